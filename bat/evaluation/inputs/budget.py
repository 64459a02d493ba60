"""``evaluation.max_cost`` and ``eval.run --max-cost``: the most a run may spend.

An amount in the run's currency (that of ``prices:``), finite and above zero, and at
most ``MAX_COST``: a number past it is a typo, not a budget (and bounds what the
progress lines print). The flag is text; eval.yaml's value a YAML number, never text
("5" quoted is refused as a price is: it reads as a number only by accident).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator, Field

from bat.evaluation.inputs.prices import finite_number

MAX_COST = 1_000_000_000


MaxCost = Annotated[
    float, BeforeValidator(finite_number("an amount of money")), Field(gt=0, le=MAX_COST)
]


def parse_max_cost(text: str, flag: str = "--max-cost") -> float:
    """The flag's amount; a ValueError says, in one line, what is wrong with ``text``."""
    shown = text if len(text) <= 40 else text[:40] + "…"
    try:
        amount = float(text) if text.isascii() else math.nan
    except ValueError:
        amount = math.nan
    if not math.isfinite(amount) or not 0 < amount <= MAX_COST:
        raise ValueError(
            f"{flag} {shown!r}: expected an amount above 0 and at most {MAX_COST:,} in the "
            "run's currency (e.g. 2.50)"
        )
    return amount
