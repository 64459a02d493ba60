"""The Vega-Lite specs of the charts (Altair, fed with plain lists of dicts, no pandas).

=================  ==========================================================
``pass_rate``      pass rate per run, with its 95 % Wilson interval
``task_heatmap``   task × run pass rate (narrowed by ``--filter``)
``pass_hat_k``     pass^k against k, one line per run
``latency``        the episodes' wall time per run: min to max, quartiles, median
``tokens``         prompt and completion tokens per episode (mean) per run
``judge_scores``   LLM judge scores per dimension (only when some run has them)
``pass_rate_cost`` pass rate against cost per episode, one point per run, with the
                   Pareto frontier (only when some run has a cost; else left out silently)
=================  ==========================================================

Every number in a spec's data is a value of metrics.json or summary.json, as written
(the latency chart draws the file's quartiles, not the renderer's own boxplot). altair
is imported inside :func:`build_charts`, so ``bat --help`` never loads it.
"""

from __future__ import annotations

import textwrap
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bat.evaluation.present.plot.runs import PALETTE, Run, matches, task_order
from bat.figures import integer, percent

CHART_NAMES = (
    "pass_rate",
    "task_heatmap",
    "pass_hat_k",
    "latency",
    "tokens",
    "judge_scores",
    "pass_rate_cost",
)
JUDGE_DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)
# Which way each chart is better, said under its title (in the image, so a chart shown
# alone says it too, and in the report's caption): a newcomer cannot guess that a higher
# hallucination_score means fewer hallucinations.
READING = {
    "pass_rate": "higher is better",
    "task_heatmap": "green is better: the share of each task's attempts that passed",
    "pass_hat_k": "higher is better; the steeper the drop with k, the flakier the agent",
    "latency": "shorter is better",
    "tokens": "fewer is cheaper",
    "judge_scores": (
        "higher is better for every score, 0 to 1 (hallucination_score 1: nothing invented)"
    ),
    "pass_rate_cost": (
        "up and left is better; ringed, joined by the line: the Pareto frontier (no other "
        "run is cheaper and as good)"
    ),
}
# The cost axis turns logarithmic when the dearest run costs this many times the cheapest:
# on a linear axis the cheap runs would sit on top of one another.
LOG_COST_RATIO = 30.0
SUBTITLE_WIDTH = 90  # characters of a chart's subtitle line (about the width of the chart)
LABEL_LIMIT = 60  # columns of a label drawn in a chart (a wide character, 😀 or 東, is 2)
# Rows of the task heatmap: beyond them the renderer runs out of stack (about 1,500 tasks)
# and nobody reads the chart anyway; a larger dataset shows its worst tasks.
HEATMAP_TASKS = 60
# A rate axis's tick labels, spelled as :func:`bat.figures.percent` spells a rate ("80 %",
# with the space) but in whole percents: the renderer writes them, in its own language.
PERCENT_TICKS = "format(datum.value * 100, '.0f') + ' %'"


@dataclass
class Chart:
    """One chart: its file stem, title, Vega-Lite spec and, once rendered, SVG and PNG."""

    name: str
    title: str
    spec: dict[str, Any]
    reading: str = ""  # which way is better (READING)
    svg: str = ""
    png: bytes = b""


@dataclass
class ChartSet:
    """The charts of one invocation and why any were left out."""

    charts: list[Chart] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # chart name -> reason
    # charts with nothing to draw that are left out without a word (the cost chart of
    # runs without cost: an older bat's, a run of unpriced models)
    absent: list[str] = field(default_factory=list)


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
        ("pass_rate_cost", _cost_chart),
    )
    for name, maker in makers:
        made = maker(alt, runs, task_filter)
        if made is None:
            result.absent.append(name)
            continue
        if isinstance(made, str):
            result.skipped[name] = made
            continue
        title, chart, *said = made
        reading = said[0] if said else READING[name]
        # a long reading goes on lines of its own: one line would be wider than the chart
        subtitle = (
            textwrap.wrap(reading, SUBTITLE_WIDTH) if len(reading) > SUBTITLE_WIDTH else reading
        )
        heading = alt.TitleParams(title, subtitle=subtitle, subtitleColor="#56606b")
        spec = chart.properties(title=heading).to_dict(validate=False)
        result.charts.append(Chart(name=name, title=title, spec=spec, reading=reading))
    return result


