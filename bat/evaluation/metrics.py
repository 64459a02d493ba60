"""``summary.json`` and ``metrics.json`` of one model's episodes.

Field names follow bat-cli's files (``attempts``, ``passed``, ``failed``,
``success_percentage``, ``per_episode``, ``summary``); ours are added beside them.
pass@k and pass^k use the unbiased estimators over the n judged attempts of a task, c of
them passed: pass@k = 1 − C(n−c, k)/C(n, k) (at least one of k tries passes),
pass^k = C(c, k)/C(n, k) (all k tries pass). Infrastructure failures are counted apart
and left out of n: they say nothing about the agent. Agent errors are the agent's own
outcome: they count in n (as failures, unless the task expected ``error``), and are
tallied by kind (``records.AGENT_ERROR_KINDS``) so a CI script can branch on them.
``pass_at``/``pass_hat`` give the estimators for every k from 1 to n; a run's value for
a k averages the tasks with at least k judged attempts. Pass rates carry a Wilson 95 %
interval, which stays inside [0, 1] and is honest for the small n of k attempts.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from math import comb, sqrt
from typing import Any

from bat.evaluation.records import AGENT_ERROR_KINDS, EpisodeResult

Z95 = 1.959963984540054  # the standard normal quantile of 97.5 %

SUMMARY_SCHEMA = "bat.summary/1"
METRICS_SCHEMA = "bat.metrics/1"


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Probability that at least one of k attempts passes; None without attempts."""
    if n <= 0:
        return None
    k = min(k, n)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Probability that all of k attempts pass; None without attempts."""
    if n <= 0:
        return None
    k = min(k, n)
    return comb(c, k) / comb(n, k)


def wilson_interval(passed: int, n: int, z: float = Z95) -> list[float] | None:
    """The Wilson score interval of a pass rate, ``[low, high]``; None without attempts."""
    if n <= 0:
        return None
    rate = passed / n
    denominator = 1 + z * z / n
    center = (rate + z * z / (2 * n)) / denominator
    half = z * sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / denominator
    return [round(max(0.0, center - half), 4), round(min(1.0, center + half), 4)]


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile ``q`` (0-100) of ``values``."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(min(rank, len(ordered))) - 1]


@dataclass
class EpisodeRow:
    """The few numbers of an episode the statistics need (kept small for big runs)."""

    task_id: str
    attempt: int
    passed: bool
    status: str
    infra_error: str | None
    wall_time_s: float
    time_to_first_event_s: float | None
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    model_calls: int
    tool_calls: int
    scores: dict[str, float | None] | None = None
    judge_error: str | None = None
    agent_error: str | None = None  # the kind, when the agent answered with an error
    vacuous: bool = False  # passed with an empty answer, or only the status checked

    @classmethod
    def of(cls, episode: EpisodeResult) -> EpisodeRow:
        usage = episode.trace.usage
        return cls(
            task_id=episode.task_id,
            attempt=episode.attempt,
            passed=bool(episode.verdict and episode.verdict.passed),
            status=episode.status,
            infra_error=episode.infra_error.kind if episode.infra_error else None,
            wall_time_s=round(episode.trace.wall_time_s, 4),
            time_to_first_event_s=(
                None
                if episode.trace.time_to_first_event_s is None
                else round(episode.trace.time_to_first_event_s, 4)
            ),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            model_calls=usage.model_calls,
            tool_calls=len(episode.trace.tool_calls),
            agent_error=episode.agent_error.kind if episode.agent_error else None,
            vacuous=bool(episode.verdict and episode.verdict.vacuous),
            **_scores(episode.scores),
        )


def _scores(scores: dict[str, Any] | None) -> dict[str, Any]:
    """The per-dimension scores of an episode's ``scores`` (see bat.evaluation.judging)."""
    if not scores:
        return {}
    dimensions = scores.get("dimensions") or {}
    return {
        "scores": {name: (value or {}).get("score") for name, value in dimensions.items()} or None,
        "judge_error": scores.get("error"),
    }


