"""CSV: one row per episode, for spreadsheets and scripts (``--to csv:PATH``).

Columns: ``run_id, model, task_id, attempt, status, passed, agent_error, infra_failure,
wall_time_s, time_to_first_event_s, cold, prompt_tokens, completion_tokens, total_tokens``
(``cold``: true for an episode left out of the latency figures as its agent's cold start),
then ``judge.<dimension>`` for every judge dimension of the run (empty when an episode
was not scored), then, in a run with simulated users only, ``conversation_ended,
user_turns, simulated_turns, user_tokens`` (how the conversation ended, its user turns,
those the user model wrote, the user model's tokens; empty for a task without a user),
then ``reason`` (why it did not pass; empty when it passed), then, in a run that priced
its episodes only, ``cost.agent, cost.user, cost.judge, cost.total, cost.currency,
cost.unpriced`` (each payer's part, empty when it had no price; ``cost.unpriced`` names
the models with none, ``;``-separated: ``cost.total`` is then a lower bound). The cost
columns come last so every column before keeps its place; a run without cost (an
older bat's) keeps the columns it always had.

Safe to open in a spreadsheet: a text cell starting with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return (which a spreadsheet would run as a formula) is prefixed with
``'``. Written in UTF-8 with the ``csv`` module's quoting (``excel`` dialect).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from bat.evaluation.log.outcome import row_outcome
from bat.evaluation.log.summary import EpisodeRow
from bat.evaluation.present.export.data import RunData

COLUMNS = (
    "run_id",
    "model",
    "task_id",
    "attempt",
    "status",
    "passed",
    "agent_error",
    "infra_failure",
    "wall_time_s",
    "time_to_first_event_s",
    "cold",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    """A cell's text, with ``'`` before one a spreadsheet would read as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class CsvExporter:
    """CSV: one row per episode (status, verdict, errors, time, tokens, judge scores)."""

    def __call__(self, run: RunData, path: Path) -> None:
        from bat.evaluation.present.export import write_text

        write_text(path, render(run))


# Only in a run with simulated users: a run without keeps its columns.
CONVERSATION_COLUMNS = ("conversation_ended", "user_turns", "simulated_turns", "user_tokens")


# Only in a run whose episodes have a cost, last.
COST_COLUMNS = (
    "cost.agent",
    "cost.user",
    "cost.judge",
    "cost.total",
    "cost.currency",
    "cost.unpriced",
)


def header(run: RunData) -> list[str]:
    talked = CONVERSATION_COLUMNS if has_conversations(run) else ()
    priced = COST_COLUMNS if has_cost(run) else ()
    return [*COLUMNS, *(f"judge.{name}" for name in dimensions(run)), *talked, "reason", *priced]


def has_cost(run: RunData) -> bool:
    return any(model.summary.cost is not None for model in run.models)


def _cost_cells(row: EpisodeRow) -> list[object]:
    cost = row.cost
    if cost is None:
        return [""] * len(COST_COLUMNS)
    amounts = [_plain(value) for value in (cost.agent, cost.user, cost.judge, cost.total)]
    return [*amounts, cost.currency, ";".join(cost.unpriced)]


def _plain(amount: float | None) -> str | None:
    """An amount in plain decimals (``0.000044``, not Python's ``4.4e-05``, which some
    spreadsheets read as text); costs are rounded to 10 decimals where computed."""
    if amount is None:
        return None
    return f"{amount:.10f}".rstrip("0").rstrip(".") or "0"


def has_conversations(run: RunData) -> bool:
    return any(model.summary.conversation is not None for model in run.models)


def _conversation_cells(row: EpisodeRow) -> list[object]:
    found = row.conversation
    if found is None:
        return ["", "", "", ""]
    return [
        found.ended or "",
        found.turns,
        found.simulated_turns,
        found.user_tokens.total_tokens,
    ]


def dimensions(run: RunData) -> list[str]:
    """Every judge dimension of the run, in the order first seen."""
    found: dict[str, None] = {}
    for model in run.models:
        for name in model.summary.totals.judge or {}:
            found.setdefault(name, None)
        for row in model.rows:
            for name in row.scores or {}:
                found.setdefault(name, None)
    return list(found)


def render(run: RunData) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header(run))
    judged = dimensions(run)
    talked = has_conversations(run)
    priced = has_cost(run)
    for model in run.models:
        for row in model.rows:
            tokens = row.tokens
            scores = row.scores or {}
            cells = [
                run.run_id,
                model.label,
                row.task_id,
                row.attempt,
                row.status,
                "true" if row_outcome(row).passed else "false",
                row.agent_error or "",
                row.infra_error or "",
                row.wall_time_s,
                "" if row.time_to_first_event_s is None else row.time_to_first_event_s,
                "true" if row.cold else "false",
                tokens.prompt_tokens,
                tokens.completion_tokens,
                tokens.total_tokens,
                *(scores.get(name) for name in judged),
                *(_conversation_cells(row) if talked else []),
                model.reason(row),
                *(_cost_cells(row) if priced else []),
            ]
            writer.writerow([safe_cell(cell) for cell in cells])
    return buffer.getvalue()
