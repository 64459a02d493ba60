"""Charts of evaluation runs (``bat eval.plot``): find the runs, build the specs, render.

A run is one folder holding a ``metrics.json`` — in a run directory, one model's folder
``<run-id>/<model>/`` — found anywhere under the folder the charts are for. Its label is
``<model> @ <run id>`` (the run folder's name), made unique with the folder's relative
path when two runs share both. The charts are Altair specs fed with plain lists of
dicts (``alt.Data(values=...)``, no pandas), rendered to SVG by vl-convert (in this
process, one converter for every chart) and rasterized from that SVG to PNG:

=================  ==========================================================
``pass_rate``      pass rate per run, with its 95 % Wilson interval
``task_heatmap``   task × run pass rate (narrowed by ``--filter``)
``pass_hat_k``     pass^k against k, one line per run
``latency``        distribution of the episodes' wall time per run
``tokens``         prompt and completion tokens per episode (mean) per run
``judge_scores``   LLM judge scores per dimension (only when some run has them)
=================  ==========================================================

Files from before and after the richer metrics (``pass_rate_ci95``, ``pass_hat``,
``latency_s``, ``judge``, per-episode ``scores``) are read alike: what a file lacks is
computed from its ``per_episode`` rows. Run folders of bat-cli 2026.10 are read too
(:mod:`bat.evaluation.log.batcli` converts them). altair and vl_convert are imported inside the
functions that need them, so ``bat --help`` never loads them.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.atomic import write_bytes_atomic, write_text_atomic
from bat.errors import InputError

METRICS_FILE = "metrics.json"
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"
CHART_NAMES = ("pass_rate", "task_heatmap", "pass_hat_k", "latency", "tokens", "judge_scores")
JUDGE_DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)
PNG_SCALE = 2.0
Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal distribution
# Category colours (Tableau 10, then lighter twins): a run keeps its colour in every chart.
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#a0cbe8",
    "#ffbe7d",
    "#ff9d9a",
    "#86bcb6",
    "#8cd17d",
    "#f1ce63",
    "#d4a6c8",
    "#fabfd2",
    "#d7b5a6",
    "#79706e",
)
LABEL_LIMIT = 60  # columns of a label drawn in a chart (a wide character, 😀 or 東, is 2)


# --- runs -------------------------------------------------------------------------------


@dataclass
class TaskCount:
    """One task of one run: attempts, passes and infrastructure failures."""

    attempts: int = 0
    passed: int = 0
    infra: int = 0

    @property
    def rate(self) -> float | None:
        return self.passed / self.attempts if self.attempts else None


@dataclass
class Run:
    """One folder holding a ``metrics.json`` (and usually ``summary.json``, ``episodes/``)."""

    folder: Path
    model: str
    run_id: str
    metrics: dict[str, Any]
    summary_file: dict[str, Any] | None
    label: str = ""
    index: int = 0
    chart_label: str = ""  # the label as drawn (see chart_labels)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.metrics["per_episode"]

    @property
    def stats(self) -> dict[str, Any]:
        return self.metrics["summary"]

    @property
    def color(self) -> str:
        return PALETTE[self.index % len(PALETTE)]

    # Every figure below prefers the field the metrics file has, and falls back to
    # computing it from the per-episode rows (files written before the field existed).

    def episodes(self) -> int:
        value = _int(self.stats.get("episodes"))
        return len(self.rows) if value is None else value

    def passed(self) -> int:
        value = _int(self.stats.get("passed"))
        return sum(bool(row.get("passed")) for row in self.rows) if value is None else value

    def infra_failures(self) -> int:
        value = _int(self.stats.get("infra_failures"))
        if value is None:
            return sum(row.get("infra_error") is not None for row in self.rows)
        return value

    def agent_errors(self) -> dict[str, int]:
        """Episodes per agent-error kind (only kinds that occurred)."""
        given = self.stats.get("agent_errors")
        if isinstance(given, dict):
            return {str(k): v for k, v in given.items() if isinstance(v, int) and v > 0}
        counts: dict[str, int] = {}
        for row in self.rows:
            kind = row.get("agent_error")
            if isinstance(kind, str):
                counts[kind] = counts.get(kind, 0) + 1
        return counts

    def vacuous_passes(self) -> int:
        value = _int(self.stats.get("vacuous_passes"))
        return sum(bool(row.get("vacuous")) for row in self.rows) if value is None else value

    def pass_rate(self) -> float | None:
        value = _num(self.stats.get("pass_rate"))
        if value is None and self.episodes():
            value = self.passed() / self.episodes()
        return value

    def pass_rate_ci95(self) -> tuple[float, float] | None:
        given = self.stats.get("pass_rate_ci95")
        if isinstance(given, list | tuple) and len(given) == 2:
            low, high = _num(given[0]), _num(given[1])
            if low is not None and high is not None:
                return low, high
        return wilson_interval(self.passed(), self.episodes())

    def tasks(self) -> dict[str, TaskCount]:
        """Per task, in the order of the files (the dataset's order)."""
        counts: dict[str, TaskCount] = {}
        for row in self.rows:
            count = counts.setdefault(str(row["task_id"]), TaskCount())
            count.attempts += 1
            count.passed += bool(row.get("passed"))
            count.infra += row.get("infra_error") is not None
        if counts or not self.summary_file:
            return counts
        for task in self.summary_file.get("tasks") or []:
            if isinstance(task, dict) and "task_id" in task:
                counts[str(task["task_id"])] = TaskCount(
                    attempts=_int(task.get("attempts")) or 0,
                    passed=_int(task.get("passed")) or 0,
                    infra=_int(task.get("infra_failures")) or 0,
                )
        return counts

    def pass_hat_curve(self) -> list[tuple[int, float]]:
        """``(k, pass^k)`` for k from 1 to the most attempts judged of a task."""
        given = self.stats.get("pass_hat")
        if isinstance(given, dict) and given:
            points = []
            for key, value in given.items():
                k, number = _int(key), _num(value)
                if k is not None and k >= 1 and number is not None:
                    points.append((k, number))
            return sorted(points)
        return _pass_hat_from_rows(self.rows)

    def pass_at_k(self) -> float | None:
        return _num(self.stats.get("pass_at_k"))

    def pass_hat_k(self) -> float | None:
        return _num(self.stats.get("pass_hat_k"))

    def k(self) -> int | None:
        return _int(self.stats.get("k"))

    def wall_times(self) -> list[float]:
        return [v for v in (_num(row.get("wall_time_s")) for row in self.rows) if v is not None]

    def latency(self) -> dict[str, float | None]:
        """``p50``, ``p90``, ``p99``, ``mean``, ``max`` of the episodes' wall time (s)."""
        given = self.stats.get("latency_s")
        if isinstance(given, dict):
            return {key: _num(given.get(key)) for key in ("p50", "p90", "p99", "mean", "max")}
        values = sorted(self.wall_times())
        if not values:
            return dict.fromkeys(("p50", "p90", "p99", "mean", "max"))
        return {
            "p50": statistics.median(values),
            "p90": _nearest_rank(values, 0.90),
            "p99": _nearest_rank(values, 0.99),
            "mean": statistics.fmean(values),
            "max": values[-1],
        }

    def tokens_per_episode(self) -> tuple[float, float] | None:
        """Mean prompt and completion tokens per episode."""
        count = self.episodes()
        if not count:
            return None
        tokens = self.stats.get("tokens")
        prompt = completion = None
        if isinstance(tokens, dict):
            prompt, completion = (
                _num(tokens.get("prompt_total")),
                _num(tokens.get("completion_total")),
            )
        if prompt is None:
            prompt = sum(_num(row.get("prompt_tokens")) or 0 for row in self.rows)
        if completion is None:
            completion = sum(_num(row.get("completion_tokens")) or 0 for row in self.rows)
        return prompt / count, completion / count

    def judge(self) -> dict[str, dict[str, float | int | None]]:
        """Per dimension with at least one score: ``mean``, ``min``, ``max``, ``count``."""
        given = self.stats.get("judge")
        found: dict[str, dict[str, float | int | None]] = {}
        if isinstance(given, dict):
            for dimension, stats in given.items():
                if isinstance(stats, dict) and _num(stats.get("mean")) is not None:
                    found[str(dimension)] = {
                        "mean": _num(stats.get("mean")),
                        "min": _num(stats.get("min")),
                        "max": _num(stats.get("max")),
                        "count": _int(stats.get("count")),
                    }
            return found
        values: dict[str, list[float]] = {}
        for row in self.rows:
            scores = row.get("scores")
            if isinstance(scores, dict):
                for dimension, value in scores.items():
                    number = _num(value)
                    if number is not None:
                        values.setdefault(str(dimension), []).append(number)
        for dimension, numbers in values.items():
            found[dimension] = {
                "mean": statistics.fmean(numbers),
                "min": min(numbers),
                "max": max(numbers),
                "count": len(numbers),
            }
        return found


def find_runs(folder: Path, unusable: list[str] | None = None) -> list[Run]:
    """Every folder under ``folder`` (itself included) holding a ``metrics.json``.

    A file that cannot be used is an error; with ``unusable``, it is listed there and
    left out instead (as long as one run is left), so that one broken old run does not
    keep every later run of the folder from being drawn.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder")
    paths = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if METRICS_FILE in files:
            paths.append(Path(root) / METRICS_FILE)
    if not paths:
        raise InputError(
            f"no {METRICS_FILE} in {folder} or any folder under it "
            "(bat eval.summarize writes one per model of a run)"
        )
    runs, problems = [], []
    for path in paths:
        try:
            runs.append(_load_run(path))
        except InputError as exc:
            problems.append(exc.message)
    if problems and unusable is not None and runs:
        unusable += problems
    elif len(problems) == 1:
        raise InputError(problems[0])
    elif problems:
        raise InputError(f"{len(problems)} {METRICS_FILE} files cannot be used", problems)
    runs.sort(key=lambda run: (run.run_id, run.model, str(run.folder)))
    seen: dict[tuple[str, str], int] = {}
    for run in runs:
        seen[(run.model, run.run_id)] = seen.get((run.model, run.run_id), 0) + 1
    for index, run in enumerate(runs):
        run.index = index
        run.label = f"{run.model} @ {run.run_id}"
        if seen[(run.model, run.run_id)] > 1:
            where = run.folder.relative_to(folder).as_posix()
            run.label += f" [{where}]"
    return runs


def _load_run(path: Path) -> Run:  # TEMPORARY SHIM (not committed)
    from bat.evaluation.log import store
    from bat.evaluation.log.summary import dump

    found = store.read_results(path.parent)
    metrics = dump(found.metrics)
    for row in metrics["per_episode"]:
        row["passed"] = row["success"]
        row.update(
            prompt_tokens=row["tokens"]["prompt_tokens"],
            completion_tokens=row["tokens"]["completion_tokens"],
        )
    metrics["summary"].pop("tokens")
    summary = dump(found.summary)
    summary["tasks"] = summary["attempts"]
    return Run(path.parent, found.model, found.run_id, metrics, summary)


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object; any other content is an :class:`InputError`."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is malformed: expected a JSON object")
    if _SURROGATE_ESCAPE.search(text):
        data = without_surrogates(data)
    return data


# JSON may spell half of a UTF-16 pair alone ("\ud800"); Python then holds a string that
# cannot be written as UTF-8 at all, so no label, table or file could be made of it.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


def task_order(runs: Iterable[Run]) -> list[str]:
    """Every task id of the runs, in first-seen order."""
    order: dict[str, None] = {}
    for run in runs:
        for task_id in run.tasks():
            order.setdefault(task_id, None)
    return list(order)


def matches(task_id: str, task_filter: str | None) -> bool:
    """Whether ``--filter`` keeps the task: a plain, case-sensitive substring test."""
    return not task_filter or task_filter in task_id


# --- statistics -------------------------------------------------------------------------


def wilson_interval(passed: int, total: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``passed`` out of ``total`` (95 % by default)."""
    if total <= 0:
        return None
    p = passed / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _pass_hat_from_rows(rows: list[dict[str, Any]]) -> list[tuple[int, float]]:
    from bat.evaluation.metrics import pass_hat_k

    judged: dict[str, list[int]] = {}
    for row in rows:
        if row.get("infra_error") is None:
            tally = judged.setdefault(str(row["task_id"]), [0, 0])
            tally[0] += 1
            tally[1] += bool(row.get("passed"))
    most = max((n for n, _ in judged.values()), default=0)
    points = []
    for k in range(1, most + 1):
        values = [pass_hat_k(n, c, k) for n, c in judged.values()]
        points.append((k, statistics.fmean(v for v in values if v is not None)))
    return points


def _nearest_rank(ordered: list[float], quantile: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(quantile * len(ordered)) - 1))]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


