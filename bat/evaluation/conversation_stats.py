"""The figures of conversations with a simulated user, part of :mod:`bat.evaluation.stats`.

Kept apart so stats.py stays readable; :func:`bat.evaluation.stats.summarize` is still the
one caller, so summary.json, metrics.json and every gate read the same numbers.

Definitions, over the episodes of tasks with a ``user`` (their ``metrics.json`` row has a
``conversation``), **infrastructure failures left out** as in every figure (a user model
that failed is one: kind ``user_model``):

* **pass@k / pass^k** are the estimators of :mod:`bat.evaluation.stats` over those tasks
  only; pass^k is the number tau2-bench reports for its simulated users.
* **turns** are the user turns of a conversation, the dataset's fixed turns included:
  mean, p50, p90, max.
* **ended** counts how conversations ended (``episode.CONVERSATION_ENDS``), every kind
  present; ``ended_rate`` divides by the conversations.
* **user_tokens** is what the user model spent, summed over every episode of those
  tasks (an infrastructure failure spent them too), never added to the agent's tokens.
"""

from __future__ import annotations

from bat.evaluation.log.episode import CONVERSATION_ENDS, EpisodeResult
from bat.evaluation.log.outcome import row_outcome
from bat.evaluation.log.summary import (
    ConversationFigures,
    EpisodeRow,
    RowConversation,
    TurnFigures,
    UserTokens,
)


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
        user_tokens=UserTokens(
            prompt_tokens=user.usage.prompt_tokens,
            completion_tokens=user.usage.completion_tokens,
            total_tokens=user.usage.total_tokens,
            model_calls=user.usage.model_calls,
        ),
    )


def conversation_figures(rows: list[EpisodeRow], k: int) -> ConversationFigures | None:
    """The figures of the rows' conversations; None when no row has one (the key is then
    left out of the files: a run without simulated users keeps its bytes)."""
    from bat.evaluation.stats import _mean, _round, pass_at_k, pass_hat_k, percentile

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
            prompt_tokens=sum(t.prompt_tokens for t in spent),
            completion_tokens=sum(t.completion_tokens for t in spent),
            total_tokens=sum(t.total_tokens for t in spent),
            model_calls=sum(t.model_calls for t in spent),
        ),
    )
