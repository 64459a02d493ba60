"""``output_regex``: which patterns a dataset may hold, and the limits they run under.

The same rules hold for the ``regex`` of a stand-in model's rule file
(:mod:`bat.evaluation.inputs.model_script`), which compiles through
:func:`compile_regex` and searches with the same time limit.

A pattern comes from a dataset file, so it is untrusted: a backtracking pattern such as
``^(a|aa)+$`` can take longer than the universe on a modest answer, and Python's ``re``
cannot be interrupted (Ctrl-C waits for it). So patterns run on the ``regex`` engine,
which takes a ``timeout`` (the verdict runs each with :data:`REGEX_TIME_LIMIT_S`), and are
checked on load by that same engine, so a pattern that loads always runs. ``regex``
unrolls counted repeats when it compiles and follows recursive calls, so both are bounded
before it sees a pattern.
"""

from __future__ import annotations

import re
from typing import Any

from bat.figures import integer

REGEX_TIME_LIMIT_S = 1.0  # one output_regex check, against one answer
REGEX_MAX_LENGTH = 2000  # characters of an output_regex
REGEX_MAX_REPEAT = 100_000  # items once counted repeats are unrolled: (?:a{100}){100} is 10,000
# The engine's recursion and subroutine calls, (?R) (?1) (?-1) (?&name) (?P>name), not
# after an odd number of backslashes (``\\(?R)`` is text).
_RECURSION = re.compile(r"(?<!\\)(?:\\\\)*\(\?(?:R|[+-]?\d+|&\w+|P>\w+)\)")


def check_regex(pattern: str) -> None:
    """Raise ``ValueError`` for a pattern the verdict's engine cannot run safely."""
    compile_regex(pattern)


def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by the ``regex`` engine once it passed the limits above, for
    a search with ``timeout=REGEX_TIME_LIMIT_S``; ``ValueError`` for one that did not."""
    import regex

    if len(pattern) > REGEX_MAX_LENGTH:
        raise ValueError(f"a regular expression of at most {REGEX_MAX_LENGTH} characters")
    if repeat_weight(pattern) > REGEX_MAX_REPEAT:
        raise ValueError(
            f"its counted repeats ({{n}}, {{m,n}}) unroll to more than {integer(REGEX_MAX_REPEAT)} "
            "items; use + or * for long runs"
        )
    call = _RECURSION.search(pattern)
    if call:
        raise ValueError(
            f"{call[0]!r} calls a group or the whole pattern again; recursive patterns are "
            "not allowed (one without progress fills the memory before it fails)"
        )
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None


def repeat_weight(pattern: str) -> int:
    """How many items the engine may unroll the pattern into, estimated from above.

    A rough scan, not a parser: every item counts 1, a group the sum of its items, and a
    ``{m}``, ``{m,n}`` or ``{m,}`` multiplies the item or group before it by its largest
    number. Escapes and ``[...]`` sets are single items. The estimate errs on the high
    side (a ``{12}`` inside a ``(?x)`` comment counts), never on the low.
    """
    sums = [0]  # the weight of each open group so far
    last = 0  # the weight of the item a quantifier would apply to
    i = 0
    while i < len(pattern):
        char = pattern[i]
        found = re.match(r"\{(\d*)(?:,(\d*))?\}", pattern[i:]) if char == "{" else None
        if found and (found[1] or found[2]):
            numbers = [int(n) for n in found.groups() if n]
            sums[-1] += last * (max(numbers) - 1)
            last *= max(numbers)
            i += found.end()
            continue
        if char == "(":
            sums.append(0)
            last = 0
            i += 1
            continue
        if char == ")" and len(sums) > 1:
            last = max(sums.pop(), 1)
            i += 1
        elif char == "\\":
            last, i = 1, i + 2
        elif char == "[":
            last, i = 1, _set_end(pattern, i)
        else:
            last, i = 1, i + 1
        sums[-1] += last
    return sum(sums)


def _set_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the set that opens at ``start`` (sets may nest)."""
    depth, i = 0, start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]" and i > start + 1 and pattern[i - 1] != "[":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i
