"""The bundled demo, offline and without any key: `python eval_fixtures/demo/run_demo.py`.

It starts the scripted model server (eval_fixtures/model_server.py) as the LLM judge on a
free port, then runs `bat eval.run` in this folder — which starts the demo agent on
another free port, runs 16 tasks × 3 attempts, judges every episode, writes summary.json
and metrics.json, and draws the charts and report.html into eval/output/ — and stops the
judge afterwards. eval/eval.yaml reads the two from DEMO_JUDGE_URL and DEMO_AGENT_PORT
(9961 and 9960 when `bat eval.run` is run here by hand), so two demos, or a demo and the
tests, never fight over a port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    judge = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_fixtures.model_server",
            "--port",
            "0",
            "--rules",
            str(HERE / "judge-rules.json"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = judge.stdout.readline().strip()
        if not ready.startswith("listening on"):
            print(
                f"run_demo: the scripted judge did not start ({ready or 'no output'})",
                file=sys.stderr,
            )
            return 1
        print(f"run_demo: scripted judge {ready}", flush=True)
        url = ready.removeprefix("listening on").strip()
        env = {**os.environ, "DEMO_JUDGE_URL": f"{url}/v1", "DEMO_AGENT_PORT": str(free_port())}
        bat = Path(sys.executable).with_name("bat")
        return subprocess.run([str(bat), "eval.run"], cwd=HERE, env=env, check=False).returncode
    finally:
        judge.terminate()
        judge.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
