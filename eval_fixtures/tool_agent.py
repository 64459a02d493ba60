"""The tool agent: an A2A agent that "calls tools" by keyword and reports what it did.

Why: the evaluation engine judges tool calls, model calls, tokens and calls to other
agents, which it learns from two sources: metadata on the A2A events (``metadata.bat``)
and the telemetry spans bat-adk appends to a JSON-lines file. This agent produces both,
deterministically, so the engine's tests know exactly what it must find.

Triggers, in the order they appear in the text (case-sensitive, whole words):

* ``weather in <City>``: ``get_weather(city=<City>)`` -> ``sunny in <City>``;
* ``calculate <expr>``: ``calculator(expression=<expr>)`` -> the integer value of + - * /
  and parentheses, or an error (``"error": true``) for anything else;
* ``search <words> [limit N]``: ``search(query=<words>, options={"limit": N or 5})``
  -> ``results for <words>``;
* ``ASK_AGENT <name>``: records a call to agent <name> (nothing is sent) -> ``asked <name>``;
* ``TWICE`` anywhere: the first tool call is made twice.

An argument runs to the next trigger or to , ; ? ! (a trailing "and"/"then" dropped). The
answer joins the results with "; " (``no tools needed`` if none). A turn is 1 model call,
2 if a tool or agent was called (the first plans with prompt = 10 x user words, the second
answers with completion = 5 x answer words). Metadata and span formats: README.md.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import operator
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentCard, AgentSkill
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from eval_fixtures._a2a_server import Turn, add_option, build_card, common_parser, pause
from eval_fixtures._a2a_server import serve as serve_agent
from eval_fixtures._spans import Span, SpanFile, new_span, trace_parent

NAME = "ToolAgent"
TRIGGER = re.compile(r"\b(weather in|calculate|search|ASK_AGENT)\b")
STOP = re.compile(r"[,;?!]")
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
DEFAULT_LIMIT = 5


@dataclass
class Call:
    """A tool call (``agent`` False) or a call to another agent."""

    name: str
    args: dict[str, Any]
    result: str
    error: bool = False
    agent: bool = False


@dataclass
class TurnWork:
    """What one turn did: its calls, its answer and its model calls' token counts."""

    text: str
    calls: list[Call] = field(default_factory=list)
    answer: str = ""
    model_calls: list[tuple[int, int]] = field(default_factory=list)  # (prompt, completion)


def argument(raw: str) -> str:
    """The argument text of a trigger: up to a stop character, connectives trimmed."""
    text = STOP.split(raw, maxsplit=1)[0].strip().rstrip(".").strip()
    return re.sub(r"(\s+(and|then|also))+$", "", text)


