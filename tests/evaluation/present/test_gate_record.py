"""A run's gates are those it ran with (issue 28): ``eval.gate`` alone is a what-if that
writes nothing; ``--save`` records its answer in gates.json and the report together;
``--run DIR`` needs no eval.yaml. One real run of the echo agent (charts drawn, so the
report exists), copied for each test that writes."""

from __future__ import annotations

import json
import shutil
import urllib.request

import pytest
import yaml

from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs

TASKS = [
    {
        "id": "hello",
        "tags": ["smoke"],
        "turns": ["hi"],
        "expected": {"output_must_contain": ["hi"]},
    },
    {"id": "pay", "turns": ["pay"], "expected": {"output_must_contain": ["echo: pay"]}},
    {"id": "broken", "turns": ["FAIL: no"], "expected": {"output_must_contain": ["paid"]}},
]
GATES = ["pass_rate >= 0.5", {"name": "smoke", "must_pass": ["tag:smoke"]}]
WHAT_IF = "latency.p90 < 0.001"  # no agent answers over HTTP in a millisecond


def bat(*args, cwd, **env):
    return run_bat(*args, cwd=cwd, env={"HOME": str(cwd / ".home"), **env})


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """A finished run whose own gates passed, with its report.html drawn."""
    root = tmp_path_factory.mktemp("gated")
    project = make_project(root / "p", TASKS, k=1)
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["gates"] = GATES
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_bat("eval.run", cwd=project, env={"HOME": str(root / "home")}, charts=True)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    assert json.loads((run_dir / "gates.json").read_text())["passed"] is True
    return project


@pytest.fixture
def project(gated, tmp_path):
    copy = tmp_path / "p"
    shutil.copytree(gated, copy)
    return copy


def files(project):
    (run_dir,) = run_dirs(project)
    return (run_dir / "gates.json").read_bytes(), (project / "eval/output/report.html").read_bytes()


def test_a_what_if_gate_prints_and_exits_but_records_nothing(gated):
    before = files(gated)
    result = bat("eval.gate", "--gate", WHAT_IF, cwd=gated)
    assert result.code == 1, result.err
    assert f"✗  {WHAT_IF}" in result.out and "1 gate failed" in result.err
    assert "A what-if: nothing recorded" in result.out and "--save" in result.out
    assert files(gated) == before  # byte for byte: the run still passed its own gates
    # A what-if that passes exits 0, and still writes nothing.
    result = bat("eval.gate", "--gate", "pass_rate > 0", cwd=gated)
    assert result.code == 0, result.err
    assert files(gated) == before


def test_save_records_the_gates_in_gates_json_the_report_exports_and_viewer(project):
    from bat.evaluation.present.view.server import serve_beside

    gates_before, report_before = files(project)
    assert b"every gate passed" in report_before or b"gates passed" in report_before
    result = bat("eval.gate", "--save", "--gate", WHAT_IF, cwd=project)
    assert result.code == 1, result.err
    (run_dir,) = run_dirs(project)
    assert f"Recorded in {run_dir.name}/gates.json" in result.out
    gates_after, report_after = files(project)
    written = json.loads(gates_after)
    assert gates_after != gates_before and written["passed"] is False
    assert [g["name"] for g in written["gates"]] == ["pass_rate >= 0.5", "smoke", WHAT_IF]
    page = report_after.decode()
    assert report_after != report_before and "1 of 3 gates failed" in page
    assert WHAT_IF.replace("<", "&lt;") in page
    out = project / "e.json"
    assert bat("eval.export", "--to", f"json:{out}", cwd=project).code == 0
    assert json.loads(out.read_text())["gates"] == written
    viewer = serve_beside(project / "eval/output", 0, announce=lambda line: None)
    try:
        with urllib.request.urlopen(viewer.listening.url.rstrip("/") + "/", timeout=10) as response:
            runs_page = response.read().decode()
    finally:
        viewer.stop()
    assert "2 passed, 1 failed" in runs_page


def test_save_without_a_report_writes_gates_json_only(project):
    (run_dir,) = run_dirs(project)
    (project / "eval/output/report.html").unlink()
    result = bat("eval.gate", "--save", "--gate", "pass_rate > 0", cwd=project)
    assert result.code == 0, result.err
    assert len(json.loads((run_dir / "gates.json").read_text())["gates"]) == 3
    assert not (project / "eval/output/report.html").exists()  # none to agree with


