"""Counted nouns in what bat prints: "1 run", "2 runs", never "1 run(s)" or "1 runs"."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` agreeing: ``counted(1, "run")`` is "1 run"; ``plural``
    for nouns that do not take an "s" ("failures" does; "analyses" would be given)."""
    word = noun if count == 1 else (plural or f"{noun}s")
    return f"{count} {word}"