# --- chart specs ------------------------------------------------------------------------


@dataclass
class Chart:
    """One chart: its file stem, title, Vega-Lite spec and, once rendered, SVG and PNG."""

    name: str
    title: str
    spec: dict[str, Any]
    svg: str = ""
    png: bytes = b""


@dataclass
class ChartSet:
    """The charts of one invocation and why any were left out."""

    charts: list[Chart] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # chart name -> reason


def build_charts(runs: list[Run], task_filter: str | None = None) -> ChartSet:
    """The Vega-Lite specs of every chart the runs have data for."""
    import altair as alt

    result = ChartSet()
    drawn = chart_labels(run.label for run in runs)
    for run in runs:
        run.chart_label = drawn[run.label]
    makers = (
        ("pass_rate", _pass_rate_chart),
        ("task_heatmap", _heatmap_chart),
        ("pass_hat_k", _pass_hat_chart),
        ("latency", _latency_chart),
        ("tokens", _tokens_chart),
        ("judge_scores", _judge_chart),
    )
    for name, maker in makers:
        made = maker(alt, runs, task_filter)
        if isinstance(made, str):
            result.skipped[name] = made
            continue
        title, chart = made
        spec = chart.properties(title=title).to_dict(validate=False)
        result.charts.append(Chart(name=name, title=title, spec=spec))
    return result


