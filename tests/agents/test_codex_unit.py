"""The ``codex`` preset's pure parts: its command, its config.toml, and reading what Codex
0.171.0 really printed against bat's scripted model (tests/agents/data/codex, recorded as
its README says), and never raising on anything else."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.agents import registry
from bat.agents.kinds import ModelTarget, TurnInput
from bat.agents.presets.codex import Codex

DATA = Path(__file__).parent / "data" / "codex"
THREAD = "01a2489f-1590-7f03-bd97-d1013833deba"  # first_turn's thread, resumed


def _recorded(name: str) -> tuple[str, str]:
    err = DATA / f"{name}.err"
    return (DATA / f"{name}.out").read_text(), err.read_text() if err.exists() else ""


def _turn(message="hi", index=0, session=None, options=None, **model) -> TurnInput:
    target = dict(model="gpt-test", base_url="http://127.0.0.1:9/v1")
    target["env"] = {"OPENAI_API_KEY": "sk-1", "OTHER": "x"}
    return TurnInput(
        message=message,
        index=index,
        session=session,
        workspace=Path("/w"),
        home=Path("/h"),
        model=ModelTarget(**{**target, **model}),
        options=options or {},
        new_session="episode-1",
    )


def test_registry_names_the_preset():
    agent = registry.load("codex", {})
    assert isinstance(agent, Codex) and registry.program_of(agent) == "codex"


def test_first_turn_execs_later_turns_resume_the_thread():
    agent = Codex()
    first = agent.invocation(_turn("-s danger-full-access $(x)"))
    assert first.argv == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-s",
        "workspace-write",
        "-m",
        "gpt-test",
        "--",
        "-s danger-full-access $(x)",  # after --: never read as flags
    ]
    assert first.env == {"OPENAI_API_KEY": "sk-1"} and first.stdin is None
    later = agent.invocation(_turn("next", index=1, session=THREAD))
    assert later.argv[:3] == ["codex", "exec", "resume"]
    assert later.argv[-3:] == ["--", THREAD, "next"]
    assert 'sandbox_mode="workspace-write"' in later.argv and "-s" not in later.argv


def test_config_names_the_model_and_turns_off_the_rest():
    invocation = Codex().invocation(_turn(base_url='http://127.0.0.1:9/v1"\n[x]'))
    document = tomllib.loads(invocation.files[".codex/config.toml"])
    assert document["model_provider"] == "bat"
    provider = document["model_providers"]["bat"]
    assert provider["base_url"] == 'http://127.0.0.1:9/v1"\n[x]'  # one value, never a table
    assert provider["wire_api"] == "responses" and provider["env_key"] == "OPENAI_API_KEY"
    assert provider["request_max_retries"] == 0 and provider["stream_max_retries"] == 0
    assert document["analytics"] == {"enabled": False}
    assert document["check_for_update_on_startup"] is False
    assert document["approval_policy"] == "never"
    features = document["features"]
    assert not any(features[name] for name in ("plugins", "remote_plugin", "apps"))
    assert features["unbounded_connection_retries"] is False
    assert "x" not in document


@given(url=st.text(max_size=40))
@settings(max_examples=100, deadline=None)
def test_any_base_url_is_one_toml_string(url):
    invocation = Codex().invocation(_turn(base_url=url or "x"))
    document = tomllib.loads(invocation.files[".codex/config.toml"])
    assert document["model_providers"]["bat"]["base_url"] == (url or "x")


def test_options_and_the_cli_own_model_when_the_run_names_none():
    agent = Codex({"executable": "/opt/c", "sandbox": "read-only", "extra_args": ["-c", "a=1"]})
    invocation = agent.invocation(_turn(options=agent.settings, model=None, base_url=None, env={}))
    assert invocation.argv[0] == "/opt/c" and invocation.argv[-3:] == ["a=1", "--", "hi"]
    assert "read-only" in invocation.argv and "-m" not in invocation.argv
    assert invocation.env == {}
    document = tomllib.loads(invocation.files[".codex/config.toml"])
    assert "model_provider" not in document and "model_providers" not in document


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"sandbox": "none"}, "sandbox 'none' is none of"),
        ({"extra_args": "-c"}, "extra_args"),
        ({"executable": ""}, "executable"),
        ({"approval": "x"}, "is no option of codex"),
    ],
)
def test_bad_options_are_one_line(options, words):
    problem = registry.options_problem("codex", options)
    assert problem is not None and words in problem and "\n" not in problem


def test_a_command_that_wrote_a_file_its_usage_and_thread():
    out = Codex().read(*_recorded("wrote"), 0)
    assert out.error is None
    assert out.reply.startswith("Done: Chunk ID:") and "Process exited with code 0" in out.reply
    (call,) = out.tool_calls
    assert call.name == "command_execution" and call.error is False
    assert "printf 'hi there" in call.args["command"] and "hello.txt" in call.args["command"]
    assert out.usage is not None and out.usage.prompt_tokens > 1000
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    assert out.session and out.events == 7


def test_a_failing_command_is_the_calls_error_not_the_turns():
    out = Codex().read(*_recorded("failed_command"), 0)
    assert out.error is None and "Process exited with code 2" in out.reply
    (call,) = out.tool_calls
    assert call.error is True and "nonexistent-bat" in call.result


def test_a_refused_write_is_no_error_of_the_turn():
    out = Codex().read(*_recorded("denied"), 0)
    assert out.error is None and "Read-only file system" in out.reply


def test_a_resumed_turn_keeps_the_thread_and_saw_the_first():
    first = Codex().read(*_recorded("first_turn"), 0)
    later = Codex().read(*_recorded("resumed"), 0)
    assert first.reply == "Noted." and first.session == THREAD
    assert later.session == THREAD
    assert later.reply == "You said apples (2 user messages, first: remember apples)."


@pytest.mark.parametrize(
    ("name", "kind", "code", "words"),
    [
        ("unauthorized", "authentication_failed", 401, "401 Unauthorized"),
        ("rate_limited", "rate_limited", 429, "429 Too Many Requests"),
        ("server_error", "model_error", None, "high demand"),
        ("connection_refused", "model_error", None, "Connection failed"),
    ],
)
def test_errors_read_from_the_events_not_the_exit_status(name, kind, code, words):
    out = Codex().read(*_recorded(name), 1)
    assert out.error is not None and out.error.kind == kind and out.error.code == code
    assert words in out.error.message and out.reply == ""
    # the same events with exit status 0 are the same error: the events decide
    assert Codex().read(*_recorded(name), 0).error == out.error


def test_a_warning_item_is_no_error_and_no_events_is_one():
    wrote, _ = _recorded("wrote")
    assert '"type":"error"' in wrote  # "Model metadata ... not found": a warning item
    none = Codex().read("", "error: unexpected argument '--bogus' found\n", 2)
    assert none.error is not None and none.error.kind == "unknown"
    assert "printed no events (exit status 2)" in none.error.message
    assert "--bogus" in none.error.message
    cut = "\n".join(wrote.splitlines()[:4])  # killed before turn.completed
    retried = wrote.replace(
        '{"type":"turn.started"}',
        '{"type":"turn.started"}\n{"type":"error","message":"Reconnecting... 1/5"}',
    )
    assert Codex().read(retried, "", 0).error is None  # a retry that went through
    assert "without completing" in Codex().read(cut, "", None).error.message


LINES = st.one_of(
    st.text(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=20,
    ).map(json.dumps),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                [
                    "thread.started",
                    "item.started",
                    "item.completed",
                    "turn.completed",
                    "turn.failed",
                    "error",
                ]
            ),
            "thread_id": st.none() | st.integers() | st.text(max_size=10),
            "item": st.none()
            | st.text(max_size=5)
            | st.fixed_dictionaries(
                {
                    "id": st.none() | st.integers() | st.text(max_size=5),
                    "type": st.sampled_from(
                        [
                            "agent_message",
                            "command_execution",
                            "file_change",
                            "mcp_tool_call",
                            "web_search",
                            "x",
                        ]
                    ),
                    "text": st.none() | st.integers() | st.text(max_size=10),
                    "command": st.none() | st.integers() | st.text(max_size=10),
                    "exit_code": st.none() | st.integers() | st.text(max_size=3),
                    "changes": st.none()
                    | st.lists(
                        st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5))
                    ),
                    "arguments": st.none()
                    | st.integers()
                    | st.dictionaries(st.text(max_size=5), st.integers()),
                    "result": st.none()
                    | st.floats()
                    | st.dictionaries(st.text(max_size=5), st.integers()),
                    "error": st.none() | st.text(max_size=5) | st.integers(),
                }
            ),
            "usage": st.none()
            | st.integers()
            | st.dictionaries(
                st.sampled_from(["input_tokens", "output_tokens"]),
                st.integers() | st.text(max_size=3),
            ),
            "error": st.none()
            | st.text(max_size=5)
            | st.dictionaries(st.just("message"), st.integers() | st.text(max_size=10)),
            "message": st.none() | st.integers() | st.text(max_size=30),
        }
    ).map(json.dumps),
)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(LINES, max_size=12), stderr=st.text(max_size=100), code=st.none() | st.integers()
)
def test_read_never_raises_on_odd_output(lines, stderr, code):
    out = Codex().read("\n".join(lines), stderr, code)
    assert out.error is None or out.error.kind
    assert len(out.reply) <= 100_000
