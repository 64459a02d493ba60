"""The numbers a run's files may hold: finite, not negative, bounded.

bat computes every one of them, so a NaN, a negative time, ``1e308`` or a pass rate of
-50 % in a file means the file was edited (by hand or by another tool). Refused when
read, they never reach a summary, a gate or a file bat writes: ``1e308`` seconds summed
over two episodes is an infinity, a negative latency passes any ``latency.p90 < N``
gate, and a baseline claiming -1e300 % would let any run pass ``--max-drop``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

# Longer than any episode (a turn times out within a day); far from a float's overflow.
MAX_SECONDS = 10**7

Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Milliseconds = Annotated[float, Field(ge=0, le=MAX_SECONDS * 1000, allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # passed / attempts, pass@k
Percentage = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]  # bat-cli's 100 * rate
# A cost in a run's currency: bat computes it from counts and prices, both bounded, so more
# than this (or a negative one, which passes any ``cost.total <= N`` gate) was edited in.
MAX_MONEY = 10**12
Money = Annotated[float, Field(ge=0, le=MAX_MONEY, allow_inf_nan=False)]

# Token and call counts are reported by the agent, so they are not bounded where the run
# records them (a wild report must not stop a run); a file is checked when read instead
# (``store``): a negative count passes any ``tokens.total <= N`` gate, and 10^400 tokens
# overflow the float of a mean.
MAX_COUNT = 10**15


def reported_count(value: object) -> int:
    """A token or call count an agent reported, as the run records it: a whole number
    from 0 to ``MAX_COUNT`` (an integral float too: JSON writers differ); anything else
    (NaN, an infinity, a negative or huge number, text, a boolean) is 0, not reported.
    Taken as sent, a NaN would end the episode as a protocol failure (``int(nan)``
    raises) and 10^400 would make the run's own files unreadable."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not (value.is_integer() and abs(value) <= MAX_COUNT):
        return 0
    number = int(value)
    return number if 0 <= number <= MAX_COUNT else 0


def count_problem(key: str, value: int) -> str | None:
    """Why ``value`` is no count a run's file may hold (None: it is one)."""
    if 0 <= value <= MAX_COUNT:
        return None
    shown = str(value) if len(str(value)) <= 20 else f"a number of {len(str(value))} digits"
    return f"{key}: {shown} is not a count from 0 to {MAX_COUNT:,}"


def score_problem(key: str, value: float | None) -> str | None:
    """Why ``value`` is no judge's score (None: it is one, or none was given)."""
    if value is None or 0 <= value <= 1:
        return None
    return f"{key}: {value} is not a score from 0 to 1"
