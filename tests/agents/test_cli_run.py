"""``bat eval.run`` with a command-line agent: what a run makes of a program's turns."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

# A program that answers in bat's NDJSON: it writes the file its message names (the
# last word) and says so; "hang" sleeps, "fail" exits 2, "leak" prints the model key.
AGENT = r"""
import json, os, sys, time
message = sys.argv[-1]
word = message.split()[-1]
emit = lambda **event: print(json.dumps(event), flush=True)
emit(type="session", id="s-" + str(len(sys.argv)))
if word == "hang":
    time.sleep(60)
if word == "fail":
    print("the model is gone: connection refused", file=sys.stderr)
    sys.exit(2)
if word == "leak":
    emit(type="text", text="key " + os.environ.get("SECRET_KEY", ""))
    sys.exit(0)
open(word, "w").write(message)
emit(type="tool_call", id="1", name="write_file", args={"path": word})
emit(type="tool_result", id="1", result="ok")
emit(type="text", text="wrote " + word)
"""


def _project(root: Path, tasks: list[dict], **agent) -> Path:
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "README").write_text("the user's project\n")
    (root / "agent.py").write_text(AGENT)
    (root / "tasks.json").write_text(json.dumps(tasks))
    config = {
        "evaluation": {
            "dataset": "tasks.json",
            "k": 1,
            "concurrency": 4,
            "turn_timeout_s": 10,
            "agent": {
                "adapter": "command",
                "options": {"command": [sys.executable, str(root / "agent.py"), "{message}"]},
                "workspace": {"source": "repo"},
                **agent,
            },
        }
    }
    (root / "eval").mkdir()
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    return root


def _episodes(root: Path) -> dict[str, dict]:
    run = sorted((root / "eval" / "output").glob("2*"))[-1]
    return {path.stem: json.loads(path.read_text()) for path in run.glob("*/episodes/*.json")}


def test_a_run_keeps_failed_workspaces_and_raw_output_and_judges_the_files(bat, tmp_path, home):
    tasks = [
        {"id": "writes", "turns": ["make a.txt"], "expected": {"output_must_contain": ["wrote"]}},
        {"id": "fails", "turns": ["make b.txt", "now fail"]},
    ]
    root = _project(tmp_path, tasks)
    result = bat("eval.run", cwd=root)
    assert result.code == 0, result.err  # no gates: a failed task is a result, not an error
    episodes = _episodes(root)
    good, bad = episodes["writes__try1"], episodes["fails__try1"]
    assert good["verdict"]["passed"] and good["trace"]["workspace"]["kept"] is None
    assert good["trace"]["workspace"]["changes"]["created"] == ["a.txt"]
    assert good["trace"]["tool_calls"][0] == {
        "name": "write_file",
        "args": {"path": "a.txt"},
        "result": "ok",
        "error": False,
        "source": "stream",
        "turn": 0,
    }
    assert bad["status"] == "error" and bad["agent_error"]["kind"] == "unknown"
    assert "connection refused" in bad["agent_error"]["message"]
    assert bad["trace"]["turns"][1]["exit_code"] == 2
    kept = Path(bad["trace"]["workspace"]["kept"])
    assert (kept / "b.txt").read_text() == "make b.txt"
    run = kept.parents[2]
    assert (run / kept.parent.parent.name / "raw" / "fails.1" / "turn-2.out").exists()
    assert not list((run / kept.parent.parent.name / "workspaces").glob("writes*"))
    assert (root / "repo" / "README").read_text() == "the user's project\n"
    assert sorted(p.name for p in (root / "repo").iterdir()) == ["README"]


def test_a_hanging_program_is_the_agents_timeout_within_the_turn_limit(bat, tmp_path, home):
    root = _project(tmp_path, [{"id": "hangs", "turns": ["please hang"]}])
    config = yaml.safe_load((root / "eval" / "eval.yaml").read_text())
    config["evaluation"]["turn_timeout_s"] = 1
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    started = time.monotonic()
    bat("eval.run", cwd=root)
    assert time.monotonic() - started < 15
    (episode,) = _episodes(root).values()
    assert episode["agent_error"]["kind"] == "timeout"
    assert episode["trace"]["turns"][0]["wall_time_s"] < 5


def test_secrets_of_the_configuration_stay_out_of_raw_output(bat, tmp_path, home):
    root = _project(
        tmp_path,
        [{"id": "leaks", "turns": ["please leak"]}],
        env={"SECRET_KEY": "sk-very-secret-1234567890"},
    )
    bat("eval.run", cwd=root)
    (raw,) = (root / "eval" / "output").glob("2*/*/raw/leaks.1/turn-1.out")
    assert "sk-very-secret-1234567890" not in raw.read_text()
    assert "sk-very-secret" not in json.dumps(_episodes(root))


@pytest.mark.parametrize(
    ("agent", "words"),
    [
        ({"adapter": "cloud-code"}, "no agent adapter 'cloud-code'"),
        ({"options": {"command": ["x"], "colour": 1}}, "'colour' is no option of command"),
        (
            {"options": {"command": ["no-such-cli-anywhere", "{message}"]}},
            "'no-such-cli-anywhere' is not installed",
        ),
        ({"workspace": {"source": "repo", "keep": "sometimes"}}, "keep"),
        ({"workspace": {"source": "nowhere"}}, "evaluation.agent.workspace.source: no folder at"),
    ],
)
def test_a_wrong_agent_setting_is_one_line_before_anything_runs(bat, tmp_path, home, agent, words):
    root = _project(tmp_path, [{"id": "t", "turns": ["make a.txt"]}], **agent)
    result = bat("eval.run", cwd=root)
    assert result.code == 2, result.out + result.err
    assert words in result.err and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) <= 2
    assert not (root / "eval" / "output").exists() or not list(
        (root / "eval" / "output").glob("2*/*/episodes/*")
    )


def test_resources_are_installed_locked_and_not_the_agents_changes(bat, tmp_path, home):
    import hashlib

    root = _project(
        tmp_path,
        [{"id": "uses", "turns": ["make a.txt"], "expected": {"files_created": ["a.txt"]}}],
        workspace={
            "source": "repo",
            "resources": [{"source": "skill.md", "dest": ".skills/skill.md", "version": "1.2"}],
        },
    )
    (root / "skill.md").write_text("# a skill\n")
    assert bat("eval.run", cwd=root).code == 0
    (episode,) = _episodes(root).values()
    space = episode["trace"]["workspace"]
    assert episode["verdict"]["passed"], episode["verdict"]["reason"]
    assert space["changes"]["created"] == ["a.txt"]  # the resource was there before the agent
    (lock,) = space["resources"]
    assert lock == {
        "source": "skill.md",
        "dest": ".skills/skill.md",
        "sha256": hashlib.sha256(b"# a skill\n").hexdigest(),
        "version": "1.2",
    }
    (written,) = (root / "eval" / "output").glob("2*/*/raw/uses.1/resource_lock.json")
    assert json.loads(written.read_text()) == {"resources": [lock]}


def test_a_workspace_that_cannot_be_made_is_an_infrastructure_failure(bat, tmp_path, home):
    import subprocess

    root = _project(
        tmp_path,
        [{"id": "t", "turns": ["make a.txt"]}],
        workspace={"source": "repo", "ref": "no-such-ref"},
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=root / "repo", check=True)
    subprocess.run([*git, "add", "-A"], cwd=root / "repo", check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=root / "repo", check=True)
    result = bat("eval.run", cwd=root)
    assert result.code == 3, result.out + result.err  # infrastructure: the run is not trusted
    (episode,) = _episodes(root).values()
    assert episode["infra_error"]["kind"] == "not_run"
    assert "the workspace could not be made" in episode["infra_error"]["message"]
    assert "no-such-ref" in episode["infra_error"]["message"]


def test_variables_in_a_cli_agents_options_are_replaced(bat, tmp_path, home, monkeypatch):
    root = _project(
        tmp_path, [{"id": "t", "turns": ["make a.txt"], "expected": {"files_created": ["a.txt"]}}]
    )
    monkeypatch.setenv("AGENT_PYTHON", sys.executable)
    config = yaml.safe_load((root / "eval" / "eval.yaml").read_text())
    config["evaluation"]["agent"]["options"]["command"][0] = "${AGENT_PYTHON}"
    config["evaluation"]["agent"]["workspace"]["source"] = "${REPO_DIR:-repo}"
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    assert bat("eval.run", cwd=root).code == 0
    (episode,) = _episodes(root).values()
    assert episode["verdict"]["passed"], episode["verdict"]["reason"]
    config["evaluation"]["agent"]["options"]["command"][0] = "${NOT_SET_ANYWHERE_X}"
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.show", cwd=root)
    assert result.code == 2 and "${NOT_SET_ANYWHERE_X} is not set" in result.err
