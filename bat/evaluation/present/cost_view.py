"""What a run cost, in one wording: the report, the viewer, the exports, ``eval.compare``
and the gates' tables.

The numbers are summary.json's and metrics.json's cost figures and the episode's own
``cost`` (:mod:`bat.evaluation.stats`, :mod:`bat.evaluation.cost`): nothing is computed
here but their wording. A total with an unpriced part is a lower bound, and says so
("at least 0.0102 USD"), since a guess would pass for a price; a cost of which nothing
is known (every part unpriced) is "unpriced", and a run without cost shows
:data:`~bat.figures.MISSING`: never a zero it did not measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation.log.episode import EpisodeCost
from bat.evaluation.log.gates import GateResult
from bat.evaluation.log.summary import CostFigures, RowCost
from bat.figures import MISSING, money, number

ILLUSTRATIVE = "illustrative"  # the word of a price's note that makes the price made up
UNPRICED = "unpriced"
AT_LEAST = "at least "


def lower_bound(figures: CostFigures) -> str:
    """ "at least " when some episode has a part without a price, else ""."""
    return AT_LEAST if figures.unpriced_episodes else ""


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


def nothing_priced(figures: CostFigures) -> bool:
    """Every part with a cost had no price (a run of a model no price is known for)."""
    return figures.total == 0 and figures.unpriced_episodes > 0


def figures_cells(figures: CostFigures | None) -> dict[str, Any]:
    """The model's cost as table cells: total, per episode (mean) and per pass, each
    with its currency; ``unpriced``: the models without a price (the total is less)."""
    if figures is None:
        return {"total": MISSING, "per_episode": MISSING, "per_pass": MISSING, "unpriced": []}
    least, currency = lower_bound(figures), figures.currency
    if nothing_priced(figures):  # "at least 0 USD" would say nothing
        return {"total": UNPRICED, "per_episode": MISSING, "per_pass": MISSING,
                "p90": MISSING, "parts": MISSING, "unpriced": list(figures.unpriced),
                "unpriced_episodes": figures.unpriced_episodes}  # fmt: skip
    return {
        "total": least + money(figures.total, currency),
        "per_episode": least + money(figures.per_episode.mean, currency),
        "per_pass": MISSING
        if figures.per_pass is None
        else least + money(figures.per_pass, currency),
        "p90": money(figures.per_episode.p90, currency),
        "parts": f"agent {money(figures.agent, currency)} · judges "
        f"{money(figures.judge, currency)} · simulated user {money(figures.user, currency)}",
        "unpriced": list(figures.unpriced),
        "unpriced_episodes": figures.unpriced_episodes,
    }


def episode_parts(cost: EpisodeCost | None) -> list[tuple[str, str]]:
    """An episode's cost, part by part: (payer, amount), the total last. The agent's part
    is always shown; the simulated user's and the judges'
    when they have an amount (a file keeps no empty part: an unpriced one is named in
    ``cost.unpriced``)."""
    if cost is None:
        return []
    currency = cost.currency
    # None: no price (its model is named in ``unpriced``), or the agent reported no tokens
    parts = [("agent", MISSING if cost.agent is None else money(cost.agent, currency))]
    for name, value in (("simulated user", cost.user), ("judges", cost.judge)):
        if value is not None:
            parts.append((name, money(value, currency)))
    least = AT_LEAST if cost.unpriced else ""
    return [*parts, ("total", least + money(cost.total, currency))]


def card_prices(run_dir: Path) -> dict[str, Any] | None:
    """The ``prices`` record of a run's card.json (``PriceBook.record()``), or None: no
    card, a card written before prices were recorded, or one that cannot be read."""
    from bat.evaluation.log.card import read_card

    try:
        card = read_card(run_dir)
    except InputError:
        return None
    if card is None:
        return None
    found = getattr(card, "prices", None)
    if found is None:
        found = (card.model_extra or {}).get("prices")
    if hasattr(found, "model_dump"):
        found = found.model_dump(mode="json")
    return found if isinstance(found, dict) else None


def illustrative(prices: dict[str, Any] | None) -> bool:
    """Whether some price of the record is made up (its note says "illustrative"): the
    demo's stand-in models cost nothing real, and a reader must not take their figures
    for a provider's."""
    models = (prices or {}).get("models")
    if not isinstance(models, dict):
        return False
    return any(
        isinstance(entry, dict) and ILLUSTRATIVE in str(entry.get("note") or "").lower()
        for entry in models.values()
    )
