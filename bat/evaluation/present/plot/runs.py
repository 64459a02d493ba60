"""The runs under a folder: each folder holding a ``metrics.json`` is one run.

In a run directory that is one model's folder ``<run-id>/<model>/``. A run's label is
``<model> @ <run id>``, made unique with the folder's relative path when two runs share
both. A :class:`Run` holds the typed files :func:`bat.evaluation.log.store.read_results`
read (bat's of any version, bat-cli 2026.10's) and only hands their values on: no
statistic is computed here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from bat.errors import InputError
from bat.evaluation.log import layout, store
from bat.evaluation.log.summary import (
    CostFigures,
    Distribution,
    EpisodeRow,
    JudgeStats,
    MetricsSummary,
)

# Category colours (Tableau 10, then lighter twins): a run keeps its colour in every chart.
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6",
    "#8cd17d", "#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e",
)  # fmt: skip


@dataclass(frozen=True)
class TaskCount:
    """One task of one run, as summary.json counts it."""

    attempts: int
    passed: int
    infra: int
    rate: float | None  # summary.json's pass_rate of the task


@dataclass
class Run:
    """One model folder's results (``summary.json``, ``metrics.json``) and its label."""

    results: store.ModelResults
    label: str = ""
    index: int = 0
    chart_label: str = ""  # the label as drawn (see specs.chart_labels)

    @property
    def folder(self) -> Path:
        return self.results.folder

    @property
    def model(self) -> str:
        return self.results.model

    @property
    def run_id(self) -> str:
        return self.results.run_id

    @property
    def source(self) -> str:
        return self.results.source

    @property
    def color(self) -> str:
        return PALETTE[self.index % len(PALETTE)]

    @property
    def stats(self) -> MetricsSummary:
        return self.results.metrics.summary

    @property
    def rows(self) -> list[EpisodeRow]:
        return self.results.metrics.per_episode

    @property
    def k(self) -> int:
        return self.results.summary.k

    @property
    def episodes(self) -> int:
        return self.stats.episodes

    @property
    def passed(self) -> int:
        return self.stats.passed

    @property
    def infra_failures(self) -> int:
        return self.stats.infra_failures

    @property
    def vacuous_passes(self) -> int:
        return self.stats.vacuous_passes

    @property
    def agent_errors(self) -> dict[str, int]:
        """Episodes per agent-error kind, only the kinds that occurred."""
        return {kind: n for kind, n in self.stats.agent_errors.items() if n > 0}

    @property
    def pass_rate(self) -> float | None:
        return self.stats.pass_rate

    @property
    def pass_rate_ci95(self) -> tuple[float, float] | None:
        interval = self.stats.pass_rate_ci95
        return (interval[0], interval[1]) if interval and len(interval) == 2 else None

    @property
    def pass_at_k(self) -> float | None:
        return self.stats.pass_at_k

    @property
    def pass_hat_k(self) -> float | None:
        return self.stats.pass_hat_k

    @property
    def pass_hat_curve(self) -> list[tuple[int, float]]:
        """``(k, pass^k)`` for each k metrics.json gives a value for, k ascending."""
        points = [(int(k), v) for k, v in self.stats.pass_hat.items() if v is not None]
        return sorted(points)

    @property
    def latency(self) -> Distribution:
        """The episodes' wall time in seconds."""
        return self.stats.wall_time_s

    @property
    def tokens_per_episode(self) -> tuple[float, float] | None:
        """Mean prompt and completion tokens per episode."""
        tokens = self.stats.tokens
        if tokens.prompt_mean is None or tokens.completion_mean is None:
            return None
        return tokens.prompt_mean, tokens.completion_mean

    @property
    def judge(self) -> dict[str, JudgeStats]:
        """Per judge dimension with at least one score."""
        return {name: s for name, s in (self.stats.judge or {}).items() if s.mean is not None}

    @property
    def cost(self) -> CostFigures | None:
        """What the model's episodes cost (None: none has a cost, an older bat's run)."""
        return self.stats.cost

    @cached_property
    def illustrative_prices(self) -> bool:
        """Whether the run's card says some of its prices are made up (the demo's)."""
        from bat.evaluation.present.cost_view import card_prices, illustrative

        run_dir = self.folder.parent
        return layout.is_run_folder(run_dir) and illustrative(card_prices(run_dir))

    def task_costs(self) -> dict[str, CostFigures]:
        """Per task that has a cost, summary.json's figures."""
        return {t.task_id: t.cost for t in self.results.summary.attempts if t.cost is not None}

    def tasks(self) -> dict[str, TaskCount]:
        """Per task, in summary.json's order (the dataset's)."""
        return {
            task.task_id: TaskCount(
                attempts=task.attempts,
                passed=task.passed,
                infra=task.infra_failures,
                rate=task.pass_rate,
            )
            for task in self.results.summary.attempts
        }


def find_runs(folder: Path, unusable: list[str] | None = None) -> list[Run]:
    """Every folder under ``folder`` (itself included) holding a ``metrics.json``.

    A file that cannot be used is an error; with ``unusable``, it is listed there and
    left out instead (as long as one run is left), so that one broken old run does not
    keep every later run of the folder from being drawn.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder")
    found = store.result_folders(folder)
    if not found:
        raise InputError(
            f"no {layout.METRICS_FILE} in {folder} or any folder under it "
            "(bat eval.summarize writes one per model of a run)"
        )
    runs, problems = [], []
    for model_dir in found:
        try:
            runs.append(Run(store.read_results(model_dir)))
        except InputError as exc:
            problems.append(exc.message)
    if problems and unusable is not None and runs:
        unusable += problems
    elif len(problems) == 1:
        raise InputError(problems[0])
    elif problems:
        raise InputError(f"{len(problems)} {layout.METRICS_FILE} files cannot be used", problems)
    runs.sort(key=lambda run: (run.run_id, run.model, str(run.folder)))
    seen: dict[tuple[str, str], int] = {}
    for run in runs:
        seen[(run.model, run.run_id)] = seen.get((run.model, run.run_id), 0) + 1
    for index, run in enumerate(runs):
        run.index = index
        run.label = f"{run.model} @ {run.run_id}"
        if seen[(run.model, run.run_id)] > 1:
            run.label += f" [{run.folder.relative_to(folder).as_posix()}]"
    return runs


def task_order(runs: Iterable[Run]) -> list[str]:
    """Every task id of the runs, in first-seen order."""
    order: dict[str, None] = {}
    for run in runs:
        for task_id in run.tasks():
            order.setdefault(task_id, None)
    return list(order)


def matches(task_id: str, task_filter: str | None, known: Collection[str] = ()) -> bool:
    """Whether ``--filter`` keeps the task, by the one rule of task filters
    (:mod:`bat.evaluation.inputs.task_glob`); ``known``: every task id charted."""
    from bat.evaluation.inputs.task_glob import task_matcher

    return not task_filter or task_matcher(task_filter, known)(task_id)
