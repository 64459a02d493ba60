"""``bat eval.export``: every exporter on a real run of the echo agent, a JUnit report
checked against the JUnit XML schema and read back by a JUnit consumer library, and a
third-party exporter installed as a real distribution (entry point) on PYTHONPATH."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import Error, Failure, JUnitXml

from bat.evaluation.present.export.csv_rows import COST_COLUMNS, FORMULA_STARTS, safe_cell
from tests.conftest import REPO, run_bat
from tests.evalkit import episodes, make_project, run_dirs, summary

XSD = REPO / "tests" / "data" / "junit.xsd"
SCHEMA = xmlschema.XMLSchema(XSD)
NASTY = "goodbye | =cmd\n<x>"
TASKS = [
    {"id": "pass-me", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}},
    {"id": "fail-me", "turns": ["hello"], "expected": {"output_must_contain": [NASTY]}},
    {"id": "=SUM(1+1)", "turns": ["sum"], "expected": {"output_must_contain": ["echo: sum"]}},
    {"id": "agent-err", "turns": ["FAIL: boom \x01 <&> ]]>"], "expected": {}},
    {"id": "hang", "turns": ["HANG"], "expected": {}},
]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One real run (k=2): two tasks pass, one fails its check, one ends in an agent
    error, one hangs past the turn timeout (an infrastructure failure: exit 3)."""
    root = tmp_path_factory.mktemp("export")
    home = root / "home"
    home.mkdir()
    project = make_project(
        root / "project", TASKS, k=2, turn_timeout_s=1, agent_shutdown_timeout_s=2
    )
    result = run_bat("eval.run", cwd=project, env={"HOME": str(home)})
    assert result.code == 3, result.out + result.err  # the hang: numbers incomplete
    (run_dir,) = run_dirs(project)
    return project, run_dir, home


def export(made, *args, env=None):
    project, _, home = made
    return run_bat("eval.export", *args, cwd=project, env={"HOME": str(home), **(env or {})})


def test_junit_validates_against_the_schema_and_reads_back(made, tmp_path):
    _, run_dir, _ = made
    out = tmp_path / "reports" / "junit.xml"  # the folder is made
    result = export(made, "--to", f"junit:{out}")
    assert result.code == 0, result.err
    assert result.out.strip() == f"Wrote {out}"
    SCHEMA.validate(str(out))

    report = JUnitXml.fromfile(str(out))
    (suite,) = list(report)
    assert suite.name == "agent-default"
    assert (suite.tests, suite.failures, suite.errors) == (5, 2, 1)
    cases = {case.name: case for case in suite}
    assert list(cases) == [task["id"] for task in TASKS]
    assert all(case.classname == "agent-default" for case in cases.values())
    assert cases["pass-me"].is_passed and cases["=SUM(1+1)"].is_passed

    (failure,) = cases["fail-me"].result
    assert isinstance(failure, Failure) and failure.type == "verdict"
    assert failure.message.startswith("2 of 2 attempts failed; attempt 1: ")
    assert NASTY.replace("\n", "\\n") in failure.message  # the verdict's reason, escaped
    assert "attempt 2:" in failure.text

    (agent_failure,) = cases["agent-err"].result
    assert isinstance(agent_failure, Failure) and agent_failure.type == "agent_error.unknown"
    assert "agent error unknown" in agent_failure.message
    assert "boom  <&> ]]>" in agent_failure.text  # escaped, the control character removed

    (error,) = cases["hang"].result
    assert isinstance(error, Error) and error.type == "infrastructure.timeout"
    assert "every attempt (2) failed for infrastructure reasons" in error.message

    walls = [e["trace"]["wall_time_s"] for n, e in episodes(run_dir).items() if "pass-me" in n]
    assert abs(cases["pass-me"].time - sum(walls)) < 0.002
    assert "answer: echo: hello" in cases["pass-me"].system_out
    for wall in walls:  # each attempt's time as every other place prints one
        assert f"(status completed, {wall:.2f} s)" in cases["pass-me"].system_out

    properties = {p.name: p.value for p in suite.properties()}
    totals = summary(run_dir)["totals"]
    assert properties["pass@2"] == str(totals["pass_at"]["2"])
    assert properties["pass^1"] == str(totals["pass_hat"]["1"])
    assert properties["infra_failures"] == "2" and properties["agent_errors.unknown"] == "2"
    assert properties["k"] == "2" and properties["run_id"] == run_dir.name
    assert "\x01" not in out.read_text(encoding="utf-8")


