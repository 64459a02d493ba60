"""One episode's scores from each judge's outcome: the judges' side of ``scores``.

The shape itself, and how it is written, belong to the log
(:mod:`bat.evaluation.log.scores`): the statistics, the report and the viewer read it
without importing the judges. Kept apart from the HTTP and the parsing because this is
where several judges become one set of scores: per dimension the mean over the judges
that answered, each judge's score, the spread between them, and the reasons of those
that failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bat.evaluation.inputs.config import JUDGE_DIMENSIONS
from bat.evaluation.judging import assertions as nl
from bat.evaluation.judging.parse import Judgement
from bat.evaluation.log.scores import JudgeScores


@dataclass(frozen=True)
class Outcome:
    """One judge's result for one episode: a judgement or the reason there is none."""

    judgement: Judgement | None
    error: str | None = None
    cached: bool = False
    # The task's assertions as this judge decided them (empty: the task has none).
    assertions: list[nl.Decision] = field(default_factory=list)
    # (prompt, completion) tokens the judgement took (from the cache: when it was made)
    tokens: tuple[int, int] = (0, 0)


def combine(
    rubric_version: str, outcomes: dict[str, Outcome], assertions: list[str] | None = None
) -> JudgeScores:
    """The scores of one episode from each judge's outcome (``label -> Outcome``), and the
    task's ``assertions`` decided (a judge that failed decided none of them)."""
    labels = list(outcomes)
    several = len(labels) > 1
    dimensions: dict[str, dict[str, Any]] = {}
    for dim in JUDGE_DIMENSIONS:
        per_judge: dict[str, float | None] = {}
        reasons: list[str] = []
        for label, outcome in outcomes.items():
            if outcome.judgement is None:
                per_judge[label] = None
                continue
            score, reasoning = outcome.judgement[dim]
            per_judge[label] = score
            reasons.append(f"[{label}] {reasoning}" if several else reasoning)
        values = [v for v in per_judge.values() if v is not None]
        dimensions[dim] = {
            "score": round(sum(values) / len(values), 6) if values else None,
            "reasoning": "\n".join(reasons),
            "per_judge": per_judge,
            "disagreement": round(max(values) - min(values), 6) if len(values) > 1 else None,
        }
    failed = {label: o.error or "failed" for label, o in outcomes.items() if o.judgement is None}
    error = None
    if failed and len(failed) == len(outcomes):
        error = (
            "; ".join(f"{label}: {why}" for label, why in failed.items())
            if several
            else (next(iter(failed.values())))
        )
    given: dict[str, Any] = {
        "usage": {
            label: {"prompt_tokens": o.tokens[0], "completion_tokens": o.tokens[1]}
            for label, o in outcomes.items()
            if o.judgement is not None
        }
    }
    if assertions:
        decided = {
            label: outcome.assertions
            if outcome.judgement is not None and len(outcome.assertions) == len(assertions)
            else [(None, f"undecided: {outcome.error or 'the judgement failed'}")] * len(assertions)
            for label, outcome in outcomes.items()
        }
        given["assertions"] = nl.combine(assertions, decided)
    # Validated in one call (pydantic's core makes the nested models): a re-judge of a
    # big run makes one of these per episode.
    return JudgeScores.model_validate(
        {
            "rubric_version": rubric_version,
            "judges": labels,
            "dimensions": dimensions,
            "error": error,
            "judge_errors": failed,
            **given,
        }
    )
