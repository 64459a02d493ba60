"""What a bat-cli 2026.10 episode that ended ``final_status: "error"`` really was.

Why: bat-cli writes the one word ``error`` for two different things. Read as one, a
bat-cli run shows no agent errors and no infrastructure failures, and ``eval.compare``
calls a task "improved" when bat-cli merely lost its connection in the older run. The
episode's own text and events tell them apart, because bat-cli 2026.10 writes them in
fixed ways (its ``eval/engine/adapter.py`` and ``orchestrator.py``):

* **The agent's failure.** The agent's task ended ``failed``, ``rejected`` or
  ``canceled``: bat-cli maps each of these A2A states to ``error`` and records the status
  event, so ``trace.events`` holds an event with ``task_status: "error"``, and
  ``final_output`` is the agent's status message. Read as bat reads a failed task: an
  agent error, its kind from the message's words (``unknown`` when they say nothing;
  the A2A state itself is lost, so ``state`` is left empty).
* **An exception during the conversation.** bat-cli catches it and writes
  ``final_output: "<ExceptionName>: <text>"``. What it was decides: a broken or refused
  connection, a timeout, an answer that is not A2A or that bat-cli could not read is an
  **infrastructure failure** (bat-cli could not observe the agent: ``unreachable``,
  ``crash``, ``timeout`` or ``protocol``); a JSON-RPC error or HTTP 5xx that the agent
  sent is the agent's error, classified as bat classifies its own calls
  (:func:`bat.evaluation.log.outcome.classify`, on the same a2a-sdk exception rebuilt from
  its name and text).
* **bat-cli's own failure before or around the conversation** (the agent card could not be
  fetched, a client could not be made): ``final_output: "<eval error: ...>"`` and
  ``aux.error``. Always an infrastructure failure.
* Anything else (no error event, no exception text): the agent's stream ended without a
  final state, and bat-cli's initial ``error`` was never replaced. bat reads such a
  conversation of its own as unfinished (status ``working``, a failure, no error).

Every reader of bat-cli runs (the metrics rows of ``eval.plot`` and ``eval.compare``, the
episodes of ``eval.export``, ``eval.view`` and the report) takes the reading from
:func:`error_of`, so they all count the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bat.evaluation.log.episode import AgentError, InfraError
from bat.evaluation.log.outcome import classify, from_final_status, from_state

# bat-cli keeps at most this many events (a longer conversation's error event may be lost)
EVENTS_KEPT = 200
_EVAL_ERROR = re.compile(r"^<eval error: (.*)>$", re.DOTALL)
_EXCEPTION = re.compile(r"^([A-Z][A-Za-z0-9_]*): ?(.*)$", re.DOTALL)
_TIMEOUT_WORDS = re.compile(r"timed? ?out|timeout", re.IGNORECASE)
_REFUSED_WORDS = re.compile(
    r"refused|connect ?error|connection attempts failed|failed to establish|unreachable"
    r"|name or service|name resolution|no route|fetching agent card",
    re.IGNORECASE,
)
# httpx's and Python's names for a connection that broke under a request, or never was.
_UNREACHABLE_NAMES = {"ConnectError", "ConnectionRefusedError", "ConnectionError", "OSError"}
_BROKEN_NAMES = {
    "RemoteProtocolError",
    "ReadError",
    "WriteError",
    "NetworkError",
    "CloseError",
    "ConnectionResetError",
    "BrokenPipeError",
    "IncompleteRead",
}


@dataclass(frozen=True)
class Reading:
    """An episode's status word and what its failure was (at most one of the two)."""

    status: str
    agent_error: AgentError | None = None
    infra: InfraError | None = None


def error_of(data: dict[str, Any]) -> Reading:
    """What a bat-cli episode file (its parsed JSON) came to: the status word bat uses, and
    the agent's error or the infrastructure failure (see the module's docstring)."""
    status = data.get("final_status")
    output = data.get("final_output")
    output = output if isinstance(output, str) else ""
    if not (isinstance(status, str) and status.strip().lower() == "error"):
        word, agent_error = from_final_status(status, output)
        return Reading(word, agent_error)
    aux = data.get("aux") if isinstance(data.get("aux"), dict) else {}
    own = _EVAL_ERROR.match(output.strip())
    if own or isinstance(aux.get("error"), str):
        text = own[1] if own else aux["error"]
        return Reading("working", infra=_eval_error(text))
    events = _events(data)
    failed = [str(e.get("content_preview") or "") for e in events if _is_error(e)]
    if failed or len(events) >= EVENTS_KEPT:
        said = output or (failed[-1] if failed else "")
        agent_error = from_state("failed", said).model_copy(update={"state": None})
        return Reading("error", agent_error)
    raised = _EXCEPTION.match(output.strip())
    if raised:
        failure = _raised(raised[1], raised[2])
        if isinstance(failure, AgentError):
            return Reading("error", failure)
        return Reading("working", infra=failure)
    return Reading("working")  # the stream ended before a final state: unfinished


def _is_error(event: dict[str, Any]) -> bool:
    return event.get("task_status") == "error"


def _events(data: dict[str, Any]) -> list[dict[str, Any]]:
    trace = data.get("trace") if isinstance(data.get("trace"), dict) else {}
    events = trace.get("events")
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def _eval_error(text: str) -> InfraError:
    """bat-cli's own failure around the conversation (no agent card, no client)."""
    if _TIMEOUT_WORDS.search(text):
        kind = "timeout"
    elif _REFUSED_WORDS.search(text):
        kind = "unreachable"
    else:
        kind = "protocol"
    return InfraError(kind=kind, message=_short(f"bat-cli: {text}"))


def _raised(name: str, text: str) -> AgentError | InfraError:
    """The failure an exception bat-cli caught stands for, from its class name and text."""
    said = f"{name}: {text}".strip()
    if "Timeout" in name or name == "TimeoutError":
        return InfraError(kind="timeout", message=_short(said))
    if name in _UNREACHABLE_NAMES:
        return InfraError(kind="unreachable", message=_short(said))
    if name in _BROKEN_NAMES:
        return InfraError(kind="crash", message=_short(f"the connection broke: {said}"))
    if text.startswith("Network communication error"):
        kind = "unreachable" if _REFUSED_WORDS.search(text) else "crash"
        return InfraError(kind=kind, message=_short(said))
    rebuilt = _a2a_exception(name, text)
    if rebuilt is not None:
        return classify(rebuilt)  # as bat classifies the same failure of its own calls
    # bat-cli's own code, or the a2a client, could not read what came back
    return InfraError(kind="protocol", message=_short(said))


def _a2a_exception(name: str, text: str) -> BaseException | None:
    """The a2a-sdk exception named ``name`` carrying ``text``, if a2a-sdk has it."""
    from a2a.client.errors import A2AClientError, AgentCardResolutionError
    from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP

    if name == "AgentCardResolutionError":
        return AgentCardResolutionError(text)
    if name == "A2AClientError":
        return A2AClientError(text)
    for kind in JSON_RPC_ERROR_CODE_MAP:
        if kind.__name__ == name:
            return kind(text)
    return None


def _short(text: str) -> str:
    from bat.evaluation.log.outcome import MESSAGE_CHARS

    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