def chart_labels(texts: Iterable[str]) -> dict[str, str]:
    """A label the renderer can draw for each text, distinct for distinct texts.

    Task ids, model names, run ids and judge dimensions come from files of any age (old
    run folders, bat-cli's) that never went through today's checks on load; a control
    character or a non-character makes the renderer abort the whole process, so each
    is drawn as an escape (``\\x1b``). Labels are cut at ``LABEL_LIMIT`` columns here,
    not by the renderer: its own cut splits emoji in halves it cannot measure. Texts that
    come out alike get ``#2``, ``#3`` so no two rows or runs merge. A few words the
    renderer's expression parser takes for names of its own (``if``, ``toString``) fail
    the chart as a sort order or a colour domain: they get a trailing space.
    """
    labels: dict[str, str] = {}
    used: set[str] = set()
    for text in texts:
        if text in labels:
            continue
        base = drawable(text)
        if base in _RENDERER_WORDS:
            base += " "  # looks the same, and is not taken for a name
        label, number = base, 1
        while label in used:
            number += 1
            label = f"{base} #{number}"
        labels[text] = label
        used.add(label)
    return labels


# Values the renderer (Vega's expression parser) looks up as its own names: a label equal
# to one fails the chart with "Unrecognized signal name". Found by tests/test_task_ids.py.
_RENDERER_WORDS = frozenset(
    {
        "if",
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "__proto__",
    }
)


