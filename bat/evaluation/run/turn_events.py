"""One turn's A2A events folded into what the episode records: the turn's status, its
answer, and the trace's events, tool calls and usage.

The answer reads the same whichever way it came (streamed event by event, or one Task
or Message returned), over every binding:

* an artifact's text parts are joined as they came, without a separator: chunks
  streamed with ``append`` and the parts of the final Task (which keeps the chunks as
  parts) are one text; separate artifacts are lines, but artifacts that follow one
  another under one ``name`` are one answer in pieces (agents that stream each model
  chunk as an artifact of its own);
* a data part reads as its JSON, a file part as ``[file <name> <url>]``, on lines of
  their own;
* a turn's answer is what that turn added: a task continued over turns keeps its
  artifacts, and the Task an agent returns (or streams first) still carries them.

Then the final status's message, then a plain message reply. Tool calls, token usage
and calls to other agents may ride on the events: an event's ``metadata`` may hold a
``"bat"`` object ``{"tool_calls": [{"name", "args", "result", "error"}], "usage":
{"prompt_tokens", "completion_tokens", "total_tokens"}, "model_calls": n,
"agent_calls": [{"name"}]}`` describing what happened since the previous event
(docs/eval-formats.md). Span files are the other source (``spans``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bat.evaluation.log.bounds import reported_count
from bat.evaluation.log.episode import AgentCall, EpisodeTrace, StatusEvent, ToolCall, Usage

PREVIEW = 200
# A2A task states -> the status words of datasets and verdicts.
_STATUS = {
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_SUBMITTED": "working",
    "TASK_STATE_UNSPECIFIED": "working",
    "TASK_STATE_FAILED": "error",
    "TASK_STATE_REJECTED": "error",
    "TASK_STATE_CANCELED": "error",
}
_ERROR_STATE = {
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_CANCELED": "canceled",
}
CONTINUED = ("input-required", "auth-required")  # a turn the next one continues


Piece = tuple[bool, str]  # (a text part?, its text): a part of an answer, rendered


@dataclass
class Turn:
    """Accumulates one turn's events.

    ``earlier`` holds the artifacts (id -> pieces) of the episode's earlier turns: a task
    continued over several turns keeps its artifacts, and a Task returned or streamed
    now still carries them; only what this turn added is its answer."""

    earlier: dict[str, list[Piece]] = field(default_factory=dict)
    status: str = "working"
    error_state: str | None = None  # failed, rejected or canceled
    task_id: str | None = None
    artifacts: dict[str, list[Piece]] = field(default_factory=dict)  # id -> this turn's
    names: dict[str, str] = field(default_factory=dict)  # id -> the artifact's name
    whole: dict[str, list[Piece]] = field(default_factory=dict)  # id -> every piece so far
    final_status_text: str = ""
    message_text: str = ""

    def take_artifact(self, key: str, name: str, pieces: list[Piece]) -> None:
        """A whole artifact as a Task holds it: this turn's part is what follows the
        pieces of earlier turns (all of it when the artifact was replaced)."""
        before = self.earlier.get(key, [])
        if before and pieces[: len(before)] == before:
            self._set(key, name, pieces[len(before) :], whole=pieces)
        else:
            self._set(key, name, pieces, whole=pieces)

    def add_chunk(self, key: str, name: str, pieces: list[Piece], append: bool) -> None:
        """An artifact update: its pieces add to this turn's (``append``) or replace it."""
        if append:
            mine = self.artifacts.get(key, []) + pieces
            whole = self.whole.get(key, self.earlier.get(key, [])) + pieces
        else:
            mine = whole = pieces
        self._set(key, name, mine, whole=whole)

    def _set(self, key: str, name: str, pieces: list[Piece], *, whole: list[Piece]) -> None:
        self.names[key] = name or self.names.get(key, "")
        self.whole[key] = whole
        if pieces:
            self.artifacts[key] = pieces
        else:
            self.artifacts.pop(key, None)

    def output(self) -> str:
        # The answer may come in artifacts, a final status message or a plain message;
        # take the first that has text so it is never lost to an empty last event.
        # Consecutive artifacts of one name are one answer sent in pieces (agents that
        # stream each model chunk as an artifact of its own); other artifacts are lines.
        groups: list[list[Piece]] = []
        last_name = None
        for key, pieces in self.artifacts.items():
            name = self.names.get(key) or None
            if groups and name is not None and name == last_name:
                groups[-1] = groups[-1] + pieces
            else:
                groups.append(list(pieces))
            last_name = name
        joined = "\n".join(text for text in map(_join, groups) if text)
        return joined or self.final_status_text or self.message_text or ""