# --- labels -------------------------------------------------------------------------------


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
        if base in RENDERER_WORDS:
            base += " "  # looks the same, and is not taken for a name
        label, number = base, 1
        while label in used:
            number += 1
            label = f"{base} #{number}"
        labels[text] = label
        used.add(label)
    return labels


# Values the renderer (Vega's expression parser) looks up as its own names: a label equal
# to one fails the chart with "Unrecognized signal name" (tests/evaluation/inputs/test_task_ids.py).
RENDERER_WORDS = frozenset(
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
    from bat.evaluation.inputs.dataset import hidden_character

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


# --- shared encodings ---------------------------------------------------------------------


def _run_axis(alt: Any, runs: list[Run], channel: str = "Y") -> Any:
    return getattr(alt, channel)(
        "run:N", sort=[run.chart_label for run in runs], title=None, axis=alt.Axis(labelLimit=0)
    )


def _run_colors(alt: Any, runs: list[Run], legend: Any = None) -> Any:
    labels = [run.chart_label for run in runs]
    return alt.Color(
        "run:N",
        title="run",
        sort=labels,
        scale=alt.Scale(domain=labels, range=[run.color for run in runs]),
        legend=legend,
    )


def _legend(alt: Any) -> Any:
    return alt.Legend(orient="bottom", direction="vertical", labelLimit=0)


# --- the charts ---------------------------------------------------------------------------


def _pass_rate_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows = []
    for run in runs:
        rate, interval = run.pass_rate, run.pass_rate_ci95
        low, high = interval if interval else (None, None)
        text = "no episodes" if rate is None else f"{percent(rate)} ({run.passed}/{run.episodes})"
        rows.append({"run": run.chart_label, "rate": rate, "low": low, "high": high, "text": text})
    base = alt.Chart(alt.Data(values=rows))
    y = _run_axis(alt, runs)
    x = alt.X(
        "rate:Q",
        title="pass rate (bar: 95 % Wilson interval)",
        scale=alt.Scale(domain=[0, 1]),
        axis=alt.Axis(labelExpr=PERCENT_TICKS),
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
    tasks = [task_id for task_id in every if matches(task_id, task_filter, every)]
    if not every:
        return "no run has an episode"
    if not tasks:
        return f"no task matches {task_filter!r}"
    shown = len(tasks)
    if len(tasks) > HEATMAP_TASKS:
        tasks = worst_tasks(runs, tasks, HEATMAP_TASKS)
    names = chart_labels(tasks)
    rows = [
        {
            "run": run.chart_label,
            "task": names[task_id],
            "rate": count.rate,
            "text": f"{count.passed}/{count.attempts}",
        }
        for run in runs
        for task_id, count in run.tasks().items()
        if task_id in names and count.attempts
    ]
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
            legend=alt.Legend(labelExpr=PERCENT_TICKS),
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
        title += f" (task ids containing {drawable(repr(task_filter))}: {shown})"
    if shown > len(tasks):
        title += f": the {len(tasks)} of {integer(shown)} with the lowest pass rate"
    chart = (cells + counts).properties(width=alt.Step(64), height=alt.Step(20))
    return title, chart


def worst_tasks(runs: list[Run], tasks: list[str], most: int) -> list[str]:
    """The ``most`` tasks of ``tasks`` with the lowest mean pass rate over the runs that
    ran them, the worst first (ties in the dataset's order)."""
    rates: dict[str, list[float]] = {task_id: [] for task_id in tasks}
    for run in runs:
        for task_id, count in run.tasks().items():
            if task_id in rates and count.attempts:
                rates[task_id].append(count.rate)
    order = {task_id: n for n, task_id in enumerate(tasks)}

    def badness(task_id: str) -> tuple[float, int]:
        values = rates[task_id]
        return (sum(values) / len(values) if values else 1.0, order[task_id])

    return sorted(tasks, key=badness)[:most]


def _pass_hat_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows, with_data = [], []
    for run in runs:
        points = run.pass_hat_curve
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
                "value:Q",
                title="pass^k",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(labelExpr=PERCENT_TICKS),
            ),
            color=_run_colors(alt, with_data, _legend(alt)),
        )
        .properties(width=460, height=260)
    )
    return "pass^k per run: the chance that k attempts at a task all pass", chart


