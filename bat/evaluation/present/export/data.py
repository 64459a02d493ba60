"""A run folder as the exporters see it: read once, by the log layer's readers.

The numbers are the summaries' (``summary.json``, ``metrics.json``: computed once by
:mod:`bat.evaluation.stats`); the episode files add what a row does not keep: the
agent's error message, an infrastructure failure's message, the answer. An episode file
that cannot be read is named in :attr:`RunData.unreadable` and its row still exported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation.log import batcli, files, layout, store
from bat.evaluation.log.episode import EpisodeResult
from bat.evaluation.log.outcome import row_outcome
from bat.evaluation.log.run import ModelEntry, RunRecord, read_run
from bat.evaluation.log.summary import EpisodeRow, Metrics, Summary, TaskSummary


@dataclass
class ModelData:
    """One model of the run: its entry in run.json, its summaries and its episodes."""

    label: str
    folder: Path
    summary: Summary
    metrics: Metrics
    entry: ModelEntry | None = None
    episodes: dict[tuple[str, int], EpisodeResult] = field(default_factory=dict)

    @property
    def rows(self) -> list[EpisodeRow]:
        """Every episode's row, in the dataset's task order, then by attempt."""
        return self.metrics.per_episode

    @property
    def tasks(self) -> list[TaskSummary]:
        return self.summary.attempts

    def task_rows(self, task_id: str) -> list[EpisodeRow]:
        return [row for row in self.rows if row.task_id == task_id]

    def episode(self, row: EpisodeRow) -> EpisodeResult | None:
        return self.episodes.get((row.task_id, row.attempt))

    def reason(self, row: EpisodeRow) -> str:
        """Why an episode did not pass, in one line ("" when it passed): the
        infrastructure failure, else the agent's error, else the verdict's reasons."""
        episode = self.episode(row)
        outcome = row_outcome(row)
        if outcome.word == "infra":
            message = episode.infra_error.message if episode and episode.infra_error else ""
            return _joined(f"infrastructure failure ({outcome.infra})", message)
        if outcome.passed:
            return ""
        verdict = row.verdict.reason or (
            episode.verdict.reason if episode and episode.verdict else ""
        )
        if outcome.word == "error":
            error = episode.agent_error if episode else None
            detail = error.message if error else ""
            state = f", task {error.state}" if error and error.state else ""
            if detail and detail in verdict:
                detail = ""  # the verdict already quotes the agent's message
            return _joined(f"agent error {outcome.agent_error}{state}", detail, verdict)
        return verdict or f"status {row.status!r}"

    @property
    def provider(self) -> str | None:
        return self.entry.provider if self.entry else None

    @property
    def model_name(self) -> str:
        return (self.entry.model if self.entry else None) or self.summary.model_name


@dataclass
class RunData:
    """What every exporter reads: the run, its models, its gates when it has them."""

    run_dir: Path
    run_id: str
    record: RunRecord | None  # None for a bat-cli 2026.10 folder (no run.json)
    models: list[ModelData]
    unevaluated: list[ModelEntry] = field(default_factory=list)  # models without summaries
    gates: dict[str, Any] | None = None  # gates.json as written, when present
    unreadable: list[str] = field(default_factory=list)

    @property
    def k(self) -> int:
        if self.record is not None:
            return self.record.k
        return self.models[0].summary.k if self.models else 1


def load_run(run_dir: Path) -> RunData:
    """The run at ``run_dir`` for the exporters; an InputError when it has no summaries
    yet (``bat eval.summarize`` writes them)."""
    run_dir = Path(run_dir)
    record = read_run(run_dir) if layout.is_run_folder(run_dir) else None
    folders = store.summarized_models(run_dir)
    entries = {}
    if record is not None:
        entries = {(run_dir / model.dir).resolve(): model for model in record.models}
    models = []
    unreadable: list[str] = []
    for folder in folders:
        results = store.read_results(folder)
        entry = entries.get(folder.resolve())
        read = batcli.episodes if batcli.is_model_folder(folder) else store.episodes
        episodes = {
            (episode.task_id, episode.attempt): episode for _, episode in read(folder, unreadable)
        }
        label = entry.label if entry else results.summary.model
        models.append(ModelData(label, folder, results.summary, results.metrics, entry, episodes))
    summarized = {folder.resolve() for folder in folders}
    unevaluated = [m for folder, m in entries.items() if folder not in summarized]
    if not models and not any(entry.status == "failed" for entry in unevaluated):
        raise InputError(
            f"{run_dir} has no summaries to export yet "
            f"(write them with: bat eval.summarize --run {run_dir.name})"
        )
    run_id = record.run_id if record else (models[0].summary.run_id or run_dir.name)
    return RunData(
        run_dir, run_id, record, models, unevaluated, _gates(run_dir), unreadable=unreadable
    )


def _gates(run_dir: Path) -> dict[str, Any] | None:
    """gates.json as plain JSON (``{"passed": bool, "gates": [...]}``), or None."""
    path = layout.gates_file(run_dir)
    if not path.is_file():
        return None
    data = files.read_json_object(path)
    if not isinstance(data.get("gates", []), list):
        raise InputError(f"{path} is malformed: 'gates' is not a list")
    return data


def _joined(*parts: str) -> str:
    return ": ".join(" ".join(part.split()) for part in parts if part and part.strip())