def _pieces(parts: Any) -> list[Piece]:
    """The parts of an artifact or message as text: a data part as its JSON, a file as
    its name and URL (what an answer's checks can read), text as written."""
    pieces: list[Piece] = []
    for part in parts:
        content = part.WhichOneof("content")
        if content == "text":
            pieces.append((True, part.text))
        elif content == "data":
            from google.protobuf.json_format import MessageToDict

            value = _whole_numbers(MessageToDict(part).get("data"))
            pieces.append((False, json.dumps(value, ensure_ascii=False, sort_keys=True)))
        elif content in ("url", "raw"):
            described = " ".join(x for x in (part.filename, part.url) if x)
            pieces.append((False, f"[file {described or part.media_type or 'bytes'}]"))
    return pieces


def _whole_numbers(value: Any) -> Any:
    """``value`` with whole floats as ints: protobuf's Value holds every number as a
    double, so the agent's ``42`` arrives as ``42.0``."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _join(pieces: list[Piece], glue: str = "") -> str:
    """Text parts joined by ``glue`` (nothing, in an artifact: its parts may be the
    chunks it was streamed in, which a Task keeps as parts); other parts on lines."""
    out: list[str] = []
    previous_text = False
    for is_text, text in pieces:
        if out:
            out.append(glue if is_text and previous_text else "\n")
        out.append(text)
        previous_text = is_text
    return "".join(out)


def _message_text(message: Any) -> str:
    """A message's parts, a line each (as a2a-sdk's ``get_message_text`` joins them)."""
    return _join(_pieces(message.parts), "\n")


def absorb(
    event: Any, turn: Turn, trace: EpisodeTrace, index: int, t: float, opened_by: str | None
) -> None:
    """Fold one StreamResponse into the turn and the trace."""
    kind = event.WhichOneof("payload")
    preview, state = "", None
    if kind == "task":
        task = event.task
        turn.task_id = task.id or turn.task_id
        state = _state(task.status.state, turn)
        for artifact in task.artifacts:
            key = artifact.artifact_id or str(len(turn.artifacts))
            turn.take_artifact(key, artifact.name, _pieces(artifact.parts))
        if task.status.HasField("message"):
            preview = _message_text(task.status.message)
        _metadata(trace, task.metadata, task.status.message.metadata)
    elif kind == "status_update":
        update = event.status_update
        turn.task_id = update.task_id or turn.task_id
        state = _state(update.status.state, turn)
        if update.status.HasField("message"):
            preview = _message_text(update.status.message)
        _metadata(trace, update.metadata, update.status.message.metadata)
    elif kind == "artifact_update":
        update = event.artifact_update
        turn.task_id = update.task_id or turn.task_id
        key = update.artifact.artifact_id or str(len(turn.artifacts))
        pieces = _pieces(update.artifact.parts)
        turn.add_chunk(key, update.artifact.name, pieces, update.append)
        preview = _join(pieces)
        _metadata(trace, update.metadata, update.artifact.metadata)
    elif kind == "message":
        preview = _message_text(event.message)
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
            # an artifact changes no state: its event carries the task's status so far
            # (bat-cli's episode model requires a status word on every event)
            status=state if state is not None else turn.status,
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


def _state(state: int, turn: Turn) -> str:
    """The status word of an A2A task state; a failed, rejected or canceled one is noted."""
    from a2a.types import TaskState

    name = TaskState.Name(state)
    if name in _ERROR_STATE:
        turn.error_state = _ERROR_STATE[name]
    return _STATUS.get(name, "working")


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
        prompt = reported_count(usage.get("prompt_tokens"))
        completion = reported_count(usage.get("completion_tokens"))
        total = reported_count(usage.get("total_tokens")) or prompt + completion
        trace.usage = trace.usage.add(
            Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=total,
                model_calls=reported_count(calls),
            )
        )
        trace.usage_source = source
