"""The run's cost budget put together before its first episode (``pipeline``).

A budget counts money: every model whose tokens the episodes pay for (each model of
``models:``, or the agent's own, and the simulated users' model when a task has a user)
needs a price, or what is spent cannot be known and the budget cannot be kept: the run
is refused before it starts. The judges are priced or not as they may be: their cost
comes after the episodes and is not what the budget stops (run.budget).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bat.errors import UsageError
from bat.evaluation.estimate import last_run_costs, spent_in
from bat.evaluation.run.budget import CostBudget
from bat.figures import money

Say = Callable[[str], None]


def budget_limit(resolved: Any, flag: float | None) -> float | None:
    """``--max-cost`` over ``evaluation.max_cost`` (None: no budget)."""
    return flag if flag is not None else resolved.evaluation.max_cost


def check_priced(ctx: Any, limit: float, tasks: list[Any]) -> None:
    """Refuse (one line, exit 2) a budget with a model the episodes pay for unpriced."""
    from bat.evaluation.cost import AGENT_DEFAULT, PriceBook

    resolved = ctx.resolved
    config = resolved.config
    # Quiet: the refusal is the one line. With update_prices the run's own book (the
    # newer table is fetched once, whoever asks first).
    book = (
        ctx.prices
        if config.evaluation.update_prices is not False
        else PriceBook(config.prices, ctx.team_prices)
    )
    payers = [model or AGENT_DEFAULT for model in resolved.models]
    if config.user is not None and any(task.user is not None for task in tasks):
        payers.append(config.user)
    for spec in payers:
        if book.price_of(spec) is None:
            raise UsageError(
                f"a budget (max_cost {money(limit, book.currency)}) needs every model's price, "
                f"and {spec.provider}:{spec.model} has none: give it one in prices: "
                "(eval.yaml), or run without a budget"
            )


def start_budget(ctx: Any, run_dir: Path, limit: float, resumed: bool, say: Say) -> CostBudget:
    """The budget of this run: what it spent already (resumed), the estimate of an
    episode in flight (its own mean so far, else the last run's), said in one line."""
    book = ctx.prices
    spent, own_mean = spent_in(run_dir) if resumed else (0.0, None)
    earlier = None
    if own_mean is None:
        earlier = last_run_costs(ctx.resolved.output_dir, book.currency, leave_out=run_dir)
    budget = CostBudget(
        limit,
        currency=book.currency,
        spent=spent,
        earlier_mean=own_mean if earlier is None else earlier.running_mean(),
        say=say,
    )
    so_far = f", {money(spent, book.currency)} spent already" if resumed else ""
    source = (
        "this run's"
        if own_mean is not None
        else f"run {earlier.run_id}'s"
        if earlier is not None
        else "none until one ends"
    )
    say(
        f"budget: max_cost {money(limit, book.currency)}{so_far} (episodes in flight "
        f"estimated at the mean cost per episode: {source})"
    )
    return budget


def dry_run_lines(ctx: Any, flag: float | None, tasks: list[Any]) -> list[str]:
    """``eval.run --dry-run``'s cost lines for ``tasks``: the estimate per model from the
    last run's cost per episode, and the budget (refused first, as the run would be,
    when a model it pays for has no price)."""
    from bat.evaluation.estimate import estimate_lines

    resolved, book = ctx.resolved, ctx.prices
    limit = budget_limit(resolved, flag)
    if limit is not None:
        check_priced(ctx, limit, tasks)
    earlier = last_run_costs(resolved.output_dir, book.currency)
    ids = [task.id for task in tasks]
    found = estimate_lines(resolved, ids, book, earlier, resolved.model_label)
    if limit is not None:
        found.append(f"budget         max_cost {money(limit, book.currency)}")
        running = _running_estimate(resolved, len(tasks), earlier)
        if running is not None and running >= limit:
            found.append(
                f"               the episodes alone are estimated at about "
                f"{money(running, book.currency)} (judging comes on top): the run would "
                "stop part-way"
            )
    return found


def _running_estimate(resolved: Any, tasks: int, earlier: Any) -> float | None:
    """What the planned episodes would spend as they run (the budget's measure: agents
    and simulated users), from the last run; None when a model has no earlier cost."""
    if earlier is None:
        return None
    total = 0.0
    for model in resolved.models:
        costs = earlier.models.get(resolved.model_label(model))
        if costs is None:
            return None
        total += costs.running * tasks * resolved.evaluation.k
    return total
