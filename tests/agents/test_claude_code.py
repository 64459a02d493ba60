"""The claude-code preset against the real Claude Code (pinned by .ci/coding_agents.sh) and
bat's scripted model speaking Anthropic's Messages API: nothing leaves 127.0.0.1.

Two halves. The preset's ``read`` is tested on what Claude Code really printed, run once
per module by the preset's own ``invocation`` (a write, a resumed turn, a denied write,
a dead model, a 401 and a 429); Hypothesis checks it never raises on anything else. Then
``bat eval.run`` with ``adapter: claude-code``, two runs: one whose executable is Claude
Code under ``strace`` (a file created and checked, a resumed second turn, every connect
to loopback), one in ``default`` permission mode beside a dead model (a refused write is
a failed check of a completed episode; a dead model, the turn's model_error at once).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.agents.kinds import ModelTarget, TurnInput
from bat.agents.presets.claude_code import ClaudeCode
from bat.evaluation.run.scripted_model import serving
from tests.coding_agents import cli_path, traced
from tests.conftest import run_bat
from tests.evalkit import free_port, start_model_server

RULES = [
    {"after_tool": "Write", "reply": "Wrote it: {result}"},
    {"match": "second", "reply": "turn {user_count} after: {first}"},
    {
        "match": "create",
        "reply": "Creating the file.",
        "tool_calls": [
            {
                "name": "Write",
                "args": {"file_path": "{cwd}/hello.txt", "content": "hello from bat\n"},
            }
        ],
    },
]
FAULTS = [{"match": "auth", "status": 401}, {"match": "limit", "status": 429}]
KEY = {"ANTHROPIC_API_KEY": "scripted-model-needs-no-key"}
PRESET = ClaudeCode()


def run_turn(claude, root: Path, message: str, base_url: str, **options) -> tuple[str, str, int]:
    """One turn as the preset words it, in ``root``'s workspace and HOME."""
    space, home = root / "ws", root / "home"
    space.mkdir(parents=True, exist_ok=True)
    home.mkdir(exist_ok=True)
    session = options.pop("session", None)
    turn = TurnInput(
        message=message,
        index=0 if session is None else 1,
        session=session,
        workspace=space,
        home=home,
        model=ModelTarget("anthropic", "claude-sonnet-4-5", base_url, KEY),
        options={**PRESET.defaults(), "executable": str(claude), **options},
        new_session="0a0b0c0d-1111-4222-8333-444455556666",
    )
    invocation = PRESET.invocation(turn)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    ran = subprocess.run(
        invocation.argv,
        cwd=space,
        env={**env, "TMPDIR": str(root), **KEY, **invocation.env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return ran.stdout, ran.stderr, ran.returncode


@pytest.fixture(scope="module")
def claude():
    return cli_path("claude-code", "claude")


@pytest.fixture(scope="module")
def printed(claude, tmp_path_factory) -> dict[str, tuple[str, str, int]]:
    """What Claude Code printed, per case, run once for the module."""
    root = tmp_path_factory.mktemp("claude-runs")
    (root / "rules.json").write_text(json.dumps(RULES))
    (root / "faults.json").write_text(json.dumps(FAULTS))
    out: dict[str, tuple[str, str, int]] = {}
    with serving(root / "rules.json") as base:
        out["write"] = run_turn(claude, root / "a", "please create the file", base)
        session = PRESET.read(*out["write"]).session
        out["resume"] = run_turn(claude, root / "a", "a second turn", base, session=session)
        denied = dict(permission_mode="default")
        out["denied"] = run_turn(claude, root / "b", "please create the file", base, **denied)
    out["dead"] = run_turn(claude, root / "c", "hello", f"http://127.0.0.1:{free_port()}")
    proc, faulty = start_model_server(root / "faults.json")
    try:
        out["auth"] = run_turn(claude, root / "d", "auth please", faulty)
        out["limit"] = run_turn(claude, root / "e", "limit please", faulty)
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    return out


def test_a_write_is_a_tool_call_with_its_result_and_the_reply(printed, tmp_path_factory):
    stdout, stderr, code = printed["write"]
    read = PRESET.read(stdout, stderr, code)
    assert code == 0 and read.error is None
    assert read.session == "0a0b0c0d-1111-4222-8333-444455556666"
    (call,) = read.tool_calls
    assert call.name == "Write" and call.args["file_path"].endswith("/ws/hello.txt")
    assert call.args["content"] == "hello from bat\n" and not call.error
    assert call.result.startswith("File created successfully")
    assert read.reply.startswith("Wrote it: File created successfully")
    usage = read.usage
    assert usage.model_calls == 2 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert read.events >= 5


def test_a_resumed_turn_continues_the_conversation(printed):
    read = PRESET.read(*printed["resume"])
    assert read.error is None and read.tool_calls == []
    assert read.session == "0a0b0c0d-1111-4222-8333-444455556666"
    assert read.reply == "turn 2 after: please create the file"


def test_a_denied_write_is_a_failed_tool_call_not_an_error_of_the_turn(printed):
    stdout, stderr, code = printed["denied"]
    read = PRESET.read(stdout, stderr, code)
    assert code == 0 and read.error is None
    (call,) = read.tool_calls
    assert call.name == "Write" and call.error and "permission" in call.result


@pytest.mark.parametrize(
    ("case", "kind", "status"),
    [
        ("dead", "model_error", None),
        ("auth", "authentication_failed", 401),
        ("limit", "rate_limited", 429),
    ],
)
def test_a_failing_model_is_the_turns_error(printed, case, kind, status):
    stdout, stderr, code = printed[case]
    read = PRESET.read(stdout, stderr, code)
    assert read.error is not None and read.error.kind == kind and read.error.code == status
    assert read.reply == "" and "API Error" in read.error.message
    assert "\n" not in read.error.message and len(read.error.message) <= 500


def test_the_invocation_words_the_turn():
    turn = TurnInput(
        message="-rf looks like a flag",
        index=1,
        session="s-1",
        workspace=Path("/w"),
        home=Path("/h"),
        model=ModelTarget("anthropic", None, "http://127.0.0.1:1", KEY),
        options={**PRESET.defaults(), "max_turns": 3, "extra_args": ["--effort", "low"]},
        new_session="unused",
    )
    invocation = PRESET.invocation(turn)
    assert invocation.argv == [
        "claude", "-p", "--output-format", "stream-json", "--verbose", "--resume", "s-1",
        "--permission-mode", "acceptEdits", "--max-turns", "3", "--effort", "low",
        "--", "-rf looks like a flag",
    ]  # fmt: skip
    assert invocation.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1"
    assert invocation.env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert invocation.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert "IS_SANDBOX" not in invocation.env


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"permission_mode": "yolo"}, "permission_mode 'yolo' is none of"),
        ({"max_turns": 0}, "max_turns must be"),
        ({"extra_args": "--x"}, "extra_args must be a list"),
        ({"max_retries": -1}, "max_retries must be"),
    ],
)
def test_bad_options_are_refused_in_one_line(options, words):
    from bat.agents.registry import options_problem

    problem = options_problem("claude-code", options)
    assert problem is not None and words in problem and "\n" not in problem


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_read_never_raises_on_any_text(text):
    read = PRESET.read(text, text[:100], 1)
    assert read.error is not None or read.reply is not None


EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["system", "assistant", "user", "result", "other"])},
    optional={
        "session_id": st.one_of(st.text(max_size=5), st.integers()),
        "message": st.one_of(
            st.none(),
            st.text(max_size=5),
            st.fixed_dictionaries(
                {},
                optional={
                    "id": st.one_of(st.text(max_size=3), st.integers()),
                    "content": st.one_of(
                        st.text(max_size=5),
                        st.lists(
                            st.dictionaries(
                                st.sampled_from(
                                    [
                                        "type",
                                        "id",
                                        "name",
                                        "input",
                                        "text",
                                        "content",
                                        "tool_use_id",
                                        "is_error",
                                    ]
                                ),
                                st.one_of(
                                    st.sampled_from(["text", "tool_use", "tool_result"]),
                                    st.none(),
                                    st.integers(),
                                    st.text(max_size=5),
                                    st.lists(st.integers(), max_size=2),
                                ),
                            ),
                            max_size=4,
                        ),
                    ),
                },
            ),
        ),
        "is_error": st.one_of(st.booleans(), st.none(), st.text(max_size=2)),
        "error": st.one_of(st.none(), st.text(max_size=8)),
        "result": st.one_of(st.none(), st.text(max_size=20), st.integers()),
        "api_error_status": st.one_of(st.none(), st.integers(), st.text(max_size=3)),
        "subtype": st.sampled_from(["success", "error_max_turns", "init"]),
        "usage": st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(["input_tokens", "output_tokens", "cache_read_input_tokens"]),
                st.one_of(st.integers(), st.text(max_size=2), st.floats()),
            ),
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT, max_size=12), st.integers(min_value=-1, max_value=2))
def test_read_never_raises_on_odd_events(events, code):
    stdout = "\n".join(json.dumps(event) for event in events)
    read = PRESET.read(stdout, "", code)
    assert read.events == len(events)
    assert read.error is None or len(read.error.message) <= 500


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_read_never_raises_on_real_output_cut_anywhere(printed, data):
    case = data.draw(st.sampled_from(sorted(printed)))
    stdout = printed[case][0]
    cut = data.draw(st.integers(0, len(stdout)))
    lines = stdout[:cut].splitlines()
    shuffled = data.draw(st.permutations(lines))
    PRESET.read("\n".join(shuffled), "", None)


