"""The figures of conversations with a simulated user as every presenter shows them.

One list of (name, value) per model or task, named as the gates name them
(``conversation.turns.p90``, ``conversation.goal_met`` a rate, ``conversation.pass^3``),
so a JUnit property, a report cell and a gate can be matched by eye; one table for the
Markdown export and the report. The numbers are summary.json's
(:mod:`bat.evaluation.stats`): nothing is computed here.
"""

from __future__ import annotations

from bat.evaluation.log.episode import CONVERSATION_ENDS
from bat.evaluation.log.summary import ConversationFigures
from bat.figures import MISSING, integer, number, percent

# How the endings read in a table's header.
ENDING_TITLES = {
    "goal_met": "Goal met",
    "stopped_unmet": "Stopped unmet",
    "max_turns": "Max turns",
    "agent_ended": "Agent ended",
}
TABLE_HEADER = [
    "Conversations",
    "pass^k",
    "Turns mean / p50 / p90 / max",
    *(ENDING_TITLES[end] for end in CONVERSATION_ENDS),
    "User model tokens",
]


def figures(found: ConversationFigures) -> list[tuple[str, float | int | None]]:
    """Every figure, named as a gate names it (counts of endings as ``ended.KIND``)."""
    named: list[tuple[str, float | int | None]] = [
        ("conversation.tasks", found.tasks),
        ("conversation.conversations", found.conversations),
        ("conversation.infra_failures", found.infra_failures),
        ("conversation.passed", found.passed),
        ("conversation.pass_rate", found.pass_rate),
        ("conversation.pass_at_k", found.pass_at_k),
        ("conversation.pass_hat_k", found.pass_hat_k),
    ]
    named += [(f"conversation.pass@{k}", value) for k, value in found.pass_at.items()]
    named += [(f"conversation.pass^{k}", value) for k, value in found.pass_hat.items()]
    named += [(f"conversation.turns.{key}", getattr(found.turns, key)) for key in _TURNS]
    named += [(f"conversation.{end}", rate) for end, rate in found.ended_rate.items()]
    named += [(f"conversation.ended.{end}", n) for end, n in found.ended.items()]
    tokens = found.user_tokens
    named += [
        ("conversation.user_tokens.prompt", tokens.prompt_tokens),
        ("conversation.user_tokens.completion", tokens.completion_tokens),
        ("conversation.user_tokens.total", tokens.total_tokens),
    ]
    return named


_TURNS = ("mean", "p50", "p90", "max")


def table_cells(found: ConversationFigures) -> list[str]:
    """One row of the "Simulated users" table (:data:`TABLE_HEADER`), as text."""
    infra = f" (+{found.infra_failures} infra)" if found.infra_failures else ""
    turns = " / ".join(_turns(getattr(found.turns, key)) for key in _TURNS)
    endings = [
        f"{found.ended[end]} ({percent(found.ended_rate[end])})" for end in CONVERSATION_ENDS
    ]
    return [
        f"{found.conversations}{infra}",
        percent(found.pass_hat_k),
        turns,
        *endings,
        integer(found.user_tokens.total_tokens),
    ]


def _turns(value: float | None) -> str:
    return MISSING if value is None else number(value)
