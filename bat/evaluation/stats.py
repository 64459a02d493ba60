"""The statistics of a model's episodes: ``summary.json`` and ``metrics.json``, computed once.

This is the only module that computes a number of a run; charts, the report and
``eval.compare`` read what it wrote (:mod:`bat.evaluation.log.summary` has the shapes).

Definitions, one of each:

* **pass@k** and **pass^k** use the unbiased estimators over the n judged attempts of a
  task, c of them passed: pass@k = 1 − C(n−c, k)/C(n, k) (at least one of k tries
  passes), pass^k = C(c, k)/C(n, k) (all k tries pass). ``pass_at``/``pass_hat`` give
  them for every k from 1 to n; a run's value for a k averages the tasks with at least
  k judged attempts.
* **Infrastructure failures** are counted apart and left out of n: they say nothing about
  the agent. **Agent errors** are the agent's own outcome: they count in n (as failures,
  unless the task expected ``error``), tallied by kind (``AGENT_ERROR_KINDS``).
* **Pass rates** (passed / attempts, every attempt counted) carry a **Wilson 95 %
  interval**, which stays inside [0, 1] and is honest for the small n of k attempts.
* **Percentiles** interpolate linearly between the two nearest ranks (Hyndman and Fan's
  type 7, numpy's and Vega's default): the p-th percentile of sorted x₁…xₙ is at rank
  1 + (n − 1)·p/100. So the median is the p50, and p50 of [1, 2, 3, 4] is 2.5.
* **Judge means** are over the episodes a judge was asked about: an infrastructure
  failure or an agent error that failed its episode is not judged, so it is in no mean,
  count or error count of a judge dimension (pooled, per task, in gates).
* **Latency** (``wall_time_s`` and ``time_to_first_event_s``) is over the warm
  episodes: those marked ``cold`` (the first wave after each agent start, see
  :mod:`bat.evaluation.run.runner`) hold the agent's start-up, not its latency, and are
  counted in ``cold_episodes`` instead. When every episode is cold there is no warm
  figure to give, and all of them count. bat-cli's ``time`` (total, mean, min, max in
  ms) stays over every episode, as bat-cli wrote it: its total is the time spent.
* **Conversations with a simulated user** have figures of their own, over the episodes
  of tasks with a ``user`` (their row has a ``conversation``), infrastructure failures
  left out (a user model that failed is one, kind ``user_model``): pass@k and pass^k
  over those tasks only (pass^k is the number tau2-bench reports); ``turns``, the user
  turns of a conversation, the dataset's fixed ones included (mean, p50, p90, max);
  ``ended``, how they ended, every kind of ``episode.CONVERSATION_ENDS`` counted, and
  ``ended_rate`` over the conversations; ``user_tokens``, what the user model spent over
  every episode of those tasks (an infrastructure failure spent them too), never added
  to the agent's tokens.
* **Cost** (``cost``, present when the episodes have one: :mod:`bat.evaluation.cost`)
  adds each episode's priced parts, the agent's, the simulated user's and the judges'
  apart; every episode counts, infrastructure failures too (their tokens were spent).
  ``per_episode`` is over the episodes with a cost; ``per_pass`` is the total over the
  passed attempts. A part with no price is left out of every sum and the episode
  counted in ``unpriced_episodes``: such a total is a lower bound. An episode whose
  agent reported no tokens costs 0 for the agent when the agent reports them in other
  episodes of the model (it failed before any model call), and is unpriced when it
  never does (its cost is unknown): ``cost_figures``.
* Figures are rounded to 4 decimals (times in seconds: a tenth of a millisecond); costs
  to 10 (a cheap model's episode costs millionths of a dollar).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from math import comb, floor, sqrt

from bat.evaluation.log.episode import AGENT_ERROR_KINDS, CONVERSATION_ENDS, EpisodeResult
from bat.evaluation.log.outcome import episode_outcome, row_outcome
from bat.evaluation.log.scores import was_not_judged
from bat.evaluation.log.summary import (
    ConversationFigures,
    CostFigures,
    CostPerEpisode,
    Distribution,
    EpisodeRow,
    JudgeStats,
    Metrics,
    MetricsSummary,
    RowConversation,
    RowCost,
    RowTime,
    RowTokens,
    RowVerdict,
    Summary,
    TaskSummary,
    TimeMs,
    TokenTotals,
    Totals,
    TurnFigures,
    UserTokens,
)

Z95 = 1.959963984540054  # the standard normal quantile of 97.5 %


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
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated (type 7)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def row_of(episode: EpisodeResult) -> EpisodeRow:
    """The few numbers of an episode the statistics need (kept small for big runs)."""
    usage = episode.trace.usage
    wall = round(episode.trace.wall_time_s, 4)
    first = episode.trace.time_to_first_event_s
    outcome = episode_outcome(episode)
    scores = episode.scores
    return EpisodeRow(
        task_id=episode.task_id,
        expected_outcome=episode.expected_outcome,
        status=episode.status,
        time=RowTime(wall_ms=round(wall * 1000, 1)),
        tokens=RowTokens(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
        ),
        verdict=RowVerdict(
            passed=outcome.passed, reason=episode.verdict.reason if episode.verdict else ""
        ),
        attempt=episode.attempt,
        wall_time_s=wall,
        time_to_first_event_s=None if first is None else round(first, 4),
        model_calls=usage.model_calls,
        tool_calls=len(episode.trace.tool_calls),
        scores=(scores.per_dimension() or None) if scores else None,
        judge_error=scores.error if scores else None,
        cold=episode.cold,
        conversation=row_conversation(episode),
        cost=row_cost(episode),
        **outcome.row_fields(),
    )


def summarize(
    rows: Iterable[EpisodeRow],
    *,
    k: int,
    model: str,
    task_order: list[str],
    model_name: str | None = None,
    run_id: str | None = None,
    run_name: str | None = None,
    timestamp_utc: str | None = None,
) -> tuple[Summary, Metrics]:
    """``summary.json`` and ``metrics.json`` of one model's episodes."""
    position = {task_id: index for index, task_id in enumerate(task_order)}
    rows = sorted(rows, key=lambda row: (position.get(row.task_id, len(position)), row.attempt))
    by_task: dict[str, list[EpisodeRow]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    tracked = reports_tokens(rows)  # decided over the model: per task the same
    tasks = [
        _task_summary(task_id, task_rows, k, tracked) for task_id, task_rows in by_task.items()
    ]
    judge = _judge_stats(rows)
    totals = _totals(rows, tasks, judge)
    conversation = conversation_figures(rows, k)
    cost = cost_figures(rows, tracked)
    summary = Summary(
        run_name=run_name,
        timestamp_utc=timestamp_utc,
        k=k,
        model_name=model_name or model,
        attempts=tasks,
        qualitative_scores={name: stats.mean for name, stats in (judge or {}).items()},
        passed=totals.passed,
        model=model,
        run_id=run_id,
        totals=totals,
        conversation=conversation,
        cost=cost,
    )
    stats = _episode_stats(rows, k, totals)
    stats.conversation = conversation
    stats.cost = cost
    metrics = Metrics(model=model, run_id=run_id, per_episode=rows, summary=stats)
    return summary, metrics


def _totals(
    rows: list[EpisodeRow], tasks: list[TaskSummary], judge: dict[str, JudgeStats] | None
) -> Totals:
    judged = [t for t in tasks if t.judged]
    attempts = sum(t.attempts for t in tasks)
    passed = sum(t.passed for t in tasks)
    return Totals(
        tasks=len(tasks),
        attempts=attempts,
        passed=passed,
        failed=attempts - passed,
        infra_failures=sum(t.infra_failures for t in tasks),
        infra_failures_by_kind=_tally(row.infra_error for row in rows),
        agent_errors_total=sum(row.agent_error is not None for row in rows),
        agent_errors=agent_error_counts(rows),
        vacuous_passes=sum(row.vacuous for row in rows),
        success_percentage=_percentage(passed, attempts),
        success_ci95=wilson_interval(passed, attempts),
        pass_at_k=_mean(t.pass_at_k for t in judged),
        pass_hat_k=_mean(t.pass_hat_k for t in judged),
        pass_at=_mean_by_k(tasks, "pass_at"),
        pass_hat=_mean_by_k(tasks, "pass_hat"),
        tasks_without_judged_attempts=len(tasks) - len(judged),
        judge=judge,
    )


def _task_summary(task_id: str, rows: list[EpisodeRow], k: int, tracked: bool) -> TaskSummary:
    attempts = len(rows)
    passed = sum(row.success for row in rows)
    infra = sum(row.infra_error is not None for row in rows)
    judged = attempts - infra
    judge = _judge_stats(rows)
    return TaskSummary(
        task_id=task_id,
        attempts=attempts,
        passed=passed,
        failed=attempts - passed,
        success_percentage=_percentage(passed, attempts),
        infra_failures=infra,
        agent_errors=_tally(row.agent_error for row in rows),
        vacuous_passes=sum(row.vacuous for row in rows),
        pass_rate=_round(passed / attempts) if attempts else None,
        pass_rate_ci95=wilson_interval(passed, attempts),
        judged=judged,
        pass_at_k=_round(pass_at_k(judged, passed, k)),
        pass_hat_k=_round(pass_hat_k(judged, passed, k)),
        pass_at={str(j): _round(pass_at_k(judged, passed, j)) for j in range(1, judged + 1)},
        pass_hat={str(j): _round(pass_hat_k(judged, passed, j)) for j in range(1, judged + 1)},
        judge={name: stats.mean for name, stats in judge.items()} if judge else None,
        conversation=conversation_figures(rows, k),
        cost=cost_figures(rows, tracked),
    )


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


def _mean_by_k(tasks: list[TaskSummary], key: str) -> dict[str, float | None]:
    """For each k, the mean over the tasks with at least k judged attempts."""
    longest = max((t.judged for t in tasks), default=0)
    return {
        str(j): _mean(getattr(t, key)[str(j)] for t in tasks if t.judged >= j)
        for j in range(1, longest + 1)
    }


def _judge_stats(rows: list[EpisodeRow]) -> dict[str, JudgeStats] | None:
    """Per judge dimension: mean, min, max, count of scores and count of errors.

    Over the episodes a judge was asked about only: an infrastructure failure or a failing
    agent error is not judged (its scores say so) and is neither a score nor a judge
    error here, even when an older run, or bat-cli's, holds scores for it."""
    scored = [
        row
        for row in rows
        if (row.scores is not None or row.judge_error)
        and not was_not_judged(row.judge_error)
        and row_outcome(row).not_judged_because is None
    ]
    if not scored:
        return None
    names = sorted({name for row in scored for name in (row.scores or {})})
    stats = {}
    for name in names:
        values = [
            row.scores[name] for row in scored if row.scores and row.scores.get(name) is not None
        ]
        stats[name] = JudgeStats(
            mean=_mean(values),
            min=_round(min(values)) if values else None,
            max=_round(max(values)) if values else None,
            count=len(values),
            errors=len(scored) - len(values),
        )
    return stats


def _episode_stats(rows: list[EpisodeRow], k: int, totals: Totals) -> MetricsSummary:
    cold = sum(row.cold for row in rows)
    timed = [row for row in rows if not row.cold] or rows  # all cold: nothing warm to give
    wall = [row.wall_time_s for row in timed]
    first = [row.time_to_first_event_s for row in timed if row.time_to_first_event_s is not None]
    prompt = sum(row.tokens.prompt_tokens for row in rows)
    completion = sum(row.tokens.completion_tokens for row in rows)
    per_episode = [row.tokens.total_tokens for row in rows]
    count = len(rows)
    every = distribution([row.wall_time_s for row in rows])  # bat-cli's time: every episode
    return MetricsSummary(
        episodes=count,
        k_attempts=k,
        total_runs=count,
        passed=totals.passed,
        failed=count - totals.passed,
        pass_rate=_round(totals.passed / count) if count else None,
        time=TimeMs(
            total_wall_ms=_ms(every.total),
            avg_wall_ms=_ms(every.mean),
            min_wall_ms=_ms(every.min),
            max_wall_ms=_ms(every.max),
        ),
        tokens=TokenTotals(
            prompt_tokens_total=prompt,
            completion_tokens_total=completion,
            total_tokens_total=sum(per_episode),
            avg_total_tokens=_round(sum(per_episode) / count) if count else 0.0,
            min_total_tokens=min(per_episode, default=0),
            max_total_tokens=max(per_episode, default=0),
            prompt_mean=_round(prompt / count) if count else None,
            completion_mean=_round(completion / count) if count else None,
        ),
        pass_rate_ci95=wilson_interval(totals.passed, count),
        infra_failures=totals.infra_failures,
        infra_failures_by_kind=totals.infra_failures_by_kind,
        agent_errors_total=totals.agent_errors_total,
        agent_errors=totals.agent_errors,
        vacuous_passes=totals.vacuous_passes,
        pass_at_k=totals.pass_at_k,
        pass_hat_k=totals.pass_hat_k,
        pass_at=totals.pass_at,
        pass_hat=totals.pass_hat,
        wall_time_s=distribution(wall),
        time_to_first_event_s=distribution(first),
        judge=totals.judge,
        model_calls_total=sum(row.model_calls for row in rows),
        tool_calls_total=sum(row.tool_calls for row in rows),
        cold_episodes=cold,
    )


# --- conversations with a simulated user ------------------------------------------------
def row_conversation(episode: EpisodeResult) -> RowConversation | None:
    """What an episode's row keeps of its simulated user (None: a task without one)."""
    user = episode.trace.simulated_user
    if user is None:
        return None
    return RowConversation(
        ended=user.ended,
        turns=user.turns,
        simulated_turns=user.simulated_turns,
        max_turns=user.max_turns,
        user_tokens=UserTokens(**user.usage.model_dump()),
    )


def conversation_figures(rows: list[EpisodeRow], k: int) -> ConversationFigures | None:
    """The figures of the rows' conversations; None when no row has one (the key is then
    left out of the files: a run without simulated users keeps its bytes)."""
    talked = [row for row in rows if row.conversation is not None]
    if not talked:
        return None
    observed = [row for row in talked if row_outcome(row).word != "infra"]
    by_task: dict[str, list[EpisodeRow]] = {}
    for row in talked:
        by_task.setdefault(row.task_id, []).append(row)
    per_task = []  # (judged, passed) of each task
    for task_rows in by_task.values():
        judged = [row for row in task_rows if row_outcome(row).word != "infra"]
        per_task.append((len(judged), sum(row.success for row in judged)))
    longest = max(n for n, _ in per_task)

    def mean_over_tasks(estimator, j: int | None) -> float | None:
        """As summary.json's totals: each task's value rounded, averaged over the tasks
        with a judged attempt (with ``j``: with at least ``j`` of them)."""
        return _mean(
            _round(estimator(n, c, j or k)) for n, c in per_task if n and (j is None or n >= j)
        )

    turns = [float(row.conversation.turns) for row in observed]  # type: ignore[union-attr]
    ended = dict.fromkeys(CONVERSATION_ENDS, 0)
    for row in observed:
        end = row.conversation.ended  # type: ignore[union-attr]
        if end in ended:
            ended[end] += 1
    count = len(observed)
    passed = sum(row.success for row in observed)
    spent = [row.conversation.user_tokens for row in talked]  # type: ignore[union-attr]
    return ConversationFigures(
        tasks=len(by_task),
        conversations=count,
        infra_failures=len(talked) - count,
        passed=passed,
        pass_rate=_round(passed / count) if count else None,
        pass_at_k=mean_over_tasks(pass_at_k, None),
        pass_hat_k=mean_over_tasks(pass_hat_k, None),
        pass_at={str(j): mean_over_tasks(pass_at_k, j) for j in range(1, longest + 1)},
        pass_hat={str(j): mean_over_tasks(pass_hat_k, j) for j in range(1, longest + 1)},
        turns=TurnFigures(
            mean=_round(sum(turns) / count) if count else None,
            p50=_round(percentile(turns, 50)),
            p90=_round(percentile(turns, 90)),
            max=max(turns, default=None),
        ),
        simulated_turns_total=sum(row.conversation.simulated_turns for row in observed),  # type: ignore[union-attr]
        ended=ended,
        ended_rate={end: _round(n / count) if count else None for end, n in ended.items()},
        user_tokens=UserTokens(
            **{name: sum(getattr(t, name) for t in spent) for name in UserTokens.model_fields}
        ),
    )


# --- cost ---------------------------------------------------------------------------------
def row_cost(episode: EpisodeResult) -> RowCost | None:
    """What an episode's row keeps of its cost (None: written without one)."""
    cost = episode.cost
    if cost is None:
        return None
    return RowCost(
        currency=cost.currency,
        total=cost.total,
        agent=cost.agent,
        user=cost.user,
        judge=cost.judge,
        unpriced=list(cost.unpriced),
        untracked=cost.untracked,
    )


# What ``unpriced`` names for an agent that reported no tokens in any episode.
NO_TOKENS = "the agent (no tokens reported)"


def reports_tokens(rows: Iterable[EpisodeRow]) -> bool:
    """Whether the agent reported its tokens in some episode of ``rows`` (a model's)."""
    return any(row.cost is not None and not row.cost.untracked for row in rows)


def cost_figures(rows: list[EpisodeRow], tracked: bool | None = None) -> CostFigures | None:
    """The cost of the rows' episodes; None when none has a cost (the key is then left
    out of the files: an older bat's run keeps its bytes).

    An episode whose agent reported no tokens (``untracked``): when the agent reports
    them in other episodes of the model (``tracked``, by default over ``rows``), it spent
    nothing there (an error before any model call): its agent part is 0. When it never
    reports them, its cost is unknown: the episode is unpriced and ``NO_TOKENS`` named."""
    costed = [row.cost for row in rows if row.cost is not None]
    if not costed:
        return None
    tracked = reports_tokens(rows) if tracked is None else tracked
    unknown = not tracked and any(cost.untracked for cost in costed)
    totals = [cost.total for cost in costed]
    total = sum(totals)
    passed = sum(row.success for row in rows if row.cost is not None)
    return CostFigures(
        currency=costed[0].currency,
        total=_money(total),
        agent=_money(sum(cost.agent or 0.0 for cost in costed)),
        judge=_money(sum(cost.judge or 0.0 for cost in costed)),
        user=_money(sum(cost.user or 0.0 for cost in costed)),
        episodes=len(costed),
        unpriced_episodes=sum(
            bool(cost.unpriced) or (unknown and cost.untracked) for cost in costed
        ),
        unpriced=sorted(
            {name for cost in costed for name in cost.unpriced}
            | ({NO_TOKENS} if unknown else set())
        ),
        per_episode=CostPerEpisode(
            mean=_money(total / len(costed)),
            p50=_money(percentile(totals, 50)),
            p90=_money(percentile(totals, 90)),
            max=_money(max(totals)),
        ),
        per_pass=_money(total / passed) if passed else None,
    )


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 10)


def distribution(values: list[float]) -> Distribution:
    """Count, total, mean, min, quartiles, p90, p99 and max of ``values``."""
    if not values:
        return Distribution(
            count=0, total=None, mean=None, min=None, p25=None, median=None, p75=None,
            p90=None, p99=None, max=None,
        )  # fmt: skip
    ordered = sorted(values)
    return Distribution(
        count=len(ordered),
        total=_round(sum(ordered)),
        mean=_round(statistics.fmean(ordered)),
        min=_round(ordered[0]),
        p25=_round(percentile(ordered, 25)),
        median=_round(percentile(ordered, 50)),
        p75=_round(percentile(ordered, 75)),
        p90=_round(percentile(ordered, 90)),
        p99=_round(percentile(ordered, 99)),
        max=_round(ordered[-1]),
    )


def _ms(seconds: float | None) -> float:
    """bat-cli's milliseconds, from bat's seconds (0 without episodes, as bat-cli wrote)."""
    return 0.0 if seconds is None else round(seconds * 1000, 1)


def _percentage(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return _round(statistics.fmean(present)) if present else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