# --- bat eval.run with adapter: claude-code --------------------------------------------


def _project(root: Path, tasks: list[dict], options: dict, models: list[dict]) -> Path:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "README").write_text("the user's project\n")
    (root / "rules.yaml").write_text(yaml.safe_dump(RULES))
    (root / "tasks.json").write_text(json.dumps(tasks))
    evaluation = {
        "dataset": "tasks.json",
        "k": 1,
        "concurrency": 4,
        "turn_timeout_s": 20,
        "agent": {"adapter": "claude-code", "options": options, "workspace": {"source": "repo"}},
    }
    (root / "eval").mkdir()
    config = {"evaluation": evaluation, "models": models}
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    return root


SCRIPTED = {
    "name": "scripted",
    "provider": "anthropic",
    "model": "claude-sonnet-4-5",
    "script": "rules.yaml",
}


def _eval_run(root: Path, home: Path) -> tuple[dict[tuple[str, str], dict], Path, float]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for key in [k for k in os.environ if k.startswith(("BAT_", "ANTHROPIC_"))]:
            patch.delenv(key)
        started = time.monotonic()
        result = run_bat("eval.run", cwd=root)
        elapsed = time.monotonic() - started
    assert result.code == 0, result.out + result.err
    (run,) = (root / "eval" / "output").glob("2*")
    episodes = {
        (path.parent.parent.name, path.stem): json.loads(path.read_text())
        for path in run.glob("*/episodes/*.json")
    }
    return episodes, run, elapsed


@pytest.fixture(scope="module")
def traced_run(claude, tmp_path_factory):
    """One run under strace: a file created and checked, and a resumed second turn."""
    root = tmp_path_factory.mktemp("traced")
    wrapper, traces = traced(claude, root)
    tasks = [
        {
            "id": "creates",
            "turns": ["please create the file"],
            "expected": {
                "files_created": ["hello.txt"],
                "file_contains": {"hello.txt": "hello from bat"},
                "tools_invoked": ["Write"],
                "output_must_contain": ["Wrote it"],
                "no_errors": True,
            },
        },
        {
            "id": "resumes",
            "turns": [
                "please create the file",
                {
                    "content": "a second turn",
                    "expect": {"has_reply": True, "files_unchanged": ["hello.txt"]},
                },
            ],
            "expected": {"output_must_contain": ["turn 2 after: please create the file"]},
        },
    ]
    _project(root, tasks, {"executable": str(wrapper)}, [SCRIPTED])
    home = root / "home"
    home.mkdir()
    episodes, run, _ = _eval_run(root, home)
    return episodes, run, traces


def test_a_created_file_passes_its_checks(traced_run):
    episodes, run, _ = traced_run
    binding = json.loads((run / "run.json").read_text())["models"][0]["binding"]
    assert re.fullmatch(r"claude-code \d+\.\d+\.\d+ \(command line\)", binding)
    episode = episodes[("scripted", "creates__try1")]
    assert episode["status"] == "completed" and episode["verdict"]["passed"], episode["verdict"]
    assert episode["trace"]["workspace"]["changes"]["created"] == ["hello.txt"]
    (call,) = episode["trace"]["tool_calls"]
    assert call["name"] == "Write" and call["error"] is False and call["turn"] == 0
    assert episode["trace"]["usage"]["model_calls"] == 2
    assert episode["trace"]["workspace"]["files"]["hello.txt"] == "hello from bat\n"
    names = {check["name"] for check in episode["verdict"]["checks"]}
    assert {"files_created", "file_contains:hello.txt", "tools_invoked"} <= names, names


