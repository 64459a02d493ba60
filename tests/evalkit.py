"""Helpers for evaluation tests: a project folder that evaluates a fixture agent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "eval_fixtures" / "datasets"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_project(
    root: Path,
    tasks: list[dict] | str,
    *,
    agent: str = "echo_agent",
    agent_env: dict | None = None,
    start: bool = True,
    config_yaml: str | None = None,
    command: str | None = None,
    **evaluation,
) -> Path:
    """An agent root with eval/eval.yaml running ``eval_fixtures.<agent>`` (or ``command``)
    and a dataset."""
    (root / "eval" / "input").mkdir(parents=True, exist_ok=True)
    if isinstance(tasks, str):
        tasks = json.loads((DATASETS / tasks).read_text())
    (root / "eval" / "input" / "tasks.json").write_text(json.dumps(tasks, indent=1))
    port = free_port()
    section = {
        "agent_url": f"http://127.0.0.1:{port}",
        "k": 1,
        "concurrency": 4,
        "turn_timeout_s": 10,
        "agent_startup_timeout_s": 20,
        "agent_shutdown_timeout_s": 5,
        **evaluation,
    }
    section["agent"] = {
        "start": start,
        "command": command or f"{{python}} -m eval_fixtures.{agent}",
        "env": {"PYTHONPATH": str(REPO), **(agent_env or {})},
    }
    models = section.pop("models", None)
    config = {"evaluation": section}
    if models is not None:
        config["models"] = models
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if config_yaml is not None:
        (root / "config.yaml").write_text(config_yaml)
    return root


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / "eval" / "output").glob("*/run.json"))


def episodes(run_dir: Path, model: str = "agent-default") -> dict[str, dict]:
    folder = run_dir / model / "episodes"
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def summary(run_dir: Path, model: str = "agent-default") -> dict:
    return json.loads((run_dir / model / "summary.json").read_text())


def start_fixture(agent: str, port: int, **env: str) -> subprocess.Popen:
    """A fixture agent started by the test itself (not by bat); waits until it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", f"eval_fixtures.{agent}", "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    line = proc.stdout.readline()
    assert "listening" in line, line
    return proc


def port_answers(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def start_model_server(rules: Path | None) -> tuple[subprocess.Popen, str]:
    """The scripted model server on a free port; returns the process and its base URL."""
    command = [sys.executable, "-m", "eval_fixtures.model_server", "--port", "0"]
    if rules is not None:
        command += ["--rules", str(rules)]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert "listening on " in line, line
    return proc, line.split("listening on ", 1)[1].strip()


def start_bat(*args: str, cwd: Path, home: Path) -> subprocess.Popen:
    """``bat`` running in the background (to be interrupted or watched), output captured."""
    from tests.conftest import BAT

    return subprocess.Popen(
        [str(BAT), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(home), "NO_COLOR": "1"},
    )
