"""What a run will cost, told before it runs, from what the last run cost.

``eval.run --dry-run`` multiplies the episodes planned (tasks × k, per model) by the cost
of an episode of the **last run**: the newest run in ``output_dir`` whose episodes have a
cost, in the run's currency. For each model of eval.yaml (matched by its label) the cost
of each task is its mean there when that run ran the task, else the model's mean per
episode; a model that run did not have is unknown (or 0, a stand-in model with no
price). Only priced parts count, as in the figures; the judges' cost is in them when that
run was judged.

The budget (``run.budget``) takes the same last run's mean (of the agent's and the
user's parts) for the episodes in flight before one of its own has ended; and on
``--resume``, what the run's episodes have spent so far, measured the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.errors import BatError
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.summary import CostFigures
from bat.figures import counted, money

# Earlier runs looked at, newest first, for one with costs: a folder of thousands of
# runs without any (an older bat's) is not read whole.
MAX_RUNS_LOOKED_AT = 50


@dataclass
class ModelCosts:
    """One model's cost per episode in an earlier run."""

    per_episode: float  # every priced part (the judges' too, if judged)
    running: float  # the agent's and the user's part: what is spent while episodes run
    episodes: int
    tasks: dict[str, float] = field(default_factory=dict)  # task id -> per episode


@dataclass
class EarlierCosts:
    """The newest earlier run with costs: its id and each model's costs."""

    run_id: str
    currency: str
    models: dict[str, ModelCosts]

    def running_mean(self) -> float:
        """The agent's and user's cost of an episode, over every model."""
        episodes = sum(m.episodes for m in self.models.values())
        spent = sum(m.running * m.episodes for m in self.models.values())
        return spent / episodes if episodes else 0.0


def last_run_costs(
    output_dir: Path, currency: str, *, leave_out: Path | None = None
) -> EarlierCosts | None:
    """The newest run under ``output_dir`` (not ``leave_out``) whose models have costs in
    ``currency``; None when there is none."""
    if not output_dir.is_dir():
        return None
    runs = sorted(
        (p.parent for p in output_dir.glob(f"*/{layout.RUN_FILE}") if p.is_file()), reverse=True
    )
    skip = leave_out.resolve() if leave_out is not None else None
    for run_dir in [r for r in runs if r.resolve() != skip][:MAX_RUNS_LOOKED_AT]:
        found = _run_costs(run_dir, currency)
        if found is not None:
            return found
    return None


def _run_costs(run_dir: Path, currency: str) -> EarlierCosts | None:
    try:
        record = rundir.read_run(run_dir)
        folders = rundir.model_dirs(run_dir)
    except BatError:
        return None  # an unreadable run is no source of an estimate
    models = {}
    for model, folder in zip(record.models, folders, strict=True):
        try:
            found = layout.has_summary(folder) and layout.metrics_file(folder).is_file()
            summary = store.read_results(folder).summary if found else None
        except BatError:
            summary = None
        cost = summary.cost if summary is not None else None
        if cost is None or cost.currency != currency or not cost.episodes:
            continue
        tasks = {
            task.task_id: _per_episode(task.cost)
            for task in summary.attempts
            if task.cost is not None and task.cost.episodes
        }
        models[model.label] = ModelCosts(
            per_episode=_per_episode(cost),
            running=(cost.agent + cost.user) / cost.episodes,
            episodes=cost.episodes,
            tasks=tasks,
        )
    return EarlierCosts(record.run_id, currency, models) if models else None


def _per_episode(cost: CostFigures) -> float:
    return cost.total / cost.episodes


def spent_in(run_dir: Path) -> tuple[float, float | None]:
    """What the episodes in ``run_dir`` (a resumed run's) spent as they ran — their
    agents' and simulated users' cost, the budget's measure (``run.budget``: the judges'
    is not) —, and its mean per episode (None: none has a cost)."""
    spent, priced = 0.0, 0
    for folder in rundir.model_dirs(run_dir):
        if not folder.is_dir():
            continue
        for _, episode in store.episodes(folder):
            if episode.cost is not None:
                spent += episode.cost.running
                priced += 1
    return spent, (spent / priced if priced else None)


def estimate_lines(
    resolved: Any,
    task_ids: list[str],
    book: Any,
    earlier: EarlierCosts | None,
    label_of: Callable[[Any], str],
) -> list[str]:
    """The dry run's lines: one per model and a total, and where the estimate comes from."""
    from bat.evaluation.cost import AGENT_DEFAULT

    k, currency = resolved.evaluation.k, book.currency
    planned = len(task_ids) * k
    lines, total, unknown = [], 0.0, []
    for model in resolved.models:
        label = label_of(model)
        costs = earlier.models.get(label) if earlier is not None else None
        if costs is not None:
            amount = k * sum(costs.tasks.get(task, costs.per_episode) for task in task_ids)
            matched = sum(task in costs.tasks for task in task_ids)
            mean = f"{money(costs.per_episode, currency)} per episode"
            how = (
                "each task at its own cost per episode"
                if matched == len(task_ids)
                else f"{matched} of {len(task_ids)} tasks at their own cost, the rest at {mean}"
                if matched
                else mean
            )
            lines.append(f"  [{label}] about {money(amount, currency)} ({planned} episodes; {how})")
            total += amount
            continue
        spec = model or AGENT_DEFAULT
        if getattr(spec, "script", None) is not None and book.price_of(spec) is None:
            lines.append(f"  [{label}] 0 (a stand-in model without a price in prices:)")
            continue
        unknown.append(label)
        lines.append(f"  [{label}] unknown until a run ({planned} episodes)")
    source = (
        f"from run {earlier.run_id}'s cost per episode (priced parts only)"
        if earlier is not None
        else "no earlier run with costs"
    )
    shown = money(total, currency)
    head = (
        f"cost estimate  about {shown} in all, {source}"
        if not unknown
        else f"cost estimate  at least {shown} ({counted(len(unknown), 'model')} unknown), {source}"
    )
    if earlier is None and unknown and len(unknown) == len(resolved.models):
        head = f"cost estimate  unknown until a run ({source})"
    return [head, *lines]
