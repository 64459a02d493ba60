"""``bat eval.compare A B``: two runs (or two models of one run) side by side.

Each side is a folder holding ``summary.json`` — a model folder of a run — named by
its path, by a run (directory or id) with a single model, or ``RUN:MODEL`` to pick one
model of a run. A run folder without ``run.json`` (bat-cli 2026.10's) is one whose
sub-folders hold ``summary.json``; bat-cli's files are read by :mod:`bat.evaluation.log.batcli`.
Per task: the pass rate on each side and the change; a task *flipped* when its majority
outcome (pass rate ≥ 0.5) changed. Significance is McNemar's exact test on those paired
task outcomes: of the tasks that flipped, are there more in one direction than chance
would give? (two-sided binomial test, p = 1 when nothing flipped).

Beside the pass rates, what each side cost (summary.json's ``cost``): the total and the
cost per episode, before and after, and their relative change — the trade a model
choice weighs. Costs are compared only in one currency and when both sides have one
(:func:`cost_warnings` says why not otherwise); a side with unpriced parts shows "at
least", one with nothing priced "unpriced".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.summary import CostFigures, Summary, TaskSummary
from bat.evaluation.present.cost_view import AT_LEAST, UNPRICED, known
from bat.evaluation.present.power import mcnemar_exact
from bat.figures import counted, money, number, percent, points
from bat.terminal import safe


def resolve_side(reference: str, output_dir: Path) -> Path:
    """The model folder (holding summary.json) that ``reference`` names."""
    run_ref, _, model = reference.partition(":")
    direct = Path(reference)
    if layout.has_summary(direct):
        return direct
    try:
        run_dir = rundir.find_run(output_dir, run_ref)
        dirs = store.summarized_models(run_dir)
    except InputError:
        run_dir = _run_without_run_file(run_ref, output_dir)
        if run_dir is None:
            raise
        dirs = store.summarized_models(run_dir)
        for folder in dirs:  # read only what is inside the run folder named
            if not folder.resolve().is_relative_to(run_dir.resolve()):
                raise InputError(f"{folder} leads outside {run_dir} (a link out)") from None
    if model:
        chosen = [d for d in dirs if d.name == model] or [
            d for d in dirs if _label(run_dir, d) == model
        ]
        if not chosen:
            names = ", ".join(d.name for d in dirs) or "none"
            raise InputError(
                f"run {run_dir.name} has no summarized model {model!r} (it has: {names})"
            )
        return chosen[0]
    if not dirs:
        raise InputError(
            f"run {run_dir.name} has no summarized model "
            f"(bat eval.summarize --run {run_dir.name} writes them)"
        )
    if len(dirs) != 1:
        names = ", ".join(d.name for d in dirs)
        raise InputError(
            f"run {run_dir.name} has several models ({names}): name one as {run_ref}:MODEL"
        )
    return dirs[0]


def _label(run_dir: Path, folder: Path) -> str | None:
    """The label a model folder is shown under (``openai:gpt-4.1``, bat-cli's
    ``openai:echo-model``), so ``RUN:LABEL`` names it as well as ``RUN:FOLDER``."""
    from bat.evaluation.log import batcli

    if layout.is_run_folder(run_dir):
        entries = rundir.read_run(run_dir).models
        return next((e.label for e in entries if (run_dir / e.dir) == folder), None)
    if batcli.is_model_folder(folder):
        return batcli.load(folder).model
    return None


def _run_without_run_file(run_ref: str, output_dir: Path) -> Path | None:
    """A run folder with no run.json (as bat-cli 2026.10 writes them) whose sub-folders
    hold summary.json, named by its path or its name under ``output_dir``; else None."""
    for folder in dict.fromkeys([Path(run_ref), output_dir / run_ref] if run_ref else []):
        if (
            folder.is_dir()
            and not layout.is_run_folder(folder)
            and any(layout.has_summary(d) for d in folder.iterdir())
        ):
            return folder
    return None


def compare(a: Path, b: Path) -> dict[str, Any]:
    """The comparison of two model folders, as plain data (what ``--json`` prints)."""
    left, right = _summary(a), _summary(b)
    rates_a = {t.task_id: t for t in left.attempts}
    rates_b = {t.task_id: t for t in right.attempts}
    order = [t.task_id for t in left.attempts] + [
        t.task_id for t in right.attempts if t.task_id not in rates_a
    ]
    rows, regressions, improvements = [], [], []
    for task_id in order:
        rate_a, rate_b = _rate(rates_a.get(task_id)), _rate(rates_b.get(task_id))
        row = {"task_id": task_id, "a": rate_a, "b": rate_b, "change": None, "flip": None}
        if rate_a is not None and rate_b is not None:
            row["change"] = round(rate_b - rate_a, 4)
            if rate_a >= 0.5 > rate_b:
                row["flip"] = "regressed"
                regressions.append(task_id)
            elif rate_b >= 0.5 > rate_a:
                row["flip"] = "improved"
                improvements.append(task_id)
        rows.append(row)
    paired = [r for r in rows if r["change"] is not None]
    return {
        "a": _side(a, left),
        "b": _side(b, right),
        "tasks": rows,
        "paired_tasks": len(paired),
        "mean_change": round(sum(r["change"] for r in paired) / len(paired), 4) if paired else None,
        "regressed": regressions,
        "improved": improvements,
        "mcnemar_p": mcnemar_exact(len(regressions), len(improvements)),
        "cost": _cost_change(left.cost, right.cost),
    }


def _cost_change(a: CostFigures | None, b: CostFigures | None) -> dict[str, Any] | None:
    """The cost of each side and the relative change of the total and of the cost per
    episode (``change``: B / A − 1; None when A's is 0 or they cannot be compared: a side
    without cost, two currencies, or a side with unpriced parts, whose cost is only a
    lower bound). None when no cost is known of either side."""
    if not (known(a) or known(b)):
        return None  # nothing priced on either side (an older run, or no prices:)
    comparable = (
        a is not None
        and b is not None
        and a.currency == b.currency
        and not (a.unpriced or b.unpriced)
    )
    found: dict[str, Any] = {"comparable": comparable}
    for name in ("total", "per_episode"):
        before, after = _amount(a, name), _amount(b, name)
        change = None
        if comparable and before and after is not None:
            change = round(after / before - 1, 4)
        found[name] = {"a": before, "b": after, "change": change}
    for side, cost in (("a", a), ("b", b)):
        found[side] = (
            None
            if cost is None
            else {
                "currency": cost.currency,
                "unpriced": cost.unpriced,
                "per_pass": cost.per_pass,
                "known": known(cost),
            }
        )
    return found


def _amount(cost: CostFigures | None, name: str) -> float | None:
    if cost is None:
        return None
    return cost.total if name == "total" else cost.per_episode.mean


def cost_warnings(result: dict[str, Any]) -> list[str]:
    """Why the two sides' costs are not compared, in plain words: one side has none (a
    run made before bat priced episodes), they are in different currencies, or a side
    left parts unpriced (its cost is a lower bound)."""
    cost = result.get("cost")
    if cost is None or cost["comparable"]:
        return []
    a, b = cost["a"], cost["b"]
    if a is None or b is None:
        which = "A" if a is None else "B"
        return [
            f"{which} has no cost (a run made before bat priced episodes): the costs are "
            "not compared"
        ]
    if a["currency"] != b["currency"]:
        return [
            f"A is priced in {a['currency']} and B in {b['currency']}: the costs are not compared"
        ]
    return [
        f"{name}'s cost is a lower bound ({', '.join(side['unpriced'])} had no price): the "
        "change is not computed (set prices: in eval.yaml)"
        for name, side in (("A", a), ("B", b))
        if side["unpriced"]
    ]


def card_warnings(a: Path, b: Path) -> list[str]:
    """What differs between the benchmark cards of the runs of two model folders, in
    plain words (see :func:`bat.evaluation.log.card.comparable`); nothing when both are of
    one run, or a side has no card (an older run, bat-cli's folders)."""
    from bat.evaluation.log.card import comparable, read_card

    run_a, run_b = Path(a).parent, Path(b).parent
    if not (layout.is_run_folder(run_a) and layout.is_run_folder(run_b)):
        return []
    if run_a.resolve() == run_b.resolve():
        return []
    try:
        card_a, card_b = read_card(run_a), read_card(run_b)
    except InputError as exc:
        return [f"{exc.message}: the runs' cards are not compared"]
    if card_a is None or card_b is None:
        return []
    return [safe(line) for line in comparable(card_a, card_b)]


def render(result: dict[str, Any]) -> str:
    """The comparison as a table for the terminal (labels and ids read from run folders
    are printed with their control characters escaped)."""
    return safe(_table(result))


def _table(result: dict[str, Any]) -> str:
    a, b = result["a"], result["b"]
    lines = [
        f"A  {a['model']} ({a['run_id']}): {_side_rate(a)} of episodes passed",
        f"B  {b['model']} ({b['run_id']}): {_side_rate(b)} of episodes passed",
        "",
        f"{'task':<40} {'A':>7} {'B':>7} {'change':>13}",
    ]
    for row in result["tasks"]:
        mark = {"regressed": "  ✗ regressed", "improved": "  ✓ improved"}.get(row["flip"] or "", "")
        lines.append(
            f"{row['task_id'][:40]:<40} {percent(row['a']):>7} {percent(row['b']):>7} "
            f"{points(row['change']):>13}{mark}"
        )
    lines += [
        "",
        f"{counted(result['paired_tasks'], 'task')} on both sides; "
        f"mean change {points(result['mean_change'])}; "
        f"{len(result['regressed'])} regressed, {len(result['improved'])} improved; "
        f"McNemar exact p = {number(result['mcnemar_p'])}",
    ]
    lines += _cost_lines(result)
    return "\n".join(lines)


def _cost_lines(result: dict[str, Any]) -> list[str]:
    """The cost beside the pass rate: ``cost  0.0102 USD → 0.0153 USD (+50.0 %)``, the
    total and per episode; "at least" marks a side with unpriced parts (a lower bound)."""
    cost = result.get("cost")
    if cost is None:
        return []
    lines = []
    for name, label in (("total", "cost"), ("per_episode", "cost per episode")):
        figure = cost[name]
        before = _side_amount(figure["a"], cost["a"])
        after = _side_amount(figure["b"], cost["b"])
        change = figure["change"]
        relative = f" ({100 * change:+.1f} %)" if change is not None else ""
        lines.append(f"{label:<17} {before} → {after}{relative}")
    pass_rate = points(-drop_of(result) or 0.0)  # no "-0.0 points"
    lines[0] += f"; pass rate {pass_rate}"
    return ["", *lines]


def _side_amount(amount: float | None, side: dict[str, Any] | None) -> str:
    if side is None:
        return "no cost"
    if not side["known"]:
        return UNPRICED
    least = AT_LEAST if side["unpriced"] and amount is not None else ""
    return least + money(amount, side["currency"])


def _summary(folder: Path) -> Summary:
    """The model folder's summary, whichever bat or bat-cli wrote it."""
    results = store.read_results(folder)
    summary = results.summary
    summary.run_id = results.run_id
    return summary


def _side(folder: Path, summary: Summary) -> dict[str, Any]:
    return {
        "folder": str(folder),
        "model": summary.model,
        "run_id": summary.run_id,
        "success_percentage": summary.totals.success_percentage,
    }


def _rate(task: TaskSummary | None) -> float | None:
    """A task's pass rate over the attempts that observed the agent: an infrastructure
    failure says nothing of it (kept out, as of pass@k), so a connection lost in one run
    is no "improved" task in the next. None when no attempt observed it."""
    if task is None or not task.infra_failures:
        return None if task is None else task.pass_rate
    return round(task.passed / task.judged, 4) if task.judged else None


def _side_rate(side: dict[str, Any]) -> str:
    """A side's pass rate (summary.json keeps it as a percentage, as bat-cli wrote it)."""
    return percent(side["success_percentage"] / 100)


def regression(
    result: dict[str, Any], *, alpha: float = 0.05, max_drop: float | None = None
) -> tuple[float, bool, str]:
    """Did side B regress from side A? ``(drop, regressed, why)``: the drop of the pass
    rate (A − B, a fraction), and whether it is a regression — McNemar's p under
    ``alpha`` with more tasks regressed than improved, or a drop over ``max_drop``.

    A drop the test *cannot tell* about (too few flipped tasks for any p < ``alpha``,
    :mod:`.power`) is a regression unless ``max_drop`` is given: then the drop alone
    decides. Passing it for want of evidence would let a 25-point drop on 8 tasks
    through."""
    drop = drop_of(result)
    regressed, improved, p = result["regressed"], result["improved"], result["mcnemar_p"]
    if not math.isfinite(drop):  # NaN compares false with any bound: never a pass
        return drop, True, "the pass rates are not numbers bat can compare"
    significant = p < alpha and len(regressed) > len(improved)
    too_far = max_drop is not None and drop > max_drop
    cannot_tell = cannot_tell_of(result, alpha) if drop > 0 else None
    why = (
        f"pass rate {points(-drop)}; {counted(len(regressed), 'task')} regressed, "
        f"{len(improved)} improved; McNemar p = {number(p)}"
    )
    if significant:
        why += f" < {alpha:g}: a significant regression"
    if cannot_tell:
        why += f"; {cannot_tell}"
        if max_drop is None:
            why += "; a drop the test cannot judge fails unless a largest drop is allowed "
            why += "(--max-drop, or max_drop: in eval.yaml)"
    if too_far:
        why += f"; the drop is over {max_drop:g}"
    if regressed:
        shown = ", ".join(regressed[:5]) + (" ..." if len(regressed) > 5 else "")
        why += f" (regressed: {shown})"
    return drop, significant or too_far or bool(cannot_tell and max_drop is None), why


def drop_of(result: dict[str, Any]) -> float:
    """How far B's pass rate is under A's, a fraction (negative: B is higher)."""
    return round((result["a"]["success_percentage"] - result["b"]["success_percentage"]) / 100, 4)


def cannot_tell_of(result: dict[str, Any], alpha: float = 0.05) -> str | None:
    """ "cannot tell: ..." when McNemar's test cannot reach p < ``alpha`` with the
    comparison's flipped tasks (:mod:`.power`), else None."""
    from bat.evaluation.present.power import reach

    flipped = len(result["regressed"]) + len(result["improved"])
    found = reach(result["paired_tasks"], flipped, alpha)
    return None if found.can_tell else found.text()
