"""What each page of the viewer shows, read from the run folders (no web library here).

Everything is read through the log layer (:mod:`bat.evaluation.log`); nothing here
computes a statistic (the figures are metrics.json's) and nothing is written. Every name
that comes from a URL is checked here before any file is opened: a run is a folder right
under the served folder holding a run.json, a model one run.json lists, an episode a
file of that model's ``episodes/`` with an episode's name; anything else, or anything
reached through a symbolic link, is "not found" (None).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation.log import batcli, layout, store
from bat.evaluation.log import card as cards
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import EpisodeResult
from bat.evaluation.log.gates import GatesFile
from bat.evaluation.log.summary import ConversationFigures, CostFigures
from bat.evaluation.present.cost_view import (
    card_prices,
    episode_parts,
    figures_cells,
    illustrative,
)
from bat.evaluation.present.view.watch import OUTCOMES, Found, cell_id, outcome_of
from bat.figures import MISSING, integer, interval, number, percent
from bat.numbers import whole_number

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")  # a run id or a model folder's name
# An episode file's name: its stem is TaskSpec.file_stem (``[A-Za-z0-9._-]``, no leading
# dot), which may begin with ``-`` (task ``-x``) or hold ``..`` (task ``a..b``): one path
# component either way, since it has no ``/`` and is neither ``.`` nor ``..``.
_EPISODE_FILE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*__try[0-9]+\.json\Z")


# --- resolving names from URLs --------------------------------------------------------------


def _inside(folder: Path, name: str, *, pattern: re.Pattern = _NAME) -> Path | None:
    """``folder / name`` when ``name`` is one plain name of a real (unlinked) entry."""
    if not pattern.match(name) or (pattern is _NAME and ".." in name):
        return None
    path = folder / name
    if path.is_symlink() or not path.exists():
        return None
    try:
        if path.resolve().parent != folder.resolve():
            return None
    except OSError:
        return None
    return path


def find_run(folder: Path, run_id: str) -> Path | None:
    """The run ``run_id`` right under ``folder``, or None."""
    path = _inside(folder, run_id)
    if path is None:
        return None
    return path if layout.is_run_folder(path) or batcli.is_run_folder(path) else None


def find_model(run_dir: Path, record: rundir.RunRecord, label: str) -> tuple[int, Path] | None:
    """The index and folder of the model run.json lists under ``label``, or None."""
    for index, model in enumerate(record.models):
        if model.dir != label:
            continue
        try:
            path = rundir.model_dir(run_dir, model, index)
        except InputError:
            return None
        return (index, path) if _inside(run_dir, label) is not None else None
    return None


def find_episode(model_dir: Path, name: str) -> Path | None:
    """The episode file ``name`` of a model folder, or None."""
    if not layout.EPISODE_NAME.match(name) or not _EPISODE_FILE.match(name):
        return None
    folder = layout.episodes_dir(model_dir)
    if folder.is_symlink() or not folder.is_dir():
        return None
    path = _inside(folder, name, pattern=_EPISODE_FILE)
    return path if path is not None and path.is_file() else None


def run_folders(folder: Path) -> list[Path]:
    """Every run right under ``folder``, the latest first (run ids start with the time)."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if find_run(folder, p.name) is not None]
    return sorted(found, key=lambda p: p.name, reverse=True)


def run_signature(run_dir: Path) -> tuple:
    """When the files of a run that its page shows beside the episodes last changed:
    run.json, gates.json, the card, the dataset snapshot, each model's summaries."""
    stamps = []
    for path in (
        layout.run_file(run_dir),
        layout.gates_file(run_dir),
        layout.card_file(run_dir),
        layout.tasks_snapshot(run_dir),
        *run_dir.glob("*/summary.json"),
        *run_dir.glob("*/metrics.json"),
    ):
        try:
            found = path.stat()
        except OSError:
            stamps.append((path.name, None))
            continue
        stamps.append((str(path), found.st_size, found.st_mtime_ns))
    return tuple(stamps)