def _latency_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    """metrics.json's ``wall_time_s``: a rule from min to max, a bar from the first to the
    third quartile, a tick at the median; the renderer computes no statistic."""
    rows = []
    for run in runs:
        seconds = run.latency
        if seconds.count and seconds.min is not None:
            rows.append(
                {
                    "run": run.chart_label,
                    "min": seconds.min,
                    "p25": seconds.p25,
                    "median": seconds.median,
                    "p75": seconds.p75,
                    "max": seconds.max,
                    "count": seconds.count,
                }
            )
    if not rows:
        return "no episode has a wall time"
    drawn = [run for run in runs if any(row["run"] == run.chart_label for row in rows)]
    base = alt.Chart(alt.Data(values=rows)).encode(y=_run_axis(alt, drawn))
    color = _run_colors(alt, drawn)
    tooltip = ["run:N", "min:Q", "p25:Q", "median:Q", "p75:Q", "max:Q", "count:Q"]
    whisker = base.mark_rule(strokeWidth=1.5).encode(
        x=alt.X("min:Q", title="wall time per episode (s): min to max, quartiles, median"),
        x2="max:Q",
        color=color,
    )
    box = base.mark_bar(size=14).encode(x="p25:Q", x2="p75:Q", color=color, tooltip=tooltip)
    median = base.mark_tick(color="white", thickness=2, size=14).encode(x="median:Q")
    chart = (whisker + box + median).properties(width=460, height=alt.Step(24))
    return "Latency per run", chart


def _tokens_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    rows = []
    for run in runs:
        means = run.tokens_per_episode
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
        judged = run.judge
        if judged:
            with_data.append(run)
        for dimension, stats in judged.items():
            if dimension not in dimensions:
                dimensions.append(dimension)
            rows.append(
                {
                    "run": run.chart_label,
                    "dimension": dimension,
                    "mean": stats.mean,
                    "min": stats.min,
                    "max": stats.max,
                    "count": stats.count,
                }
            )
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


# --- pass rate against cost ---------------------------------------------------------------


def pareto_front(points: list[tuple[float, float]]) -> list[bool]:
    """For each ``(cost, rate)``, whether no other point beats it: cheaper or as cheap,
    and as good or better, and strictly one of the two. Equal points are both on it."""
    return [
        not any(c <= cost and r >= rate and (c < cost or r > rate) for c, r in points)
        for cost, rate in points
    ]


