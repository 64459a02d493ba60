"""How a cost is shown beside the other figures (exports, ``eval.compare``, gates).

An amount with unpriced parts is a lower bound and says so ("≥ 0.0102 USD"); a cost of
which nothing is known (every episode's models unpriced, nothing added: the echo agent
of a run without ``prices:``) is "unknown", never "0 USD". The figures themselves are
:func:`bat.evaluation.stats.cost_figures`'; this module only words them.
"""

from __future__ import annotations

from bat.evaluation.log.gates import GateResult
from bat.evaluation.log.summary import CostFigures, RowCost
from bat.figures import MISSING, money, number

UNKNOWN = "unknown"


def known(cost: CostFigures | None) -> bool:
    """Whether anything of ``cost`` is known: some part of some episode had a price."""
    if cost is None:
        return False
    return cost.total > 0 or cost.unpriced_episodes < cost.episodes


def amount(value: float | None, cost: CostFigures | RowCost | None) -> str:
    """``value`` (an amount of ``cost``) in its currency, "≥" before a lower bound;
    "unknown" when nothing of it had a price."""
    if cost is None or value is None:
        return MISSING
    if cost.unpriced and not value:
        return UNKNOWN
    return ("≥ " if cost.unpriced else "") + money(value, cost.currency)


def gate_value(gate: GateResult) -> str:
    """A gate's value as its tables show it (the terminal, the report, the viewer): a
    cost gate's with its currency (``0.0102 USD``), any other as a plain number."""
    return money(gate.value, gate.unit) if gate.unit else number(gate.value)
