"""The ``qwen-code`` preset's pure parts: its command, its settings, and reading what Qwen
Code 0.15.10 really printed against bat's scripted model (tests/agents/data/qwen_code,
recorded as its README says), and never raising on anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.agents import registry
from bat.agents.kinds import ModelTarget, TurnInput
from bat.agents.presets.qwen_code import QwenCode

DATA = Path(__file__).parent / "data" / "qwen_code"
EPISODE = "3f2a9c4e-8b1d-4e6f-9a2b-7c5d1e0f3a4b"


def _recorded(name: str) -> tuple[str, str]:
    err = DATA / f"{name}.err"
    return (DATA / f"{name}.out").read_text(), err.read_text() if err.exists() else ""


def _turn(message="hi", index=0, session=None, options=None, **model) -> TurnInput:
    target = dict(model="qwen3-coder", base_url="http://127.0.0.1:9/v1")
    target["env"] = {"OPENAI_API_KEY": "sk-1", "OTHER": "x"}
    return TurnInput(
        message=message,
        index=index,
        session=session,
        workspace=Path("/w"),
        home=Path("/h"),
        model=ModelTarget(**{**target, **model}),
        options=options or {},
        new_session=EPISODE,
    )


def test_registry_names_the_preset():
    agent = registry.load("qwen-code", {})
    assert isinstance(agent, QwenCode) and registry.program_of(agent) == "qwen"


def test_first_turn_takes_the_episode_id_later_turns_resume_the_session():
    agent = QwenCode()
    first = agent.invocation(_turn("-y --approval-mode yolo $(x)"))
    assert first.argv == [
        "qwen",
        "--prompt=-y --approval-mode yolo $(x)",  # one argument: never read as flags
        "--output-format",
        "stream-json",
        "--auth-type",
        "openai",
        "--approval-mode",
        "auto-edit",
        "-m",
        "qwen3-coder",
        "--session-id",
        EPISODE,
    ]
    assert first.env == {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_MODEL": "qwen3-coder",
        "OPENAI_API_KEY": "sk-1",
    }
    later = agent.invocation(_turn("next", index=1, session="s-7"))
    assert later.argv[-2:] == ["--resume", "s-7"] and "--session-id" not in later.argv
    lost = agent.invocation(_turn("next", index=1))
    assert lost.argv[-1] == "--continue"


def test_settings_turn_off_everything_but_the_models_requests():
    invocation = QwenCode().invocation(_turn(options={"max_retries": 2}))
    document = json.loads(invocation.files[".qwen/settings.json"])
    assert document["privacy"] == {"usageStatisticsEnabled": False}
    assert document["telemetry"] == {"enabled": False}
    assert document["general"] == {"enableAutoUpdate": False}
    assert document["memory"] == {"enableManagedAutoMemory": False}
    assert document["model"]["generationConfig"]["maxRetries"] == 2


def test_options_and_the_cli_own_model_when_the_run_names_none():
    agent = QwenCode({"executable": "/opt/q", "approval_mode": "plan", "extra_args": ["-d"]})
    invocation = agent.invocation(_turn(options=agent.settings, model=None, base_url=None, env={}))
    assert invocation.argv[0] == "/opt/q" and invocation.argv[-1] == "-d"
    assert "plan" in invocation.argv and "-m" not in invocation.argv
    assert invocation.env == {}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"approval_mode": "always"}, "approval_mode 'always' is none of"),
        ({"max_retries": -1}, "max_retries"),
        ({"extra_args": "-d"}, "extra_args"),
        ({"executable": ""}, "executable"),
    ],
)
def test_bad_options_are_one_line(options, words):
    problem = registry.options_problem("qwen-code", options)
    assert problem is not None and words in problem and "\n" not in problem


def test_a_written_file_its_call_result_usage_and_session():
    out = QwenCode().read(*_recorded("wrote"), 0)
    assert out.error is None
    assert out.reply == "Done: Successfully created and wrote to new file: /tmp/qw/f/ws/hello.txt."
    (call,) = out.tool_calls
    assert call.name == "write_file" and call.error is False
    assert call.args == {"file_path": "/tmp/qw/f/ws/hello.txt", "content": "hi there\n"}
    assert call.result.startswith("Successfully created")
    assert out.usage is not None and out.usage.model_calls == 2
    assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens == 10
    assert out.session and out.events == 5


def test_a_denied_write_is_the_calls_error_not_the_turns():
    out = QwenCode().read(*_recorded("denied"), 0)
    assert out.error is None
    (call,) = out.tool_calls
    assert call.error is True and "permission" in call.result


def test_a_resumed_turn_keeps_the_session():
    first = QwenCode().read(*_recorded("first_turn"), 0)
    second = QwenCode().read(*_recorded("resumed"), 0)
    assert first.session == second.session == "11111111-2222-4333-8444-555555555555"
    assert second.reply.endswith("messages 6")  # system, context, ack, 2 users, 1 reply


@pytest.mark.parametrize(
    ("name", "kind", "code"),
    [
        ("unauthorized", "authentication_failed", 401),
        ("rate_limited", "rate_limited", 429),
        ("server_error", "model_error", 500),
        ("connection_refused", "model_error", None),
    ],
)
def test_a_failed_model_call_is_read_from_the_words_though_it_exits_0(name, kind, code):
    out = QwenCode().read(*_recorded(name), 0)
    assert out.error is not None and out.error.kind == kind and out.error.code == code
    assert out.error.message.startswith("[API Error") and out.reply == ""
    assert out.usage is None  # a failed call is no model call


def test_no_events_is_an_error_with_stderr_last_line():
    out = QwenCode().read(*_recorded("empty_message"), 1)
    assert out.error is not None and out.error.kind == "unknown"
    assert "printed no events (exit status 1): No input provided" in out.error.message


def test_a_result_marked_as_an_error_is_one():
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "error": {"message": "429 Too Many Requests"},
        },
    ]
    out = QwenCode().read("\n".join(json.dumps(line) for line in lines), "", 1)
    assert out.error is not None and out.error.kind == "rate_limited"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["system", "assistant", "user", "result", "x"])},
    optional={
        "session_id": JSON,
        "message": st.fixed_dictionaries(
            {},
            optional={
                "content": JSON
                | st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["text", "tool_use", "tool_result"])},
                        optional={
                            "text": JSON,
                            "id": JSON,
                            "name": JSON,
                            "input": JSON,
                            "tool_use_id": JSON,
                            "content": JSON,
                            "is_error": JSON,
                        },
                    ),
                    max_size=3,
                ),
                "usage": JSON,
            },
        ),
        "result": JSON,
        "is_error": JSON,
        "error": JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT | JSON, max_size=6), st.text(max_size=200), st.none() | st.integers())
def test_read_never_raises_on_events(events, stderr, code):
    stdout = "\n".join(json.dumps(event) for event in events)
    out = QwenCode().read(stdout, stderr, code)
    assert out.events <= len(events)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000), st.text(max_size=200))
def test_read_never_raises_on_text(stdout, stderr):
    QwenCode().read(stdout, stderr, None)
