"""Rendering the charts (vl-convert) and writing everything ``bat eval.plot`` makes.

The specs are rendered to SVG by vl-convert, in this process, and rasterized from that
SVG to PNG. :func:`plot_folder` writes the charts and ``report.html`` into the folder it
plots, each file atomically, and removes the files of a chart an earlier invocation drew
that this one skips (they would contradict the report). vl_convert is imported inside
:func:`render`, so ``bat --help`` never loads it.

**Rendered once per change.** A chart's files are drawn from its spec alone, and the spec
holds the chart's data. ``.charts.json`` in the plotted folder keeps the SHA-256 of the
spec each chart's files were drawn from; a chart whose spec is unchanged, with both its
files still there, is not rendered again (``eval.plot`` after a judge that changed nothing,
a view that re-plots, a second ``eval.run`` stage).

**In parallel.** vl-convert lets go of the interpreter for part of each conversion, and
its converter takes several requests at once: the charts are rendered on a few threads.
It helps a little: the five charts of a 200-episode run in 0.21 s instead of 0.23 s here
(small specs, where the converter's own work dominates, in half the time).

Starting the converter ahead of time, while the episodes run, was tried and left out:
its first conversion (a third of a second) holds the interpreter most of the time, so on
this two-core machine the episodes were slowed by as much as the plot stage gained
(``benchmarks/scale.py``, 200 episodes at concurrency 8: 4.12 s either way), and the
runtime's 70 MB were held through the whole run.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.atomic import json_text, write_bytes_atomic, write_text_atomic
from bat.evaluation.present.plot.report import write_report
from bat.evaluation.present.plot.runs import Run, find_runs
from bat.evaluation.present.plot.specs import Chart, ChartSet, build_charts, drawable
from bat.secrets import Scrubber

PNG_SCALE = 2.0
RENDERED = ".charts.json"  # chart name -> the SHA-256 of the spec its files were drawn from


def spec_digest(chart: Chart) -> str:
    """What a chart's files are drawn from: its spec, the PNG scale and the converter's
    version (a new vl-convert may draw the same spec differently)."""
    import vl_convert as vlc

    text = json.dumps(chart.spec, sort_keys=True, separators=(",", ":"), default=str)
    drawer = f"vl-convert {getattr(vlc, '__version__', '?')}, PNG scale {PNG_SCALE}"
    return hashlib.sha256(f"{drawer}\n{text}".encode()).hexdigest()


def render(chart_set: ChartSet, threads: int | None = None) -> None:
    """SVG and PNG of every chart not rendered yet (``chart.svg`` empty), on a few
    threads of one in-process vl-convert converter.

    A chart the converter fails on is moved to the skipped ones with the first line of
    its error (the rest is a JavaScript stack): the other charts and the report are
    still written.
    """
    todo = [chart for chart in chart_set.charts if not chart.svg]
    if not todo:
        return
    import vl_convert as vlc

    version = _vegalite_version(vlc)

    def draw(chart: Chart) -> str | None:
        try:
            svg = vlc.vegalite_to_svg(chart.spec, vl_version=version, allowed_base_urls=[])
            chart.png = vlc.svg_to_png(svg, scale=PNG_SCALE)
            chart.svg = svg
        except Exception as exc:  # the converter raises plain ValueError/RuntimeError
            return f"it could not be rendered: {_first_line(exc)}"
        return None

    workers = threads or min(len(todo), max(2, os.cpu_count() or 1), 4)
    if workers <= 1:
        failures = [draw(chart) for chart in todo]
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="bat-render") as pool:
            failures = list(pool.map(draw, todo))
    for chart, failure in zip(todo, failures, strict=True):
        if failure is not None:
            chart_set.charts.remove(chart)
            chart_set.skipped[chart.name] = failure


def _reuse(folder: Path, chart_set: ChartSet) -> dict[str, str]:
    """Load the files of every chart whose spec is the one they were drawn from; returns
    the digest of every chart's spec."""
    try:
        drawn = json.loads((folder / RENDERED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        drawn = {}
    if not isinstance(drawn, dict):
        drawn = {}
    digests = {}
    for chart in chart_set.charts:
        digests[chart.name] = digest = spec_digest(chart)
        if drawn.get(chart.name) != digest:
            continue
        try:
            svg = (folder / f"{chart.name}.svg").read_text(encoding="utf-8")
            png = (folder / f"{chart.name}.png").read_bytes()
        except (OSError, ValueError):
            continue  # a file removed or damaged since: drawn again
        chart.svg, chart.png = svg, png
    return digests


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


def plot_folder(folder: Path, task_filter: str | None = None, *, scrubber: Scrubber) -> PlotResult:
    """Charts (PNG and SVG) and ``report.html`` of every run under ``folder``, in it; the
    report's every value without a secret of ``scrubber``."""
    folder = Path(folder)
    unusable: list[str] = []
    runs = find_runs(folder, unusable)
    task_filter = task_filter or None
    chart_set = build_charts(runs, task_filter)
    digests = _reuse(folder, chart_set)
    fresh = [chart.name for chart in chart_set.charts if not chart.svg]
    render(chart_set)
    result = PlotResult(runs=runs, unusable=unusable)
    for chart in chart_set.charts:
        svg_path, png_path = folder / f"{chart.name}.svg", folder / f"{chart.name}.png"
        if chart.name in fresh:
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
    drawn = {chart.name: digests[chart.name] for chart in chart_set.charts}
    write_text_atomic(folder / RENDERED, json_text(drawn, indent=1, sort_keys=True))
    result.written.append(write_report(folder, runs, chart_set, task_filter, scrubber=scrubber))
    return result
