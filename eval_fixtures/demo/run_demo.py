"""The bundled demo, offline and without any key: `python eval_fixtures/demo/run_demo.py`.

It starts the scripted model server (eval_fixtures/model_server.py) as the LLM judge,
on the port of the judge's base_url in eval/eval.yaml, then runs `bat eval.run` in this
folder — which starts the tool-using fixture agent, runs 10 tasks × 3 attempts, judges
every episode, writes summary.json and metrics.json, and draws the charts and
report.html into eval/output/ — and stops the judge afterwards.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def main() -> int:
    config = yaml.safe_load((HERE / "eval" / "eval.yaml").read_text(encoding="utf-8"))
    port = urlsplit(config["judge"]["base_url"]).port
    judge = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_fixtures.model_server",
            "--port",
            str(port),
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
        bat = Path(sys.executable).with_name("bat")
        return subprocess.run([str(bat), "eval.run"], cwd=HERE, check=False).returncode
    finally:
        judge.terminate()
        judge.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