def drawable(text: str, limit: int = LABEL_LIMIT) -> str:
    """``text`` with every unprintable character escaped, at most ``limit`` long."""
    from bat.evaluation.dataset import hidden_character

    out = "".join(_escape(char) if hidden_character(char) else char for char in str(text))
    widths = [2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in out]
    if sum(widths) > limit:  # cut by columns: 60 emoji are as wide as 120 letters
        kept, used = 0, 0
        while used + widths[kept] <= limit - 1:
            used += widths[kept]
            kept += 1
        out = out[:kept] + "…"
    return out or "(empty)"


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _run_axis(alt: Any, runs: list[Run], channel: str = "Y") -> Any:
    encoder = getattr(alt, channel)
    return encoder(
        "run:N",
        sort=[run.chart_label for run in runs],
        title=None,
        axis=alt.Axis(labelLimit=0),
    )


def _run_colors(alt: Any, runs: list[Run], legend: Any = None) -> Any:
    return alt.Color(
        "run:N",
        title="run",
        sort=[run.chart_label for run in runs],
        scale=alt.Scale(
            domain=[run.chart_label for run in runs], range=[run.color for run in runs]
        ),
        legend=legend,
    )


def _legend(alt: Any) -> Any:
    return alt.Legend(orient="bottom", direction="vertical", labelLimit=0)