def _cost_points(runs: list[Run]) -> tuple[list[dict[str, Any]], str, list[Run]]:
    """One point per run that has a cost per episode and a pass rate, in the currency
    most runs have (a run in another currency cannot be put on the same axis)."""
    from bat.evaluation.present.cost_view import nothing_priced
    from bat.figures import money

    # a run with nothing priced (its every part unpriced) would sit at zero, cheapest of
    # all and on the frontier by a cost nobody measured: it is left out
    priced = [
        run for run in runs
        if run.cost is not None and run.cost.per_episode.mean is not None
        and run.pass_rate is not None
        and not nothing_priced(run.cost)
    ]  # fmt: skip
    if not priced:
        return [], "", []
    currencies = [run.cost.currency for run in priced if run.cost]
    currency = max(dict.fromkeys(currencies), key=currencies.count)
    drawn = [run for run in priced if run.cost and run.cost.currency == currency]
    rows = []
    for run in drawn:
        cost = run.cost
        assert cost is not None and cost.per_episode.mean is not None
        least = "at least " if cost.unpriced_episodes else ""
        rows.append(
            {
                "run": run.chart_label,
                "run_id": drawable(run.run_id),
                "model": drawable(run.model),
                "rate": run.pass_rate,
                "cost": cost.per_episode.mean,
                "pass_rate": f"{percent(run.pass_rate)} ({run.passed}/{run.episodes})",
                "per_episode": least + money(cost.per_episode.mean, currency),
                "total": least + money(cost.total, currency),
                "lower_bound": bool(cost.unpriced_episodes),
            }
        )
    front = pareto_front([(row["cost"], row["rate"]) for row in rows])
    for row, on in zip(rows, front, strict=True):
        row["frontier"] = on
    return rows, currency, drawn


def _cost_chart(alt: Any, runs: list[Run], task_filter: str | None) -> Any:
    """Pass rate (y) against the mean cost of an episode (x), one point per run, the
    Pareto frontier a stepped line through its ringed points: what a model choice
    weighs. None (no chart, no word) when no run has a cost."""
    rows, currency, drawn = _cost_points(runs)
    if not rows:
        return None
    costs = [row["cost"] for row in rows]
    log = min(costs) > 0 and max(costs) / min(costs) >= LOG_COST_RATIO
    x_title = f"cost per episode (mean, {currency}{', log scale' if log else ''})"
    x = alt.X(
        "cost:Q",
        title=x_title,
        # log: padding, so a point at either end is drawn whole, not cut by the plot's
        # edge; linear: from 0 (a cost is never below it; padding would draw negative
        # costs on the axis) to a tenth past the dearest point
        scale=alt.Scale(type="log", nice=False, padding=14)
        if log
        else alt.Scale(domain=[0, max(costs) * 1.1 or 1], nice=False),
        axis=alt.Axis(format="~g" if log else "~r", labelOverlap=True),
    )
    y = alt.Y(
        "rate:Q",
        title="pass rate",
        scale=alt.Scale(domain=[0, 1]),
        axis=alt.Axis(labelExpr=PERCENT_TICKS),
    )
    tooltip = [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("model:N", title="model"),
        alt.Tooltip("pass_rate:N", title="pass rate"),
        alt.Tooltip("per_episode:N", title="cost per episode"),
        alt.Tooltip("total:N", title="total cost"),
        alt.Tooltip("frontier:N", title="on the frontier"),
    ]
    front = sorted((row for row in rows if row["frontier"]), key=lambda r: (r["cost"], r["rate"]))
    line = (
        alt.Chart(alt.Data(values=front))
        .mark_line(interpolate="step-after", color="#56606b", strokeWidth=1.5, strokeDash=[5, 3])
        .encode(x=x, y=y, order=alt.Order("cost:Q"))
    )
    ring = (
        alt.Chart(alt.Data(values=front))
        .mark_point(size=260, color="#222", strokeWidth=1.5, filled=False)
        .encode(x=x, y=y)
    )
    points = (
        alt.Chart(alt.Data(values=rows))
        .mark_point(size=90, filled=True, opacity=1)
        .encode(x=x, y=y, color=_run_colors(alt, drawn, _legend(alt)), tooltip=tooltip)
    )
    chart = (line + ring + points).properties(width=460, height=300)
    reading = READING["pass_rate_cost"]
    left_out = len(runs) - len(drawn)
    if left_out:
        runs_left = f"{left_out} run{'s' if left_out > 1 else ''}"
        reading += f"; {runs_left} without a known cost in {currency} left out"
    if any(row["lower_bound"] for row in rows):
        reading += "; some costs are lower bounds (unpriced models)"
    if any(run.illustrative_prices for run in drawn):
        reading += "; prices are illustrative"
    return "Pass rate against cost per episode", chart, reading
