"""The ``gemini``, ``opencode`` and ``aider`` presets: their commands (argv, environment,
files), and reading. opencode's reading is tested on what opencode 1.18.33 really printed
against bat's scripted model (tests/agents/data/opencode, recorded as its README says);
Gemini CLI's and aider's on the shapes their documentation gives (neither is installed
by .ci/coding_agents.sh). Hypothesis checks that no reader ever raises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.agents import registry
from bat.agents.kinds import ModelTarget, TurnInput
from bat.agents.presets.aider import Aider
from bat.agents.presets.gemini import Gemini
from bat.agents.presets.opencode import Opencode

DATA = Path(__file__).parent / "data" / "opencode"
SCRIPTED = ModelTarget(
    provider="openai",
    model="scripted",
    base_url="http://127.0.0.1:9/v1",
    env={"OPENAI_API_KEY": "sk-1", "GEMINI_API_KEY": "g-1"},
)


def _turn(agent, message="hi", index=0, session=None, model=SCRIPTED) -> TurnInput:
    return TurnInput(
        message=message,
        index=index,
        session=session,
        workspace=Path("/w"),
        home=Path("/h"),
        model=model,
        options=agent.settings,
        new_session="episode-1",
    )


def _recorded(name: str) -> tuple[str, str]:
    err = DATA / f"{name}.err"
    return (DATA / f"{name}.out").read_text(), err.read_text() if err.exists() else ""


@pytest.mark.parametrize(
    ("name", "cls", "program"),
    [("gemini", Gemini, "gemini"), ("opencode", Opencode, "opencode"), ("aider", Aider, "aider")],
)
def test_the_registry_names_each_preset(name, cls, program):
    agent = registry.load(name, {})
    assert isinstance(agent, cls) and registry.program_of(agent) == program


@pytest.mark.parametrize(
    ("name", "options", "words"),
    [
        ("gemini", {"approval_mode": "auto-edit"}, "approval_mode 'auto-edit' is none of"),
        ("gemini", {"extra_args": "-d"}, "extra_args"),
        ("opencode", {"permission": {"edit": "yes"}}, "permission"),
        ("opencode", {"title": ""}, "title"),
        ("aider", {"edit_format": "patch"}, "edit_format 'patch' is none of"),
        ("aider", {"executable": 3}, "executable"),
    ],
)
def test_bad_options_are_one_line(name, options, words):
    problem = registry.options_problem(name, options)
    assert problem is not None and words in problem and "\n" not in problem


# --- Gemini CLI ------------------------------------------------------------------------


def test_gemini_command_settings_and_resume():
    agent = Gemini()
    first = agent.invocation(_turn(agent, "--yolo please"))
    assert first.argv == [
        "gemini",
        "--prompt=--yolo please",
        "--output-format",
        "stream-json",
        "--approval-mode",
        "auto_edit",
        "-m",
        "scripted",
    ]
    assert first.env == {"GEMINI_API_KEY": "g-1", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/v1"}
    document = json.loads(first.files[".gemini/settings.json"])
    assert document["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert document["privacy"]["usageStatisticsEnabled"] is False
    assert document["telemetry"]["enabled"] is False
    assert document["general"]["enableAutoUpdate"] is False
    assert agent.invocation(_turn(agent, index=1, session="s1")).argv[-2:] == ["--resume", "s1"]
    assert agent.invocation(_turn(agent, index=1)).argv[-2:] == ["--resume", "latest"]


def _lines(*events) -> str:
    return "\n".join(json.dumps(event) for event in events)


def test_gemini_reads_deltas_tool_calls_usage_and_session():
    stdout = _lines(
        {"type": "init", "session_id": "g-s", "model": "gemini-2.5-pro"},
        {"type": "message", "role": "user", "content": "make it"},
        {"type": "tool_use", "tool_name": "write_file", "tool_id": "t1",
         "parameters": {"file_path": "/w/a.txt", "content": "x"}},
        {"type": "tool_result", "tool_id": "t1", "status": "success", "output": "ok"},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t2", "parameters": {}},
        {"type": "tool_result", "tool_id": "t2", "status": "error",
         "error": {"type": "denied", "message": "not allowed"}},
        {"type": "message", "role": "assistant", "content": "Wrote ", "delta": True},
        {"type": "message", "role": "assistant", "content": "a.txt.", "delta": True},
        {"type": "result", "status": "success",
         "stats": {"total_tokens": 30, "input_tokens": 20, "output_tokens": 10}},
    )  # fmt: skip
    out = Gemini().read(stdout, "", 0)
    assert out.error is None and out.reply == "Wrote a.txt." and out.session == "g-s"
    first, second = out.tool_calls
    assert (first.name, first.result, first.error) == ("write_file", "ok", False)
    assert (second.result, second.error) == ("not allowed", True)
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (20, 10)


@pytest.mark.parametrize(
    ("events", "kind"),
    [
        ([{"type": "result", "status": "error",
           "error": {"type": "FatalAuthenticationError", "message": "API key not valid"}}],
         "authentication_failed"),
        ([{"type": "error", "severity": "error", "message": "429 RESOURCE_EXHAUSTED"}],
         "rate_limited"),
        ([{"type": "error", "severity": "warning", "message": "slow"},
          {"type": "result", "status": "error", "error": {"message": "fetch failed"}}],
         "model_error"),
    ],
)  # fmt: skip
def test_gemini_errors_come_from_the_events(events, kind):
    out = Gemini().read(_lines(*events), "", 1)
    assert out.error is not None and out.error.kind == kind and out.reply == ""


def test_gemini_without_events_says_what_stderr_said():
    out = Gemini().read("", "Loaded cached credentials.\nError: connect ECONNREFUSED", 1)
    assert out.error.kind == "model_error" and "exit status 1" in out.error.message


# --- opencode --------------------------------------------------------------------------


def test_opencode_command_declares_the_model_and_sends_nothing_out():
    agent = Opencode()
    first = agent.invocation(_turn(agent, "two  words 'and' --flags"))
    assert first.argv == [
        "opencode",
        "run",
        "--format",
        "json",
        "--pure",
        "--title",
        "bat",
        "-m",
        "bat/scripted",
    ]
    assert first.stdin == "two  words 'and' --flags"  # as typed: no quoting, no flags
    config = json.loads(first.env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["bat"]
    assert provider["options"] == {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "sk-1"}
    assert config["permission"] == {"edit": "allow", "bash": "deny", "webfetch": "deny"}
    assert first.env["npm_config_registry"].startswith("http://127.0.0.1:")
    assert first.env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    later = agent.invocation(_turn(agent, index=1, session="ses_1"))
    assert later.argv[-2:] == ["--session", "ses_1"]
    assert agent.invocation(_turn(agent, index=1)).argv[-1] == "--continue"
    own = agent.invocation(_turn(agent, model=ModelTarget(provider="anthropic", model="m")))
    assert own.argv[-2:] == ["-m", "anthropic/m"]
    assert "provider" not in json.loads(own.env["OPENCODE_CONFIG_CONTENT"])


def test_opencode_a_written_file():
    out = Opencode().read(*_recorded("wrote"), 0)
    assert out.error is None and out.reply == "Done: Wrote file successfully."
    (call,) = out.tool_calls
    assert (
        call.name == "write" and call.error is False and call.result == "Wrote file successfully."
    )
    assert call.args == {"filePath": "/tmp/oc/ws/hello.txt", "content": "hi there\n"}
    assert out.usage.model_calls == 2 and out.session.startswith("ses_")


def test_opencode_a_resumed_turn_and_a_denied_write():
    first = Opencode().read(*_recorded("first_turn"), 0)
    second = Opencode().read(*_recorded("resumed"), 0)
    assert first.session == second.session and second.reply == "You said apples."
    denied = Opencode().read(*_recorded("denied"), 0)
    (call,) = denied.tool_calls
    assert denied.error is None and call.name == "write" and call.error is True
    assert "unavailable tool 'write'" in call.result


@pytest.mark.parametrize(
    ("name", "kind", "code"),
    [("unauthorized", "authentication_failed", 401), ("connection_refused", "model_error", None)],
)
def test_opencode_model_errors(name, kind, code):
    out = Opencode().read(*_recorded(name), 1)
    assert out.error is not None and (out.error.kind, out.error.code) == (kind, code)


# --- aider -----------------------------------------------------------------------------


def test_aider_command_keeps_its_files_out_of_the_workspace():
    agent = Aider()
    first = agent.invocation(_turn(agent, "--yes-always -x"))
    assert first.argv[:3] == ["aider", "--message", "--yes-always -x"]
    for flag in ("--no-auto-commits", "--no-gitignore", "--yes-always", "--analytics-disable"):
        assert flag in first.argv
    history = first.argv[first.argv.index("--chat-history-file") + 1]
    assert history.startswith("/h/") and "--restore-chat-history" not in first.argv
    assert first.argv[first.argv.index("--model") + 1] == "openai/scripted"
    assert first.env["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1"
    assert first.env["OPENAI_API_KEY"] == "sk-1"
    assert first.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert "--restore-chat-history" in agent.invocation(_turn(agent, index=1)).argv


def test_aider_reads_its_reply_usage_and_litellm_errors():
    stdout = (
        "Aider v0.86.2\nModel: openai/scripted with whole edit format\nGit repo: none\n"
        "Repo-map: disabled\n\nI made hello.txt.\n\nhello.txt\n```\nhi\n```\n\n"
        "Tokens: 2.1k sent, 25 received.\nApplied edit to hello.txt\n"
    )
    out = Aider().read(stdout, "", 0)
    assert out.error is None and out.tool_calls == []
    assert out.reply.startswith("I made hello.txt.") and "Tokens" not in out.reply
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (2100, 25)
    failed = Aider().read("litellm.AuthenticationError: Incorrect API key\n", "", 0)
    assert failed.error.kind == "authentication_failed" and failed.reply == ""
    gone = Aider().read("", "litellm.APIConnectionError: Connection refused", 1)
    assert gone.error.kind == "model_error"


# --- never raising -----------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from([
        "type", "role", "content", "delta", "tool_name", "tool_id", "parameters", "status",
        "output", "error", "stats", "session_id", "sessionID", "part", "tool", "state",
        "input", "tokens", "cache", "data", "statusCode", "message", "severity", "text",
    ]) | st.text(max_size=6), inner, max_size=5),
    max_leaves=25,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(JSON, max_size=8), st.text(max_size=200), st.none() | st.integers())
def test_no_reader_raises_on_any_events(events, stderr, code):
    stdout = "\n".join(json.dumps(event) for event in events)
    for agent in (Gemini(), Opencode(), Aider()):
        agent.read(stdout, stderr, code)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000), st.text(max_size=300))
def test_no_reader_raises_on_any_text(stdout, stderr):
    for agent in (Gemini(), Opencode(), Aider()):
        agent.read(stdout, stderr, None)