def summarize(
    rows: Iterable[EpisodeRow], *, k: int, model: str, task_order: list[str]
) -> tuple[dict, dict]:
    """``(summary.json, metrics.json)`` contents for one model's episodes."""
    position = {task_id: index for index, task_id in enumerate(task_order)}
    rows = sorted(rows, key=lambda row: (position.get(row.task_id, len(position)), row.attempt))
    by_task: dict[str, list[EpisodeRow]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    tasks = [_task_summary(task_id, task_rows, k) for task_id, task_rows in by_task.items()]
    judged = [t for t in tasks if t["judged"]]
    totals = {
        "tasks": len(tasks),
        "attempts": sum(t["attempts"] for t in tasks),
        "passed": sum(t["passed"] for t in tasks),
        "failed": sum(t["failed"] for t in tasks),
        "infra_failures": sum(t["infra_failures"] for t in tasks),
        "infra_failures_by_kind": _tally(row.infra_error for row in rows),
        "agent_errors_total": sum(row.agent_error is not None for row in rows),
        "agent_errors": agent_error_counts(rows),
        "vacuous_passes": sum(row.vacuous for row in rows),
        "success_percentage": _percentage(
            sum(t["passed"] for t in tasks), sum(t["attempts"] for t in tasks)
        ),
        "pass_at_k": _mean(t["pass_at_k"] for t in judged),
        "pass_hat_k": _mean(t["pass_hat_k"] for t in judged),
        "pass_at": _mean_by_k(tasks, "pass_at"),
        "pass_hat": _mean_by_k(tasks, "pass_hat"),
        "tasks_without_judged_attempts": len(tasks) - len(judged),
        "judge": _judge_stats(rows),
    }
    totals["success_ci95"] = wilson_interval(totals["passed"], totals["attempts"])
    summary = {"schema": SUMMARY_SCHEMA, "model": model, "k": k, "tasks": tasks, "totals": totals}
    metrics = {
        "schema": METRICS_SCHEMA,
        "model": model,
        "per_episode": [row.__dict__ for row in rows],
        "summary": _episode_stats(rows, k, totals),
    }
    return summary, metrics


def _task_summary(task_id: str, rows: list[EpisodeRow], k: int) -> dict[str, Any]:
    attempts = len(rows)
    passed = sum(row.passed for row in rows)
    infra = sum(row.infra_error is not None for row in rows)
    judged = attempts - infra
    judge = _judge_stats(rows)
    return {
        "task_id": task_id,
        "attempts": attempts,
        "passed": passed,
        "failed": attempts - passed,
        "infra_failures": infra,
        "agent_errors": _tally(row.agent_error for row in rows),
        "vacuous_passes": sum(row.vacuous for row in rows),
        "success_percentage": _percentage(passed, attempts),
        "pass_rate_ci95": wilson_interval(passed, attempts),
        "judged": judged,
        "pass_at_k": _round(pass_at_k(judged, passed, k)),
        "pass_hat_k": _round(pass_hat_k(judged, passed, k)),
        "pass_at": {str(j): _round(pass_at_k(judged, passed, j)) for j in range(1, judged + 1)},
        "pass_hat": {str(j): _round(pass_hat_k(judged, passed, j)) for j in range(1, judged + 1)},
        "judge": {name: stats["mean"] for name, stats in judge.items()} if judge else None,
    }


def agent_error_counts(rows: Iterable[EpisodeRow]) -> dict[str, int]:
    """Episodes per agent-error kind, every kind of the closed set present (0 or more)."""
    counts = dict.fromkeys(AGENT_ERROR_KINDS, 0)
    for row in rows:
        if row.agent_error is not None:
            counts[row.agent_error] = counts.get(row.agent_error, 0) + 1
    return counts


def _tally(values: Iterable[str | None]) -> dict[str, int]:
    """How often each value occurs (None left out), in first-seen order."""
    counts: dict[str, int] = {}
    for value in values:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1
    return counts


def _mean_by_k(tasks: list[dict[str, Any]], key: str) -> dict[str, float | None]:
    """For each k, the mean over the tasks with at least k judged attempts."""
    longest = max((t["judged"] for t in tasks), default=0)
    return {
        str(j): _mean(t[key][str(j)] for t in tasks if t["judged"] >= j)
        for j in range(1, longest + 1)
    }


def _judge_stats(rows: list[EpisodeRow]) -> dict[str, dict[str, Any]] | None:
    """Per judge dimension: mean, min, max, count of scores and count of errors."""
    scored = [row for row in rows if row.scores is not None or row.judge_error]
    if not scored:
        return None
    names = sorted({name for row in scored for name in (row.scores or {})})
    stats = {}
    for name in names:
        values = [
            row.scores[name] for row in scored if row.scores and row.scores.get(name) is not None
        ]
        stats[name] = {
            "mean": _mean(values),
            "min": _round(min(values)) if values else None,
            "max": _round(max(values)) if values else None,
            "count": len(values),
            "errors": len(scored) - len(values),
        }
    return stats


def _episode_stats(rows: list[EpisodeRow], k: int, totals: dict[str, Any]) -> dict[str, Any]:
    wall = [row.wall_time_s for row in rows]
    first = [row.time_to_first_event_s for row in rows if row.time_to_first_event_s is not None]
    prompt = sum(row.prompt_tokens for row in rows)
    completion = sum(row.completion_tokens for row in rows)
    total = sum(row.total_tokens for row in rows)
    count = len(rows)
    return {
        "episodes": count,
        "passed": totals["passed"],
        "pass_rate": _round(totals["passed"] / count) if count else None,
        "pass_rate_ci95": wilson_interval(totals["passed"], count),
        "infra_failures": totals["infra_failures"],
        "infra_failures_by_kind": totals["infra_failures_by_kind"],
        "agent_errors_total": totals["agent_errors_total"],
        "agent_errors": totals["agent_errors"],
        "vacuous_passes": totals["vacuous_passes"],
        "k": k,
        "pass_at_k": totals["pass_at_k"],
        "pass_hat_k": totals["pass_hat_k"],
        "pass_at": totals["pass_at"],
        "pass_hat": totals["pass_hat"],
        "wall_time_s": _distribution(wall),
        "latency_s": {
            "p50": _round(percentile(wall, 50)),
            "p90": _round(percentile(wall, 90)),
            "p99": _round(percentile(wall, 99)),
            "mean": _distribution(wall)["mean"],
            "max": _distribution(wall)["max"],
        },
        "time_to_first_event_s": _distribution(first),
        "tokens": {
            "prompt_total": prompt,
            "completion_total": completion,
            "total": total,
            "mean_per_episode": _round(total / count) if count else None,
            "prompt_mean": _round(prompt / count) if count else None,
            "completion_mean": _round(completion / count) if count else None,
        },
        "judge": totals["judge"],
        "model_calls_total": sum(row.model_calls for row in rows),
        "tool_calls_total": sum(row.tool_calls for row in rows),
    }


def _distribution(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "p90": None, "max": None}
    ordered = sorted(values)
    p90 = percentile(ordered, 90)
    return {
        "mean": _round(statistics.fmean(ordered)),
        "median": _round(statistics.median(ordered)),
        "p90": _round(p90),
        "max": _round(ordered[-1]),
    }


def _percentage(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return _round(statistics.fmean(present)) if present else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
