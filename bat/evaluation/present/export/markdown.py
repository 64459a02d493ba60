"""Markdown: the summary a pull request or a CI job page shows (``--to markdown:PATH``).

A headline (run id and status), the gates when the run folder has ``gates.json``, one
table row per model (passed/attempts, pass rate with its 95 % interval, pass@k, pass^k,
infrastructure failures, agent errors; in a run that priced its episodes, what the model
cost in all, per episode and per passing attempt, a total with unpriced parts marked
"at least" and explained under the table, a model with no price at all said so in a line), a
"Simulated users" table when a model had conversations with a simulated user (pass^k
over them, turns, how they ended, the user model's tokens), the failed tasks with the
first reason, and the natural-language assertions of those tasks that the judges did
not find true (failed or undecided).
Table cells are escaped: ``|`` and ``<`` cannot break the table or open HTML, and
newlines are folded. When ``$GITHUB_STEP_SUMMARY`` is set (a GitHub Actions step), the
file is also appended to it (:func:`bat.evaluation.present.export.append_step_summary`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bat.evaluation.log.summary import CostFigures
from bat.evaluation.present import conversation
from bat.evaluation.present.cost_view import amount, known
from bat.evaluation.present.export.data import RunData
from bat.figures import MISSING, counted, interval, money, number, percent

CELL_LIMIT = 200  # characters of a reason in a table cell


def cell(value: object, limit: int = CELL_LIMIT) -> str:
    """A table cell: one line, ``|`` escaped, no HTML, at most ``limit`` characters."""
    text = " ".join(("" if value is None else str(value)).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


class MarkdownExporter:
    """Markdown: the run's summary for a pull request (also to $GITHUB_STEP_SUMMARY)."""

    github_step_summary = True

    def __call__(self, run: RunData, path: Path) -> None:
        from bat.evaluation.present.export import write_text

        write_text(path, render(run))


