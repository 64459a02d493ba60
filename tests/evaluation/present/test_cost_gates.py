"""Cost gates (issue 31): ``cost.total``, ``cost.per_episode.*``, ``cost.judge.total``,
``cost.per_pass`` on runs priced by bat's own code (``costkit``), checked by
``bat eval.gate`` in this process: the figure is summary.json's, a gate on a run without
cost or with unpriced parts fails saying why, bad gate text is one line and exit 2."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.inputs.gate_specs import COST, OPERATORS, GateSpec, parse_expression
from bat.evaluation.present.gates import evaluate
from bat.figures import money
from tests.conftest import run_bat
from tests.evaluation.present.costkit import write_run

LETTERS = {"t1": "pp", "t2": "pf", "t3": "ff"}  # 3 of 6 attempts pass


def gate(run_dir, *gates, save=True):
    args = [arg for text in gates for arg in ("--gate", text)]
    home = run_dir.parent / ".home"
    return run_bat(
        "eval.gate", "--run", str(run_dir), *(["--save"] if save else []), *args,
        cwd=run_dir.parent, env={"HOME": str(home)},
    )  # fmt: skip


def gates_of(run_dir):
    return json.loads((run_dir / "gates.json").read_text())["gates"]


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("cost"), "r1", LETTERS)


def test_each_cost_gate_reads_summary_json_and_fails_or_passes_on_it(priced):
    cost = json.loads((priced / "m" / "summary.json").read_text())["cost"]
    assert cost["currency"] == "USD" and cost["unpriced"] == []
    figures = {
        "total": cost["total"],
        "per_episode.mean": cost["per_episode"]["mean"],
        "per_episode.p90": cost["per_episode"]["p90"],
        "per_episode.max": cost["per_episode"]["max"],
        "judge.total": cost["judge"],
        "per_pass": cost["per_pass"],
    }
    assert set(figures) == set(COST)
    assert cost["per_pass"] == pytest.approx(cost["total"] / 3)
    held = [f"cost.{name} <= {value}" for name, value in figures.items()]
    result = gate(priced, *held, "cost.total <= 1", "cost.total < 0.000001")
    assert result.code == 1, result.err  # the last gate fails, the others hold
    found = gates_of(priced)
    assert [g["value"] for g in found[:6]] == list(figures.values())
    assert all(g["passed"] and g["unit"] == "USD" for g in found[:7])
    failed = found[7]
    assert not failed["passed"] and failed["unit"] == "USD"
    shown = money(cost["total"])  # "0.00264 USD": three significant digits, its currency
    assert shown == f"{cost['total']:.5f} USD"
    assert failed["detail"] == f"{shown} is not < 1e-06"
    (line,) = [line for line in result.out.splitlines() if "cost.total <= 1 " in line]
    assert line.split()[-4:] == ["m", *shown.split(), "<=", "1"][-4:] and shown in line
    assert f"cost.total < 1e-06 [m]: {shown} is not < 1e-06" in result.err


def test_a_cost_gate_has_the_scopes_of_every_gate(priced):
    """Every model pooled, a subset of tasks: the same figures over those rows only."""
    rows = json.loads((priced / "m" / "metrics.json").read_text())["per_episode"]
    t1 = sum(row["cost"]["total"] for row in rows if row["task_id"] == "t1")
    spec = GateSpec(gate="cost.per_pass <= 1", model="all", tasks=["t1"])
    (found,) = evaluate(priced, [spec], dict, priced.parent).gates
    assert found.model == "all" and found.passed and found.unit == "USD"
    assert found.value == pytest.approx(t1 / 2)  # t1 passed both attempts


def test_a_cost_with_unpriced_parts_is_a_lower_bound_and_never_passes(tmp_path):
    run_dir = write_run(tmp_path, "r1", LETTERS, agent="script:llama-ours")
    result = gate(run_dir, "cost.total <= 1")
    assert result.code == 1
    (found,) = gates_of(run_dir)
    assert found["value"] > 0 and not found["passed"]  # the judge's part alone
    assert "only a lower bound: 6 episodes of 6 have parts with no price" in found["detail"]
    assert "(script:llama-ours); set prices: in eval.yaml" in found["detail"]
    nothing = write_run(tmp_path, "r2", LETTERS, agent="script:a", judge="script:j")
    assert gate(nothing, "cost.total <= 1").code == 1
    (found,) = gates_of(nothing)
    assert found["value"] is None  # not 0: nothing of it is known
    assert found["detail"] == (
        "no cost is known: script:a, script:j had no price; set prices: in eval.yaml for them"
    )


def test_a_run_without_cost_fails_a_cost_gate_saying_why(tmp_path):
    run_dir = write_run(tmp_path, "old", LETTERS, priced=False)
    result = gate(run_dir, "cost.per_episode.p90 <= 1", "pass_rate >= 0.5")
    assert result.code == 1
    cost_gate, rate_gate = gates_of(run_dir)
    assert rate_gate["passed"] and not cost_gate["passed"] and cost_gate["value"] is None
    assert cost_gate["unit"] is None
    assert cost_gate["detail"].startswith("no episode of the tasks chosen has a cost (a run made")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("cost.p99 <= 1", "no cost figure 'p99' (cost.total, cost.per_episode.mean|p90|max,"),
        ("cost.total <= abc", "is not a gate: write FIGURE OP NUMBER"),
        ("cost.total <= 5%", "cost.total is not a rate: give its threshold without %"),
        ("cost.per_pass >= -1", "cost.per_pass is never negative"),
        ("cost <= 1", "no cost figure ''"),
    ],
)
def test_bad_cost_gate_text_is_one_line_and_exit_2(priced, text, said):
    result = gate(priced, text, save=False)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    (line,) = result.err.splitlines()
    assert line.startswith("bat: error: --gate") and said in line


@given(
    figure=st.sampled_from(COST),
    op=st.sampled_from(OPERATORS),
    amount=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    tail=st.text(alphabet="abcxyz._0123456789", max_size=8),
)
def test_the_parser_reads_every_cost_figure_and_nothing_else(figure, op, amount, tail):
    threshold = parse_expression(f"cost.{figure} {op} {amount!r}")
    assert threshold.figure.name == f"cost.{figure}" and threshold.threshold == amount
    name = f"cost.{figure}{tail}"
    if name.removeprefix("cost.") not in COST:
        with pytest.raises(ValueError, match=r"cost figure|not a gate"):
            parse_expression(f"{name} {op} 1")