def runs_signature(folder: Path) -> str:
    """A digest of what the runs page shows at a glance: which runs there are, and when
    each run.json, summary or gates file last changed (not every episode: the runs page
    would reload all the time during a run)."""
    import hashlib

    parts = []
    for run_dir in run_folders(folder):
        for path in (
            layout.run_file(run_dir),
            layout.gates_file(run_dir),
            *run_dir.glob("*/summary.json"),
        ):
            try:
                parts.append(f"{path.relative_to(folder)}:{path.stat().st_mtime_ns}")
            except OSError:
                continue
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@dataclass
class Counts:
    """A model's episodes so far, by outcome (the latest record of each cell)."""

    done: int = 0
    expected: int = 0
    by_outcome: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))

    @property
    def progress(self) -> int:
        """Percent done, for the progress bar."""
        return 0 if not self.expected else min(100, round(100 * self.done / self.expected))


@dataclass
class ModelView:
    index: int
    label: str
    status: str
    reason: str | None
    counts: Counts
    figures: dict[str, str] | None  # from metrics.json, when the model is summarized
    problem: str | None = None  # why its results could not be read
    rows: list[dict[str, Any]] = field(default_factory=list)  # the task × attempt grid
    name: str = ""  # the model's label (run.json's), shown; ``label`` is its folder (URLs)

    @property
    def shown(self) -> str:
        return self.name or self.label


def _figures(model_dir: Path) -> tuple[dict[str, str] | None, str | None]:
    """The headline figures of a summarized model, or why they cannot be read."""
    if not layout.has_summary(model_dir) or not layout.metrics_file(model_dir).is_file():
        return None, None
    try:
        results = store.read_results(model_dir)
    except InputError as exc:
        return None, exc.message
    stats = results.metrics.summary
    k = results.summary.k
    return {
        "episodes": str(stats.episodes),
        "passed": str(stats.passed),
        "pass_rate": percent(stats.pass_rate),
        "interval": interval(stats.pass_rate_ci95),
        "pass_at_k": f"{percent(stats.pass_at_k)} (k={k})",
        "pass_hat_k": f"{percent(stats.pass_hat_k)} (k={k})",
        "infra": str(stats.infra_failures),
        "agent_errors": str(stats.agent_errors_total),
        **_conversation_figures(results.summary.conversation),
        **_cost_figures(stats.cost),
    }, None


def _cost_figures(found: CostFigures | None) -> dict[str, str]:
    """The model's cost figures of the run page (none for a run without cost)."""
    if found is None:
        return {}
    cells = figures_cells(found)
    return {
        "cost_total": cells["total"],
        "cost_per_episode": cells["per_episode"],
        "cost_p90": cells["p90"],
        "cost_per_pass": cells["per_pass"],
        "cost_parts": cells["parts"],
        "cost_unpriced": ", ".join(cells["unpriced"]),
    }


def _conversation_figures(found: ConversationFigures | None) -> dict[str, str]:
    """The simulated users' figures of the run page (none without simulated users)."""
    if found is None:
        return {}
    turns = found.turns
    return {
        "conversations": str(found.conversations),
        "conversation_pass_hat_k": percent(found.pass_hat_k),
        "turns": " / ".join(MISSING if v is None else number(v) for v in (turns.p50, turns.p90)),
        "endings": ", ".join(f"{n} {end.replace('_', ' ')}" for end, n in found.ended.items() if n)
        or MISSING,
        "user_tokens": integer(found.user_tokens.total_tokens),
    }


def _counts(latest: list[Found], label: str, expected: int) -> Counts:
    counts = Counts(expected=expected)
    for entry in latest:
        if entry.model == label:
            counts.done += 1
            counts.by_outcome[entry.outcome] += 1
    return counts


def _gate_counts(gates: GatesFile | None) -> dict[str, Any] | None:
    if gates is None:
        return None
    return {
        "passed": sum(g.passed for g in gates.gates),
        "failed": len(gates.failed),
        "all_passed": gates.passed,
        "gates": gates.gates,
    }


def _read_gates(run_dir: Path) -> GatesFile | None:
    from bat.evaluation.present import gates

    return gates.read(run_dir)


# --- the runs page ---------------------------------------------------------------------------


@dataclass
class RunView:
    run_id: str
    name: str | None = None
    status: str = "unknown"
    started_at: str | None = None
    ended_at: str | None = None
    k: int = 1
    tasks: int = 0
    models: list[ModelView] = field(default_factory=list)
    gates: dict[str, Any] | None = None
    problem: str | None = None  # run.json could not be read
    next_event: int = 0  # the entries of the run's watch the counts and grid were made of
    card: Any = None
    record: Any = None
    matches: Any = None  # the filters' episodes (:class:`Matches`), with the grid
    grid_page: int = 1  # the page of the grid's task rows shown
    grid_pages: int = 1
    grid_first: int = 0  # the rows shown: from grid_first (counted from 0) to grid_last
    grid_last: int = 0
    grid_rows: int = 0  # the rows in all
    illustrative_prices: bool = False  # the card says some price is made up (the demo's)


