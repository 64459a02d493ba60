"""Budgets (``evaluation.max_cost``, ``--max-cost``) and the dry run's cost estimate.

A real run: the tool fixture agent (its token counts are fixed per task) with a scripted
model priced in ``prices:``, so every episode has a cost, run in-process.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.budget import MAX_COST, parse_max_cost
from bat.evaluation.log.episode import EpisodeCost
from bat.evaluation.run.budget import CostBudget
from tests.evalkit import episodes, make_project, run_dirs, summary

MODEL = "openai_house"  # the model folder of openai:house
TASKS = [
    {
        "id": f"t{n}",
        "turns": [f"calculate {n}*7"],
        "expected": {"output_must_contain": [str(7 * n)]},
    }
    for n in range(1, 7)
]


def priced_project(root, **evaluation):
    project = make_project(root, TASKS, agent="tool_agent", concurrency=1, **evaluation)
    (project / "model.json").write_text(json.dumps([{"reply": "unused"}]))
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["models"] = [
        {"provider": "openai", "model": "house", "script": "model.json"},
        {"provider": "openai", "model": "other", "script": "model.json"},
    ]
    config["prices"] = {
        "house": {"input": 1000, "output": 2000, "note": "a test's"},
        "other": {"input": 500, "output": 1000},
    }
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    return project, config


def estimate_of(out: str) -> float:
    (found,) = re.findall(r"cost estimate  about ([0-9.]+) USD in all", out)
    return float(found)


def test_a_budget_stops_the_run_part_way_resume_finishes_it_and_the_dry_run_estimates_a_repeat(
    tmp_path, bat, home
):
    project, _ = priced_project(tmp_path / "p")
    dry = bat("eval.run", "--dry-run", cwd=project)
    assert dry.code == 0 and "cost estimate  unknown until a run" in dry.out

    # Each episode of house costs 0.03 USD: after three, 0.09 reaches 0.07; the rest never
    # start, and neither does the other model (one budget for the whole run).
    stopped = bat("eval.run", "--max-cost", "0.07", cwd=project)
    assert stopped.code == 3, stopped.err
    (run_dir,) = run_dirs(project)
    assert "budget: max_cost 0.0700 USD" in stopped.out
    assert "budget reached: 0.0900 USD spent by the episodes of max_cost 0.0700 USD" in stopped.out
    assert len(episodes(run_dir, MODEL)) == 3  # kept; the three others are missing
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "partial"
    assert [model["status"] for model in record["models"]] == ["stopped", "stopped"]
    assert "[openai:other] not started: the budget (max_cost 0.0700 USD)" in stopped.out
    assert "starting the agent" in stopped.out.split("[openai:other]")[0]
    assert not (run_dir / "openai_other" / "episodes").exists()
    assert (
        "the budget (max_cost 0.0700 USD) was reached with 0.0900 USD spent by the episodes "
        "(their agents and simulated users; judging comes on top): 3 episodes not "
        f"run (finish the run with a higher budget: bat eval.run --resume {run_dir.name} "
        "--max-cost Y)"
    ) in stopped.err
    assert "openai:other: the budget (max_cost 0.0700 USD) was reached with 0.0900 USD " in (
        stopped.err
    )
    assert summary(run_dir, MODEL)["cost"]["episodes"] == 3  # summarized as other partial runs

    done = bat("eval.run", "--resume", run_dir.name, "--max-cost", "1", cwd=project)
    assert done.code == 0, done.err
    assert "0.0900 USD spent already" in done.out
    assert len(episodes(run_dir, MODEL)) == 6 and len(episodes(run_dir, "openai_other")) == 6
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"

    dry = bat("eval.run", "--dry-run", cwd=project)
    assert f"from run {run_dir.name}'s cost per episode" in dry.out
    assert "[openai:house] about 0.180 USD (6 episodes; each task at its own cost" in dry.out
    assert "[openai:other] about 0.0900 USD (6 episodes" in dry.out
    estimate = estimate_of(dry.out)
    short = bat("eval.run", "--dry-run", "--max-cost", "0.1", cwd=project)  # 0.27 planned
    assert "the episodes alone are estimated at about 0.270 USD (judging comes on top): the" in (
        short.out
    )
    assert "would stop" not in dry.out  # no budget, no warning
    again = bat("eval.run", cwd=project)  # the same run again: its real cost
    assert again.code == 0, again.err
    real = sum(summary(run_dirs(project)[-1], m)["cost"]["total"] for m in (MODEL, "openai_other"))
    assert real > 0 and abs(estimate - real) <= 0.1 * real


def test_a_budget_with_an_unpriced_model_or_a_bad_amount_is_refused_before_the_run(
    tmp_path, bat, home
):
    project, config = priced_project(tmp_path / "p")
    for bad in ("0", "-1", "nan", "inf", "lots", "1e12", ""):  # "": an unset $BUDGET
        result = bat("eval.run", "--max-cost", bad, cwd=project)
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert result.err.startswith(f"bat: error: --max-cost '{bad}': expected an amount")
    for bad in ("5", 0, -2, ".inf", True):
        config["evaluation"]["max_cost"] = bad
        (project / "eval/eval.yaml").write_text(yaml.safe_dump(config).replace("'.inf'", ".inf"))
        result = bat("eval.run", cwd=project)
        assert result.code == 2 and "evaluation.max_cost" in result.err, result.err
    config["evaluation"]["max_cost"] = 2
    config["prices"] = {}  # the stand-in model has no price now
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    for args in (["eval.run"], ["eval.run", "--dry-run"], ["eval.run", "--max-cost", "1"]):
        result = bat(*args, cwd=project)
        assert result.code == 2, result.err
        assert result.err.startswith("bat: error: a budget (max_cost ") and "prices:" in result.err
        assert "openai:house has none" in result.err and result.err.count("\n") == 1
    assert run_dirs(project) == []  # refused before any run folder


def test_the_in_flight_estimate_holds_episodes_back_before_any_is_spent():
    said = []
    budget = CostBudget(1.0, earlier_mean=0.3, say=said.append)
    assert [budget.may_start() for _ in range(5)] == [True, True, True, True, False]
    assert said == [
        "budget reached: 0 USD spent by the episodes and 4 episodes in flight (about "
        "1.20 USD) of max_cost 1.00 USD; no new episode starts (judging comes on top)"
    ]
    budget.landed()
    budget.written(EpisodeCost(agent=0.1))
    assert budget.mean() == pytest.approx(0.1) and not budget.may_start()  # stays stopped
    assert CostBudget(1.0).may_start()  # no earlier run: 0 per episode until one ends


@settings(max_examples=60, derandomize=True, database=None)
@given(st.one_of(st.text(max_size=30), st.floats().map(repr), st.integers().map(str)))
def test_any_max_cost_text_is_an_amount_in_bounds_or_one_line_of_error(text):
    try:
        amount = parse_max_cost(text)
    except ValueError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--max-cost ")
    else:
        assert math.isfinite(amount) and 0 < amount <= MAX_COST
