"""Can McNemar's exact test show a regression with this sample at all?

``eval.compare --fail-on-regression`` and the ``--baseline`` gate call a drop a
regression when McNemar's exact test on the flipped tasks gives p < alpha. With few
flipped tasks that can never happen: the smallest two-sided p the test gives for ``n``
flipped tasks is when all ``n`` flipped the same way, ``2 / 2**n`` (1 for n ≤ 1), so
with alpha = 0.05 it takes at least 6 flipped tasks. Below that, "not significant"
says nothing about the drop: 2 of 8 tasks regressed (a 25-point drop) gives p = 0.5,
and so would a real regression of that size. The check then says it *cannot tell*,
how many flipped tasks the test needs, and about how many paired tasks would give that
many at this sample's flip rate; it fails unless a largest drop allowed (``--max-drop``,
``max_drop:``) decides instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb

from bat.figures import counted

# mcnemar_exact rounds p to 6 decimals: from about 22 flips on, it is 0 (< any alpha).
_MOST_FLIPS = 64


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b flips one way and c the other."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return round(min(1.0, 2 * tail), 6)


def smallest_p(flipped: int) -> float:
    """The smallest p McNemar's exact test (as bat computes it) can give for
    ``flipped`` discordant tasks: all of them flipped one way."""
    return mcnemar_exact(flipped, 0)


def flips_needed(alpha: float) -> int:
    """The fewest flipped tasks with which the test can reach p < ``alpha`` (0 < alpha < 1)."""
    for flipped in range(_MOST_FLIPS + 1):
        if smallest_p(flipped) < alpha:
            return flipped
    return _MOST_FLIPS


@dataclass(frozen=True)
class Reach:
    """What the test can show with a comparison's paired and flipped tasks."""

    paired: int  # tasks on both sides
    flipped: int  # tasks whose majority outcome changed, either way
    alpha: float

    @property
    def needed(self) -> int:
        """Flipped tasks (all one way) the test needs to reach p < alpha."""
        return flips_needed(self.alpha)

    @property
    def can_tell(self) -> bool:
        """Some direction of these flips would be significant."""
        return self.flipped >= self.needed

    @property
    def paired_needed(self) -> int | None:
        """About how many paired tasks would give ``needed`` flips at this sample's flip
        rate (None: no task flipped, so no rate to go by)."""
        if self.flipped == 0:
            return None
        return max(self.needed, math.ceil(self.needed * self.paired / self.flipped))

    def text(self) -> str:
        """One clause: "cannot tell: 8 paired tasks, 2 flipped; ..."."""
        flips = "none flipped" if self.flipped == 0 else f"{self.flipped} flipped"
        said = (
            f"cannot tell: {counted(self.paired, 'paired task')}, {flips}; McNemar's exact "
            f"test needs at least {counted(self.needed, 'flipped task')} (all one way) to "
            f"reach p < {self.alpha:g}"
        )
        wanted = self.paired_needed
        if wanted is None:
            return said + " (the pass rate fell within tasks, none changed its majority)"
        more = wanted - self.paired
        return said + (
            f": about {counted(wanted, 'paired task')} at this flip rate ({more} more)"
            if more > 0
            else ""
        )


def reach(paired: int, flipped: int, alpha: float = 0.05) -> Reach:
    return Reach(paired=paired, flipped=flipped, alpha=alpha)