def runs_page(folder: Path, watch_of: Any) -> list[RunView]:
    """Every run under ``folder``, with its models' figures (``watch_of(run_dir)`` gives
    the run's :class:`RunWatch`, for the counts of a model not summarized yet: a run
    whose models are all summarized is shown from its metrics.json alone, without
    reading its episodes)."""
    return [run_view(run_dir, watch_of, grid=False) for run_dir in run_folders(folder)]


def run_view(
    run_dir: Path, watch_of: Any, *, grid: bool, filters: Filters | None = None
) -> RunView:
    """One run: its record, models, counts and gates (and the grid, with ``grid``;
    with ``filters``, only the models and task rows they keep, and the list of the
    episodes they match)."""
    view = RunView(run_id=run_dir.name)
    try:
        record = batcli.read_record(run_dir)
    except InputError as exc:
        view.problem = exc.message
        return view
    summarized = all(
        layout.has_summary(run_dir / model.dir)
        and layout.metrics_file(run_dir / model.dir).is_file()
        for model in record.models
    )
    latest: list[Found] = []
    watch = watch_of(run_dir)
    if grid or record.status == "running" or not summarized:
        watch.refresh()
        view.next_event, latest = watch.latest()
    view.record = record
    view.name = record.run_name
    view.status = record.status
    view.started_at = record.started_at
    view.ended_at = record.ended_at
    view.k = record.k
    view.tasks = len(record.tasks)
    view.gates = _gate_counts(_read_gates(run_dir))
    if grid:
        try:
            view.card = cards.read_card(run_dir)
        except InputError:
            view.card = None
        view.illustrative_prices = illustrative(card_prices(run_dir))
    for index, model in enumerate(record.models):
        counts = _counts(latest, model.dir, len(record.tasks) * record.k)
        try:
            model_dir: Path | None = rundir.model_dir(run_dir, model, index)
        except InputError as exc:
            model_dir, problem = None, exc.message
            figures = None
        else:
            paths = [layout.metrics_file(model_dir), layout.summary_file(model_dir)]
            figures, problem = watch.memo(
                f"figures {model.dir}", paths, functools.partial(_figures, model_dir)
            )
        shown = ModelView(index, model.dir, model.status, model.reason, counts, figures, problem)
        shown.name = model.label
        if grid:
            shown.rows = _grid(record, index, model.dir, latest)
        view.models.append(shown)
    if grid:
        filters = filters or Filters()
        tags = watch.memo("tags", [layout.tasks_snapshot(run_dir)], lambda: _task_tags(run_dir))
        view.matches = _matching(record, latest, filters, tags)
        if filters.active:
            keep = view.matches
            view.models = [m for m in view.models if not filters.model or m.label == filters.model]
            for shown in view.models:
                shown.rows = [r for r in shown.rows if keep.row_kept(str(r["task"]))]
        _page_the_grid(view, filters.grid)
    return view


