"""Talking to the agent under test over A2A (a2a-sdk 1.x): one episode = one conversation.

One HTTP client and one resolved agent card serve a whole run. Each episode gets its own
context id; its turns are sent in order in that conversation, and a turn that ended in
``input-required`` is continued by the next one (same task id). Streaming agents are
read event by event, others with one blocking call: the a2a-sdk client picks by the
card's ``capabilities.streaming``.

Tool calls, token usage and calls to other agents may ride on the stream: an event's
``metadata`` may hold a ``"bat"`` object ``{"tool_calls": [{"name", "args", "result",
"error"}], "usage": {"prompt_tokens", "completion_tokens", "total_tokens"},
"model_calls": n, "agent_calls": [{"name"}]}`` describing what happened since the
previous event (docs/eval-formats.md). Span files are the other source (``spans``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bat.errors import OperationError
from bat.evaluation.records import (
    AgentCall,
    EpisodeTrace,
    InfraError,
    StatusEvent,
    ToolCall,
    TurnRecord,
    Usage,
)

PREVIEW = 200
# A2A task states -> the status words of datasets and verdicts.
_STATUS = {
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "input-required",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_SUBMITTED": "working",
    "TASK_STATE_UNSPECIFIED": "working",
    "TASK_STATE_FAILED": "error",
    "TASK_STATE_REJECTED": "error",
    "TASK_STATE_CANCELED": "error",
}


@dataclass
class Observed:
    """What one episode produced, before any verdict."""

    status: str
    final_output: str
    trace: EpisodeTrace
    infra_error: InfraError | None = None


@dataclass
class _Turn:
    """Accumulates one turn's events."""

    status: str = "working"
    task_id: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    final_status_text: str = ""
    message_text: str = ""

    def output(self) -> str:
        # The answer may come in artifacts, a final status message or a plain message;
        # take the first that has text so it is never lost to an empty last event.
        joined = "\n".join(text for text in self.artifacts.values() if text)
        return joined or self.final_status_text or self.message_text or ""


class A2ASession:
    """An open connection to one agent: resolve the card once, then run episodes."""

    def __init__(self, url: str, *, concurrency: int, card_timeout_s: float = 10) -> None:
        self.url = url.rstrip("/")
        self.concurrency = concurrency
        self.card_timeout_s = card_timeout_s
        self.card: Any = None
        self._http: Any = None
        self._client: Any = None

    async def __aenter__(self) -> A2ASession:
        import httpx
        from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

        limits = httpx.Limits(
            max_connections=self.concurrency + 4, max_keepalive_connections=self.concurrency + 4
        )
        # No read timeout here: a turn is bounded by the runner's per-turn timeout.
        timeout = httpx.Timeout(connect=self.card_timeout_s, read=None, write=30, pool=None)
        self._http = httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False)
        try:
            card = await A2ACardResolver(self._http, self.url).get_agent_card()
        except Exception as exc:
            await self._http.aclose()
            raise OperationError(f"cannot read the agent card at {self.url}: {exc}") from None
        _point_interfaces_at(card, self.url)
        self.card = card
        config = ClientConfig(streaming=bool(card.capabilities.streaming), httpx_client=self._http)
        self._client = ClientFactory(config).create(card)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()
        if self._http is not None and not self._http.is_closed:
            await self._http.aclose()

    async def run_episode(self, turns: list[str], *, turn_timeout_s: float) -> Observed:
        """Send ``turns`` in one conversation and record everything that came back."""
        context_id = uuid.uuid4().hex
        trace = EpisodeTrace(context_id=context_id)
        started = time.perf_counter()
        previous: _Turn | None = None
        status, output, infra = "working", "", None
        for index, text in enumerate(turns):
            continue_task = (
                previous.task_id if previous and previous.status == "input-required" else None
            )
            turn = _Turn()
            record = TurnRecord(input=text, status="working")
            turn_started = time.perf_counter()
            try:
                async with asyncio.timeout(turn_timeout_s):
                    await self._send(
                        text, context_id, continue_task, index, turn, record, trace, started
                    )
            except TimeoutError:
                infra = InfraError(
                    kind="timeout",
                    message=f"turn {index + 1} got no final answer within {turn_timeout_s:g} s",
                )
            except Exception as exc:  # every client failure is an infrastructure failure
                infra = InfraError(kind=_classify(exc), message=_describe(exc))
            record.status = turn.status
            record.output = turn.output()
            record.task_id = turn.task_id
            record.wall_time_s = round(time.perf_counter() - turn_started, 6)
            trace.turns.append(record)
            status, output, previous = turn.status, record.output, turn
            if infra is not None or turn.status == "error":
                break
        trace.wall_time_s = round(time.perf_counter() - started, 6)
        if trace.turns:
            trace.time_to_first_event_s = trace.turns[0].time_to_first_event_s
        return Observed(status=status, final_output=output, trace=trace, infra_error=infra)

    async def _send(
        self,
        text: str,
        context_id: str,
        task_id: str | None,
        index: int,
        turn: _Turn,
        record: TurnRecord,
        trace: EpisodeTrace,
        started: float,
    ) -> None:
        from a2a.types import Message, Part, Role, SendMessageRequest

        message = Message(
            message_id=uuid.uuid4().hex,
            context_id=context_id,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
        )
        if task_id:
            message.task_id = task_id
        opened = time.perf_counter()
        first = True
        async for event in self._client.send_message(SendMessageRequest(message=message)):
            now = time.perf_counter()
            if first:
                record.time_to_first_event_s = round(now - opened, 6)
            _absorb(event, turn, trace, index, now - started, text if first else None)
            first = False


