"""Gates: every figure, scope and kind, checked against a real run of the echo agent, and the
exit statuses of the contract (0 passed, 1 a gate failed, 2 bad gate, 3 untrusted)."""

import json

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.inputs.gate_specs import OPERATORS, parse_expression
from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs, start_model_server, summary

TASKS = [
    {
        "id": "hello",
        "tags": ["smoke"],
        "turns": ["hi"],
        "expected": {"output_must_contain": ["echo: hi"]},
    },
    {"id": "checkout-ok", "turns": ["pay"], "expected": {"output_must_contain": ["echo: pay"]}},
    {
        "id": "checkout-fail",
        "meta": {"category": "payments"},
        "turns": ["FAIL: card declined"],
        "expected": {"output_must_contain": ["paid"]},
    },
]


DIMENSIONS = (
    "hallucination_score",
    "response_relevance",
    "task_completion_quality",
    "tool_call_appropriateness",
)


def bat(*args, cwd, charts=False, **env):
    return run_bat(*args, cwd=cwd, env={"HOME": str(cwd / ".home"), **env}, charts=charts)


def gates_of(run_dir):
    return json.loads((run_dir / "gates.json").read_text())


def set_gates(project, gates, **evaluation):
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["gates"] = gates
    config["evaluation"].update(evaluation)
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """One judged run, k=3: hello and checkout-ok pass, checkout-fail is an agent error."""
    root = tmp_path_factory.mktemp("gates")
    rules = root / "rules.json"
    scores = {name: {"reasoning": "fine", "score": 0.8} for name in DIMENSIONS}
    rules.write_text(json.dumps([{"reply": json.dumps(scores)}]))
    server, url = start_model_server(rules)
    try:
        project = make_project(root / "p", TASKS, k=3, qualitative=True)
        config = yaml.safe_load((project / "eval/eval.yaml").read_text())
        config["judge"] = {
            "provider": "openai",
            "model": "judge",
            "base_url": url + "/v1",
            "api_key_env": "JUDGE_KEY",
        }
        (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
        (project / ".env").write_text("JUDGE_KEY=sk-test\n")
        result = bat("eval.run", cwd=project)
        assert result.code == 0, result.err
        yield project, run_dirs(project)[0]
    finally:
        server.terminate()
        server.wait()


def test_every_figure_reads_the_number_the_run_files_hold(judged):
    project, run_dir = judged
    metrics = json.loads((run_dir / "agent-default/metrics.json").read_text())["summary"]
    totals = summary(run_dir)["totals"]
    p90 = metrics["wall_time_s"]["p90"]
    gates = {
        "pass_rate >= 0.6": round(totals["passed"] / totals["attempts"], 4),
        "pass_at_3 >= 0.6": totals["pass_at"]["3"],
        "pass^2 >= 60%": totals["pass_hat"]["2"],
        "pass_hat_k >= 0.6": totals["pass_hat_k"],
        "judge.task_completion_quality >= 0.75": totals["judge"]["task_completion_quality"]["mean"],
        f"latency.p90 <= {p90}": p90,
        "latency.max < 30": metrics["wall_time_s"]["max"],
        "tokens.mean >= 0": metrics["tokens"]["avg_total_tokens"],
        "infra_failure_rate == 0": 0.0,
        "infra_failures <= 0": 0.0,
        "agent_errors == 3": 3.0,
        "agent_errors.unknown == 3": 3.0,
        "agent_errors.timeout == 0": 0.0,
    }
    args = [arg for gate in gates for arg in ("--gate", gate)]
    result = bat("eval.gate", "--save", *args, cwd=project)
    assert result.code == 0, result.err
    written = gates_of(run_dir)
    assert written["schema"] == "bat.gates/1" and written["passed"] is True
    assert [g["value"] for g in written["gates"]] == list(gates.values())
    assert all(g["model"] == "agent-default" for g in written["gates"])
    assert totals["judge"]["task_completion_quality"]["mean"] == 0.8
    assert "every gate passed" in result.out
    assert "✓  judge.task_completion_quality >= 0.75" in result.out


@pytest.mark.parametrize(
    ("gate", "detail"),
    [
        ("pass_rate >= 0.9", "0.6667 is not >= 0.9"),
        ("pass_at_5 >= 0.1", "pass_at_5 needs 5 judged attempts of a task; the most here is 3"),
        (
            "judge.tone >= 0.1",
            "no judge scores for 'tone' (dimensions: hallucination_score, response_relevance",
        ),
        ("latency.p50 < 0", "is not < 0"),
        ("agent_errors.unknown < 1", "3 is not < 1"),
    ],
)
def test_a_failing_gate_exits_1_and_says_why(judged, gate, detail):
    project, run_dir = judged
    result = bat("eval.gate", "--save", "--gate", "pass_rate > 0", "--gate", gate, cwd=project)
    assert result.code == 1, result.err
    assert result.err.splitlines()[0] == "bat: error: 1 gate failed"
    assert detail in result.err and "Traceback" not in result.err
    written = gates_of(run_dir)
    assert written["passed"] is False
    assert [g["passed"] for g in written["gates"]] == [True, False]


def test_scopes_tasks_tags_must_pass_and_pooled_models(judged):
    project, run_dir = judged
    set_gates(
        project,
        [
            {"name": "smoke", "must_pass": ["tag:smoke"]},
            {"name": "checkout", "gate": "pass_rate >= 0.5", "tasks": ["checkout-*"]},
            {"name": "payments", "gate": "pass_rate == 0", "tasks": ["tag:payments"]},
            {"name": "pooled", "gate": "pass_rate >= 0.6", "model": "all"},
            {"name": "every task", "must_pass": ["*"]},
            {"name": "nobody", "gate": "pass_rate >= 0", "model": "gpt-9"},
            {"name": "nothing", "gate": "pass_rate >= 0", "tasks": ["no-such-*"]},
        ],
    )
    try:
        result = bat("eval.gate", "--save", cwd=project)
    finally:
        set_gates(project, [])
    assert result.code == 1
    by_name = {g["name"]: g for g in gates_of(run_dir)["gates"]}
    assert by_name["smoke"]["passed"] and by_name["smoke"]["value"] == 0
    assert by_name["checkout"]["passed"] and by_name["checkout"]["value"] == 0.5
    assert by_name["payments"]["passed"] and by_name["payments"]["value"] == 0
    assert by_name["pooled"]["model"] == "all" and by_name["pooled"]["value"] == 0.6667
    every = by_name["every task"]
    assert not every["passed"] and every["value"] == 1
    assert "checkout-fail" in every["detail"]
    assert (
        not by_name["nobody"]["passed"] and "no model of that name" in by_name["nobody"]["detail"]
    )
    assert not by_name["nothing"]["passed"]
    assert by_name["nothing"]["detail"] == "no episode of the tasks chosen"
    assert "3 gates failed" in result.err


def test_eval_run_chains_the_gate_before_the_charts_and_export_and_exits_last(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=1)
    set_gates(project, ["pass_rate >= 0.9"])
    result = bat(
        "eval.run",
        "--gate",
        "pass_hat_1 >= 0.5",
        "--export",
        "junit:out/junit.xml",
        cwd=project,
        charts=True,
    )
    assert result.code == 1, result.err
    lines = result.out.splitlines()
    table = lines.index(next(line for line in lines if line.startswith("✗  pass_rate >= 0.9")))
    report = lines.index(next(line for line in lines if line.endswith("report.html")))
    export = lines.index("Wrote out/junit.xml")
    assert table < report < export
    assert result.err.splitlines()[-2:] == [
        "bat: error: 1 gate failed",
        "  - pass_rate >= 0.9 [agent-default]: 0.6667 is not >= 0.9",
    ]
    (run_dir,) = run_dirs(project)
    assert [g["passed"] for g in gates_of(run_dir)["gates"]] == [False, True]
    html = (project / "eval/output/report.html").read_text()
    assert html.index('id="gates"') < html.index('id="runs"')
    assert "1 of 2 gates failed" in html


def test_no_gates_means_exit_0_and_no_gates_file(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=1)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    assert not (run_dir / "gates.json").exists()
    assert bat("eval.gate", cwd=project).code == 0
    assert not (run_dir / "gates.json").exists()


def test_infrastructure_failures_over_the_budget_exit_3_whatever_the_gates_say(tmp_path):
    tasks = [TASKS[0], {"id": "stuck", "turns": ["HANG"], "expected": {}}]
    project = make_project(tmp_path / "p", tasks, k=1, turn_timeout_s=0.5)
    result = bat("eval.run", "--gate", "pass_rate >= 0", cwd=project)
    assert result.code == 3, result.err
    assert "1 infrastructure failure, none allowed" in result.err
    assert bat("eval.gate", "--gate", "pass_rate >= 0", cwd=project).code == 3
    # Within the budget the numbers stand, and the gates decide.
    set_gates(project, [], max_infra_failures=1)
    assert bat("eval.gate", "--gate", "pass_rate >= 0", cwd=project).code == 0
    assert bat("eval.gate", "--gate", "pass_rate >= 0.9", cwd=project).code == 1
    result = bat("eval.run", "--gate", "infra_failures <= 1", cwd=project)
    assert result.code == 0, result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gate", "speed > 1"], "--gate 'speed > 1': no figure named 'speed'"),
        (["--gate", "pass_rate"], "is not a gate: write FIGURE OP NUMBER"),
        (["--gate", "latency.p90 < 50%"], "latency.p90 is not a rate"),
        (["--gate", "agent_errors.oops > 0"], "no agent-error kind 'oops'"),
        (["--max-drop", "0.1"], "--max-drop needs --baseline RUN"),
        (["--baseline", "nope"], "no run 'nope'"),
    ],
)
def test_a_bad_gate_is_one_line_and_exit_2(judged, args, message):
    project, _ = judged
    result = bat("eval.gate", *args, cwd=project)
    assert result.code == 2, result.err
    assert len(result.err.splitlines()) == 1 and message in result.err


