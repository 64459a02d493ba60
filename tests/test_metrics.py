"""pass@k, pass^k and the summaries, against hand-computed values."""

from math import isclose

import pytest

from bat.evaluation.metrics import EpisodeRow, pass_at_k, pass_hat_k, summarize


@pytest.mark.parametrize(
    ("n", "c", "k", "at", "hat"),
    [
        (5, 5, 3, 1.0, 1.0),  # all passed
        (5, 0, 3, 0.0, 0.0),  # none passed
        (5, 2, 1, 0.4, 0.4),  # k=1: both are the pass rate
        (5, 2, 2, 1 - 3 / 10, 1 / 10),  # C(3,2)/C(5,2) = 3/10; C(2,2)/C(5,2) = 1/10
        (5, 3, 3, 1.0, 1 / 10),  # C(2,3) = 0; C(3,3)/C(5,3) = 1/10
        (4, 1, 2, 1 - 3 / 6, 0.0),  # C(3,2)/C(4,2) = 3/6
        (2, 1, 5, 1.0, 0.0),  # n < k: k is lowered to n = 2
    ],
)
def test_estimators(n, c, k, at, hat):
    assert isclose(pass_at_k(n, c, k), at)
    assert isclose(pass_hat_k(n, c, k), hat)


def test_no_attempts_is_none():
    assert pass_at_k(0, 0, 3) is None and pass_hat_k(0, 0, 3) is None


def row(task, attempt, passed, infra=None, wall=1.0, tokens=10):
    return EpisodeRow(
        task_id=task,
        attempt=attempt,
        passed=passed,
        status="completed",
        infra_error=infra,
        wall_time_s=wall,
        time_to_first_event_s=0.1,
        prompt_tokens=tokens,
        completion_tokens=0,
        total_tokens=tokens,
        model_calls=1,
        tool_calls=0,
    )


def test_summary_keeps_infrastructure_failures_apart():
    rows = [
        row("a", 1, True),
        row("a", 2, False),
        row("a", 3, False, infra="timeout"),
        row("b", 1, False, infra="crash"),
        row("b", 2, False, infra="crash"),
    ]
    summary, metrics = summarize(rows, k=2, model="m", task_order=["a", "b"])
    a, b = summary["tasks"]
    assert (a["attempts"], a["passed"], a["failed"], a["infra_failures"]) == (3, 1, 2, 1)
    assert a["success_percentage"] == 33.33
    assert a["judged"] == 2 and a["pass_at_k"] == 1.0 and a["pass_hat_k"] == 0.0
    assert b["judged"] == 0 and b["pass_at_k"] is None
    totals = summary["totals"]
    assert (totals["attempts"], totals["passed"], totals["infra_failures"]) == (5, 1, 3)
    assert totals["pass_at_k"] == 1.0  # averaged over tasks with judged attempts only
    assert totals["tasks_without_judged_attempts"] == 1
    assert metrics["summary"]["pass_rate"] == 0.2
    assert len(metrics["per_episode"]) == 5
    assert metrics["summary"]["tokens"]["total"] == 50


def test_summary_follows_dataset_order():
    rows = [row("z", 1, True), row("a", 1, True), row("m", 1, True)]
    summary, _ = summarize(rows, k=1, model="m", task_order=["m", "z", "a"])
    assert [t["task_id"] for t in summary["tasks"]] == ["m", "z", "a"]


def test_time_distribution():
    rows = [row("a", i, True, wall=float(i)) for i in range(1, 11)]
    _, metrics = summarize(rows, k=1, model="m", task_order=["a"])
    wall = metrics["summary"]["wall_time_s"]
    assert wall == {"mean": 5.5, "median": 5.5, "p90": 9.0, "max": 10.0}
