"""SpanIndex: spans of other agents joined by trace id (``extra_spans``), and its waits.

The span lines are made by the tool agent's own code (``work`` and ``make_spans``, which
use ``eval_fixtures._spans.new_span``) and written by its ``SpanFile``, so they are what
the fixture agent, imitating bat-adk's file exporter, writes in a real run. A called
agent continues its caller's trace through the W3C ``traceparent`` (``trace_parent``).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path

import pytest

from bat.evaluation.run import spans as spans_module
from bat.evaluation.run.spans import SpanIndex
from eval_fixtures._spans import SpanFile, new_span, trace_parent
from eval_fixtures.tool_agent import make_spans, work


def write(path: Path, spans: list[dict]) -> None:
    """Append ``spans`` as the fixture agents do (one JSON line each, flushed)."""
    out = SpanFile([path], privacy=0)
    try:
        out.write(spans)
    finally:
        for handle in out.files:
            handle.close()


def turn_spans(text: str, context_id: str, *, traceparent: str | None = None):
    """The spans the tool agent writes for one turn of ``text``, and that turn's work."""
    turn = work(text)
    trace_id, parent = trace_parent({"traceparent": traceparent} if traceparent else {})
    ids = {"context_id": context_id, "task_id": f"task-{context_id}"}
    ids |= {"trace_id": trace_id, "parent": parent}
    start = time.time_ns()
    return make_spans(turn, ids, start, start + 1_000_000), turn


def tokens(*turns) -> int:
    return sum(p + c for turn in turns for p, c in turn.model_calls)


@pytest.fixture
def calling(tmp_path):
    """A turn of the main agent that calls ``planner``, whose own spans (continuing the
    caller's trace) are in another file, beside a planner turn nobody's call started."""
    main_file, extra_file = tmp_path / "run" / "spans.jsonl", tmp_path / "planner.jsonl"
    main, main_turn = turn_spans("ASK_AGENT planner", "ctx-main")
    (client,) = [s for s in main if s["kind"] == "CLIENT"]
    assert client["attributes"]["gen_ai.agent.name"] == "planner"
    carrier = f"00-{client['trace_id']}-{client['span_id']}-01"
    called, called_turn = turn_spans("weather in Paris", "ctx-planner", traceparent=carrier)
    alone, _ = turn_spans("calculate 6*7", "ctx-planner-alone")
    # The called agent ends (and writes its spans) before its caller does.
    write(extra_file, [*called, *alone])
    write(main_file, main)
    return main_file, extra_file, main_turn, called_turn


def test_extra_spans_join_the_conversation_by_trace_id(calling):
    main_file, extra_file, main_turn, called_turn = calling
    without = SpanIndex(main_file)
    without.refresh()
    report = without.report("ctx-main")
    assert report["tool_calls"] == []
    assert report["agent_calls"] == [{"name": "planner"}]
    assert report["model_calls"] == len(main_turn.model_calls) == 2
    assert report["usage"]["total_tokens"] == tokens(main_turn)

    joined = SpanIndex(main_file, extra=(extra_file,))
    joined.refresh()
    report = joined.report("ctx-main")
    # The planner's tool call and model calls are part of the caller's conversation...
    assert report["tool_calls"] == [
        {
            "name": "get_weather",
            "args": {"city": "Paris"},
            "result": "sunny in Paris",
            "error": False,
        }
    ]
    assert report["model_calls"] == 4
    assert report["usage"] == {
        "prompt_tokens": sum(p for t in (main_turn, called_turn) for p, _ in t.model_calls),
        "completion_tokens": sum(c for t in (main_turn, called_turn) for _, c in t.model_calls),
        "total_tokens": tokens(main_turn, called_turn),
    }
    # ...its root span is not a call to another agent, and its other trace stays apart.
    assert report["agent_calls"] == [{"name": "planner"}]
    assert "calculator" not in json.dumps(report)
    assert joined.turns_seen("ctx-main") == 1
    assert joined.report("ctx-planner-alone")["tool_calls"][0]["name"] == "calculator"


def test_extra_spans_written_later_are_read_on_the_next_refresh(tmp_path):
    main_file, extra_file = tmp_path / "spans.jsonl", tmp_path / "other.jsonl"
    main, _ = turn_spans("ASK_AGENT helper", "ctx")
    (client,) = [s for s in main if s["kind"] == "CLIENT"]
    carrier = f"00-{client['trace_id']}-{client['span_id']}-01"
    called, _ = turn_spans("search cats limit 2", "ctx-helper", traceparent=carrier)
    write(main_file, main)
    index = SpanIndex(main_file, extra=(extra_file,))  # the extra file does not exist yet
    index.refresh()
    assert index.report("ctx")["tool_calls"] == []
    text = "".join(json.dumps(span) + "\n" for span in called)
    with extra_file.open("w") as handle:  # half of the last line first: it must wait
        handle.write(text[:-20])
    index.refresh()
    # The half line is not read yet (it is the helper's root span)...
    assert len(index.spans_of("ctx")) == len(main) + len(called) - 1
    assert index.turns_seen("ctx-helper") == 0
    assert index.total == len(main)  # ...and only the agent's own spans say it writes any
    with extra_file.open("a") as handle:
        handle.write(text[-20:])
    index.refresh()
    assert len(index.spans_of("ctx")) == len(main) + len(called)
    assert index.turns_seen("ctx-helper") == 1
    (call,) = index.report("ctx")["tool_calls"]
    assert call["name"] == "search" and call["args"] == {"query": "cats", "options": {"limit": 2}}


