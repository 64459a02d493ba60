"""Tool calls and token usage from OpenTelemetry span files (JSON lines, as bat-adk writes).

The agent writes one span per line when a span ends. The root span of each A2A turn
carries the conversation id (``gen_ai.conversation.id`` / ``session.id``); the spans
below it share its trace id. OpenInference attributes say what a span was:
``openinference.span.kind`` ``TOOL`` with ``tool.name`` and ``input.value`` (the
arguments as JSON), ``LLM`` with ``llm.token_count.prompt|completion|total``; a call to
another agent is a ``CLIENT`` span with ``gen_ai.operation.name: invoke_agent`` and
``gen_ai.agent.name``.

One index per run tails the file incrementally, so thousands of concurrent episodes
share a single reader. An episode waits only until the root spans of all its turns
are there (a real exporter writes them a little after the reply), never a fixed delay,
and only when spans will come at all (``expected``: the agent's telemetry settings say
so). The first wait may take up to ``FIRST_WAIT_S``; once spans have been seen, a wait
lasts at most a few times the longest delay seen so far (``WAIT_FACTOR``, at least
``MIN_WAIT_S``). When a wait runs out and the file is still empty, the agent writes no
spans after all: every other wait ends at once and no episode waits again.

``extra`` files are the span files of other agents this one calls (bat-cli's
``evaluation.extra_spans``): their spans join a conversation by trace id, as a called
agent's spans continue its caller's trace (W3C ``traceparent``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bat.evaluation.log.bounds import MAX_COUNT, reported_count
from bat.evaluation.log.episode import EpisodeTrace
from bat.numbers import whole_number

CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
REDACTED = "__REDACTED__"


FIRST_WAIT_S = 5.0
MIN_WAIT_S = 0.5
WAIT_FACTOR = 4.0


class _Tail:
    """One JSON-lines file read as it grows (a half-written last line waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def new_lines(self) -> list[bytes]:
        try:  # a stat first: most calls find nothing new (or no file), and open costs more
            if os.stat(self.path).st_size <= self._offset:
                return []
        except OSError:
            return []
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except (FileNotFoundError, IsADirectoryError):
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        return lines


class SpanIndex:
    """Spans of one file (and its ``extra`` files), grouped by trace and by conversation."""

    def __init__(self, path: Path, extra: tuple[Path, ...] = (), *, expected: bool = True) -> None:
        self.path = path
        self.expected = expected
        self._tails = [_Tail(path), *(_Tail(other) for other in extra)]
        self._by_trace: dict[str, list[dict]] = defaultdict(list)
        self._roots: dict[str, list[dict]] = defaultdict(list)  # conversation id -> root spans
        self.total = 0  # spans of the agent's own file read so far (not the extra files')
        self.silent = False  # a wait ran out with no span at all: the agent writes none
        self.longest_delay_s = 0.0  # the longest a wait took until its spans were there
        self.waits = 0  # waits that ran (for the run record and the tests)

    def refresh(self) -> None:
        """Read the lines appended to every file since the last call."""
        for number, tail in enumerate(self._tails):
            for line in tail.new_lines():
                self._add(line, own=number == 0)

    def _add(self, line: bytes, *, own: bool) -> None:
        try:
            span = json.loads(line)
        except ValueError:
            return
        if not isinstance(span, dict) or not isinstance(span.get("attributes"), dict):
            return
        self.total += own  # the agent's own spans: whether it writes any at all
        trace_id = span.get("trace_id")
        if isinstance(trace_id, str):
            self._by_trace[trace_id].append(span)
        attributes = span["attributes"]
        for key in CONVERSATION_KEYS:
            conversation = attributes.get(key)
            if isinstance(conversation, str):
                self._roots[conversation].append(span)
                break

    def turns_seen(self, conversation_id: str) -> int:
        return len(self._roots.get(conversation_id, ()))

    def wait_limit(self) -> float:
        """How long a wait may take now (see the module's docstring)."""
        if self.total == 0:
            return FIRST_WAIT_S
        return min(FIRST_WAIT_S, max(MIN_WAIT_S, WAIT_FACTOR * self.longest_delay_s))

    async def wait_for(self, conversation_id: str, turns: int) -> bool:
        """Wait until ``turns`` root spans of the conversation are in the file, as long as
        spans are worth waiting for; returns whether they are there."""
        self.refresh()
        if self.turns_seen(conversation_id) >= turns:
            return True
        if not self.expected or self.silent:
            return False
        self.waits += 1
        started = time.monotonic()
        deadline = started + self.wait_limit()
        delay = 0.005
        while not self.silent:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
            self.refresh()
            if self.turns_seen(conversation_id) >= turns:
                self.longest_delay_s = max(self.longest_delay_s, time.monotonic() - started)
                return True
            if time.monotonic() >= deadline:
                self.silent = self.total == 0
                return False
        return False

    def spans_of(self, conversation_id: str) -> list[dict]:
        """Every span of the conversation's traces, in start order."""
        traces = {root.get("trace_id") for root in self._roots.get(conversation_id, ())}
        spans = [span for trace in traces for span in self._by_trace.get(trace, ())]
        return sorted(spans, key=lambda span: span.get("start_time") or 0)

    def report(self, conversation_id: str) -> dict[str, Any]:
        """The conversation's tool calls, usage and model calls, as a stream report would say."""
        tool_calls, agent_calls = [], []
        prompt = completion = total = model_calls = 0
        for span in self.spans_of(conversation_id):
            attributes = span["attributes"]
            kind = str(attributes.get("openinference.span.kind", "")).upper()
            if kind == "TOOL":
                tool_calls.append(
                    {
                        "name": attributes.get("tool.name", REDACTED),
                        "args": _json_or_text(attributes.get("input.value")),
                        "result": _tool_result(attributes.get("output.value")),
                        "error": span.get("status") == "ERROR",
                    }
                )
            elif kind == "LLM":
                model_calls += 1
                p = _int(attributes.get("llm.token_count.prompt"))
                c = _int(attributes.get("llm.token_count.completion"))
                prompt, completion = prompt + p, completion + c
                total += _int(attributes.get("llm.token_count.total")) or p + c
            elif _is_agent_call(span):
                agent_calls.append({"name": str(attributes.get("gen_ai.agent.name", REDACTED))})
        return {
            "tool_calls": tool_calls,
            "agent_calls": agent_calls,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": total,
            },
            "model_calls": model_calls,
        }