def _pass_rate_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows = []
    for run in runs:
        rate, interval = run.pass_rate(), run.pass_rate_ci95()
        low, high = interval if interval else (None, None)
        text = "no episodes" if rate is None else f"{rate:.0%} ({run.passed()}/{run.episodes()})"
        rows.append({"run": run.chart_label, "rate": rate, "low": low, "high": high, "text": text})
    base = alt.Chart(alt.Data(values=rows))
    y = _run_axis(alt, runs)
    x = alt.X(
        "rate:Q",
        title="pass rate (bar: 95 % Wilson interval)",
        scale=alt.Scale(domain=[0, 1]),
        axis=alt.Axis(format="%"),
    )
    bars = base.mark_bar(color=PALETTE[0], opacity=0.85).encode(y=y, x=x)
    interval = base.mark_errorbar(ticks=True, color="#222").encode(
        y=y, x=alt.X("low:Q", title=None), x2="high:Q"
    )
    labels = base.mark_text(align="left", dx=6, fontSize=11).encode(
        y=y, x=alt.X("high:Q", title=None), text="text:N"
    )
    chart = (bars + interval + labels).properties(width=460, height=alt.Step(24))
    return "Pass rate per run", chart


def _heatmap_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    every = task_order(runs)
    tasks = [task_id for task_id in every if matches(task_id, task_filter)]
    if not every:
        return "no run has an episode"
    if not tasks:
        return f"no task id contains {task_filter!r}"
    names = chart_labels(tasks)
    rows = []
    for run in runs:
        for task_id, count in run.tasks().items():
            if task_id in names and count.attempts:
                rows.append(
                    {
                        "run": run.chart_label,
                        "task": names[task_id],
                        "rate": count.rate,
                        "text": f"{count.passed}/{count.attempts}",
                    }
                )
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X(
            "run:N",
            sort=[run.chart_label for run in runs],
            title=None,
            axis=alt.Axis(orient="top", labelAngle=-35, labelLimit=0),
        ),
        y=alt.Y("task:N", sort=[names[t] for t in tasks], title=None, axis=alt.Axis(labelLimit=0)),
    )
    cells = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color(
            "rate:Q",
            title="pass rate",
            scale=alt.Scale(domain=[0, 1], scheme="redyellowgreen"),
            legend=alt.Legend(format="%"),
        )
    )
    counts = base.mark_text(fontSize=10).encode(
        text="text:N",
        # dark cells (the ends of the scale) get white text, the pale middle black
        color=alt.condition(
            "datum.rate < 0.2 || datum.rate > 0.8", alt.value("white"), alt.value("#111")
        ),
    )
    title = "Pass rate per task"
    if task_filter:
        title += f" (task ids containing {drawable(repr(task_filter))}: {len(tasks)})"
    chart = (cells + counts).properties(width=alt.Step(64), height=alt.Step(20))
    return title, chart


def _pass_hat_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows, with_data = [], []
    for run in runs:
        points = run.pass_hat_curve()
        if points:
            with_data.append(run)
        rows += [{"run": run.chart_label, "k": k, "value": value} for k, value in points]
    if not rows:
        return "no run has a judged attempt (one that is not an infrastructure failure)"
    most = max(row["k"] for row in rows)
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=alt.OverlayMarkDef(size=40), strokeWidth=2)
        .encode(
            x=alt.X(
                "k:Q",
                title="k (attempts that must all pass)",
                scale=alt.Scale(domain=[1, max(most, 2)]),
                axis=alt.Axis(
                    format="d",
                    tickMinStep=1,
                    values=list(range(1, most + 1)) if most <= 20 else alt.Undefined,
                ),
            ),
            y=alt.Y(
                "value:Q", title="pass^k", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")
            ),
            color=_run_colors(alt, with_data, _legend(alt)),
        )
        .properties(width=460, height=260)
    )
    return "pass^k per run: the chance that k attempts at a task all pass", chart


def _latency_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows = [
        {"run": run.chart_label, "seconds": value} for run in runs for value in run.wall_times()
    ]
    if not rows:
        return "no episode has a wall time"
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_boxplot(extent="min-max", size=14)
        .encode(
            y=_run_axis(alt, runs),
            x=alt.X("seconds:Q", title="wall time per episode (s): min, quartiles, max"),
            color=_run_colors(alt, runs),
        )
        .properties(width=460, height=alt.Step(24))
    )
    return "Latency per run", chart


def _tokens_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows = []
    for run in runs:
        means = run.tokens_per_episode()
        if means is not None:
            rows.append({"run": run.chart_label, "kind": "prompt", "order": 0, "tokens": means[0]})
            rows.append(
                {"run": run.chart_label, "kind": "completion", "order": 1, "tokens": means[1]}
            )
    if not rows:
        return "no run has episodes"
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(
            y=_run_axis(alt, runs),
            x=alt.X("tokens:Q", title="tokens per episode (mean)", stack="zero"),
            color=alt.Color(
                "kind:N",
                title=None,
                scale=alt.Scale(domain=["prompt", "completion"], range=["#4e79a7", "#f28e2b"]),
                legend=alt.Legend(orient="bottom"),
            ),
            order=alt.Order("order:Q"),
        )
        .properties(width=460, height=alt.Step(24))
    )
    return "Tokens per episode: prompt and completion", chart