def test_a_bad_gate_in_eval_yaml_names_its_key_and_runs_nothing(tmp_path):
    project = make_project(tmp_path / "p", TASKS, k=1)
    set_gates(project, ["pass_rate >= 0.5", {"gate": "pass_rate >= 1", "baseline": "x"}])
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and "Traceback" not in result.err
    assert "gates[1]" in result.err and "a gate is one of" in result.err
    assert run_dirs(project) == []


def test_baseline_and_compare_fail_on_a_significant_regression(tmp_path):
    good = [
        {"id": f"t{i}", "turns": [f"ok {i}"], "expected": {"output_must_contain": ["echo"]}}
        for i in range(7)
    ]
    project = make_project(tmp_path / "p", good, k=1)
    assert bat("eval.run", cwd=project).code == 0
    # The same tasks, six of them now answered with a failure.
    bad = [dict(t, turns=["FAIL"]) if i < 6 else t for i, t in enumerate(good)]
    (project / "eval/input/tasks.json").write_text(json.dumps(bad))
    base = run_dirs(project)[0].name
    result = bat("eval.run", "--baseline", base, cwd=project)
    assert result.code == 1, result.err
    gate = gates_of(run_dirs(project)[1])["gates"][0]
    assert gate["kind"] == "baseline" and gate["value"] == 0.8571
    assert "6 tasks regressed, 0 improved; McNemar p = 0.03125 < 0.05" in gate["detail"]
    newer = run_dirs(project)[1].name
    compared = bat("eval.compare", base, newer, "--fail-on-regression", cwd=project)
    assert compared.code == 1 and "B regressed from A" in compared.err
    assert bat("eval.compare", base, newer, cwd=project).code == 0
    assert bat("eval.compare", newer, base, "--fail-on-regression", cwd=project).code == 0
    # A drop allowed by max_drop without significance: one task of seven.
    one = [dict(t, turns=["FAIL"]) if i == 0 else t for i, t in enumerate(good)]
    (project / "eval/input/tasks.json").write_text(json.dumps(one))
    assert bat("eval.run", "--baseline", base, "--max-drop", "0.2", cwd=project).code == 0
    assert bat("eval.gate", "--baseline", base, "--max-drop", "0.1", cwd=project).code == 1


@given(
    figure=st.sampled_from(["pass_rate", "pass_at_2", "pass^3", "judge.x", "latency.p99"]),
    op=st.sampled_from(OPERATORS),
    number=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    spaces=st.sampled_from(["", " ", "  "]),
)
def test_an_expression_reads_back_what_was_written(figure, op, number, spaces):
    if figure != "latency.p99":  # a rate or a judge's score: from 0 to 1
        number = min(number, 1.0)
    threshold = parse_expression(f"{figure}{spaces}{op}{spaces}{number!r}")
    assert threshold.op == op and threshold.threshold == number


@given(st.text(max_size=40))
def test_any_text_is_a_gate_or_a_value_error(text):
    try:
        parse_expression(text)
    except ValueError as exc:
        assert str(exc)
