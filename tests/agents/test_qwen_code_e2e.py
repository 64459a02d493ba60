"""``bat eval.run`` with ``adapter: qwen-code``: the real Qwen Code (pinned by
.ci/coding_agents.sh) against bat's scripted model, offline. Two runs:

* Qwen Code under ``strace`` (the ``executable`` option names a wrapper): a file created
  and checked, a resumed second turn whose request carries the first, and every
  connect(2) of every process it started going to loopback;
* ``approval_mode: plan`` beside a model server that is gone: a refused write is a failed
  check of a completed episode (Qwen Code exits 0), a dead model the turn's
  ``model_error`` within the turn timeout. (A refused key, 401, is read from Qwen Code's
  real output in test_qwen_code_unit.py.)
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
    {"after_tool": "write_file", "reply": "Wrote it: {result}"},
    {
        "match": "make hello",
        "tool_calls": [
            {
                "name": "write_file",
                "args": {"file_path": "{cwd}/hello.txt", "content": "hi there\n"},
            }
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
        "tools_invoked": ["write_file"],
        "output_must_contain": ["Successfully created"],
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
    "model": "qwen-scripted",
    "script": "rules.yaml",
}


@pytest.fixture(scope="module")
def qwen() -> Path:
    return cli_path("qwen-code", "qwen")


def _project(
    root: Path,
    tasks: list[dict],
    options: dict,
    models: list[dict],
    adapter: str = "qwen-code",
    rules: list[dict] = RULES,
) -> Path:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "README").write_text("the user's project\n")
    (root / "rules.yaml").write_text(yaml.safe_dump(rules))
    (root / "tasks.json").write_text(json.dumps(tasks))
    evaluation = {
        "dataset": "tasks.json",
        "k": 1,
        "concurrency": 4,
        "turn_timeout_s": 20,
        "agent": {"adapter": adapter, "options": options, "workspace": {"source": "repo"}},
    }
    (root / "eval").mkdir()
    (root / "eval" / "eval.yaml").write_text(
        yaml.safe_dump({"evaluation": evaluation, "models": models})
    )
    return root


def _eval_run(root: Path, home: Path, code: int = 0) -> tuple[dict[tuple[str, str], dict], float]:
    """Run bat in-process with an empty HOME and no OPENAI_/BAT_ variables of the caller."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for key in [k for k in os.environ if k.startswith(("BAT_", "OPENAI_", "QWEN_"))]:
            patch.delenv(key)
        started = time.monotonic()
        result = run_bat("eval.run", cwd=root)
        elapsed = time.monotonic() - started
    assert result.code == code, result.out + result.err
    (run,) = (root / "eval" / "output").glob("2*")
    episodes = {
        (path.parent.parent.name, path.stem): json.loads(path.read_text())
        for path in run.glob("*/episodes/*.json")
    }
    return episodes, elapsed


def test_a_file_made_a_resumed_turn_and_no_connection_beyond_loopback(qwen, tmp_path):
    wrapper, traces = traced(qwen, tmp_path)
    root = _project(tmp_path / "p", [CREATES, RESUMES], {"executable": str(wrapper)}, [SCRIPTED])
    episodes, _ = _eval_run(root, tmp_path)

    made = episodes[("scripted", "creates__try1")]
    assert made["status"] == "completed" and made["verdict"]["passed"], made["verdict"]
    (call,) = made["trace"]["tool_calls"]
    assert call["name"] == "write_file" and call["error"] is False
    assert call["args"]["file_path"].endswith("/hello.txt")
    assert made["trace"]["workspace"]["changes"]["created"] == ["hello.txt"]
    assert made["trace"]["usage"]["model_calls"] == 2

    resumed = episodes[("scripted", "resumes__try1")]
    assert resumed["verdict"]["passed"], resumed["verdict"]
    first, second = resumed["trace"]["turns"]
    assert (first["output"], second["output"]) == ("Noted.", "You said apples.")

    seen = connects(traces)
    assert seen, "strace saw no connect at all"
    outside = beyond_loopback(seen)
    assert not outside, outside


def test_a_refused_write_fails_its_check_and_a_dead_model_is_a_model_error(qwen, tmp_path):
    dead = {
        "name": "gone",
        "provider": "openai",
        "model": "qwen-gone",
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "env": {"OPENAI_API_KEY": "sk-nobody-listens"},
    }
    options = {"executable": str(qwen), "approval_mode": "plan"}
    root = _project(tmp_path / "p", [CREATES], options, [SCRIPTED, dead])
    episodes, elapsed = _eval_run(root, tmp_path)

    refused = episodes[("scripted", "creates__try1")]
    assert refused["status"] == "completed" and refused["agent_error"] is None
    assert not refused["verdict"]["passed"]
    (call,) = refused["trace"]["tool_calls"]
    assert call["error"] is True and "declined" in call["result"]
    assert refused["trace"]["turns"][0]["exit_code"] == 0
    assert refused["trace"]["workspace"]["changes"]["created"] == []

    gone = episodes[("gone", "creates__try1")]
    assert gone["status"] == "error" and gone["agent_error"]["kind"] == "model_error"
    assert "Connection error" in gone["agent_error"]["message"]
    assert gone["trace"]["turns"][0]["wall_time_s"] < 20 and elapsed < 40
