"""pass@k, pass^k, percentiles and the summaries, against hand-computed values."""

from math import isclose

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation import stats
from bat.evaluation.log.scores import JudgeScores
from bat.evaluation.log.summary import dump
from bat.evaluation.stats import pass_at_k, pass_hat_k, percentile, row_of
from tests import logkit


def summarize(rows, **options):
    """The JSON content of summary.json and metrics.json, as the files hold them."""
    summary, metrics = stats.summarize(rows, **options)
    return dump(summary), dump(metrics)


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
    episode = logkit.episode(
        task, attempt, passed, infra=infra, wall=wall, prompt_tokens=tokens, completion_tokens=0
    )
    return row_of(episode)


def test_summary_keeps_infrastructure_failures_apart():
    rows = [
        row("a", 1, True),
        row("a", 2, False),
        row("a", 3, False, infra="timeout"),
        row("b", 1, False, infra="crash"),
        row("b", 2, False, infra="crash"),
    ]
    summary, metrics = summarize(rows, k=2, model="m", task_order=["a", "b"])
    a, b = summary["attempts"]
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
    assert metrics["summary"]["tokens"]["total_tokens_total"] == 50


def test_summary_follows_dataset_order():
    rows = [row("z", 1, True), row("a", 1, True), row("m", 1, True)]
    summary, _ = summarize(rows, k=1, model="m", task_order=["m", "z", "a"])
    assert [t["task_id"] for t in summary["attempts"]] == ["m", "z", "a"]


def test_time_distribution():
    rows = [row("a", i, True, wall=float(i)) for i in range(1, 11)]
    _, metrics = summarize(rows, k=1, model="m", task_order=["a"])
    wall = metrics["summary"]["wall_time_s"]
    assert wall == {
        "count": 10,
        "total": 55.0,
        "mean": 5.5,
        "min": 1.0,
        "p25": 3.25,
        "median": 5.5,
        "p75": 7.75,
        "p90": 9.1,
        "p99": 9.91,
        "max": 10.0,
    }
    assert metrics["summary"]["time"] == {  # bat-cli's milliseconds, from the seconds
        "total_wall_ms": 55000.0,
        "avg_wall_ms": 5500.0,
        "min_wall_ms": 1000.0,
        "max_wall_ms": 10000.0,
    }


@pytest.mark.parametrize(
    ("passed", "n", "interval"),
    [
        (0, 5, [0.0, 0.4345]),
        (5, 5, [0.5655, 1.0]),
        (3, 10, [0.1078, 0.6032]),
        (1, 1, [0.2065, 1.0]),
    ],
)
def test_wilson_interval(passed, n, interval):
    from bat.evaluation.stats import wilson_interval

    assert wilson_interval(passed, n) == interval
    assert wilson_interval(0, 0) is None


def test_pass_at_and_hat_for_every_k():
    rows = [row("a", i, i <= 2) for i in range(1, 6)]  # n = 5, c = 2
    summary, _ = summarize(rows, k=5, model="m", task_order=["a"])
    task = summary["attempts"][0]
    assert task["pass_at"] == {"1": 0.4, "2": 0.7, "3": 0.9, "4": 1.0, "5": 1.0}
    assert task["pass_hat"] == {"1": 0.4, "2": 0.1, "3": 0.0, "4": 0.0, "5": 0.0}
    assert task["pass_rate_ci95"] == [0.1176, 0.7693]


def test_averages_by_k_use_the_tasks_with_enough_attempts():
    rows = [
        row("a", 1, True),
        row("a", 2, False),
        row("b", 1, True),
        row("b", 2, True),
        row("b", 3, True),
    ]
    summary, metrics = summarize(rows, k=3, model="m", task_order=["a", "b"])
    totals = summary["totals"]
    assert totals["pass_at"] == {"1": 0.75, "2": 1.0, "3": 1.0}
    assert totals["pass_hat"] == {"1": 0.75, "2": 0.5, "3": 1.0}
    assert metrics["summary"]["pass_at"] == totals["pass_at"]