def test_a_second_turn_resumes_the_session(traced_run):
    episodes, run, _ = traced_run
    episode = episodes[("scripted", "resumes__try1")]
    assert episode["status"] == "completed" and episode["verdict"]["passed"], episode["verdict"]
    assert len(episode["trace"]["turns"]) == 2
    names = {check["name"] for check in episode["verdict"]["checks"]}
    assert {"turn 2: has_reply", "turn 2: files_unchanged"} <= names, names
    sessions = []
    for turn in (1, 2):
        (out,) = run.glob(f"scripted/raw/resumes.1/turn-{turn}.out")
        sessions.append({m for m in re.findall(r'"session_id":"([^"]+)"', out.read_text())})
    assert len(sessions[0]) == 1 and sessions[0] == sessions[1]


def test_claude_code_connects_to_loopback_only(traced_run):
    _, _, traces = traced_run
    connects = [
        line
        for path in traces.glob("connect.*")
        for line in path.read_text().splitlines()
        if "connect(" in line and ("AF_INET" in line)
    ]
    assert connects, "no connection traced: the model was never reached?"
    for line in connects:
        if "AF_INET6" in line:
            assert re.search(r'inet_pton\(AF_INET6, "::1"', line), line
        else:
            assert 'inet_addr("127.0.0.1")' in line, line


def test_a_refused_write_fails_its_check_and_a_dead_model_fails_at_once(claude, tmp_path):
    tasks = [
        {
            "id": "refused",
            "turns": ["please create the file"],
            "expected": {"files_created": ["hello.txt"]},
        }
    ]
    dead = {
        "name": "dead",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "base_url": f"http://127.0.0.1:{free_port()}",
        "env": KEY,
    }
    options = {"executable": str(claude), "permission_mode": "default"}
    _project(tmp_path, tasks, options, [SCRIPTED, dead])
    home = tmp_path / "home"
    home.mkdir()
    episodes, _, elapsed = _eval_run(tmp_path, home)
    refused = episodes[("scripted", "refused__try1")]
    assert refused["status"] == "completed" and refused.get("agent_error") is None
    assert refused["trace"]["turns"][0]["exit_code"] == 0
    (call,) = refused["trace"]["tool_calls"]
    assert call["name"] == "Write" and call["error"] is True
    assert not refused["trace"]["workspace"]["changes"]["created"]
    gone = episodes[("dead", "refused__try1")]
    assert gone["status"] == "error" and gone["agent_error"]["kind"] == "model_error"
    assert "ECONNREFUSED" in gone["agent_error"]["message"]
    assert gone["trace"]["turns"][0]["wall_time_s"] < 10  # well within turn_timeout_s (20)
    assert elapsed < 20
    (check,) = [c for c in refused["verdict"]["checks"] if c["name"] == "files_created"]
    assert not check["passed"] and not refused["verdict"]["passed"]


@pytest.mark.parametrize(
    ("options", "sandbox"),
    [
        ({"permission_mode": "bypassPermissions"}, True),
        ({"extra_args": ["--dangerously-skip-permissions"]}, True),
        ({"permission_mode": "plan"}, False),
    ],
)
def test_is_sandbox_only_when_permissions_are_skipped_as_root(options, sandbox):
    turn = TurnInput(
        message="hi",
        index=0,
        session=None,
        workspace=Path("/w"),
        home=Path("/h"),
        model=ModelTarget(),
        options={**PRESET.defaults(), **options},
        new_session="0a0b0c0d-1111-4222-8333-444455556666",
    )
    invocation = PRESET.invocation(turn)
    assert invocation.argv[5:7] == ["--session-id", "0a0b0c0d-1111-4222-8333-444455556666"]
    assert "ANTHROPIC_BASE_URL" not in invocation.env and "--model" not in invocation.argv
    expected = sandbox and os.geteuid() == 0
    assert ("IS_SANDBOX" in invocation.env) == expected
