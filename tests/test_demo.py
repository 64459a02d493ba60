"""The bundled demo of the README's first command: it must evaluate cleanly, offline.

It runs in place (eval_fixtures/demo, whose output folder git ignores), exactly as the
README runs it, and removes the run it made.
"""

import json
import shutil
import subprocess
import sys

from tests.conftest import REPO
from tests.evalkit import run_dirs, summary

DEMO = REPO / "eval_fixtures" / "demo"


def test_demo_evaluates_judges_and_reports(home):
    before = set(run_dirs(DEMO))
    config_before = (DEMO / "config.yaml").read_bytes()
    proc = subprocess.run(
        [sys.executable, str(DEMO / "run_demo.py")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    made = [d for d in run_dirs(DEMO) if d not in before]
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = made
        model = json.loads((run_dir / "run.json").read_text())["models"][0]["dir"]
        totals = summary(run_dir, model)["totals"]
        assert totals["attempts"] == 30 and totals["passed"] == 30
        assert totals["judge"]["response_relevance"]["count"] == 30
        assert "30/30 episodes passed" in proc.stdout
        assert "judged 30 episodes" in proc.stdout
        output = DEMO / "eval" / "output"
        assert (output / "report.html").is_file() and (output / "judge_scores.png").is_file()
        assert (DEMO / "config.yaml").read_bytes() == config_before
    finally:
        for run_dir in made:
            shutil.rmtree(run_dir)