def test_run_dir_without_eval_yaml_checks_the_gates_the_run_ran_with(gated, tmp_path):
    """A CI job holding only the run folder: the gates, their tags and the budget come
    from run.json and the run's tasks.json."""
    (original,) = run_dirs(gated)
    job = tmp_path / "job"
    run_dir = job / "downloaded" / original.name
    shutil.copytree(original, run_dir)
    before = (run_dir / "gates.json").read_bytes()
    result = bat("eval.gate", "--run", str(run_dir), cwd=job)
    assert result.code == 0, result.err
    assert "✓  pass_rate >= 0.5" in result.out and "✓  smoke" in result.out
    assert "every gate passed" in result.out
    assert (run_dir / "gates.json").read_bytes() == before
    result = bat("eval.gate", "--run", str(run_dir), "--gate", "pass_rate >= 0.9", cwd=job)
    assert result.code == 1 and "0.6667 is not >= 0.9" in result.err
    result = bat("eval.gate", "--run", str(run_dir), "--save", "--gate", WHAT_IF, cwd=job)
    assert result.code == 1, result.err
    assert json.loads((run_dir / "gates.json").read_text())["passed"] is False
    assert not (job / "eval").exists()  # nothing made where there was no project


def test_an_eval_yaml_that_cannot_be_read_is_not_replaced_by_the_runs_record(project):
    (run_dir,) = run_dirs(project)
    (project / "eval/eval.yaml").write_text("evaluation: [unclosed\n")
    result = bat("eval.gate", "--run", str(run_dir), cwd=project)
    assert result.code == 2 and "Traceback" not in result.err
    assert "eval.yaml" in result.err and len(result.err.splitlines()) == 1


def test_a_hand_edited_gate_in_run_json_is_one_line_naming_it(gated, tmp_path):
    (original,) = run_dirs(gated)
    run_dir = tmp_path / original.name
    shutil.copytree(original, run_dir)
    record = json.loads((run_dir / "run.json").read_text())
    record["config"]["gates"][1] = {"must_pass": ["hello"], "gate": "pass_rate > 0"}
    (run_dir / "run.json").write_text(json.dumps(record))
    result = bat("eval.gate", "--run", str(run_dir), cwd=tmp_path)
    assert result.code == 2 and "Traceback" not in result.err
    assert "config.gates[1]" in result.err and "a gate is one of" in result.err


def test_every_stage_takes_a_run_folder_without_eval_yaml(gated, tmp_path):
    """--run DIR from a folder without eval.yaml: eval.verdict re-checks against the
    dataset the run recorded, eval.summarize and eval.export need nothing else; eval.judge
    needs eval.yaml's judges and says so. A run without gates says it has none."""
    (original,) = run_dirs(gated)
    job = tmp_path / "job"
    run_dir = job / original.name
    shutil.copytree(original, run_dir)
    verdict = bat("eval.verdict", "--run", str(run_dir), cwd=job)
    assert verdict.code == 0 and "0 verdicts changed" in verdict.out, verdict.err
    summarized = bat("eval.summarize", "--run", str(run_dir), cwd=job)
    assert summarized.code == 0, summarized.err
    exported = bat("eval.export", "--run", str(run_dir), "--to", "json:-", cwd=job)
    assert exported.code == 0 and json.loads(exported.out)
    judged = bat("eval.judge", "--run", str(run_dir), cwd=job)
    assert judged.code == 2 and "eval.yaml" in judged.err and judged.err.count("\n") == 1
    record = json.loads((run_dir / "run.json").read_text())
    record["config"]["gates"] = []
    (run_dir / "run.json").write_text(json.dumps(record))
    none = bat("eval.gate", "--run", str(run_dir), cwd=job)
    assert none.code == 0 and f"No gates to check on {run_dir.name}" in none.out
    assert not (job / "eval").exists()


def test_verdict_without_eval_yaml_uses_the_dataset_the_run_recorded(project, tmp_path):
    """The recorded dataset is the project's tasks.json: a stricter expectation there
    changes the verdicts of a run re-checked from elsewhere."""
    (run_dir,) = run_dirs(project)
    record = json.loads((run_dir / "run.json").read_text())
    record["dataset"] = str(project / "eval/input/tasks.json")  # this copy's, not gated's
    (run_dir / "run.json").write_text(json.dumps(record))
    tasks = json.loads((project / "eval/input/tasks.json").read_text())
    tasks[1]["expected"]["output_must_contain"] = ["never said"]
    (project / "eval/input/tasks.json").write_text(json.dumps(tasks))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = bat("eval.verdict", "--run", str(run_dir), cwd=elsewhere)
    assert result.code == 0 and "1 verdict changed" in result.out, result.out + result.err


@pytest.mark.parametrize("stage", ["eval.gate", "eval.verdict", "eval.summarize"])
def test_a_run_path_that_holds_no_run_says_so_not_that_eval_yaml_is_missing(tmp_path, stage):
    (tmp_path / "not-a-run").mkdir()
    for given in (str(tmp_path / "not-a-run"), str(tmp_path / "missing")):
        result = bat(stage, "--run", given, cwd=tmp_path)
        assert result.code == 2 and result.err == (
            f"bat: error: {given}: not a run folder (no run.json, nor bat-cli's model folders)\n"
        )
