"""The numbers a run's files may hold about time: finite, not negative, bounded.

An episode's times are measured by bat's clock, so a NaN, a negative time or ``1e308``
in a file means the file was edited (by hand or by another tool). Refused when read, they
never reach a summary, a gate or a file bat writes: ``1e308`` seconds summed over two
episodes is an infinity, and a negative latency passes any ``latency.p90 < N`` gate.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

# Longer than any episode (a turn times out within a day); far from a float's overflow.
MAX_SECONDS = 10**7

Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)]
Milliseconds = Annotated[float, Field(ge=0, le=MAX_SECONDS * 1000, allow_inf_nan=False)]
