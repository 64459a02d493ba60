"""JSON: the run in one document, for scripts and dashboards (``--to json:PATH``).

``bat.export/1``: the essentials of run.json, the gates (gates.json, when present), and
per model its totals and per-task figures (summary.json's, unchanged) and one row per
episode (metrics.json's numbers plus the reason it did not pass). A model's
``conversation`` holds summary.json's figures of its conversations with a simulated user,
an episode's the ``conversation`` of its metrics.json row (null without a simulated user:
the keys stay the same in every document). A model's ``cost`` holds summary.json's cost
figures, an episode's the ``cost`` of its metrics.json row (each null for a run made
before bat priced episodes; a task's are in its ``tasks`` entry). Keys come in a fixed
order and are only ever added; ``bat eval.schema export.json`` prints the JSON Schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bat.evaluation.log.outcome import row_outcome
from bat.evaluation.log.summary import (
    ConversationFigures,
    CostFigures,
    RowConversation,
    RowCost,
    TaskSummary,
    Totals,
)
from bat.evaluation.present.export.data import ModelData, RunData

EXPORT_SCHEMA = "bat.export/1"


class ExportRun(BaseModel):
    """run.json's essentials (null for a bat-cli 2026.10 folder, which has none)."""

    run_id: str
    run_name: str | None = None
    status: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    dataset: str | None = None
    dataset_sha256: str | None = None
    k: int
    tasks: list[str] = Field(default_factory=list)
    agent_url: str | None = None
    selection: dict[str, Any] | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)


class ExportTokens(BaseModel):
    prompt: int = 0
    completion: int = 0
    total: int = 0


class ExportEpisode(BaseModel):
    """One episode: what happened, and why it did not pass (``reason``, empty if it did)."""

    task_id: str
    attempt: int
    status: str
    passed: bool
    agent_error: str | None = None  # its class (AGENT_ERROR_KINDS)
    infra_failure: str | None = None  # its kind: the episode says nothing of the agent
    wall_time_s: float
    time_to_first_event_s: float | None = None
    cold: bool = False  # left out of the latency figures: its agent's cold start
    tokens: ExportTokens
    scores: dict[str, float | None] | None = None  # judge score per dimension
    reason: str = ""
    conversation: RowConversation | None = None  # a task with a simulated user only
    cost: RowCost | None = None  # null: the run did not price its episodes


class ExportModel(BaseModel):
    label: str
    provider: str | None = None
    model: str | None = None
    status: str  # completed, or failed: could not be evaluated (then no totals)
    reason: str | None = None
    totals: Totals | None = None
    conversation: ConversationFigures | None = None  # a model with simulated users only
    cost: CostFigures | None = None  # null: the run did not price its episodes
    tasks: list[TaskSummary] = Field(default_factory=list)
    episodes: list[ExportEpisode] = Field(default_factory=list)


class ExportDocument(BaseModel):
    """The file ``--to json:PATH`` writes."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(default=EXPORT_SCHEMA, alias="schema")
    run: ExportRun
    gates: dict[str, Any] | None = None
    models: list[ExportModel]
    unreadable: list[str] = Field(default_factory=list)  # episode files left out


class JsonExporter:
    """JSON: run essentials, per-model totals and every episode, in one document."""

    def __call__(self, run: RunData, path: Path) -> None:
        from bat.atomic import json_text
        from bat.evaluation.present.export import write_text

        data = document(run).model_dump(mode="json", by_alias=True)
        write_text(path, json_text(data, what=str(path), indent=1, ensure_ascii=False))


def document(run: RunData) -> ExportDocument:
    record = run.record
    if record is not None:
        head = ExportRun(
            run_id=run.run_id,
            run_name=record.run_name,
            status=record.status,
            started_at=record.started_at,
            ended_at=record.ended_at,
            dataset=record.dataset,
            dataset_sha256=record.dataset_sha256,
            k=record.k,
            tasks=record.tasks,
            agent_url=record.agent_url,
            selection=record.selection,
            versions=record.versions,
        )
    else:
        head = ExportRun(run_id=run.run_id, k=run.k)
    models = [_model(model) for model in run.models]
    models += [
        ExportModel(
            label=entry.label,
            provider=entry.provider,
            model=entry.model,
            status=entry.status,
            reason=entry.reason,
        )
        for entry in run.unevaluated
    ]
    return ExportDocument(run=head, gates=run.gates, models=models, unreadable=run.unreadable)


def _model(model: ModelData) -> ExportModel:
    episodes = [
        ExportEpisode(
            task_id=row.task_id,
            attempt=row.attempt,
            status=row.status,
            passed=row_outcome(row).passed,
            agent_error=row.agent_error,
            infra_failure=row.infra_error,
            wall_time_s=row.wall_time_s,
            time_to_first_event_s=row.time_to_first_event_s,
            cold=row.cold,
            tokens=ExportTokens(
                prompt=row.tokens.prompt_tokens,
                completion=row.tokens.completion_tokens,
                total=row.tokens.total_tokens,
            ),
            scores=row.scores,
            reason=model.reason(row),
            conversation=row.conversation,
            cost=row.cost,
        )
        for row in model.rows
    ]
    return ExportModel(
        label=model.label,
        provider=model.provider,
        model=model.model_name,
        status=model.entry.status if model.entry else "completed",
        reason=model.entry.reason if model.entry else None,
        totals=model.summary.totals,
        conversation=model.summary.conversation,
        cost=model.summary.cost,
        tasks=model.tasks,
        episodes=episodes,
    )
