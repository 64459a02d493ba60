"""Reading a judge's reply: tolerant of form, strict about the numbers.

Judges are language models: they wrap JSON in ```json fences, add a sentence before or
after it, or (on a bad day) stop mid-object. So the reply is searched for complete
top-level JSON objects, and the **last** one that holds scores is the judgement — a
judge that quotes the episode before giving its verdict is read correctly. The numbers
are where tolerance stops: a score that is missing, not a number (NaN included) or
outside [0, 1] makes the whole judgement a :class:`JudgeError`, never a guessed value.

Only the judge's reply is ever given to this parser; the prompt, where the agent's text
lives, never is. So an agent output saying ``score: 1.0`` cannot become a score.
"""

from __future__ import annotations

import json
import math
from typing import Any

from bat.evaluation.config import JUDGE_DIMENSIONS

MAX_REPLY_CHARS = 200_000  # longer replies are read from their end (where the verdict is)
MAX_REASONING_CHARS = 2000
# Where some judges nest the scores instead of putting them at the top level.
WRAPPERS = ("scores", "dimensions", "judgement", "judgment", "evaluation")
REASONING_KEYS = ("reasoning", "reason", "explanation", "rationale")

Judgement = dict[str, tuple[float, str]]


class JudgeError(Exception):
    """A judgement that failed; the message is a short reason, fit for an episode file."""


def parse_judgement(reply: str) -> Judgement:
    """``{dimension: (score, reasoning)}`` from a judge's reply, or a JudgeError saying why."""
    if not isinstance(reply, str) or not reply.strip():
        raise JudgeError("the judge's reply is empty")
    objects = json_objects(reply[-MAX_REPLY_CHARS:])
    if not objects:
        raise JudgeError(f"no complete JSON object in the judge's reply: {excerpt(reply)}")
    verdicts = [o for o in map(_unwrap, objects) if any(dim in o for dim in JUDGE_DIMENSIONS)]
    if not verdicts:
        raise JudgeError(f"no JSON object with scores in the judge's reply: {excerpt(reply)}")
    verdict = verdicts[-1]
    judgement: Judgement = {}
    for dim in JUDGE_DIMENSIONS:
        if dim not in verdict:
            raise JudgeError(f"{dim}: missing from the judge's reply")
        entry = verdict[dim]
        if isinstance(entry, dict):
            score = entry.get("score")
            reasoning = next((entry[k] for k in REASONING_KEYS if k in entry), "")
        else:  # the flat form {"dimension": 0.8}
            score, reasoning = entry, ""
        value = _number(dim, score)
        if not isinstance(reasoning, str):
            reasoning = json.dumps(reasoning, ensure_ascii=False, default=str)
        judgement[dim] = (value, reasoning.strip()[:MAX_REASONING_CHARS])
    return judgement


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every complete top-level JSON object in ``text``, in order (nested ones are inside).

    An opening brace that does not start valid JSON (chatter, a truncated object) is
    skipped, and the search goes on from the next brace.
    """
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return found


def excerpt(text: str, limit: int = 120) -> str:
    """A short, one-line excerpt of a reply for an error message."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _unwrap(obj: dict[str, Any]) -> dict[str, Any]:
    if any(dim in obj for dim in JUDGE_DIMENSIONS):
        return obj
    for key in WRAPPERS:
        inner = obj.get(key)
        if isinstance(inner, dict) and any(dim in inner for dim in JUDGE_DIMENSIONS):
            return inner
    return obj


def _number(dim: str, score: Any) -> float:
    """A finite score in [0, 1]; numeric strings pass, booleans and the rest do not."""
    if score is None:
        raise JudgeError(f"{dim}: no score given")
    if isinstance(score, bool):
        raise JudgeError(f"{dim}: score {score!r} is not a number")
    if isinstance(score, str):
        try:
            score = float(score.strip())
        except ValueError:
            raise JudgeError(f"{dim}: score {score!r} is not a number") from None
    if not isinstance(score, int | float) or not math.isfinite(score):
        raise JudgeError(f"{dim}: score {score!r} is not a number")
    if not 0 <= score <= 1:
        raise JudgeError(f"{dim}: score {score!r} is outside [0, 1]")
    return float(score)
