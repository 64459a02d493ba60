"""Rendering the charts (vl-convert) and writing everything ``bat eval.plot`` makes.

The specs are rendered to SVG by vl-convert and rasterized from that SVG to PNG, in a
child process (:mod:`.chart_worker`): vl-convert runs V8, which ends the process it runs
in with SIGTRAP when it cannot reserve its heap (``ulimit -v`` of a few GB). Its death
ends only the child; the charts it did not draw are skipped with a warning, and the
report, exports and gates follow as without charts. The child is kept for the next plot
of the same interpreter (:class:`_Renderer`), so its converter warms up once, as it did
in bat's own process.

:func:`plot_folder` writes the charts and ``report.html`` into the folder it plots, each
file atomically, and removes the files of a chart an earlier invocation drew that this
one skips (they would contradict the report).

**Rendered once per change.** A chart's files are drawn from its spec alone, and the spec
holds the chart's data. ``.charts.json`` in the plotted folder keeps the SHA-256 of the
spec each chart's files were drawn from; a chart whose spec is unchanged, with both its
files still there, is not rendered again (``eval.plot`` after a judge that changed nothing,
a view that re-plots, a second ``eval.run`` stage): then no renderer is started at all.

**In parallel.** vl-convert lets go of the interpreter for part of each conversion, and
its converter takes several requests at once: the charts are rendered on a few threads
of the renderer's process.

Starting the converter ahead of time, while the episodes run, was tried and left out:
its first conversion (a third of a second) holds the interpreter most of the time, so on
this two-core machine the episodes were slowed by as much as the plot stage gained
(``benchmarks/scale.py``, 200 episodes at concurrency 8: 4.12 s either way), and the
runtime's 70 MB were held through the whole run.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bat.atomic import json_text, write_bytes_atomic, write_text_atomic
from bat.evaluation.present.plot.chart_worker import DONE
from bat.evaluation.present.plot.report import write_report
from bat.evaluation.present.plot.runs import Run, find_runs
from bat.evaluation.present.plot.specs import Chart, ChartSet, build_charts, drawable
from bat.secrets import Scrubber

PNG_SCALE = 2.0
RENDER_TIMEOUT_S = 300.0  # the renderer's whole work; a hang ends here
RENDERED = ".charts.json"  # chart name -> the SHA-256 of the spec its files were drawn from


def spec_digest(chart: Chart) -> str:
    """What a chart's files are drawn from: its spec, the PNG scale and the converter's
    version (a new vl-convert may draw the same spec differently)."""
    text = json.dumps(chart.spec, sort_keys=True, separators=(",", ":"), default=str)
    drawer = f"vl-convert {_converter_version()}, PNG scale {PNG_SCALE}"
    return hashlib.sha256(f"{drawer}\n{text}".encode()).hexdigest()


def _converter_version() -> str:
    """vl-convert's version from its metadata: the converter itself is loaded only in
    the renderer's process."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vl-convert-python")
    except PackageNotFoundError:
        return "?"


def render(chart_set: ChartSet, threads: int | None = None) -> str | None:
    """SVG and PNG of every chart not rendered yet (``chart.svg`` empty), drawn by
    vl-convert in a child process (:mod:`.chart_worker`) on a few threads.

    A chart the converter fails on is moved to the skipped ones with the first line of
    its error. When the renderer itself cannot start or dies (V8 ends its process with
    SIGTRAP when ``ulimit -v`` leaves it no room for its heap), or takes longer than
    :data:`RENDER_TIMEOUT_S`, every chart it did not draw is skipped and the reason is
    returned, for one warning line: the report, exports and gates still follow.
    """
    todo = [chart for chart in chart_set.charts if not chart.svg]
    if not todo:
        return None
    workers = threads or min(len(todo), max(2, os.cpu_count() or 1), 4)
    answers, problem = _run_worker(todo, workers)
    for chart in todo:
        answer = answers.get(chart.name)
        if answer is None:
            failure = f"not drawn: {problem}"
        elif isinstance(answer, str):
            failure = f"it could not be rendered: {answer}"
        else:
            chart.svg, chart.png = answer
            continue
        chart_set.charts.remove(chart)
        chart_set.skipped[chart.name] = failure
    return problem if len(answers) < len(todo) else None


def _run_worker(todo: list[Chart], workers: int) -> tuple[dict[str, dict], str | None]:
    """The renderer's answers by chart name, and why it stopped early (if it did)."""
    request = {
        "vl_version": _vegalite_version(),
        "scale": PNG_SCALE,
        "threads": workers,
        "charts": [{"name": chart.name, "spec": chart.spec} for chart in todo],
    }
    line = json.dumps(request, default=str).encode() + b"\n"
    with _KEPT_LOCK:
        renderer = _KEPT.pop(sys.executable, None)
        if renderer is None or not renderer.alive():
            try:
                renderer = _Renderer(sys.executable)
            except OSError as exc:
                return {}, f"the chart renderer could not start: {exc.strerror or exc}"
        out, problem = renderer.draw(line, time.monotonic() + RENDER_TIMEOUT_S)
        if problem is None:
            _KEPT[sys.executable] = renderer  # for this interpreter's next plot
        return _answers(out), problem


