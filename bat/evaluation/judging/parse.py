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
import re
from typing import Any

from bat.evaluation.inputs.config import JUDGE_DIMENSIONS
from bat.evaluation.run.chat_client import ChatError, excerpt

MAX_REPLY_CHARS = 200_000  # longer replies are read from their end (where the verdict is)
MAX_REASONING_CHARS = 2000
MAX_FAILED_STARTS = 1000  # braces that start no JSON object, tried before giving up
# Where a JSON object can start: a brace, then (after blanks) a key or the closing brace.
_OBJECT_START = re.compile(r'\{(?=\s*["}])')
# Where some judges nest the scores instead of putting them at the top level.
WRAPPERS = ("scores", "dimensions", "judgement", "judgment", "evaluation")
REASONING_KEYS = ("reasoning", "reason", "explanation", "rationale")

Judgement = dict[str, tuple[float, str]]


# A judgement that failed; the message is a short reason, fit for an episode file. One
# class with the chat client's failures, so the judges catch both as one.
JudgeError = ChatError


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
        judgement[dim] = (value, _text(reasoning)[:MAX_REASONING_CHARS])
    return judgement


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every complete top-level JSON object in ``text``, in order (nested ones are inside).

    An opening brace that does not start valid JSON (chatter, a truncated object, an
    object nested deeper than the decoder can go) is skipped, and the search goes on from
    the next brace. Only a brace followed by ``"`` or ``}`` can start an object, so only
    those are tried; and the tries that fail are bounded, because each failure costs the
    decoder time in proportion to the reply (it counts the lines before the error): a
    reply of 100,000 braces would otherwise take seconds to read.
    """
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    failures = resume_at = 0
    for match in _OBJECT_START.finditer(text):
        index = match.start()
        if index < resume_at:
            continue  # inside an object already found
        try:
            value, resume_at = decoder.raw_decode(text, index)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
            failures += 1
            if failures > MAX_FAILED_STARTS:
                break
            continue
        found.append(value)
    return found


def _unwrap(obj: dict[str, Any]) -> dict[str, Any]:
    if any(dim in obj for dim in JUDGE_DIMENSIONS):
        return obj
    for key in WRAPPERS:
        inner = obj.get(key)
        if isinstance(inner, dict) and any(dim in inner for dim in JUDGE_DIMENSIONS):
            return inner
    return obj


def _number(dim: str, score: Any) -> float:
    """A finite score in [0, 1]; numeric strings pass, booleans and the rest do not.

    The range is checked before any conversion to float: JSON integers have no size
    limit, and a judge replying ``1000…0`` (400 digits) must get "outside [0, 1]", not an
    OverflowError.
    """
    if score is None:
        raise JudgeError(f"{dim}: no score given")
    if isinstance(score, str):
        try:
            score = float(score.strip())
        except ValueError:
            raise JudgeError(f"{dim}: score {_short(score)} is not a number") from None
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise JudgeError(f"{dim}: score {_short(score)} is not a number")
    if isinstance(score, float) and not math.isfinite(score):
        raise JudgeError(f"{dim}: score {_short(score)} is not a number")
    if not 0 <= score <= 1:
        raise JudgeError(f"{dim}: score {_short(score)} is outside [0, 1]")
    return float(score)


def _text(reasoning: Any) -> str:
    """The reasoning as text: a judge may give a list or an object instead of a string."""
    if isinstance(reasoning, str):
        return reasoning.strip()
    try:
        return json.dumps(reasoning, ensure_ascii=False, default=str)[: MAX_REASONING_CHARS + 1]
    except (ValueError, RecursionError):  # an integer too long to print, or nested too deep
        return f"({type(reasoning).__name__} that cannot be shown)"


def _short(value: Any, limit: int = 40) -> str:
    """``value`` for an error message: one line, at most ``limit`` characters (a score
    may be a 100,000-character string or a 400-digit number)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"{'-' if value < 0 else ''}(a {len(str(abs(value)))}-digit number)"
    flat = " ".join(repr(value).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
