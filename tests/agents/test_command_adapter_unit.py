"""The ``command`` adapter's pure parts: argv templates, options, and reading events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.agents import registry
from bat.agents.command import CommandAgent, read_events
from bat.agents.kinds import ModelTarget, TurnInput
from bat.errors import InputError


def _turn(message: str, index: int = 0, session: str | None = None) -> TurnInput:
    return TurnInput(
        message=message,
        index=index,
        session=session,
        workspace=Path("/w"),
        home=Path("/h"),
        model=ModelTarget(model="m1", base_url="http://127.0.0.1:1/v1"),
        options={},
        new_session="made-by-bat",
    )


def test_placeholders_fill_whole_arguments_never_split_them():
    agent = CommandAgent(
        {
            "command": ["cli", "--cwd={workspace}", "{message}"],
            "resume_command": "cli --resume {session} {message}",
        }
    )
    hostile = "a b; rm -rf / $(x) 'q' {message}"
    first = agent.invocation(_turn_with(agent, hostile))
    assert first.argv == ["cli", "--cwd=/w", hostile]
    later = agent.invocation(_turn_with(agent, "next", index=1, session="s9"))
    assert later.argv == ["cli", "--resume", "s9", "next"]
    again = agent.invocation(_turn_with(agent, "x", index=1, session=None))
    assert again.argv[2] == "made-by-bat"


def _turn_with(agent, message, index=0, session=None):
    turn = _turn(message, index, session)
    return TurnInput(**{**turn.__dict__, "options": agent.settings})


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"command": None}, "an argv"),
        ({"command": []}, "empty"),
        ({"command": "cli 'unclosed"}, "quotation"),
        ({"command": ["cli", "{nope}"]}, "unknown placeholder {nope}"),
        ({"command": ["cli"], "output": "xml"}, "ndjson or text"),
        ({"command": ["cli"], "fields": {"txt": "content"}}, "'txt' is none of"),
        ({"command": ["cli"], "types": {"a": "b"}}, "'b' is none of"),
        ({"command": ["cli"], "env": {"A": 1}}, "env:"),
        ({"command": ["cli"], "colour": "red"}, "'colour' is no option of command"),
    ],
)
def test_bad_options_are_one_line(options, words):
    problem = registry.options_problem("command", options)
    assert problem is not None and words in problem and "\n" not in problem


def test_unknown_adapter_names_the_known_ones():
    problem = registry.options_problem("cloud-code", {})
    assert "no agent adapter 'cloud-code'" in problem and "claude-code" in problem


def test_events_are_read_with_a_mapping():
    lines = [
        {"event": "session", "ident": "abc"},
        {"event": "assistant", "content": "thinking"},
        {"event": "tool_call", "ident": "1", "name": "write_file", "args": {"path": "x"}},
        {"event": "tool_result", "ident": "1", "result": "denied", "error": True},
        {"event": "usage", "input_tokens": 7, "output_tokens": 2},
        {"event": "usage", "input_tokens": 3, "output_tokens": 1},
        {"event": "assistant", "content": "done"},
    ]
    text = "noise\n" + "\n".join(json.dumps(line) for line in lines) + "\n[1,2]\n{broken"
    out = read_events(
        text, {"type": "event", "id": "ident", "text": "content"}, {"assistant": "text"}
    )
    assert out.session == "abc" and out.reply == "done" and out.events == 7
    (call,) = out.tool_calls
    assert (call.name, call.args, call.result, call.error) == (
        "write_file",
        {"path": "x"},
        "denied",
        True,
    )
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.model_calls) == (
        10,
        3,
        2,
    )


def test_an_error_event_keeps_to_the_closed_set():
    out = read_events(
        '{"type":"error","kind":"rate_limited","message":"slow down"}\n'
        '{"type":"error","kind":"volcano","message":"hot"}',
        {},
        {},
    )
    assert out.error.kind == "unknown" and out.error.message == "hot"
    assert (
        read_events('{"type":"error","kind":"rate_limited"}', {}, {}).error.kind == "rate_limited"
    )


def test_text_output_is_all_of_stdout():
    agent = CommandAgent({"command": ["x"], "output": "text"})
    assert agent.read("  hello\nworld \n", "", 0).reply == "hello\nworld"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
events = st.dictionaries(
    st.sampled_from(
        [
            "type",
            "id",
            "text",
            "name",
            "args",
            "result",
            "error",
            "kind",
            "message",
            "input_tokens",
            "output_tokens",
        ]
    ),
    json_values
    | st.sampled_from(["session", "text", "tool_call", "tool_result", "usage", "error"]),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(events.map(json.dumps) | st.text(max_size=40), max_size=12))
def test_reading_never_fails_on_any_lines(lines):
    out = read_events("\n".join(lines), {}, {})
    assert out.usage is None or out.usage.total_tokens >= 0
    for call in out.tool_calls:
        assert isinstance(call.name, str)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_template_fills_or_is_refused_in_one_line(template):
    try:
        CommandAgent.check_options({**CommandAgent.defaults(), "command": ["cli", template]})
    except InputError as exc:
        assert "\n" not in exc.message
