"""A task's natural-language assertions, decided by the judges (``expected.assertions``).

Each assertion ("The agent asked for the order number before refunding") is put to the
judges in the same request as the four scores: the episode is nearly all of the prompt,
so a request of its own would send it again. The block is added to the user message of
that task's episodes only; the system prompt, and so the prompt of every episode without
assertions, is unchanged (no cached judgement is lost, ``RUBRIC_VERSION`` stays).

A judge answers ``"assertions": [{"index": 0, "passed": true, "reason": "..."}, ...]``.
Reading it is tolerant of form and strict about the decision, as for the scores: an
assertion a judge leaves out, gives twice with two answers, or answers with anything
but true/false is *undecided* by that judge, with the reason said, and the judge's
scores still count. Several judges: an assertion passes when a majority of the judges
that decided it say it passes; a tie fails; when none decided it, it is undecided
(``passed`` None), and a verdict that includes it fails (``bat.evaluation.verdict``).
"""

from __future__ import annotations

import json
from typing import Any

from bat.evaluation.judging.parse import MAX_REASONING_CHARS, REASONING_KEYS, _text

# What one judge said of one assertion: passed (None: undecided) and the reason.
Decision = tuple[bool | None, str]

KEY = "assertions"
_TRUE = {"true", "pass", "passed", "yes"}
_FALSE = {"false", "fail", "failed", "no"}


def prompt_block(assertions: list[str]) -> list[str]:
    """The lines that ask the judge to decide ``assertions`` (each a JSON string literal:
    the dataset's words, shown as data), after the episode."""
    lines = [
        f"The dataset states {len(assertions)} assertion(s) about this episode. Decide each "
        "one, true or false, from what the episode shows, with a reason (one or "
        "two sentences citing the evidence):",
    ]
    lines += [
        f"{index}. {json.dumps(text, ensure_ascii=False)}" for index, text in enumerate(assertions)
    ]
    lines.append(
        f'Add to your JSON object the key "{KEY}": a list with one entry per assertion, '
        'in order: {"index": N, "passed": true or false, "reason": "..."}.'
    )
    return lines


def decisions(verdict: tuple[dict[str, Any], dict[str, Any]], count: int) -> list[Decision]:
    """Each of ``count`` assertions as one judge decided it, from the judgement's objects
    (:func:`bat.evaluation.judging.parse.verdict_objects`); never raises."""
    outer, inner = verdict
    given = inner.get(KEY, outer.get(KEY))
    if given is None:
        return [(None, f'undecided: the judge gave no "{KEY}"')] * count
    if not isinstance(given, list):
        return [(None, f'undecided: the judge\'s "{KEY}" is not a list')] * count
    found: dict[int, list[Decision]] = {}
    for position, entry in enumerate(given[: count * 4 + 10]):  # a runaway list is cut
        if not isinstance(entry, dict):
            continue
        index = entry.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            continue
        found.setdefault(index, []).append(_decision(entry))
    result: list[Decision] = []
    for index in range(count):
        answers = found.get(index)
        if not answers:
            result.append((None, "undecided: the judge left this assertion out"))
        elif len({passed for passed, _ in answers}) > 1:
            result.append((None, "undecided: the judge answered this assertion twice, differently"))
        else:
            result.append(answers[0])
    return result


def _decision(entry: dict[str, Any]) -> Decision:
    passed = entry.get("passed", entry.get("pass", entry.get("result")))
    reason = next((entry[k] for k in REASONING_KEYS if k in entry), "")
    reason = _text(reason)[:MAX_REASONING_CHARS]
    if isinstance(passed, str) and passed.strip().lower() in _TRUE | _FALSE:
        passed = passed.strip().lower() in _TRUE
    if not isinstance(passed, bool):
        shown = " ".join(repr(passed).split())[:40]
        return None, f"undecided: the judge's answer {shown} is not true or false"
    return passed, reason


def combine(assertions: list[str], per_judge: dict[str, list[Decision]]) -> list[dict[str, Any]]:
    """The ``scores.assertions`` entries: per assertion, the majority of the judges that
    decided it (a tie fails), their reasons, and each judge's answer."""
    several = len(per_judge) > 1
    entries = []
    for index, text in enumerate(assertions):
        answers = {label: decided[index] for label, decided in per_judge.items()}
        votes = [passed for passed, _ in answers.values() if passed is not None]
        passed = None if not votes else sum(votes) * 2 > len(votes)
        reasons = [
            f"[{label}] {why}" if several else why for label, (_, why) in answers.items() if why
        ]
        entries.append(
            {
                "assertion": text,
                "passed": passed,
                "reason": "\n".join(reasons),
                "per_judge": {label: answer[0] for label, answer in answers.items()},
            }
        )
    return entries