class _Renderer:
    """One renderer process (:mod:`.chart_worker`), kept for the next plot of the same
    interpreter: its JavaScript engine starts once, which is most of a small plot's
    time (a view that re-plots, a reusing ``tasks.py``, the test suite running bat
    in-process). In a session of its own, so the terminal's Ctrl-C is bat's to act on;
    it ends when bat closes its stdin (at exit) or dies, and is killed when a draw is
    interrupted, times out or goes wrong."""

    def __init__(self, executable: str) -> None:
        # The parent's import path, given whole: -I keeps PYTHON* variables and the
        # user's site folder from changing what the child imports.
        code = (
            f"import sys; sys.path[:] = {sys.path!r}; "
            "from bat.evaluation.present.plot.chart_worker import main; sys.exit(main())"
        )
        # stderr to a file, never a pipe that could fill and stall it
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        try:
            self.proc = subprocess.Popen(
                [executable, "-I", "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.errors,
                start_new_session=True,
            )
        except BaseException:
            self.errors.close()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def draw(self, line: bytes, deadline: float) -> tuple[bytes, str | None]:
        """Send one request; its answers, and None when the renderer finished it (else
        why it did not: then it is stopped)."""
        try:
            out, ended = self._ask(line, deadline)
        except BaseException:  # Ctrl-C while it draws: it goes with us
            self.close(at_once=True)
            raise
        if ended is None:
            return out, None
        if ended == "timeout":
            self.close(at_once=True)
            return out, f"the chart renderer took more than {RENDER_TIMEOUT_S:g} s"
        try:
            code = self.proc.wait(timeout=5)  # it closed its stdout: it is ending
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.errors.seek(0)
        err = self.errors.read()[-65536:]
        self.close(at_once=True)
        return out, _death(code, err)

    def _ask(self, line: bytes, deadline: float) -> tuple[bytes, str | None]:
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except OSError:  # it died before reading: its exit says why
            return b"", "ended"
        out = bytearray()
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not out.endswith(DONE):
                left = deadline - time.monotonic()
                if left <= 0:
                    return bytes(out), "timeout"
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return bytes(out), "ended"
                out += chunk
        return bytes(out[: -len(DONE)]), None

    def close(self, *, at_once: bool = False) -> None:
        """End the renderer: at once (killed), or by closing its stdin."""
        if at_once:
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.proc.stdout.close()
        self.errors.close()


# The renderer kept for the next plot, per interpreter path (a test may point
# sys.executable at another). Process-wide like a connection pool: it holds no state of
# any run, only a warm converter.
_KEPT: dict[str, _Renderer] = {}
_KEPT_LOCK = threading.Lock()


@atexit.register
def _close_kept() -> None:
    with _KEPT_LOCK:
        while _KEPT:
            _KEPT.popitem()[1].close()


def _answers(out: bytes) -> dict[str, tuple[str, bytes] | str]:
    """What the renderer wrote, by chart name: ``(svg, png)``, or the converter's error
    in one line. A line cut by its death, or not of the renderer's shape, is left out
    (that chart counts as not drawn)."""
    answers: dict[str, tuple[str, bytes] | str] = {}
    for line in out.splitlines():
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):  # not a line the renderer wrote whole
            continue
        if not isinstance(answer, dict) or not isinstance(answer.get("name"), str):
            continue
        svg, png, error = answer.get("svg"), answer.get("png"), answer.get("error")
        if isinstance(error, str):
            answers[answer["name"]] = drawable(error, limit=300)
        elif isinstance(svg, str) and isinstance(png, str):
            try:
                answers[answer["name"]] = (svg, base64.b64decode(png, validate=True))
            except ValueError:
                continue
    return answers


def _death(code: int, err: bytes) -> str:
    """Why the renderer ended without drawing everything, in a few words."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        low = " (too little memory? `ulimit -v` leaves its JavaScript engine no room)"
        return f"the chart renderer (vl-convert) was killed by {name}" + (
            low if name in ("SIGTRAP", "SIGABRT", "SIGSEGV", "SIGKILL") else ""
        )
    lines = [line.strip() for line in err.decode("utf-8", "replace").splitlines() if line]
    reason = drawable(lines[-1], limit=300) if lines else "no message"
    return f"the chart renderer (vl-convert) stopped with exit status {code}: {reason}"


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


def _vegalite_version() -> str:
    """The Vega-Lite version Altair writes (the renderer uses its latest if it lacks it)."""
    import altair as alt

    return ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


@dataclass
class PlotResult:
    """What one ``eval.plot`` did: the runs, the files written or removed, the notes."""

    runs: list[Run]
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)  # metrics files left out, and why
    renderer: str | None = None  # why the chart renderer drew nothing (more), or None


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
    problem = render(chart_set)
    result = PlotResult(runs=runs, unusable=unusable, renderer=problem)
    for chart in chart_set.charts:
        svg_path, png_path = folder / f"{chart.name}.svg", folder / f"{chart.name}.png"
        if chart.name in fresh:
            write_text_atomic(svg_path, chart.svg)
            write_bytes_atomic(png_path, chart.png)
        result.written += [png_path, svg_path]
    for name, reason in chart_set.skipped.items():
        result.notes.append(f"{name} skipped: {reason}")
    for name in [*chart_set.skipped, *chart_set.absent]:
        for suffix in (".png", ".svg"):
            stale = folder / f"{name}{suffix}"
            if stale.is_file():  # an earlier invocation's chart would contradict this one
                stale.unlink()
                result.removed.append(stale)
    drawn = {chart.name: digests[chart.name] for chart in chart_set.charts}
    write_text_atomic(folder / RENDERED, json_text(drawn, indent=1, sort_keys=True))
    report = write_report(
        folder, runs, chart_set, task_filter, scrubber=scrubber, unreadable=result.unusable
    )  # an episode file it could not read (a FIFO of an old run...) is warned of too
    result.written.append(report)
    return result
