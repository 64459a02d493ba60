"""Figures as bat prints them: one spelling each, in the console, report, exports and viewer.

A pass rate of 7/8 reads ``87.5 %`` wherever it is shown, so the console line, the
report, the Markdown summary and the viewer can be compared by eye (and by ``grep``).
The spellings, one per kind of figure:

* a rate (a fraction from 0 to 1) as a percentage with one decimal and a space before
  the sign: ``87.5 %`` (:func:`percent`), and a range of two: ``25.4 % – 74.6 %``
  (:func:`interval`); the space is the one the documentation writes ("95 %") and the
  SI rule for a number and its unit;
* a change of a rate in percentage points, signed: ``+12.5 points`` (:func:`points`);
* a measured duration in seconds with two decimals: ``1.23 s`` (:func:`seconds`);
* a whole number with thousands separated by commas: ``12,345`` (:func:`integer`), and
  with its noun: ``1 run``, ``2 runs`` (:func:`counted`);
* a figure of no fixed unit (a gate's value, a p-value): four significant digits,
  ``0.875``, or a whole number above a thousand (:func:`number`);
* an amount of money with its currency code after it: from 1 up with two decimals,
  ``12.35 USD``; below, three significant digits, ``0.0102 USD``, ``0.000190 USD``
  (an episode of a cheap model costs millionths) (:func:`money`);
* a figure that does not exist (no episode was judged): :data:`MISSING`.

These format numbers bat computed; text read from files (task ids, labels) is made safe
to print by :func:`bat.terminal.safe`. What is written as data (``summary.json``,
``metrics.json``, JUnit's ``time`` and properties) keeps its numbers and is never
formatted here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: A figure that cannot be computed (a rate of no episode, pass@k with no judged attempt).
MISSING = "–"


def percent(rate: float | None) -> str:
    """``rate`` (0 to 1) as a percentage: ``percent(0.875)`` is "87.5 %"."""
    return MISSING if rate is None else f"{100 * rate:.1f} %"


def interval(bounds: Sequence[float] | None) -> str:
    """A range of rates, such as a 95 % interval: "25.4 % – 74.6 %"."""
    if not bounds or len(bounds) != 2:
        return MISSING
    return f"{percent(bounds[0])} – {percent(bounds[1])}"


def points(change: float | None) -> str:
    """A change of a rate (a difference of fractions) in percentage points, signed:
    ``points(-0.125)`` is "-12.5 points" (not "-12.5 %": that would be relative)."""
    return MISSING if change is None else f"{100 * change:+.1f} points"


def seconds(value: float | None) -> str:
    """A measured duration: ``seconds(1.234)`` is "1.23 s"."""
    return MISSING if value is None else f"{value:.2f} s"


def integer(count: int) -> str:
    """A whole number, thousands separated: ``integer(12345)`` is "12,345"."""
    return f"{count:,}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` agreeing: ``counted(1, "run")`` is "1 run"; ``plural``
    for nouns that do not take an "s" ("failures" does; "analyses" would be given)."""
    word = noun if count == 1 else (plural or f"{noun}s")
    return f"{integer(count)} {word}"


def number(value: float | None) -> str:
    """A figure of no fixed unit (a gate's value, a p-value): four significant digits,
    ``0.875``, ``3.2e-07``; from a thousand up, a whole number (tokens: ``12,346``)."""
    if value is None:
        return MISSING
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def money(amount: float | None, currency: str = "USD") -> str:
    """An amount and its currency: ``money(12.345)`` is "12.35 USD", ``money(0.0001897)``
    "0.000190 USD", ``money(0)`` "0 USD"."""
    if amount is None:
        return MISSING
    if amount == 0:
        return f"0 {currency}"
    if abs(amount) >= 1:
        return f"{amount:,.2f} {currency}"
    digits = max(2, 2 - math.floor(math.log10(abs(amount))))
    return f"{amount:.{digits}f} {currency}"