def render(run: RunData) -> str:
    status = run.record.status if run.record else "bat-cli run"
    lines = [f"## bat eval: {cell(run.run_id)} ({cell(status)})", ""]
    if run.gates is not None:
        lines += _gates(run.gates)
    priced = any(known(model.summary.cost) for model in run.models)
    lines += [
        "| Model | Passed | Pass rate (95 % CI) | pass@k | pass^k | Infra failures "
        "| Agent errors |" + (" Cost | Cost/episode | Cost/pass |" if priced else ""),
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
        + (" ---: | ---: | ---: |" if priced else ""),
    ]
    for model in run.models:
        totals = model.summary.totals
        ci95 = f" ({interval(totals.success_ci95)})" if totals.success_ci95 else ""
        errors = ", ".join(f"{kind} {n}" for kind, n in totals.agent_errors.items() if n)
        lines.append(
            f"| {cell(model.label)} | {totals.passed}/{totals.attempts} "
            f"| {percent(totals.success_percentage / 100)}{ci95} | {percent(totals.pass_at_k)} "
            f"| {percent(totals.pass_hat_k)} | {totals.infra_failures} "
            f"| {totals.agent_errors_total}{f' ({cell(errors)})' if errors else ''} |"
            + (_cost_cells(model.summary.cost) if priced else "")
        )
    for entry in run.unevaluated:
        reason = entry.reason or f"status {entry.status}"
        lines.append(
            f"| {cell(entry.label)} | – | not evaluated: {cell(reason)} | | | | |"
            + (" | | |" if priced else "")
        )
    k = run.k
    lines += ["", f"k = {k} attempts per task; pass@k and pass^k at k = {k}.", ""]
    lines += _unpriced(run)
    lines += _simulated_users(run)
    failed = _failed_tasks(run)
    if failed:
        lines += [
            "### Failed tasks",
            "",
            "| Model | Task | Passed | First reason |",
            "| --- | --- | ---: | --- |",
            *failed,
            "",
        ]
        lines += _failing_assertions(run)
    else:
        lines += ["Every task passed every attempt." if run.models else "", ""]
    if run.unreadable:
        lines += [f"{counted(len(run.unreadable), 'episode file')} could not be read.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _cost_cells(cost: CostFigures | None) -> str:
    """A model's cost cells: in all, per episode (the mean), per passing attempt; a total
    with unpriced parts is marked "at least" (it is a lower bound)."""
    if cost is None:
        return f" {MISSING} | {MISSING} | {MISSING} |"
    amounts = (cost.total, cost.per_episode.mean, cost.per_pass)
    return "".join(f" {amount(value, cost)} |" for value in amounts)


def _unpriced(run: RunData) -> list[str]:
    """A line per model whose cost leaves parts out (models with no price)."""
    lines = []
    for model in run.models:
        cost = model.summary.cost
        if cost is None or not cost.unpriced:
            continue
        models = cell(", ".join(cost.unpriced))
        if known(cost):
            lines.append(
                f"Cost of {cell(model.label)} is at least the amount shown: "
                f"{counted(cost.unpriced_episodes, 'episode')} of {cost.episodes} used models "
                f"with no price ({models}); set prices: in eval.yaml."
            )
        else:
            lines.append(
                f"Cost of {cell(model.label)} unpriced: no price for {models} "
                "(set prices: in eval.yaml)."
            )
    return [*lines, ""] if lines else []


def _simulated_users(run: RunData) -> list[str]:
    """The figures of the conversations with a simulated user, a row per model that had
    them (infrastructure failures left out, as everywhere)."""
    talked = [m for m in run.models if m.summary.conversation is not None]
    if not talked:
        return []
    header = ["Model", *conversation.TABLE_HEADER]
    lines = ["### Simulated users", "", "| " + " | ".join(header) + " |"]
    lines.append("| --- |" + " ---: |" * (len(header) - 1))
    for model in talked:
        cells = conversation.table_cells(model.summary.conversation)  # type: ignore[arg-type]
        lines.append(f"| {cell(model.label)} | " + " | ".join(cell(c) for c in cells) + " |")
    return [*lines, ""]


def _gates(gates: dict[str, Any]) -> list[str]:
    held = gates.get("passed")
    headline = "✓ every gate held" if held else "✗ a gate failed" if held is False else "gates"
    lines = [f"### Gates: {headline}", "", "| | Gate | Model | Value | Threshold | Why it failed |"]
    lines.append("| :---: | --- | --- | ---: | --- | --- |")
    for gate in gates.get("gates") or []:
        if not isinstance(gate, dict):
            continue
        mark = "✓" if gate.get("passed") else "✗"
        if gate.get("threshold") is None:
            threshold = "no regression"
        else:
            threshold = f"{gate.get('op') or ''} {_number(gate.get('threshold'))}".strip()
        why = "" if gate.get("passed") else gate.get("detail") or ""
        value = _number(gate.get("value"))
        unit = gate.get("unit")
        if isinstance(unit, str) and isinstance(gate.get("value"), int | float):
            value = money(gate["value"], unit)  # a cost gate's currency
        lines.append(
            f"| {mark} | {cell(gate.get('name'))} | {cell(gate.get('model') or '')} "
            f"| {cell(value)} | {cell(threshold)} | {cell(why)} |"
        )
    return [*lines, ""]


def _number(value: Any) -> str:
    """A value of gates.json as written (a hand-edited file may hold anything there)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number(value)
    return MISSING if value is None else str(value)


def _failed_tasks(run: RunData) -> list[str]:
    """A row per task of a model that did not pass every attempt."""
    lines = []
    for model in run.models:
        for task in model.tasks:
            if task.passed == task.attempts:
                continue
            rows = model.task_rows(task.task_id)
            first = next((row for row in rows if model.reason(row)), None)
            reason = f"attempt {first.attempt}: {model.reason(first)}" if first else ""
            lines.append(
                f"| {cell(model.label)} | {cell(task.task_id)} | {task.passed}/{task.attempts} "
                f"| {cell(reason)} |"
            )
    return lines


def _failing_assertions(run: RunData) -> list[str]:
    """A row per assertion of a failed task that some attempt did not pass (failed, or
    no judge decided it): the reader of a pull request sees which statement broke."""
    lines = []
    for model in run.models:
        for task in model.tasks:
            if task.passed == task.attempts:
                continue
            tally: dict[str, dict[str, Any]] = {}  # assertion -> counts and first reason
            for row in model.task_rows(task.task_id):
                episode = model.episode(row)
                scores = episode.scores if episode else None
                for item in scores.assertions if scores else []:
                    found = tally.setdefault(
                        item.assertion, {"of": 0, "failed": 0, "undecided": 0, "why": ""}
                    )
                    found["of"] += 1
                    if item.passed is True:
                        continue
                    found["failed" if item.passed is False else "undecided"] += 1
                    if not found["why"]:
                        found["why"] = f"attempt {row.attempt}: {item.reason}"
            for text, found in tally.items():
                missed = [
                    f"{found[word]}/{found['of']} {word}"
                    for word in ("failed", "undecided")
                    if found[word]
                ]
                if missed:
                    lines.append(
                        f"| {cell(model.label)} | {cell(task.task_id)} | {cell(text)} "
                        f"| {', '.join(missed)} | {cell(found['why'])} |"
                    )
    if not lines:
        return []
    head = ["### Failing assertions", "", "| Model | Task | Assertion | Attempts | First reason |"]
    return [*head, "| --- | --- | --- | --- | --- |", *lines, ""]
