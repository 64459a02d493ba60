"""The ``command`` adapter driving a real coding CLI (eval_fixtures/coding_cli.py) through
``bat eval.run``, with bat's own scripted model behind it over real HTTP: files made and
checked, a resumed turn, text output, renamed events, a refused write, concurrent
episodes kept apart, the user's folder left alone, a hanging CLI stopped whole."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import yaml

from tests.conftest import REPO
from tests.evalkit import free_port

CLI = str(REPO / "eval_fixtures" / "coding_cli.py")

RULES = """
- match: make notes
  tool_calls: [{name: write_file, args: {path: notes.txt, content: "banana\\n"}}]
- {after_tool: write_file, match: refused, reply: "could not write: {result}"}
- {after_tool: write_file, reply: wrote notes.txt}
- {match: again, reply: "turn {user_count}; you first said: {first}"}
- match: mine alpha
  tool_calls: [{name: write_file, args: {path: alpha.txt, content: a}}, LIST]
- match: mine beta
  tool_calls: [{name: write_file, args: {path: beta.txt, content: b}}, LIST]
- {after_tool: run, reply: "files: {result}"}
- match: hang
  tool_calls: [{name: run, args: {command: "echo $$ $PPID > PIDS_FILE; sleep 300"}}]
""".replace("LIST", "{name: run, args: {command: sleep 1; ls}}")


def _project(root: Path, tasks: list[dict], *, options: dict | None = None, **evaluation) -> Path:
    """A folder to run ``bat eval.run`` in: ``repo/`` (a plain folder), tasks.json, and
    eval.yaml running coding_cli.py with a scripted model."""
    (root / "repo").mkdir(parents=True)
    (root / "repo" / "README").write_text("the user's project\n")
    (root / "tasks.json").write_text(json.dumps(tasks))
    (root / "rules.yaml").write_text(RULES.replace("PIDS_FILE", str(root / "pids")))
    command = [sys.executable, CLI, "{message}"]
    config = {
        "evaluation": {
            "dataset": "tasks.json",
            "k": 1,
            "concurrency": 2,
            "turn_timeout_s": 30,
            "agent": {
                "adapter": "command",
                "options": {
                    "command": command,
                    "resume_command": [sys.executable, CLI, "--resume", "{session}", "{message}"],
                    **(options or {}),
                },
                "workspace": {"source": "repo", "keep": "always"},
            },
            **evaluation,
        },
        "models": [
            {"name": "scripted", "provider": "openai", "model": "m1", "script": "rules.yaml"}
        ],
    }
    (root / "eval").mkdir()
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    return root


def _episodes(root: Path) -> dict[str, dict]:
    run = sorted((root / "eval" / "output").glob("2*"))[-1]
    return {path.stem: json.loads(path.read_text()) for path in run.glob("*/episodes/*.json")}


def _checks(episode: dict) -> dict[str, bool]:
    return {check["name"]: check["passed"] for check in episode["verdict"]["checks"]}


def _tree_hash(folder: Path) -> str:
    """Every path, mode and byte below ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(oct(path.lstat().st_mode).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_a_file_written_and_checked_then_a_resumed_turn_with_the_user_tree_untouched(
    bat, tmp_path, home
):
    tasks = [
        {
            "id": "notes",
            "turns": [
                {"message": "make notes", "expect": {"files_created": ["notes.txt"]}},
                {"message": "again please", "expect": {"has_reply": True}},
            ],
            "expected": {
                "file_contains": {"notes.txt": "banana"},
                "files_unchanged": ["README"],
                "tools_invoked": ["write_file"],
            },
        }
    ]
    root = _project(tmp_path, tasks)
    before = _tree_hash(root / "repo")
    result = bat("eval.run", cwd=root)
    assert result.code == 0, result.err
    episode = _episodes(root)["notes__try1"]
    assert episode["status"] == "completed" and episode["verdict"]["passed"], _checks(episode)
    first, second = episode["trace"]["turns"]
    assert first["output"] == "wrote notes.txt" and first["tool_sequence"] == ["write_file"]
    # the second run of the CLI continued the session: its model saw the first turn
    assert second["output"] == "turn 2; you first said: make notes"
    assert episode["trace"]["tool_calls"][0]["args"] == {"path": "notes.txt", "content": "banana\n"}
    assert _tree_hash(root / "repo") == before
    assert sorted(p.name for p in (root / "repo").iterdir()) == ["README"]


def test_text_output_is_the_whole_reply(bat, tmp_path, home):
    expected = {"output_must_contain": ["wrote notes.txt"]}
    tasks = [{"id": "text", "turns": ["make notes"], "expected": expected}]
    options = {"command": [sys.executable, CLI, "--output", "text", "{message}"], "output": "text"}
    root = _project(tmp_path, tasks, options=options)
    assert bat("eval.run", cwd=root).code == 0
    episode = _episodes(root)["text__try1"]
    assert episode["verdict"]["passed"] and episode["final_output"] == "wrote notes.txt"
    assert episode["trace"]["tool_calls"] == []  # text: no events to read them from


def test_renamed_fields_and_types_are_read(bat, tmp_path, home):
    """A CLI whose events say ``kind``/``content`` and ``assistant`` (coding_cli.py's
    output renamed by sed, as another CLI would print them)."""
    rename = 's/"type": "text", "text"/"kind": "assistant", "content"/; s/"type"/"kind"/'
    script = f'"$0" "$1" "$2" | sed -e \'{rename}\''
    options = {
        "command": ["sh", "-c", script, sys.executable, CLI, "{message}"],
        "fields": {"type": "kind", "text": "content"},
        "types": {"assistant": "text"},
    }
    expected = {"output_must_contain": ["wrote"], "tools_invoked": ["write_file"]}
    tasks = [{"id": "renamed", "turns": ["make notes"], "expected": expected}]
    root = _project(tmp_path, tasks, options=options)
    assert bat("eval.run", cwd=root).code == 0
    episode = _episodes(root)["renamed__try1"]
    assert episode["verdict"]["passed"], _checks(episode)
    assert episode["final_output"] == "wrote notes.txt"
    assert [call["name"] for call in episode["trace"]["tool_calls"]] == ["write_file"]


def test_a_refused_write_fails_the_check_and_the_cli_still_exits_0(bat, tmp_path, home):
    options = {"command": [sys.executable, CLI, "--read-only", "{message}"]}
    tasks = [{"id": "ro", "turns": ["make notes"], "expected": {"files_created": ["notes.txt"]}}]
    root = _project(tmp_path, tasks, options=options)
    assert bat("eval.run", cwd=root).code == 0
    episode = _episodes(root)["ro__try1"]
    assert episode["status"] == "completed" and episode["agent_error"] is None
    assert episode["trace"]["turns"][0]["exit_code"] == 0
    assert episode["final_output"].startswith("could not write: write_file: refused")
    assert episode["trace"]["tool_calls"][0]["error"] is True
    assert not episode["verdict"]["passed"] and _checks(episode) == {
        "status": True,
        "files_created": False,
    }


def test_concurrent_episodes_work_in_workspaces_of_their_own(bat, tmp_path, home):
    tasks = [{"id": name, "turns": [f"mine {name}"]} for name in ("alpha", "beta")]
    root = _project(tmp_path, tasks)
    # each turn writes the file its task names, then lists the folder a second later:
    # with both episodes at once, each listing shows its own file and never the other's
    started = time.monotonic()
    assert bat("eval.run", cwd=root).code == 0
    assert time.monotonic() - started < 20
    alpha, beta = (_episodes(root)[f"{name}__try1"] for name in ("alpha", "beta"))
    for mine, other in ((alpha, "beta"), (beta, "alpha")):
        listing = mine["final_output"]
        assert f"{mine['task_id']}.txt" in listing and f"{other}.txt" not in listing
    assert alpha["trace"]["workspace"]["kept"] != beta["trace"]["workspace"]["kept"]
    assert alpha["started_at"] < beta["ended_at"] and beta["started_at"] < alpha["ended_at"]


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, already ended, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_hanging_cli_is_stopped_at_the_turn_timeout_with_its_process_group(bat, tmp_path, home):
    root = _project(tmp_path, [{"id": "hangs", "turns": ["please hang"]}], turn_timeout_s=2)
    started = time.monotonic()
    bat("eval.run", cwd=root)
    assert time.monotonic() - started < 20
    (episode,) = _episodes(root).values()
    assert episode["status"] == "error" and episode["agent_error"]["kind"] == "timeout"
    # the shell the CLI's tool ran, and the CLI itself: both gone, not left to sleep on
    shell, cli = (int(pid) for pid in (root / "pids").read_text().split())
    deadline = time.monotonic() + 5
    while (_alive(shell) or _alive(cli)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(shell) and not _alive(cli)


def test_a_model_nobody_answers_is_the_cli_agents_model_error(bat, tmp_path, home):
    root = _project(tmp_path, [{"id": "dead", "turns": ["make notes"]}])
    config = yaml.safe_load((root / "eval" / "eval.yaml").read_text())
    dead = f"http://127.0.0.1:{free_port()}/v1"
    entry = {"name": "dead", "provider": "openai", "model": "m1", "base_url": dead}
    config["models"] = [{**entry, "env": {"OPENAI_API_KEY": "sk-test"}}]
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    bat("eval.run", cwd=root)
    (episode,) = _episodes(root).values()
    assert episode["status"] == "error" and episode["agent_error"]["kind"] == "model_error"
    assert "cannot reach" in episode["agent_error"]["message"]
    assert episode["trace"]["turns"][0]["exit_code"] == 1
