"""examples/github-actions/evaluate.yml does what docs/ci.md says: its bat steps, run here in
the order the workflow gives them, pass a good agent (exit 0) and stop a bad one (exit 1),
with the JUnit file a CI reporter reads and the Markdown summary on the job's page."""

import shlex

import pytest
import yaml
from junitparser import JUnitXml

from tests.conftest import REPO, run_bat
from tests.evalkit import make_project

WORKFLOW = REPO / "examples" / "github-actions" / "evaluate.yml"
CHECK = {"output_must_contain": ["echo"]}


def steps():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (job,) = workflow["jobs"].values()
    return job["steps"]


def bat_steps():
    """The workflow's ``bat`` command lines, as argument lists."""
    found = []
    for step in steps():
        command = step.get("run", "")
        if command.startswith("bat "):
            found.append(shlex.split(command)[1:])
    return found


def test_the_workflow_is_a_workflow_with_the_steps_the_docs_name():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["name"] == "evaluate" and True in workflow  # YAML 1.1 reads `on:` as True
    assert [args[0] for args in bat_steps()] == ["doctor", "eval.run"]
    upload = next(s for s in steps() if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "eval/output/"
    assert (REPO / "docs" / "ci.md").read_text().count("examples/github-actions/evaluate.yml")


@pytest.mark.parametrize(("answer", "expected"), [("echo", 0), ("FAIL", 1)])
def test_its_commands_pass_a_good_agent_and_stop_a_bad_one(tmp_path, answer, expected):
    tasks = [{"id": f"task-{i}", "turns": [f"hello {i}"], "expected": CHECK} for i in range(4)]
    tasks[0]["turns"] = [answer]  # the bad agent fails one task of four: 75 % < 90 %
    project = make_project(tmp_path / "agent", tasks, k=3)
    summary_page = tmp_path / "step-summary.md"
    env = {"HOME": str(tmp_path / "home"), "GITHUB_STEP_SUMMARY": str(summary_page), "CI": "1"}
    codes = []
    for args in bat_steps():
        result = run_bat(*args, cwd=project, env=env, timeout=120, charts=True)
        codes.append(result.code)
        if result.code not in (0, expected):
            pytest.fail(f"bat {' '.join(args)} -> {result.code}\n{result.out}\n{result.err}")
    assert codes == [0, expected]
    suites = list(JUnitXml.fromfile(str(project / "eval/output/junit.xml")))
    cases = [case for suite in suites for case in suite]
    assert len(cases) == 4
    failed = [case.name for case in cases if not case.is_passed]
    assert failed == ([] if expected == 0 else ["task-0"])
    page = summary_page.read_text()
    assert page == (project / "eval/output/summary.md").read_text()
    assert "pass_rate >= 0.9" in page and ("✗" in page) == (expected == 1)
    assert (project / "eval/output/report.html").is_file()