def test_csv_has_a_row_per_episode_and_no_formula(made, tmp_path):
    _, run_dir, _ = made
    out = tmp_path / "episodes.csv"
    assert export(made, "--to", f"csv:{out}").code == 0
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(TASKS) == len(episodes(run_dir))
    assert list(rows[0])[:6] == ["run_id", "model", "task_id", "attempt", "status", "passed"]
    # a run of this bat has a cost: its columns come after reason (the echo agent's unknown)
    assert list(rows[0])[-len(COST_COLUMNS) - 1 :] == ["reason", *COST_COLUMNS]
    assert rows[0]["cost.agent"] == "" and rows[0]["cost.unpriced"] == "agent-default"
    by_task = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row)
    # A spreadsheet would run =SUM(1+1) as a formula: the cell is quoted with '.
    assert "'=SUM(1+1)" in by_task and "=SUM(1+1)" not in by_task
    assert [r["passed"] for r in by_task["'=SUM(1+1)"]] == ["true", "true"]
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), row
    assert {r["infra_failure"] for r in by_task["hang"]} == {"timeout"}
    assert {r["agent_error"] for r in by_task["agent-err"]} == {"unknown"}
    assert all(NASTY.replace("\n", "\\n") in r["reason"] for r in by_task["fail-me"])
    assert [r["attempt"] for r in by_task["fail-me"]] == ["1", "2"]
    assert by_task["pass-me"][0]["reason"] == "" and by_task["pass-me"][0]["run_id"] == (
        run_dir.name
    )


def test_markdown_is_appended_to_the_github_step_summary(made, tmp_path):
    out = tmp_path / "summary.md"
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n", encoding="utf-8")
    env = {"GITHUB_STEP_SUMMARY": str(step)}
    for _ in range(2):
        result = export(made, "--to", f"markdown:{out}", env=env)
        assert result.code == 0, result.err
        assert f"Appended {out} to $GITHUB_STEP_SUMMARY ({step})" in result.out
    text = out.read_text(encoding="utf-8")
    assert step.read_text(encoding="utf-8") == "earlier step\n" + text + text
    # Wilson's 95 % interval of 4 in 10, spelled as the report and the viewer spell it
    assert "| agent-default | 4/10 | 40.0 % (16.8 % – 68.7 %) |" in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert all(line.endswith("|") for line in table)  # no newline broke a row
    (fail_row,) = [line for line in table if "fail-me" in line]
    assert "goodbye \\| =cmd\\\\n&lt;x>" in fail_row and "| 0/2 |" in fail_row
    assert any("| hang | 0/2 | attempt 1: infrastructure failure (timeout)" in r for r in table)
    assert "Gates" not in text  # the run has no gates.json
    # Without the variable nothing is appended anywhere.
    result = export(made, "--to", f"markdown:{out}", env={"GITHUB_STEP_SUMMARY": ""})
    assert result.code == 0 and "Appended" not in result.out


