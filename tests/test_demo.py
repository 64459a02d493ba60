"""The bundled demo of the README's first command: it must evaluate cleanly, offline."""

import json
import shutil

from tests.conftest import REPO
from tests.evalkit import run_dirs, summary

DEMO = REPO / "eval_fixtures" / "demo"


def test_demo_evaluates_with_every_task_passing(tmp_path, bat, home):
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo, ignore=shutil.ignore_patterns("output", "spans.jsonl"))
    eval_yaml = demo / "eval" / "eval.yaml"
    # The demo finds eval_fixtures two folders up; the copy points at the repository.
    eval_yaml.write_text(eval_yaml.read_text().replace("PYTHONPATH: ../..", f"PYTHONPATH: {REPO}"))
    result = bat("eval.run", cwd=demo, timeout=120)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(demo)
    model = json.loads((run_dir / "run.json").read_text())["models"][0]["dir"]
    totals = summary(run_dir, model)["totals"]
    assert totals["attempts"] == 30 and totals["passed"] == 30
    assert "30/30 episodes passed" in result.out
    assert (demo / "config.yaml").read_text() == (DEMO / "config.yaml").read_text()
