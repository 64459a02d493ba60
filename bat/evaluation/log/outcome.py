"""Why an episode failed: the agent's own outcome, or the harness could not observe it.

An evaluation's numbers are only as good as this split. An agent that is reachable and
answers — with a ``failed``, ``rejected`` or ``canceled`` task, a JSON-RPC error, an
HTTP 5xx from an exception in its executor — produced an **agent outcome**: status
``error``, an ``AgentError`` whose ``kind`` is one of a closed set
(``episode.AGENT_ERROR_KINDS``), counted in pass@k. Only when bat could not observe the
agent at all — nothing listens, no answer in time, the connection died, a reply that is
not A2A, or a request the agent could not even parse — is it an **infrastructure
failure** (``InfraError``), kept out of pass@k because it says nothing about the agent.

The kind of an agent error is read from what the agent said: the words of its error
message or final status message first (``401``/``unauthorized`` → authentication,
``429``/``rate limit`` → rate_limited, ``timed out`` → timeout, a provider's
``Error code: 500`` → model_error...), then the code (JSON-RPC ``-32603`` → an
exception in the agent, ``-32004`` unsupported → refused), then the A2A state
(``rejected`` → refused, ``canceled`` → canceled), and ``unknown`` as the honest default.

What an episode came to — an infrastructure failure, a pass, an agent error or a
failure — is decided once, here (:class:`EpisodeOutcome`, from an episode file or from
its row in ``metrics.json``), and every reader takes it from here: the statistics, the
judges (which skip infrastructure failures and failing agent errors), ``--retry-infra``,
the viewer, the exports and the report. An ``authentication_failed`` or ``rate_limited``
agent error that did not pass is an infrastructure failure of its kind
(:data:`CREDENTIAL_KINDS`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from bat.evaluation.log.episode import AgentError, InfraError
from bat.evaluation.log.scores import NOT_JUDGED

if TYPE_CHECKING:
    from bat.evaluation.log.episode import EpisodeResult
    from bat.evaluation.log.summary import EpisodeRow

# The status words of an episode (A2A's task states as bat-cli named them), and the
# spellings read as them on input.
Status = Literal["completed", "input-required", "auth-required", "working", "error"]
STATUS_SYNONYMS = {
    "failed": "error",
    "input_required": "input-required",
    "auth_required": "auth-required",
}


def normalize_status(value: Any) -> Any:
    """``failed`` is read as ``error``; other words pass through for validation."""
    if isinstance(value, str):
        word = value.strip().lower()
        return STATUS_SYNONYMS.get(word, word)
    return value


# --- what an episode came to ----------------------------------------------------------------

# The four outcomes, in the order they are decided: an episode is exactly one of them.
OutcomeClass = Literal["infra", "pass", "error", "fail"]


@dataclass(frozen=True)
class EpisodeOutcome:
    """What one episode came to, decided here once for every reader (the statistics, the
    viewer's grid, the exports, the report, the progress line).

    In this order: ``infra`` when bat could not observe the agent (``infra`` has the
    kind; never a pass, left out of pass@k); else ``pass`` when the deterministic
    verdict passed (``vacuous`` when the pass proves little), even with the agent error
    its task expected; else ``error`` when the agent answered with an error
    (``agent_error`` has the kind); else ``fail``: the verdict failed, or there is none.
    ``agent_error`` is kept whatever the class: pass@k counts it, by kind, in any case.
    """

    word: OutcomeClass
    infra: str | None = None
    agent_error: str | None = None
    vacuous: bool = False

    @property
    def passed(self) -> bool:
        return self.word == "pass"

    @property
    def kind(self) -> str | None:
        """The infrastructure failure's kind, else the agent error's (None for neither)."""
        return self.infra or self.agent_error

    @property
    def not_judged_because(self) -> str | None:
        """Why no LLM judge is asked about this episode (the scores' ``error``), or None
        when it is judged. Judges judge answers: an infrastructure failure has none, and
        an agent error that failed the episode answered with an error instead (an agent
        error the task expected passed: that is the agent's answer, and it is judged)."""
        return NOT_JUDGED.get(self.word)

    def row_fields(self) -> dict[str, Any]:
        """What a ``metrics.json`` row (``EpisodeRow``) keeps of it."""
        return {
            "success": self.passed,
            "infra_error": self.infra,
            "agent_error": self.agent_error,
            "vacuous": self.vacuous,
        }


# Agent errors that say the agent's model was never really asked (its key is missing or
# refused, its quota spent): the agent did not run, so such an episode, unless its verdict
# passed, counts as an infrastructure failure of that kind: out of pass@k, against
# evaluation.max_infra_failures (exit 3), run again by --retry-infra.
CREDENTIAL_KINDS = frozenset({"authentication_failed", "rate_limited"})


def outcome_from(
    passed: bool, *, vacuous: bool = False, infra: str | None = None, agent_error: str | None = None
) -> EpisodeOutcome:
    """The outcome of an episode whose verdict ``passed`` (or not), with the kinds of its
    infrastructure failure and agent error, if any. An agent error of
    :data:`CREDENTIAL_KINDS` that did not pass is an infrastructure failure of its kind
    (counted once, there, not also as an agent error)."""
    if infra is None and not passed and agent_error in CREDENTIAL_KINDS:
        infra, agent_error = agent_error, None
    if infra is not None:
        word: OutcomeClass = "infra"
    elif passed:
        word = "pass"
    elif agent_error is not None:
        word = "error"
    else:
        word = "fail"
    return EpisodeOutcome(word, infra, agent_error, vacuous and word == "pass")


def episode_outcome(episode: EpisodeResult) -> EpisodeOutcome:
    """The outcome of an episode file."""
    verdict = episode.verdict
    return outcome_from(
        bool(verdict and verdict.passed),
        vacuous=bool(verdict and verdict.vacuous),
        infra=episode.infra_error.kind if episode.infra_error else None,
        agent_error=episode.agent_error.kind if episode.agent_error else None,
    )


def row_outcome(row: EpisodeRow) -> EpisodeOutcome:
    """The outcome of an episode's row in ``metrics.json`` (any version, or bat-cli's)."""
    return outcome_from(
        row.success,
        vacuous=row.vacuous,
        infra=row.infra_error or None,  # an older file may write "" for none
        agent_error=row.agent_error or None,
    )


# --- why an agent failed -------------------------------------------------------------------

MESSAGE_CHARS = 500

# Read from the agent's words, first match wins (so "429 ... quota" is rate_limited even
# when a provider wraps it in an internal server error).
_WORDS = (
    (
        "authentication_failed",
        r"\b40[13]\b|unauthori[sz]ed|unauthenticated|authenticat|forbidden|permission[ _]?denied"
        r"|api[ _-]?key|missing credentials|invalid credentials|credentials? (?:are |is )?missing"
        # the OpenAI client's bare OpenAIError: raised for a missing key (its API errors
        # are subclasses with names of their own)
        r"|(?<![\w.])(?:openai\.)?OpenAIError\b",
    ),
    ("rate_limited", r"\b429\b|rate[ _-]?limit|too many requests|quota|resource[ _]exhausted"),
    ("timeout", r"timed?[ _-]?out|timeout|deadline[ _]exceeded"),
    (
        "model_error",
        r"error code: 5\d\d|\b50[0234]\b|internal[ _]?server[ _]?error|bad gateway"
        r"|service unavailable|overloaded|apiconnectionerror|apierror|context[ _]length"
        r"|\bmodel ['\"]?[\w.:/-]+['\"]? not found"
        r"|\b(?:openai|anthropic|ollama|litellm|groq|mistralai|google\.genai|vertexai)\.\w*error",
    ),
    ("refused", r"\brefus|\brejected\b|content[ _](?:policy|filter)|not supported|unsupported"),
)
_WORD_PATTERNS = [(kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _WORDS]

# JSON-RPC error codes (A2A's and JSON-RPC's own).
_AGENT_CODES = {
    -32603: "agent_exception",  # InternalError: the executor raised
    -32006: "agent_exception",  # InvalidAgentResponse
    -32004: "refused",  # UnsupportedOperation
    -32005: "refused",  # ContentTypeNotSupported
    -32008: "refused",  # ExtensionSupportRequired
}
# Codes that say the agent could not even read what bat sent: no outcome of the agent's.
_PROTOCOL_CODES = {-32700, -32600, -32601, -32602, -32009}
_STATE_DEFAULT = {"failed": "unknown", "rejected": "refused", "canceled": "canceled"}


def from_state(state: str, text: str) -> AgentError:
    """The agent error of a task that ended ``failed``, ``rejected`` or ``canceled``."""
    kind = "canceled" if state == "canceled" else _kind_from_words(text) or _STATE_DEFAULT[state]
    message = text.strip() or f"the task ended {state}"
    return AgentError(kind=kind, message=_short(message), state=state)


def from_final_status(status: Any, output: str) -> tuple[str, AgentError | None]:
    """The status word of an episode that another tool recorded (bat-cli 2026.10's
    ``final_status``), and the agent's error when it ended ``failed``, ``rejected`` or
    ``canceled`` (bat's ``error``, its kind read from ``output`` as from a status
    message). Anything but text is ``working``: the task never reached a final state."""
    if not isinstance(status, str):
        return "working", None
    word = status.strip().lower()
    if word in ("failed", "rejected", "canceled", "cancelled"):
        state = "canceled" if word == "cancelled" else word
        return "error", from_state(state, output)
    return normalize_status(status), None


def classify(exc: BaseException) -> InfraError | AgentError:
    """What a failed A2A call means: an answer of the agent's, or no observation at all."""
    chain = exception_chain(exc)
    connection = _connection_failure(chain)
    if connection is not None:
        return connection
    code, text, body_status = _error_of(chain)
    status = _http_status(chain) or body_status
    if status is not None:
        return _from_http(status, text)
    grpc_code = _grpc_code(chain)
    if grpc_code is not None:
        return _from_grpc(grpc_code, text)
    if code is not None:
        if code in _PROTOCOL_CODES:
            return InfraError(
                kind="protocol", message=_short(f"the agent could not read the request: {text}")
            )
        kind = _kind_from_words(text) or _AGENT_CODES.get(code, "unknown")
        return AgentError(kind=kind, message=_short(text), code=code)
    if _is_sse_error(text) or _is_sse_error(_text(chain[0])):
        return AgentError(kind=_kind_from_words(text) or "agent_exception", message=_short(text))
    return InfraError(kind="protocol", message=_short(text))


def _kind_from_words(text: str) -> str | None:
    for kind, pattern in _WORD_PATTERNS:
        if pattern.search(text):
            return kind
    return None


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it was raised from, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _connection_failure(chain: list[BaseException]) -> InfraError | None:
    import httpx
    from a2a.client import A2AClientTimeoutError

    for exc in chain:
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return InfraError(kind="unreachable", message=_describe(exc))
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            return InfraError(kind="crash", message=f"the connection broke: {_describe(exc)}")
        if isinstance(exc, httpx.TimeoutException):
            return InfraError(kind="timeout", message=_describe(exc))
        if isinstance(exc, A2AClientTimeoutError):
            return InfraError(kind="timeout", message=_describe(exc))
    return None


def _http_status(chain: list[BaseException]) -> int | None:
    import httpx

    for exc in chain:
        if isinstance(exc, httpx.HTTPStatusError):
            return exc.response.status_code
    for exc in chain:  # the v0.3 transports say only "HTTP Error: 500"
        match = re.match(r"HTTP Error:? (\d{3})\b", _text(exc))
        if match:
            return int(match[1])
    return None


def _error_of(chain: list[BaseException]) -> tuple[int | None, str, int | None]:
    """The JSON-RPC error code, the most telling message in the chain, and the HTTP
    status an error body names (a REST agent's ``{"error": {"code": 500, ...}}``, which
    also comes as an SSE ``error`` event after a stream began)."""
    from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError

    text = _text(chain[0])
    for exc in chain:
        code = JSON_RPC_ERROR_CODE_MAP.get(type(exc))
        if code is not None and isinstance(exc, A2AError):
            detail = _text(exc)
            if exc.data:
                detail += f" ({json.dumps(exc.data, default=str)[:200]})"
            return code, detail, None
        match = re.match(r"JSON-RPC Error (-?\d+): (.*)", _text(exc), re.DOTALL)
        if match:
            return int(match[1]), match[2], None
        body = _json_error(_text(exc))
        if body is not None:
            return None, body[0], body[1]
    import httpx

    for exc in chain:
        if isinstance(exc, httpx.HTTPStatusError):
            body = _json_error(_response_text(exc.response))
            if body is not None:
                return None, body[0], None
            return None, _response_text(exc.response) or text, None
    return None, text, None


def _from_http(status: int, text: str) -> InfraError | AgentError:
    if status in (404, 405, 415):
        return InfraError(
            kind="protocol", message=_short(f"HTTP {status}: no A2A endpoint here ({text})")
        )
    message = _short(f"HTTP {status}: {text}")
    if status in (401, 403):
        return AgentError(kind="authentication_failed", message=message, code=status)
    if status == 429:
        return AgentError(kind="rate_limited", message=message, code=status)
    default = "agent_exception" if status >= 500 else "unknown"
    return AgentError(kind=_kind_from_words(text) or default, message=message, code=status)


def _from_grpc(name: str, text: str) -> InfraError | AgentError:
    text = re.sub(r"^gRPC Error [A-Z_]+: ", "", text)  # said once, not twice
    if name == "UNAVAILABLE":
        # A stream cut under a call is a broken connection (the agent went away during
        # it), as on HTTP; no connection at all is an agent nobody can reach.
        broke = re.search(r"stream removed|socket closed|connection reset|broken pipe", text, re.I)
        kind = "crash" if broke else "unreachable"
        return InfraError(kind=kind, message=_short(f"gRPC {name}: {text}"))
    if name in ("UNIMPLEMENTED", "INVALID_ARGUMENT"):
        return InfraError(kind="protocol", message=_short(f"gRPC {name}: {text}"))
    kind = (
        {
            "UNAUTHENTICATED": "authentication_failed",
            "PERMISSION_DENIED": "authentication_failed",
            "RESOURCE_EXHAUSTED": "rate_limited",
            "CANCELLED": "canceled",
            "FAILED_PRECONDITION": "refused",
        }.get(name)
        or _kind_from_words(text)
        or "agent_exception"
    )
    return AgentError(kind=kind, message=_short(f"gRPC {name}: {text}"))


def _grpc_code(chain: list[BaseException]) -> str | None:
    """The gRPC status name of a failed call (by name: grpc may not be installed)."""
    for exc in chain:
        code = getattr(exc, "code", None)
        if type(exc).__name__ == "AioRpcError" and callable(code):
            return code().name
        match = re.match(r"gRPC Error ([A-Z_]+):", _text(exc))
        if match:
            return match[1]
    return None


def _json_error(text: str) -> tuple[str, int | None] | None:
    """The message of an ``{"error": {...}}`` body (REST and SSE error events), and its
    ``code`` when that is an HTTP status."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        status = code if isinstance(code, int) and 400 <= code <= 599 else None
        return str(error.get("message") or error.get("status") or error), status
    return (str(error), None) if error else None


def _is_sse_error(text: str) -> bool:
    """An error event the agent's server sent on a stream (not a broken connection)."""
    return text.startswith("SSE stream error") or _json_error(text) is not None


def _response_text(response: Any) -> str:
    try:
        return response.text
    except Exception:  # a streamed body that was never read
        return ""


def _text(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)


def _describe(exc: BaseException) -> str:
    return _short(" ".join(str(exc).split()) or type(exc).__name__)


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