def test_gates_json_is_shown_in_markdown_and_json(made, tmp_path):
    project, run_dir, home = made
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["gates"] = [
        {"name": "infra|<rate>", "gate": "infra_failures <= 5"},
        {"gate": "pass_hat_2 >= 0.8", "tasks": ["*-me"]},
    ]
    gated = tmp_path / "gated.yaml"
    gated.write_text(yaml.safe_dump(config))
    env = {"HOME": str(home), "BAT_EVAL_FILE": str(gated)}
    result = run_bat("eval.gate", "--save", "--run", str(copy), cwd=project, env=env)
    assert result.code == 3, result.err  # the hang: the gates are written, not trusted
    gates = json.loads((copy / "gates.json").read_text(encoding="utf-8"))
    assert [g["passed"] for g in gates["gates"]] == [True, False]
    md, doc = tmp_path / "s.md", tmp_path / "e.json"
    result = export(made, "--run", str(copy), "--to", f"markdown:{md}", "--to", f"json:{doc}")
    assert result.code == 0, result.err
    text = md.read_text(encoding="utf-8")
    assert "### Gates: ✗ a gate failed" in text
    failed = gates["gates"][1]
    assert (
        f"| ✗ | pass_hat_2 >= 0.8 | agent-default | {failed['value']:.4g} | >= 0.8 "
        f"| {failed['detail']} |"
    ) in text
    assert "| ✓ | infra\\|&lt;rate> | agent-default | 2 | &lt;= 5 |  |" in text  # no tag opens
    assert json.loads(doc.read_text(encoding="utf-8"))["gates"] == gates


def test_json_document(made, tmp_path):
    from bat.evaluation.inputs.schemas import schema
    from bat.evaluation.present.export.json_doc import EXPORT_SCHEMA, ExportDocument, ExportEpisode

    _, run_dir, _ = made
    out = tmp_path / "run.json"
    assert export(made, "--to", f"json:{out}").code == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data) == ["schema", "run", "gates", "models", "unreadable"]
    assert data["schema"] == EXPORT_SCHEMA and data["gates"] is None
    ExportDocument.model_validate(data)
    jsonschema.Draft202012Validator(schema("export.json")).validate(data)
    run = data["run"]
    assert run["run_id"] == run_dir.name and run["k"] == 2
    assert run["tasks"] == [task["id"] for task in TASKS]
    (model,) = data["models"]
    assert model["totals"] == summary(run_dir)["totals"]
    assert [t["task_id"] for t in model["tasks"]] == run["tasks"]
    assert len(model["episodes"]) == 10
    hang = [e for e in model["episodes"] if e["task_id"] == "hang"]
    assert {e["infra_failure"] for e in hang} == {"timeout"} and not any(e["passed"] for e in hang)
    assert list(model["episodes"][0]) == list(ExportEpisode.model_fields)  # stable keys


def test_every_format_at_once_and_the_latest_run(made, tmp_path):
    names = ["junit", "csv", "markdown", "json"]
    args = [a for n in names for a in ("--to", f"{n}:{tmp_path / ('out.' + n)}")]
    result = export(made, *args)
    assert result.code == 0, result.err
    assert result.out.splitlines() == [f"Wrote {tmp_path / ('out.' + n)}" for n in names]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("junit", "--to 'junit' is not NAME:PATH"),
        ("junit:", "--to 'junit:' is not NAME:PATH"),
        (":out.xml", "is not NAME:PATH"),
        ("nope:out.txt", "no exporter named 'nope' (exporters: csv, json, junit, markdown"),
    ],
)
def test_a_bad_target_is_one_line_and_writes_nothing(made, tmp_path, spec, says):
    first = tmp_path / "first.csv"
    result = export(made, "--to", f"csv:{first}", "--to", spec)
    assert result.code == 2, result.out + result.err
    assert result.err.count("\n") == 1 and says in result.err, result.err
    assert "Traceback" not in result.err
    assert not first.exists()  # checked before anything is written


def test_a_run_without_summaries_is_refused(made, tmp_path):
    _, run_dir, _ = made
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    for name in ("summary.json", "metrics.json"):
        (copy / "agent-default" / name).unlink()
    result = export(made, "--run", str(copy), "--to", f"csv:{tmp_path / 'e.csv'}")
    assert result.code == 2, result.err
    assert "has no summaries to export yet" in result.err
    assert f"bat eval.summarize --run {copy.name}" in result.err
    assert not (tmp_path / "e.csv").exists()


