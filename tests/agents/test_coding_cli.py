"""eval_fixtures/coding_cli.py on its own, against the scripted model server over real
HTTP: the errors a model gives become the error kinds bat reads (and exit status 1, no
retry), paths out of the working directory are refused, sessions continue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.conftest import REPO
from tests.evalkit import free_port, start_model_server

CLI = str(REPO / "eval_fixtures" / "coding_cli.py")


@pytest.fixture(scope="module")
def model():
    """One scripted model server for the module, re-scripted by each test."""
    proc, url = start_model_server(None)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _script(url: str, rules: list[dict]) -> None:
    answer = requests.post(f"{url}/control", json={"rules": rules, "reset_stats": True}, timeout=5)
    answer.raise_for_status()


def _cli(cwd: Path, home: Path, url: str, *args: str, **more: str) -> tuple[int, list[dict], str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "BAT_MODEL": "m", **more}
    env["BAT_MODEL_BASE_URL"] = f"{url}/v1"
    proc = subprocess.run(
        [sys.executable, CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, events, proc.stderr


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, "authentication_failed"), (429, "rate_limited"), (500, "model_error")],
)
def test_a_model_error_is_one_error_event_and_exit_1_without_retry(model, tmp_path, status, kind):
    _script(model, [{"status": status}])
    code, events, _ = _cli(tmp_path, tmp_path, model, "hello")
    assert code == 1
    assert events[0]["type"] == "session" and events[-1]["type"] == "error"
    assert events[-1]["kind"] == kind and str(status) in events[-1]["message"]
    assert requests.get(f"{model}/stats", timeout=5).json()["requests"] == 1


def test_a_refused_connection_is_a_model_error(tmp_path):
    code, events, _ = _cli(tmp_path, tmp_path, f"http://127.0.0.1:{free_port()}", "hello")
    assert code == 1 and events[-1]["kind"] == "model_error"
    assert "cannot reach" in events[-1]["message"]


def test_a_model_slower_than_the_cli_waits_is_a_timeout(model, tmp_path):
    _script(model, [{"delay_ms": 3000, "reply": "late"}])
    code, events, _ = _cli(tmp_path, tmp_path, model, "hello", CODING_CLI_MODEL_TIMEOUT_S="0.5")
    assert code == 1 and events[-1]["kind"] == "timeout"


def test_paths_out_of_the_working_directory_are_refused(model, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    calls = [
        {"name": "read_file", "args": {"path": "../secret.txt"}},
        {"name": "write_file", "args": {"path": str(tmp_path / "evil.txt"), "content": "x"}},
        {"name": "replace_in_file", "args": {"path": "nope.txt", "old": "a", "new": "b"}},
    ]
    _script(model, [{"match": "go", "tool_calls": calls}, {"after_tool": "*", "reply": "done"}])
    code, events, _ = _cli(work, tmp_path, model, "go")
    assert code == 0 and events[-1] == {"type": "text", "text": "done"}
    results = [event for event in events if event["type"] == "tool_result"]
    assert [result["error"] for result in results] == [True, True, True]
    assert "outside the working directory" in results[0]["result"]
    assert "outside the working directory" in results[1]["result"]
    assert not (tmp_path / "evil.txt").exists() and list(work.iterdir()) == []


def test_a_session_continues_and_an_unknown_one_is_refused(model, tmp_path):
    _script(model, [{"reply": "{user_count}: {first} / {last}"}])
    code, events, _ = _cli(tmp_path, tmp_path, model, "one")
    session = events[0]["id"]
    assert code == 0 and events[-1]["text"] == "1: one / one"
    assert (tmp_path / ".coding-cli" / "sessions" / f"{session}.json").is_file()
    code, events, _ = _cli(tmp_path, tmp_path, model, "--resume", session, "two")
    assert code == 0 and events[0]["id"] == session and events[-1]["text"] == "2: one / two"
    code, events, _ = _cli(tmp_path, tmp_path, model, "--resume", "../../etc/passwd", "x")
    assert code == 1 and events == [
        {
            "type": "error",
            "kind": "refused",
            "message": "--resume '../../etc/passwd': not a session id",
        }
    ]
    code, _, err = _cli(tmp_path, tmp_path, model, "--output", "text", "--resume", "gone", "x")
    assert code == 1 and err.strip() == "coding-cli: refused: --resume gone: no such session"