def _judge_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows, with_data, dimensions = [], [], list(JUDGE_DIMENSIONS)
    for run in runs:
        judged = run.judge()
        if judged:
            with_data.append(run)
        for dimension, stats in judged.items():
            if dimension not in dimensions:
                dimensions.append(dimension)
            rows.append({"run": run.chart_label, "dimension": dimension, **stats})
    if not rows:
        return "no run has judge scores"
    dimensions = [d for d in dimensions if any(row["dimension"] == d for row in rows)]
    names = chart_labels(dimensions)
    for row in rows:
        row["dimension"] = names[row["dimension"]]
    dimensions = [names[d] for d in dimensions]
    base = alt.Chart(alt.Data(values=rows)).encode(
        y=alt.Y("dimension:N", sort=dimensions, title=None, axis=alt.Axis(labelLimit=0)),
        yOffset=alt.YOffset("run:N", sort=[run.chart_label for run in with_data]),
    )
    bars = base.mark_bar().encode(
        x=alt.X("mean:Q", title="judge score: mean (bar), min to max (line)"),
        color=_run_colors(alt, with_data, _legend(alt)),
    )
    spread = base.mark_rule(color="#222").encode(x="min:Q", x2="max:Q")
    height = max(120, len(dimensions) * (len(with_data) * 14 + 10))
    chart = (bars + spread).properties(width=460, height=height)
    return "Judge scores per dimension", chart


# --- rendering and writing --------------------------------------------------------------


def render(chart_set: ChartSet) -> None:
    """SVG and PNG of every chart, all by one in-process vl-convert converter.

    A chart the converter fails on is moved to the skipped ones with the first line of
    its error (the rest is a JavaScript stack): the other charts and the report are
    still written.
    """
    import vl_convert as vlc

    version = _vegalite_version(vlc)
    for chart in list(chart_set.charts):
        try:
            chart.svg = vlc.vegalite_to_svg(chart.spec, vl_version=version, allowed_base_urls=[])
            chart.png = vlc.svg_to_png(chart.svg, scale=PNG_SCALE)
        except Exception as exc:  # the converter raises plain ValueError/RuntimeError
            chart_set.charts.remove(chart)
            chart_set.skipped[chart.name] = f"it could not be rendered: {_first_line(exc)}"


def _first_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    first = lines[0] if lines else type(error).__name__
    if first.endswith(":") and len(lines) > 1:  # "conversion failed:" then the reason
        first += " " + lines[1]
    return drawable(first, limit=300)


def _vegalite_version(vlc: Any) -> str | None:
    """The Vega-Lite version Altair writes, if vl-convert has it (else its latest)."""
    import altair as alt

    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return wanted if wanted in vlc.get_vegalite_versions() else None


@dataclass
class PlotResult:
    """What one ``eval.plot`` did: the runs, the files written or removed, the notes."""

    runs: list[Run]
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)  # metrics files left out, and why


def plot_folder(folder: Path, task_filter: str | None = None) -> PlotResult:
    """Charts (PNG and SVG) and ``report.html`` of every run under ``folder``, in it."""
    from bat.evaluation.report import write_report

    folder = Path(folder)
    unusable: list[str] = []
    runs = find_runs(folder, unusable)
    task_filter = task_filter or None
    chart_set = build_charts(runs, task_filter)
    render(chart_set)
    result = PlotResult(runs=runs, unusable=unusable)
    for chart in chart_set.charts:
        svg_path, png_path = folder / f"{chart.name}.svg", folder / f"{chart.name}.png"
        write_text_atomic(svg_path, chart.svg)
        write_bytes_atomic(png_path, chart.png)
        result.written += [png_path, svg_path]
    for name, reason in chart_set.skipped.items():
        result.notes.append(f"{name} skipped: {reason}")
        for suffix in (".png", ".svg"):
            stale = folder / f"{name}{suffix}"
            if stale.is_file():  # an earlier invocation's chart would contradict this one
                stale.unlink()
                result.removed.append(stale)
    result.written.append(write_report(folder, runs, chart_set, task_filter))
    return result