def test_nothing_to_export_is_a_usage_mistake(made):
    result = export(made)
    assert result.code == 2 and "nothing to export: give --to NAME:PATH" in result.err


def _plugin_site(root: Path, body: str, name: str = "myplug", exporter: str = "myfmt") -> Path:
    """A real installed distribution: a package and its .dist-info on a path folder,
    declaring its ``export`` as the exporter named ``exporter``."""
    site = root / "site"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(body, encoding="utf-8")
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[bat.exporters]\n{exporter} = {name}:export\n", encoding="utf-8"
    )
    return site


def listed_exporters(env: dict[str, str]) -> dict[str, list]:
    """``available_exporters()`` in a fresh interpreter with ``env`` (its entry points)."""
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from bat.evaluation.present.export import available_exporters as a; "
            "print(json.dumps({n: list(i) for n, i in a().items()}))",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(listing.stdout)


PLUGIN = '''
from bat.evaluation.present.export import write_text


def export(run, path):
    """Counts: one line per model, for a tool that wants only that."""
    lines = [f"{m.label} {m.summary.totals.passed}/{m.summary.totals.attempts}" for m in run.models]
    write_text(path, run.run_id + "\\n" + "\\n".join(lines) + "\\n")
'''


def test_a_third_party_exporter_is_found_through_its_entry_point(made, tmp_path):
    _, run_dir, _ = made
    site = _plugin_site(tmp_path, PLUGIN)
    out = tmp_path / "out.txt"
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    result = export(made, "--to", f"myfmt:{out}", "--to", f"csv:{tmp_path / 'e.csv'}", env=env)
    assert result.code == 0, result.err
    assert out.read_text(encoding="utf-8") == f"{run_dir.name}\nagent-default 4/10\n"
    # Without the distribution on the path, the name is unknown.
    assert export(made, "--to", f"myfmt:{out}").code == 2

    found = listed_exporters(env)
    assert list(found) == ["csv", "json", "junit", "markdown", "myfmt"]
    assert found["myfmt"][:3] == [
        "myplug",
        "0.1",
        "Counts: one line per model, for a tool that wants only that.",
    ]
    assert found["junit"][0] == "bat-cli" and found["junit"][4] is None
    assert found["junit"][2].startswith("JUnit XML")


def test_a_plugin_cannot_take_a_built_in_name(made, tmp_path):
    """The built-ins are bat's code, not entry points a plugin could shadow: a plugin
    declaring ``junit`` is not used, and --to junit: writes bat's JUnit XML."""
    site = _plugin_site(tmp_path, PLUGIN, name="shadowplug", exporter="junit")
    env = {"PYTHONPATH": str(site)}
    out = tmp_path / "j.xml"
    result = export(made, "--to", f"junit:{out}", env=env)
    assert result.code == 0, result.err
    SCHEMA.validate(str(out))  # bat's JUnit XML, not the plugin's counts
    junit = listed_exporters(env)["junit"]
    assert junit[0] == "bat-cli" and junit[3] == "bat.evaluation.present.export.junit:JUnitExporter"


def test_a_plugin_that_fails_to_load_is_named_in_one_line(made, tmp_path):
    site = _plugin_site(tmp_path, "import not_a_module_anywhere\n", name="brokenplug")
    env = {"PYTHONPATH": str(site)}
    result = export(made, "--to", f"myfmt:{tmp_path / 'x'}", env=env)
    assert result.code == 1, result.err
    assert result.err.count("\n") == 1
    assert "exporter 'myfmt' (brokenplug:export, from brokenplug) cannot be loaded" in result.err
    assert "No module named 'not_a_module_anywhere'" in result.err
    # The built-in formats still work beside it.
    assert export(made, "--to", f"csv:{tmp_path / 'e.csv'}", env=env).code == 0


