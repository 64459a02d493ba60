"""How a cost is shown in the exports, ``eval.compare`` and the gates' tables, in the
words of the report and the viewer (:mod:`bat.evaluation.present.cost_view`).

An amount with unpriced parts is a lower bound and says so ("at least 0.0102 USD"); a
cost of which nothing is known (every part unpriced: the echo agent of a run without
``prices:``) is "unpriced", never "0 USD". The figures themselves are
:func:`bat.evaluation.stats.cost_figures`'; this module only words them.
"""

from __future__ import annotations

from bat.evaluation.log.gates import GateResult
from bat.evaluation.log.summary import CostFigures, RowCost
from bat.evaluation.present.cost_view import nothing_priced
from bat.figures import MISSING, money, number

UNPRICED = "unpriced"
AT_LEAST = "at least "


def known(cost: CostFigures | None) -> bool:
    """Whether anything of ``cost`` is known: some part of some episode had a price."""
    return cost is not None and not nothing_priced(cost)


def amount(value: float | None, cost: CostFigures | RowCost | None) -> str:
    """``value`` (an amount of ``cost``) in its currency, "at least" before a lower
    bound; "unpriced" when nothing of it had a price."""
    if cost is None or value is None:
        return MISSING
    if cost.unpriced and not value:
        return UNPRICED
    return (AT_LEAST if cost.unpriced else "") + money(value, cost.currency)


def gate_value(gate: GateResult) -> str:
    """A gate's value as its tables show it (the terminal, the report, the viewer): a
    cost gate's with its currency (``0.0102 USD``), any other as a plain number."""
    return money(gate.value, gate.unit) if gate.unit else number(gate.value)