def _absorb(
    event: Any, turn: _Turn, trace: EpisodeTrace, index: int, t: float, opened_by: str | None
) -> None:
    """Fold one StreamResponse into the turn and the trace."""
    from a2a.helpers.proto_helpers import get_artifact_text, get_message_text

    kind = event.WhichOneof("payload")
    preview, state = "", None
    if kind == "task":
        task = event.task
        turn.task_id = task.id or turn.task_id
        state = _status_word(task.status.state)
        for artifact in task.artifacts:
            turn.artifacts[artifact.artifact_id or str(len(turn.artifacts))] = get_artifact_text(
                artifact
            )
        if task.status.HasField("message"):
            preview = get_message_text(task.status.message)
        _metadata(trace, task.metadata, task.status.message.metadata)
    elif kind == "status_update":
        update = event.status_update
        turn.task_id = update.task_id or turn.task_id
        state = _status_word(update.status.state)
        if update.status.HasField("message"):
            preview = get_message_text(update.status.message)
        _metadata(trace, update.metadata, update.status.message.metadata)
    elif kind == "artifact_update":
        update = event.artifact_update
        turn.task_id = update.task_id or turn.task_id
        key = update.artifact.artifact_id or str(len(turn.artifacts))
        text = get_artifact_text(update.artifact)
        turn.artifacts[key] = turn.artifacts.get(key, "") + text if update.append else text
        preview = text
        _metadata(trace, update.metadata, update.artifact.metadata)
    elif kind == "message":
        preview = get_message_text(event.message)
        turn.message_text = preview or turn.message_text
        state = "completed"  # a plain message is the whole answer
        _metadata(trace, event.message.metadata)
    if state is not None:
        turn.status = state
        # The text of a status that ends the turn is a candidate answer (or the question
        # of input-required); progress messages of `working` are not.
        if state != "working" and kind != "message":
            turn.final_status_text = preview or turn.final_status_text
    trace.events.append(
        StatusEvent(
            t=round(t, 6),
            turn=index,
            kind=_KIND[kind],
            status=state,
            preview=preview[:PREVIEW],
            input=opened_by,
        )
    )


_KIND = {
    "task": "task",
    "status_update": "status",
    "artifact_update": "artifact",
    "message": "message",
    None: "status",
}


def _status_word(state: int) -> str:
    from a2a.types import TaskState

    return _STATUS.get(TaskState.Name(state), "working")


def _metadata(trace: EpisodeTrace, *structs: Any) -> None:
    """Add the ``"bat"`` metadata of an event (tool calls, usage) to the trace."""
    for struct in structs:
        if struct is None or not len(struct.fields):
            continue
        if "bat" not in struct.fields:
            continue
        from google.protobuf.json_format import MessageToDict

        data = MessageToDict(struct).get("bat")
        if isinstance(data, dict):
            add_reported(trace, data, source="stream")


def add_reported(trace: EpisodeTrace, data: dict, *, source: str) -> None:
    """Fold one report of tool calls / usage / agent calls into ``trace``."""
    for call in data.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            trace.tool_calls.append(
                ToolCall(
                    name=call["name"],
                    args=call.get("args"),
                    result=call.get("result"),
                    error=bool(call.get("error", False)),
                    source=source,
                )
            )
            trace.tool_source = source
    for call in data.get("agent_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            trace.agent_calls.append(AgentCall(name=call["name"], source=source))
    usage = data.get("usage")
    calls = data.get("model_calls")
    if isinstance(usage, dict) or isinstance(calls, int | float):
        usage = usage if isinstance(usage, dict) else {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        total = int(usage.get("total_tokens") or prompt + completion)
        trace.usage = trace.usage.add(
            Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=total,
                model_calls=int(calls or 0),
            )
        )
        trace.usage_source = source


def _point_interfaces_at(card: Any, url: str) -> None:
    """Reach the agent where we were told it is, keeping the path its card gives.

    A card may advertise ``http://localhost:PORT`` or a public name; the engine talks to
    the address in eval.yaml (or the one it started the agent on) instead.
    """
    target = urlsplit(url)
    for interface in card.supported_interfaces:
        parts = urlsplit(interface.url)
        interface.url = urlunsplit((target.scheme, target.netloc, parts.path, parts.query, ""))
    if not card.supported_interfaces:
        from a2a.types import AgentInterface

        card.supported_interfaces.append(AgentInterface(url=url, protocol_binding="JSONRPC"))


def _classify(exc: BaseException) -> str:
    import httpx
    from a2a.client import A2AClientTimeoutError

    if isinstance(exc, A2AClientTimeoutError):
        return "timeout"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, httpx.ConnectError):
            return "unreachable"
        if isinstance(cause, httpx.RemoteProtocolError | httpx.ReadError):
            return "crash"
        if isinstance(cause, httpx.TimeoutException):
            return "timeout"
        cause = cause.__cause__ or cause.__context__
    return "protocol"


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]