def test_export_run_is_callable_from_python(made, tmp_path):
    from bat.evaluation.present.export import Target, export_run, parse_target

    _, run_dir, _ = made
    heard: list[str] = []
    written = export_run(run_dir, ["csv:" + str(tmp_path / "a.csv")], say=heard.append)
    assert written == [tmp_path / "a.csv"] and heard == [f"Wrote {tmp_path / 'a.csv'}"]
    assert parse_target("junit:c:/x.xml") == Target("junit", Path("c:/x.xml"))


@given(text=st.text(max_size=40))
def test_no_csv_cell_can_start_a_formula(text):
    cell = safe_cell(text)
    assert not cell.startswith(FORMULA_STARTS)
    assert cell == text or (cell == "'" + text and text.startswith(FORMULA_STARTS))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_any_agent_text_makes_a_valid_junit_file(made, text):
    """Whatever an agent answers or reports, the XML stays well-formed and valid, and the
    text reads back as written, less what XML cannot hold."""
    from bat.evaluation.present.export import junit
    from bat.evaluation.present.export.data import load_run

    _, run_dir, _ = made
    run = load_run(run_dir)
    (model,) = run.models
    episode = model.episodes[("pass-me", 1)]
    episode.final_output = text
    failing = model.episodes[("agent-err", 1)]
    failing.agent_error.message = text
    document = junit.render(run)
    SCHEMA.validate(document.encode("utf-8"))
    root = ET.fromstring(document.encode("utf-8"))
    case = root.find("./testsuite/testcase[@name='pass-me']")
    expected = junit.xml_text(text)
    if expected:
        assert "answer: " + expected.replace("\n", "\n  ") in case.findtext("system-out")
    failure = root.find("./testsuite/testcase[@name='agent-err']/failure")
    assert "\n" not in failure.get("message")


def test_a_model_that_could_not_be_evaluated_is_an_error_case(tmp_path, bat, home):
    tasks = [{"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["echo: hi"]}}]
    project = make_project(tmp_path / "p", tasks, agent_env={"EXIT_ON_START": "1"})
    assert bat("eval.run", cwd=project).code != 0
    junit, md, doc = tmp_path / "j.xml", tmp_path / "s.md", tmp_path / "e.json"
    result = bat(
        "eval.export", "--to", f"junit:{junit}", "--to", f"markdown:{md}", "--to", f"json:{doc}",
        cwd=project,
    )  # fmt: skip
    assert result.code == 0, result.err
    SCHEMA.validate(str(junit))
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    (case,) = list(suite)
    (error,) = case.result
    assert isinstance(error, Error) and error.type == "model_not_evaluated"
    assert "the agent exited with status 4 before it was ready" in error.message
    assert "| agent-default | – | not evaluated: the agent exited" in md.read_text()
    (model,) = json.loads(doc.read_text())["models"]
    assert model["status"] == "failed" and model["totals"] is None


def test_a_bat_cli_run_folder_exports_too(made, tmp_path):
    folder = REPO / "tests" / "data" / "bat-cli-2026.10" / "run-echo" / "20261201_033105"
    junit, rows, md = tmp_path / "j.xml", tmp_path / "e.csv", tmp_path / "s.md"
    args = ["--run", str(folder), "--to", f"junit:{junit}", "--to", f"csv:{rows}"]
    result = export(made, *args, "--to", f"markdown:{md}")
    assert result.code == 0, result.err
    SCHEMA.validate(str(junit))
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    assert (suite.name, suite.tests, suite.failures, suite.errors) == (
        "openai:echo-model",
        4,
        1,
        0,
    )
    failed = [case for case in suite if not case.is_passed]
    assert [case.name for case in failed] == ["t09"]
    assert "missing 'never present'" in failed[0].result[0].message
    with rows.open(newline="", encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == 20
    assert "could not be read" not in md.read_text(encoding="utf-8")