def merge_span_report(trace: EpisodeTrace, report: dict[str, Any]) -> None:
    """Fill in from spans what the stream did not report (the stream wins where it spoke)."""
    from bat.evaluation.run.turn_events import add_reported

    partial: dict[str, Any] = {}
    if trace.tool_source == "none":
        partial["tool_calls"] = report["tool_calls"]
    if not trace.agent_calls:
        partial["agent_calls"] = report["agent_calls"]
    if trace.usage_source == "none" and (report["model_calls"] or report["usage"]["total_tokens"]):
        partial["usage"] = report["usage"]
        partial["model_calls"] = report["model_calls"]
    add_reported(trace, partial, source="spans")


def _is_agent_call(span: dict) -> bool:
    """bat-adk's CallAgentNode opens a CLIENT span ``invoke_agent <name>`` per call."""
    attributes = span["attributes"]
    return (
        span.get("kind") == "CLIENT" and attributes.get("gen_ai.operation.name") == "invoke_agent"
    )


def _tool_result(value: Any) -> Any:
    """A TOOL span's output: its JSON, but of a LangChain ToolMessage (what a tool called
    with its ToolCall returns, serialized by OpenInference as ``{"type": "tool", "data":
    {"content": ...}}``) only the content, which is what the tool returned."""
    result = _json_or_text(value)
    if isinstance(result, dict) and result.get("type") == "tool":
        data = result.get("data")
        if isinstance(data, dict) and "content" in data:
            return _json_or_text(data["content"])
    return result


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _int(value: Any) -> int:
    """A span attribute's token count (a number, or digits as text); 0 when it is not
    one a run can record (``bounds.reported_count``: no NaN, infinity or 10^400)."""
    if isinstance(value, str):
        try:
            value = whole_number(value, highest=MAX_COUNT)
        except ValueError:
            return 0
    return reported_count(value)