def _page_the_grid(view: RunView, page: int) -> None:
    """Keep one page of ``GRID_ROWS`` task rows of every model (the same rows for each)."""
    view.grid_rows = max((len(m.rows) for m in view.models), default=0)
    view.grid_pages = max(1, -(-view.grid_rows // GRID_ROWS))
    view.grid_page = min(page, view.grid_pages)
    view.grid_first = (view.grid_page - 1) * GRID_ROWS
    view.grid_last = min(view.grid_first + GRID_ROWS, view.grid_rows)
    for shown in view.models:
        shown.rows = shown.rows[view.grid_first : view.grid_first + GRID_ROWS]
        for row in shown.rows:  # only the cells shown read their hover text
            for cell in row["cells"]:
                if cell["found"] is not None:
                    cell["found"] = {"data": cell["found"].data}


def _grid(
    record: rundir.RunRecord, index: int, label: str, latest: list[Found]
) -> list[dict[str, Any]]:
    """The task × attempt rows of one model: each cell empty (not run yet) or filled."""
    cells: dict[str, Found] = {}
    extra: dict[str, dict[int, Found]] = {}  # episodes of tasks run.json does not list
    rows = {task: n for n, task in enumerate(record.tasks)}
    for entry in latest:
        if entry.model != label:
            continue
        row = rows.get(entry.task)
        if row is not None:
            cells[cell_id(index, row, entry.attempt)] = entry
        else:
            extra.setdefault(entry.task, {})[entry.attempt] = entry
    rows = []
    for row, task in enumerate(record.tasks):
        row_cells = []
        for attempt in range(1, record.k + 1):
            cid = cell_id(index, row, attempt)
            row_cells.append({"id": cid, "attempt": attempt, "found": cells.get(cid)})
        rows.append({"task": task, "cells": row_cells})
    for task, attempts in extra.items():
        row_cells = [
            {"id": None, "attempt": n, "found": attempts.get(n)}
            for n in range(1, max(record.k, *attempts) + 1)
        ]
        rows.append({"task": task, "cells": row_cells})
    return rows


# --- the episode page ------------------------------------------------------------------------


def as_json(value: Any) -> str:
    """A value for a <pre>: JSON when it is data, the text itself when it is text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass
class EpisodeView:
    run_id: str
    model: str
    name: str
    episode: EpisodeResult | None
    outcome: str = "unreadable"
    outcome_text: str = OUTCOMES["unreadable"]
    problem: str | None = None
    dimensions: list[dict[str, Any]] = field(default_factory=list)
    # The task's natural-language assertions as the judges decided them (empty: none).
    assertions: list[dict[str, Any]] = field(default_factory=list)
    several_judges: bool = False  # an assertion was put to more than one judge
    assertions_in_verdict: bool = False  # they are checks of the verdict too (assertion:N)
    cost: list[tuple[str, str]] = field(default_factory=list)  # (payer, amount), total last
    illustrative_prices: bool = False  # the run's card says some price is made up


# An assertion's decision as the page words it, and the class that colours it.
DECISIONS = {True: ("pass", "passed"), False: ("fail", "failed"), None: ("undecided", "undecided")}


def episode_page(run_dir: Path, model: str, path: Path) -> EpisodeView:
    view = EpisodeView(run_dir.name, model, path.name, None)
    try:
        episode = store.read_any_episode(path)
    except InputError as exc:
        view.problem = exc.message
        return view
    view.episode = episode
    outcome, view.outcome_text = outcome_of(episode)
    view.outcome = outcome.word
    view.cost = episode_parts(episode.cost)
    view.illustrative_prices = bool(view.cost) and illustrative(card_prices(run_dir))
    dimensions = episode.scores.dimensions if episode.scores else {}
    for name, value in dimensions.items():
        view.dimensions.append(
            {
                "name": name,
                "score": value.score,
                "reasoning": value.reasoning,
                "per_judge": value.per_judge,
                "disagreement": value.disagreement,
            }
        )
    for index, item in enumerate(episode.scores.assertions if episode.scores else []):
        css, word = DECISIONS[item.passed]
        view.assertions.append(
            {
                "index": index,
                "assertion": item.assertion,
                "css": css,
                "word": word,
                "reason": item.reason,
                "per_judge": [
                    (judge, DECISIONS[said][1]) for judge, said in item.per_judge.items()
                ],
            }
        )
        view.several_judges |= len(item.per_judge) > 1
    checks = episode.verdict.checks if episode.verdict else []
    view.assertions_in_verdict = any(c.name.startswith("assertion:") for c in checks)
    return view


# --- filters on the run page -----------------------------------------------------------------

PAGE_SIZE = 100  # matching episodes listed on a page
GRID_ROWS = 100  # task rows of the grid on a page: a run of 10,000 tasks stays usable
_LONGEST = 200  # characters kept of a filter's value


@dataclass(frozen=True)
class Filters:
    """The run page's filters, from its query string (a plain GET form)."""

    model: str = ""
    task: str = ""  # an id or a glob (fnmatch: * ? [...])
    tag: str = ""
    status: str = ""  # an outcome: pass, fail, error, infra, unreadable
    error: str = ""  # an infrastructure failure's or agent error's kind
    q: str = ""  # words looked for in the answers
    page: int = 1  # of the matching episodes
    grid: int = 1  # of the grid's task rows (GRID_ROWS a page)

    KEYS = ("model", "task", "tag", "status", "error", "q")

    @classmethod
    def of(cls, params: Any) -> Filters:
        """The filters a query string asks for; ``ValueError`` naming ``page`` or ``grid``
        when one is given but is not a whole number from 1 (an empty one is page 1)."""
        values = {key: str(params.get(key, "") or "").strip()[:_LONGEST] for key in cls.KEYS}
        return cls(**values, page=_page(params, "page"), grid=_page(params, "grid"))

    @property
    def active(self) -> bool:
        return any(getattr(self, key) for key in self.KEYS)

    def query(self, page: int | None = None, grid: int | None = None) -> str:
        """The query string of these filters, at ``page`` of the matches and ``grid`` of
        the grid (each: as now, when not given; the first page is left out)."""
        from urllib.parse import urlencode

        pairs = [(key, getattr(self, key)) for key in self.KEYS if getattr(self, key)]
        for key, value in (("page", page or self.page), ("grid", grid or self.grid)):
            if value > 1:
                pairs.append((key, str(value)))
        return urlencode(pairs)


def _page(params: Any, key: str) -> int:
    """A page number of the query string, by the one rule of :mod:`bat.numbers` (a page
    past the last one shows the last one)."""
    text = str(params.get(key, "") or "").strip()
    if not text:
        return 1
    try:
        return whole_number(text, lowest=1)
    except ValueError as exc:
        raise ValueError(f"?{key}=: {exc}") from None


@dataclass
class Matches:
    """What the filters keep: the episodes (one page of them) and the form's choices."""

    filters: Filters
    total: int = 0
    page: int = 1
    pages: int = 1
    shown: list[dict[str, Any]] = field(default_factory=list)
    models: list[str] = field(default_factory=list)  # their folders (the filter's values)
    model_labels: dict[str, str] = field(default_factory=dict)  # folder -> label, shown
    tags: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    task_tags: dict[str, frozenset[str]] = field(default_factory=dict)
    known_tasks: frozenset[str] = (
        frozenset()
    )  # the run's task ids (a plain word naming none: *WORD*)

    def row_kept(self, task: str) -> bool:
        """A task row the task and tag filters keep."""
        from bat.evaluation.inputs.task_glob import task_matcher

        wanted = self.filters
        if wanted.task and not task_matcher(wanted.task, self.known_tasks)(task):
            return False
        return not wanted.tag or wanted.tag in self.task_tags.get(task, frozenset())


def _task_tags(run_dir: Path) -> dict[str, frozenset[str]]:
    """Each task's tags (and category), from the tasks as they were run (none without)."""
    from bat.evaluation.inputs.dataset import load_dataset

    snapshot = layout.tasks_snapshot(run_dir)
    if snapshot.is_symlink() or not snapshot.is_file():
        return {}
    try:
        dataset = load_dataset(snapshot, unknown_keys="warn")  # its tags only
    except InputError:
        return {}
    return {task.id: frozenset(task.all_tags) for task in dataset.tasks}


def _excerpt(text: str, words: str, width: int = 80) -> str:
    at = text.casefold().find(words.casefold())
    start = max(at - width, 0)
    end = min(at + len(words) + width, len(text))
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _matching(
    record: rundir.RunRecord,
    latest: list[Found],
    filters: Filters,
    task_tags: dict[str, frozenset[str]],
) -> Matches:
    """The latest episode of each cell that every filter keeps, in grid order. A search
    reads the answers from the episode files (only of the episodes the other filters
    keep): the viewer keeps no answer in memory."""
    found = Matches(filters, models=[m.dir for m in record.models])
    found.model_labels = {m.dir: m.label for m in record.models}
    found.known_tasks = frozenset(record.tasks) | {entry.task for entry in latest}
    found.task_tags = task_tags
    found.tags = sorted({tag for tags in found.task_tags.values() for tag in tags})
    found.errors = sorted({str(e.error) for e in latest if e.error})
    if not filters.active:
        return found
    rows = {task: n for n, task in enumerate(record.tasks)}
    wanted = filters.q.casefold()
    kept: list[tuple[Found, str | None]] = []
    for entry in latest:
        if filters.model and entry.model != filters.model:
            continue
        if not found.row_kept(entry.task):
            continue
        if filters.status and entry.outcome != filters.status:
            continue
        if filters.error and entry.error != filters.error:
            continue
        excerpt = None
        if filters.q:
            answer = entry.answer()
            if wanted not in answer.casefold():
                continue
            excerpt = _excerpt(answer, filters.q)
        kept.append((entry, excerpt))
    kept.sort(
        key=lambda pair: (
            pair[0].model_index,
            rows.get(pair[0].task, len(rows)),
            pair[0].task,
            pair[0].attempt,
        )
    )
    found.total = len(kept)
    found.pages = max(1, -(-len(kept) // PAGE_SIZE))
    found.page = min(filters.page, found.pages)
    page = kept[(found.page - 1) * PAGE_SIZE : found.page * PAGE_SIZE]
    found.shown = [{**entry.data, "excerpt": excerpt} for entry, excerpt in page]
    return found


# --- the charts page -------------------------------------------------------------------------


@dataclass
class ChartFile:
    name: str  # eval.plot's name of the chart, its file ``<name>.svg``
    modified: str  # when eval.plot wrote it (UTC)


def chart_files(folder: Path) -> list[ChartFile]:
    """The charts ``eval.plot`` drew into ``folder`` (regular files, not links), in its
    order: the same figures as report.html, over every run of the folder."""
    from datetime import UTC, datetime

    from bat.evaluation.present.plot.specs import CHART_NAMES

    found = []
    for name in CHART_NAMES:
        path = chart_file(folder, f"{name}.svg")
        if path is not None:
            stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC)
            found.append(ChartFile(name, stamp.strftime("%Y-%m-%d %H:%M:%S UTC")))
    return found


def chart_file(folder: Path, file: str) -> Path | None:
    """``folder/<file>`` when ``file`` is one of eval.plot's chart files (``NAME.svg`` or
    ``NAME.png``) and a regular file there; else None."""
    from bat.evaluation.present.plot.specs import CHART_NAMES

    stem, _, suffix = file.rpartition(".")
    if stem not in CHART_NAMES or suffix not in ("svg", "png"):
        return None
    path = _inside(folder, file)
    return path if path is not None and path.is_file() else None


# --- the compare page ------------------------------------------------------------------------


@dataclass
class Side:
    """One side of a comparison: a summarized model of a run."""

    run_id: str
    model: str  # the model's folder (in the key)
    folder: Path
    label: str = ""  # the model's label, shown

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.model}"


def comparable_sides(folder: Path) -> list[Side]:
    """Every summarized model of every run under ``folder``, the latest run first."""
    sides = []
    for run_dir in run_folders(folder):
        try:
            record = batcli.read_record(run_dir)
        except InputError:
            continue
        for model in record.models:
            found = find_model(run_dir, record, model.dir)
            if found is not None and layout.has_summary(found[1]):
                sides.append(Side(run_dir.name, model.dir, found[1], model.label))
    return sides


def find_side(folder: Path, key: str) -> Side | None:
    """The side ``RUN/MODEL`` (or ``RUN`` of a one-model run) names, or None."""
    run_id, _, model = key.partition("/")
    run_dir = find_run(folder, run_id)
    if run_dir is None:
        return None
    try:
        record = batcli.read_record(run_dir)
    except InputError:
        return None
    if not model:
        if len(record.models) != 1:
            return None
        model = record.models[0].dir
    found = find_model(run_dir, record, model)
    if found is None or not layout.has_summary(found[1]):
        return None
    return Side(run_dir.name, model, found[1], record.models[found[0]].label)


_FLIP_ORDER = {"regressed": 0, "improved": 1}


def compare_page(a: Side, b: Side) -> dict[str, Any]:
    """``eval.compare``'s data for two sides, the flipped tasks first (regressions, then
    improvements, then the largest drops), or the problem that kept it from being read."""
    from bat.evaluation.present.compare import card_warnings, compare

    try:
        data = compare(a.folder, b.folder)
    except InputError as exc:
        return {"problem": exc.message}
    order = {task["task_id"]: n for n, task in enumerate(data["tasks"])}
    data["tasks"] = sorted(
        data["tasks"],
        key=lambda t: (
            _FLIP_ORDER.get(t["flip"] or "", 2),
            t["change"] if t["change"] is not None else 2.0,
            order[t["task_id"]],
        ),
    )
    data["warnings"] = card_warnings(a.folder, b.folder)
    data["problem"] = None
    return data