def calculate(expression: str) -> str:
    """Integer arithmetic without eval: + - * / (exact division), parentheses, signs."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            sign = -1 if isinstance(node.op, ast.USub) else 1
            return sign * value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, right = value(node.left), value(node.right)
            if right == 0 or left % right:
                raise ValueError("division by zero" if right == 0 else "inexact division")
            return left // right
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            return OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not simple integer arithmetic: {expression!r}")

    if len(expression) > 200:
        raise ValueError("expression too long")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ValueError(f"not simple integer arithmetic: {expression!r}") from None
    return str(value(tree.body))


def tool_call(trigger: str, raw: str) -> Call | None:
    """The call a trigger makes with the text after it, or None if it has no argument."""
    arg = argument(raw)
    if not arg:
        return None
    if trigger == "weather in":
        city = re.match(r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*", arg) or re.match(r"\S+", arg)
        return Call("get_weather", {"city": city[0]}, f"sunny in {city[0]}")
    if trigger == "calculate":
        try:
            return Call("calculator", {"expression": arg}, calculate(arg))
        except ValueError as exc:
            return Call("calculator", {"expression": arg}, f"error: {exc}", error=True)
    if trigger == "search":
        limit = re.search(r"\s+limit\s+(\d+)$", arg)
        query = arg[: limit.start()] if limit else arg
        options = {"limit": int(limit[1]) if limit else DEFAULT_LIMIT}
        return Call("search", {"query": query, "options": options}, f"results for {query}")
    name = arg.split()[0]
    return Call(name, {"message": arg}, f"asked {name}", agent=True)


def work(text: str) -> TurnWork:
    """Run a turn: find the triggers, make the calls, answer, count the tokens."""
    turn = TurnWork(text)
    plain = re.sub(r"\bTWICE\b", " ", text)
    matches = list(TRIGGER.finditer(plain))
    ends = [match.start() for match in matches[1:]] + [len(plain)]
    for match, end in zip(matches, ends, strict=False):  # no matches: nothing to zip
        raw = plain[match.end() : end]
        call = tool_call(match[1], raw)
        if call is not None:
            turn.calls.append(call)
    tools = [call for call in turn.calls if not call.agent]
    if "TWICE" in text and tools:
        turn.calls.insert(turn.calls.index(tools[0]) + 1, tools[0])
    return answered(text, "; ".join(c.result for c in turn.calls) or "no tools needed", turn.calls)


def answered(text: str, answer: str, calls: list[Call] | None = None) -> TurnWork:
    """A turn that answers ``answer`` after ``calls``, its model calls counted: one, or
    two with calls (planning: 10 x user words of prompt; answering: 5 x answer words)."""
    turn = TurnWork(text, calls=list(calls or []), answer=answer)
    prompt, completion = 10 * len(text.split()), 5 * len(answer.split())
    turn.model_calls = [(prompt, 0), (0, completion)] if turn.calls else [(prompt, completion)]
    return turn


def bat_delta(calls: list[Call], model_calls: list[tuple[int, int]]) -> dict[str, Any]:
    """``metadata.bat`` for what happened since the previous event of the turn."""
    prompt, completion = map(sum, zip(*model_calls, strict=True))
    keys = ("name", "args", "result", "error")
    tool_calls = [{key: getattr(c, key) for key in keys} for c in calls if not c.agent]
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    usage["total_tokens"] = prompt + completion
    agent_calls = [{"name": c.name} for c in calls if c.agent]
    delta = {"tool_calls": tool_calls, "usage": usage, "model_calls": len(model_calls)}
    return {"bat": delta | {"agent_calls": agent_calls}}


def make_spans(turn: TurnWork, ids: dict[str, str], start: int, end: int) -> list[Span]:
    """The spans of a turn, in bat-adk's order (a span is written when it ends): the LLM
    span of each model call, a TOOL span per tool call and a CLIENT span per agent call
    between them, and last the root ``invoke_agent ToolAgent`` holding the A2A ids."""
    trace_id, parent = ids["trace_id"], ids["parent"]
    root_id = secrets.token_hex(8)
    children: list[tuple[str, dict[str, Any], Call | None]] = []
    for index, (prompt, completion) in enumerate(turn.model_calls):
        last = index == len(turn.model_calls) - 1
        llm = {
            "openinference.span.kind": "LLM",
            "llm.model_name": os.environ.get("MODEL") or "scripted",
            "llm.token_count.prompt": prompt,
            "llm.token_count.completion": completion,
            "llm.token_count.total": prompt + completion,
            "input.value": turn.text,
            "output.value": turn.answer if last else json.dumps([c.name for c in turn.calls]),
        }
        if os.environ.get("MODEL_PROVIDER"):
            llm["llm.provider"] = os.environ["MODEL_PROVIDER"]
        children.append(("ChatModel", llm, None))
        for call in [] if last else turn.calls:
            children.append((call.name, span_attributes(call, turn.text), call))
    slot = max((end - start) // max(len(children), 1), 1)
    spans = []
    for index, (name, attributes, call) in enumerate(children):
        times = (start + index * slot, start + (index + 1) * slot)
        span = new_span(name, trace_id, root_id, times, **attributes)
        if call is not None and call.agent:
            span |= {"name": f"invoke_agent {call.name}", "kind": "CLIENT"}
        if call is not None and call.error:
            error = {"exception.type": "ValueError", "exception.message": call.result}
            event = {"name": "exception", "time": times[1], "attributes": error}
            span |= {"status": "ERROR", "status_description": call.result, "events": [event]}
        spans.append(span)
    root = new_span(
        f"invoke_agent {NAME}",
        trace_id,
        parent,
        (start, end),
        **{
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": NAME,
            "gen_ai.conversation.id": ids["context_id"],
            "session.id": ids["context_id"],
            "bat.a2a.task_id": ids["task_id"],
            "openinference.span.kind": "AGENT",
        },
    )
    return [*spans, root | {"span_id": root_id}]


def span_attributes(call: Call, text: str) -> dict[str, Any]:
    """A TOOL span's attributes, or those of bat-adk's CallAgentNode span for an agent."""
    if call.agent:
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": call.name,
            "input.value": text,
            "output.value": call.result,
            "bat.a2a.task_state": "TASK_STATE_COMPLETED",
        }
    return {
        "openinference.span.kind": "TOOL",
        "tool.name": call.name,
        "input.value": json.dumps(call.args),
        "output.value": call.result,
    }


class ToolExecutor(AgentExecutor):
    """Does a turn's work, replies with metadata deltas, then writes the turn's spans."""

    def __init__(self, options: Any, spans: SpanFile | None) -> None:
        self.options = options
        self.spans = spans
        self.pending: set[asyncio.Task[None]] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        start = time.time_ns()
        await pause(self.options.latency_ms)
        await self.reply(context, event_queue, work(context.get_user_input()), start)

    async def reply(
        self, context: RequestContext, event_queue: EventQueue, turn: TurnWork, start: int
    ) -> None:
        """Complete the turn with ``turn``'s answer and metadata, then write its spans."""
        working, final = None, bat_delta([], turn.model_calls)
        if turn.calls:  # the planning model call and the calls it made, then the answer
            working = bat_delta(turn.calls, turn.model_calls[:1])
            final = bat_delta([], turn.model_calls[1:])
        if self.options.no_stream_metadata:
            working = final = None
        await Turn(context, event_queue).answer(turn.answer, self.options.answer_in, working, final)
        if self.spans is not None:
            carrier = MessageToDict(context.message.metadata) if context.message else {}
            trace_id, parent = trace_parent(carrier)  # as bat-adk: from the message metadata
            ids = {"context_id": context.context_id or "", "task_id": context.task_id or ""}
            ids |= {"trace_id": trace_id, "parent": parent}
            spans = make_spans(turn, ids, start, time.time_ns())
            task = asyncio.create_task(self.write_later(spans))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def write_later(self, spans: list[dict[str, Any]]) -> None:
        """Write after the exporter's delay; at shut-down (cancelled) at once, as a flush."""
        try:
            await asyncio.sleep(max(self.options.spans_delay_ms, 0) / 1000)
        finally:
            self.spans.write(spans)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise UnsupportedOperationError(message="the tool agent cannot cancel tasks")


