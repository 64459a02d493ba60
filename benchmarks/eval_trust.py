"""Whole `bat eval.run` runs against the echo fixture agent: time, and trust in the numbers.

    python benchmarks/eval_trust.py [--repeat 5] [--bat PATH]

Two figures (issue 8), each over ``--repeat`` runs of the real command line:

1. **A default run**: 40 tasks × k=5 = 200 episodes at the default concurrency (8), the
   agent with a config.yaml that has no telemetry (an agent that writes no spans). Median
   seconds of the whole ``eval.run`` and of its episodes alone (``run.json`` start to
   end, agent start-up included). Before issue 8, every first-wave episode waited 5 s for
   spans that never come.
2. **Concurrency 64**: the same 200 episodes at concurrency 64, counting infrastructure
   failures. Before issue 8, pooled connections sat idle through the span wait, past the
   agent's keep-alive, and a few healthy episodes failed as ``crash``. Target: 0.

``--bat`` runs another installation's ``bat`` (an older checkout's venv) for a
before/after comparison; the fixture agent is always this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "checkpoints: true\nendpoint: {url: http://localhost, port: '${PORT}'}\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def project(folder: Path, concurrency: int) -> Path:
    tasks = [
        {"id": f"t{i:02d}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(40)
    ]
    (folder / "eval" / "input").mkdir(parents=True)
    (folder / "eval" / "input" / "tasks.json").write_text(json.dumps(tasks))
    (folder / "config.yaml").write_text(CONFIG)
    command = f"{sys.executable} -m eval_fixtures.echo_agent"
    (folder / "eval" / "eval.yaml").write_text(
        "evaluation:\n"
        f"  agent_url: http://127.0.0.1:{free_port()}\n"
        "  k: 5\n"
        f"  concurrency: {concurrency}\n"
        "  agent:\n"
        f"    command: {command}\n"
        f"    env: {{PYTHONPATH: {ROOT}}}\n"
    )
    return folder


def one_run(bat: str, concurrency: int) -> tuple[float, float, int, int]:
    """(whole seconds, episode seconds, infrastructure failures, exit status)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = project(Path(tmp), concurrency)
        started = time.perf_counter()
        proc = subprocess.run(
            [bat, "eval.run"],
            cwd=folder,
            env={**os.environ, "HOME": tmp, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            check=False,
        )
        whole = time.perf_counter() - started
        (run_json,) = (folder / "eval" / "output").glob("*/run.json")
        record = json.loads(run_json.read_text())
        episodes = 0.0
        if record.get("ended_at"):
            episodes = (_time(record["ended_at"]) - _time(record["started_at"])).total_seconds()
        infra = 0
        for path in run_json.parent.glob("*/episodes/*.json"):
            infra += json.loads(path.read_text()).get("infra_error") is not None
        return whole, episodes, infra, proc.returncode


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    args = parser.parse_args()
    print(f"bat: {args.bat}")
    for concurrency in (8, 64):
        runs = [one_run(args.bat, concurrency) for _ in range(args.repeat)]
        wholes, episodes, infra, codes = zip(*runs, strict=True)
        print(
            f"200 episodes at concurrency {concurrency}: "
            f"eval.run median {statistics.median(wholes):.2f} s "
            f"(episodes {statistics.median(episodes):.2f} s), "
            f"infrastructure failures per run {list(infra)}, exit statuses {sorted(set(codes))}"
        )


if __name__ == "__main__":
    main()
