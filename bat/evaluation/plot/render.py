"""Rendering the charts (vl-convert) and writing everything ``bat eval.plot`` makes.

The specs are rendered to SVG by vl-convert, in this process, one converter for every
chart, and rasterized from that SVG to PNG. :func:`plot_folder` writes the charts and
``report.html`` into the folder it plots, each file atomically, and removes the files of
a chart an earlier invocation drew that this one skips (they would contradict the
report). vl_convert is imported inside :func:`render`, so ``bat --help`` never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.atomic import write_bytes_atomic, write_text_atomic
from bat.evaluation.plot.report import write_report
from bat.evaluation.plot.runs import Run, find_runs
from bat.evaluation.plot.specs import ChartSet, build_charts, drawable

PNG_SCALE = 2.0


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