def make_card(
    port: int, streaming: bool, binding: str = "JSONRPC", address: str | None = None
) -> AgentCard:
    skill = AgentSkill(
        id="tools",
        name="Tools",
        description="Calls search, calculator and get_weather, and other agents, by keyword.",
        tags=["tools", "test"],
        examples=["weather in Paris", "calculate 2+3", "search cats", "ASK_AGENT helper"],
    )
    description = "A deterministic test agent that reports its tool calls and token usage."
    return build_card(NAME, description, skill, port, streaming, binding, address)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line (and environment), read config.yaml, serve until SIGTERM."""
    serve_tools(argv, "tool_agent", __doc__, make_card, ToolExecutor)


def serve_tools(
    argv: list[str] | None,
    name: str,
    doc: str,
    card: Any,
    executor: type[ToolExecutor],
    more_options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """Serve a tool agent (this one, or one built on it): the shared options (and
    ``more_options``, an agent's own), the span file of config.yaml (``CONFIG_PATH``),
    ``executor`` answering."""
    parser = common_parser(f"eval_fixtures.{name}", doc.splitlines()[0])
    add_option(parser, "--no-stream-metadata", "NO_STREAM_METADATA", "no metadata.bat")
    add_option(parser, "--spans-delay-ms", "SPANS_DELAY_MS", "delay of a turn's spans", 0)
    if more_options is not None:
        more_options(parser)
    args = parser.parse_args(argv)
    config = Path(os.environ.get("CONFIG_PATH") or "config.yaml")
    try:
        spans = SpanFile.from_config(config)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{name}: error: {config}: {exc}") from None
    serve_agent(args, name, card, executor(args, spans))


if __name__ == "__main__":
    main()
