"""The second demo (eval_fixtures/demo_coding): a coding CLI fixes a bug, offline.

One run of ``run_demo.py --out DIR``, as the README runs it, shared by the module: k=3
for both stand-in models, the fixing one passing everything and the breaking one failing
each scenario for the right reason; the fixture's own folder never changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.evalkit import episodes, summary

DEMO = REPO / "eval_fixtures" / "demo_coding"


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's folder, its run folder and what run_demo.py printed."""
    out = tmp_path_factory.mktemp("demo") / "coding"
    home = tmp_path_factory.mktemp("home")
    before = _tree_hash(DEMO)
    proc = subprocess.run(
        [sys.executable, str(DEMO / "run_demo.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _tree_hash(DEMO) == before
    (run_dir,) = (out / "eval" / "output").glob("2*")
    return out, run_dir, proc.stdout


def test_the_demo_prints_where_its_report_is(demo):
    out, _, stdout = demo
    report = out / "eval" / "output" / "report.html"
    assert report.is_file() and f"report: {report}" in stdout
    assert "every gate passed" in stdout
    assert "[fixes] 9/9 episodes passed" in stdout and "[breaks] 0/9 episodes passed" in stdout


def test_the_fixing_model_passes_every_attempt(demo):
    _, run_dir, _ = demo
    totals = summary(run_dir, "fixes")["totals"]
    assert totals["attempts"] == 9 and totals["passed"] == 9 and totals["pass_hat_k"] == 1
    for episode in episodes(run_dir, "fixes").values():
        assert episode["status"] == "completed" and episode["verdict"]["passed"]
        if episode["task_id"] == "fix_bug":
            files = episode["trace"]["workspace"]["files"]
            assert "start : start + size]" in files["window.py"]
        if episode["task_id"] == "fix_then_test":  # the second turn quoted the first's reply
            first, second = episode["trace"]["turns"]
            assert second["input"].startswith(f"You said: {first['output']}\n")
            assert second["output"].endswith("3 passed\n")


def _failed(episode: dict) -> set[str]:
    return {check["name"] for check in episode["verdict"]["checks"] if not check["passed"]}


def test_the_breaking_model_fails_each_scenario_for_its_reason(demo):
    _, run_dir, _ = demo
    totals = summary(run_dir, "breaks")["totals"]
    assert totals["attempts"] == 9 and totals["passed"] == 0
    runs = episodes(run_dir, "breaks")
    for attempt in (1, 2, 3):
        fixed, explained = (
            runs[f"fix_bug__try{attempt}.json"],
            runs[f"explain_window__try{attempt}.json"],
        )
        assert fixed["status"] == explained["status"] == "completed"  # failed, not errors
        assert _failed(fixed) == {"turn 1: file_contains:window.py", "turn 1: command_succeeds"}
        assert _failed(explained) == {"turn 1: files_unchanged"}
        assert _failed(runs[f"fix_then_test__try{attempt}.json"]) == {
            "turn 1: command_succeeds",
            "turn 2: command_succeeds",
            "turn 2: no_errors",
        }
        assert fixed["trace"]["workspace"]["kept"]  # a failed episode's clone, to look at
    gates = json.loads((run_dir / "gates.json").read_text())
    assert gates["passed"] and {gate["model"] for gate in gates["gates"]} == {"fixes"}


def test_an_out_folder_that_is_not_empty_is_refused_in_one_line(tmp_path):
    (tmp_path / "taken.txt").write_text("mine")
    proc = subprocess.run(
        [sys.executable, str(DEMO / "run_demo.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: --out {tmp_path}: not an empty folder\n"
    assert [p.name for p in tmp_path.iterdir()] == ["taken.txt"]