def test_a_span_line_made_by_new_span_is_read_as_bat_adk_writes_it(tmp_path):
    """One hand-assembled turn from the bare helper: a TOOL child that failed and the root."""
    path = tmp_path / "spans.jsonl"
    trace = secrets.token_hex(16)
    root_id = secrets.token_hex(8)
    tool = new_span(
        "calculator",
        trace,
        root_id,
        (10, 20),
        **{
            "openinference.span.kind": "TOOL",
            "tool.name": "calculator",
            "input.value": '{"expression": "1/0"}',
            "output.value": "error: division by zero",
        },
    )
    tool |= {"status": "ERROR"}
    root = new_span("invoke_agent X", trace, None, (0, 30), **{"gen_ai.conversation.id": "c"}) | {
        "span_id": root_id
    }
    write(path, [tool, root])
    index = SpanIndex(path)
    index.refresh()
    assert index.report("c")["tool_calls"] == [
        {
            "name": "calculator",
            "args": {"expression": "1/0"},
            "result": "error: division by zero",
            "error": True,
        }
    ]


# --- waiting for spans ------------------------------------------------------------------


def timed(coroutine) -> tuple[object, float]:
    started = time.monotonic()
    result = asyncio.run(coroutine)
    return result, time.monotonic() - started


def test_not_expected_returns_at_once_but_reads_what_is_there(calling):
    main_file, extra_file, _, _ = calling
    index = SpanIndex(main_file, extra=(extra_file,), expected=False)
    found, seconds = timed(index.wait_for("ctx-main", 1))
    assert found is True and seconds < 0.2
    assert index.report("ctx-main")["tool_calls"][0]["name"] == "get_weather"
    missing, seconds = timed(index.wait_for("ctx-nobody", 1))
    assert missing is False and seconds < 0.2
    late, seconds = timed(index.wait_for("ctx-main", 2))  # a second turn never came
    assert late is False and seconds < 0.2
    assert index.waits == 0 and not index.silent


def test_an_empty_file_makes_the_first_wait_the_last(tmp_path, monkeypatch):
    """Expected spans that never come: the first wait runs out, sets ``silent``, and every
    later wait returns at once, while spans that do appear are still found."""
    monkeypatch.setattr(spans_module, "FIRST_WAIT_S", 0.4)  # the real one is 5 s
    path = tmp_path / "spans.jsonl"
    path.write_text("")
    index = SpanIndex(path, expected=True)
    found, seconds = timed(index.wait_for("ctx", 1))
    assert found is False and 0.4 <= seconds < 2
    assert index.silent and index.waits == 1
    found, seconds = timed(index.wait_for("ctx-2", 1))
    assert found is False and seconds < 0.1 and index.waits == 1
    spans, _ = turn_spans("calculate 2+2", "ctx-3")
    write(path, spans)
    found, seconds = timed(index.wait_for("ctx-3", 1))
    assert found is True and seconds < 0.1


def test_expected_spans_written_late_end_the_wait_when_they_come(tmp_path):
    path = tmp_path / "spans.jsonl"
    spans, _ = turn_spans("weather in Oslo", "ctx")
    index = SpanIndex(path, expected=True)

    async def scenario():
        async def write_late():
            await asyncio.sleep(0.3)
            write(path, spans)

        writer = asyncio.create_task(write_late())
        found = await index.wait_for("ctx", 1)
        await writer
        return found

    found, seconds = timed(scenario())
    assert found is True and 0.3 <= seconds < 2
    assert not index.silent and index.waits == 1
    assert 0.3 <= index.longest_delay_s < 2
    # Once spans have been seen, a wait is bounded by a few times the longest delay.
    assert index.wait_limit() == pytest.approx(
        min(spans_module.FIRST_WAIT_S, spans_module.WAIT_FACTOR * index.longest_delay_s)
    )


def test_an_agent_writing_no_spans_goes_silent_beside_a_busy_extra_file(tmp_path, monkeypatch):
    monkeypatch.setattr(spans_module, "FIRST_WAIT_S", 0.4)
    path, extra = tmp_path / "spans.jsonl", tmp_path / "other-agent.jsonl"
    path.write_text("")
    write(extra, turn_spans("calculate 1+1", "an-earlier-conversation")[0])
    index = SpanIndex(path, extra=(extra,), expected=True)
    found, _ = timed(index.wait_for("ctx", 1))
    assert found is False
    assert index.silent
