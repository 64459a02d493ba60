"""The ``scores`` of an episode file: one judge's verdict or several judges' combined.

Kept apart from the HTTP and the parsing because this is the contract the rest of bat
reads (per-dimension statistics, charts)::

    {"rubric_version": "bat.rubric/1",
     "judges": ["openai:gpt-4.1-mini", ...],
     "dimensions": {"response_relevance": {"score": 0.8,           # mean over judges, or None
                                           "reasoning": "...",
                                           "per_judge": {"openai:gpt-4.1-mini": 0.8},
                                           "disagreement": None},   # max - min, 2+ judges
                    ...},                                           # all four, always
     "error": None,                     # set when every judge failed: the reasons
     "judge_errors": {}}                # label -> reason, for each judge that failed

An episode that ended in an infrastructure failure is not sent to any judge: its scores
are exactly ``{"error": "not judged: infrastructure failure"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bat.evaluation.inputs.config import JUDGE_DIMENSIONS
from bat.evaluation.judging.parse import Judgement

NOT_JUDGED_INFRA = "not judged: infrastructure failure"


@dataclass(frozen=True)
class Outcome:
    """One judge's result for one episode: a judgement or the reason there is none."""

    judgement: Judgement | None
    error: str | None = None
    cached: bool = False


def infra_scores() -> dict[str, Any]:
    return {"error": NOT_JUDGED_INFRA}


def combine(rubric_version: str, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    """The scores of one episode from each judge's outcome (``label -> Outcome``)."""
    labels = list(outcomes)
    several = len(labels) > 1
    dimensions: dict[str, Any] = {}
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
    return {
        "rubric_version": rubric_version,
        "judges": labels,
        "dimensions": dimensions,
        "error": error,
        "judge_errors": failed,
    }
