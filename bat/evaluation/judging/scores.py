"""One episode's scores from each judge's outcome: the judges' side of ``scores``.

The shape itself, and how it is written, belong to the log
(:mod:`bat.evaluation.log.scores`): the statistics, the report and the viewer read it
without importing the judges. Kept apart from the HTTP and the parsing because this is
where several judges become one set of scores: per dimension the mean over the judges
that answered, each judge's score, the spread between them, and the reasons of those
that failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bat.evaluation.inputs.config import JUDGE_DIMENSIONS
from bat.evaluation.judging.parse import Judgement
from bat.evaluation.log.scores import JudgeScores


@dataclass(frozen=True)
class Outcome:
    """One judge's result for one episode: a judgement or the reason there is none."""

    judgement: Judgement | None
    error: str | None = None
    cached: bool = False


def combine(rubric_version: str, outcomes: dict[str, Outcome]) -> JudgeScores:
    """The scores of one episode from each judge's outcome (``label -> Outcome``)."""
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
    # Validated in one call (pydantic's core makes the nested models): a re-judge of a
    # big run makes one of these per episode.
    return JudgeScores.model_validate(
        {
            "rubric_version": rubric_version,
            "judges": labels,
            "dimensions": dimensions,
            "error": error,
            "judge_errors": failed,
        }
    )
