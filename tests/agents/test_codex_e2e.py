"""``bat eval.run`` with ``adapter: codex``: the real Codex CLI (pinned by
.ci/coding_agents.sh) against bat's scripted model on the Responses API, offline. Two
runs:

* Codex under ``strace`` (the ``executable`` option names a wrapper): a file created by
  a command and checked, a resumed second turn whose request carries the first, and
  every connect(2) of every process it started going to loopback;
* ``sandbox: read-only`` beside a model server that is gone: a refused write is a failed
  check of a completed episode (Codex exits 0), and a dead model is the turn's
  ``model_error`` at once, well within the turn timeout.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from tests.coding_agents import beyond_loopback, cli_path, connects, traced
from tests.conftest import run_bat
from tests.evalkit import free_port

RULES = [
    {"after_tool": "exec_command", "reply": "Wrote it: {result}"},
    {
        "match": "make hello",
        "tool_calls": [
            {"name": "exec_command", "args": {"cmd": "printf 'hi there\\n' > {cwd}/hello.txt"}}
        ],
    },
    # Only a conversation holding the first turn answers the second: a resumed session.
    {"regex": "(?s)remember apples.*what fruit", "scope": "prompt", "reply": "You said apples."},
    {"match": "remember", "reply": "Noted."},
]
CREATES = {
    "id": "creates",
    "turns": ["please make hello"],
    "expected": {
        "files_created": ["hello.txt"],
        "file_contains": {"hello.txt": "hi there"},
        "tools_invoked": ["command_execution"],
        "output_must_contain": ["Process exited with code 0"],
    },
}
RESUMES = {
    "id": "resumes",
    "turns": ["remember apples", "what fruit did I name?"],
    "expected": {"output_must_contain": ["You said apples."], "no_errors": True},
}
SCRIPTED = {
    "name": "scripted",
    "provider": "openai",
    "model": "codex-scripted",
    "script": "rules.yaml",
}


@pytest.fixture(scope="module")
def codex() -> Path:
    return cli_path("codex", "codex")


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
        "agent": {"adapter": "codex", "options": options, "workspace": {"source": "repo"}},
    }
    (root / "eval").mkdir()
    (root / "eval" / "eval.yaml").write_text(
        yaml.safe_dump({"evaluation": evaluation, "models": models})
    )
    return root


def _eval_run(root: Path, home: Path) -> tuple[dict[tuple[str, str], dict], float]:
    """Run bat in-process with an empty HOME and no OPENAI_/CODEX_/BAT_ variables of the
    caller."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for key in [k for k in os.environ if k.startswith(("BAT_", "OPENAI_", "CODEX_"))]:
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
    return episodes, elapsed


def test_a_file_made_a_resumed_turn_and_no_connection_beyond_loopback(codex, tmp_path):
    wrapper, traces = traced(codex, tmp_path)
    root = _project(tmp_path / "p", [CREATES, RESUMES], {"executable": str(wrapper)}, [SCRIPTED])
    episodes, _ = _eval_run(root, tmp_path)

    made = episodes[("scripted", "creates__try1")]
    assert made["status"] == "completed" and made["verdict"]["passed"], made["verdict"]
    (call,) = made["trace"]["tool_calls"]
    assert call["name"] == "command_execution" and call["error"] is False
    assert "/hello.txt" in call["args"]["command"] and "{cwd}" not in call["args"]["command"]
    assert made["trace"]["workspace"]["changes"]["created"] == ["hello.txt"]
    assert made["trace"]["usage"]["prompt_tokens"] > 0

    resumed = episodes[("scripted", "resumes__try1")]
    assert resumed["verdict"]["passed"], resumed["verdict"]
    first, second = resumed["trace"]["turns"]
    assert (first["output"], second["output"]) == ("Noted.", "You said apples.")

    seen = connects(traces)
    assert seen, "strace saw no connect at all"
    outside = beyond_loopback(seen)
    assert not outside, outside


def test_a_refused_write_fails_its_check_and_a_dead_model_is_a_model_error(codex, tmp_path):
    dead = {
        "name": "gone",
        "provider": "openai",
        "model": "codex-gone",
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "env": {"OPENAI_API_KEY": "sk-nobody-listens"},
    }
    options = {"executable": str(codex), "sandbox": "read-only"}
    root = _project(tmp_path / "p", [CREATES], options, [SCRIPTED, dead])
    episodes, elapsed = _eval_run(root, tmp_path)

    refused = episodes[("scripted", "creates__try1")]
    assert refused["status"] == "completed" and refused["agent_error"] is None
    assert not refused["verdict"]["passed"]
    assert "Read-only file system" in refused["trace"]["turns"][0]["output"]
    assert refused["trace"]["turns"][0]["exit_code"] == 0
    assert refused["trace"]["workspace"]["changes"]["created"] == []

    gone = episodes[("gone", "creates__try1")]
    assert gone["status"] == "error" and gone["agent_error"]["kind"] == "model_error"
    assert "Connection failed" in gone["agent_error"]["message"]
    assert gone["trace"]["turns"][0]["wall_time_s"] < 10 and elapsed < 40