def test_percentiles_interpolate_between_ranks():
    rows = [row("a", i, True, wall=float(i)) for i in range(1, 101)]
    _, metrics = summarize(rows, k=1, model="m", task_order=["a"])
    wall = metrics["summary"]["wall_time_s"]
    assert (wall["median"], wall["p90"], wall["p99"], wall["max"]) == (50.5, 90.1, 99.01, 100.0)
    assert percentile([1, 2, 3, 4], 50) == 2.5  # the median: one definition everywhere
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_the_median_is_the_p50_and_percentiles_are_ordered(values):
    import statistics

    assert isclose(percentile(values, 50), statistics.median(values), rel_tol=1e-9, abs_tol=1e-9)
    ranks = [percentile(values, q) for q in (0, 25, 50, 75, 90, 99, 100)]
    assert ranks == sorted(ranks) and ranks[0] == min(values) and ranks[-1] == max(values)


def test_judge_statistics_per_dimension():
    episodes = [logkit.episode("a", i, True) for i in range(1, 4)]
    episodes[0].scores = _scores(response_relevance=1.0, hallucination_score=0.5)
    episodes[1].scores = _scores(response_relevance=0.5, hallucination_score=None)
    episodes[2].scores = JudgeScores(error="judge timed out")
    rows = [row_of(episode) for episode in episodes]
    summary, metrics = summarize(rows, k=1, model="m", task_order=["a"])
    judge = metrics["summary"]["judge"]
    assert judge["response_relevance"] == {
        "mean": 0.75,
        "min": 0.5,
        "max": 1.0,
        "count": 2,
        "errors": 1,
    }
    assert judge["hallucination_score"] == {
        "mean": 0.5,
        "min": 0.5,
        "max": 0.5,
        "count": 1,
        "errors": 2,
    }
    assert summary["attempts"][0]["judge"] == {
        "hallucination_score": 0.5,
        "response_relevance": 0.75,
    }
    assert summary["qualitative_scores"] == {"hallucination_score": 0.5, "response_relevance": 0.75}
    assert metrics["per_episode"][2]["judge_error"] == "judge timed out"


def _scores(**dimensions):
    """An episode's ``scores`` as the judges write them (``judging.scores.combine``)."""
    given = {name: {"score": value} for name, value in dimensions.items()}
    return JudgeScores.model_validate({"dimensions": given})


def test_no_judge_scores_means_no_judge_block():
    _, metrics = summarize([row("a", 1, True)], k=1, model="m", task_order=["a"])
    assert metrics["summary"]["judge"] is None


def cold(episode):
    return episode.model_copy(update={"cold": True})


def test_cold_episodes_are_out_of_the_latency_and_in_every_other_figure():
    rows = [row_of(cold(logkit.episode("a", 1, True, wall=8.0)))]
    rows += [row_of(logkit.episode(task, 1, True, wall=0.5)) for task in ("b", "c", "d")]
    summary, metrics = summarize(rows, k=1, model="m", task_order=["a", "b", "c", "d"])
    figures = metrics["summary"]
    assert figures["cold_episodes"] == 1 and figures["passed"] == 4
    assert figures["wall_time_s"]["count"] == 3 and figures["wall_time_s"]["p90"] == 0.5
    assert figures["time_to_first_event_s"]["max"] == 0.05
    assert figures["time"]["max_wall_ms"] == 8000.0  # bat-cli's time: every episode
    assert summary["totals"]["passed"] == 4


def test_when_every_episode_is_cold_the_latency_holds_them_all():
    rows = [row_of(cold(logkit.episode(task, 1, True, wall=2.0))) for task in ("a", "b")]
    _, metrics = summarize(rows, k=1, model="m", task_order=["a", "b"])
    figures = metrics["summary"]
    assert figures["cold_episodes"] == 2
    assert figures["wall_time_s"]["count"] == 2 and figures["wall_time_s"]["median"] == 2.0
