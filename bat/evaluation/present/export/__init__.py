"""Exports of a run for other tools: JUnit XML, CSV, Markdown, JSON, and any plugin's.

``bat eval.export --to junit:report.xml --to markdown:summary.md`` writes one file per
``--to NAME:PATH``. The built-in exporters are named in code (:data:`BUILTIN`); plugins
come through the entry-point group ``bat.exporters`` (:data:`GROUP`), as the Python
ecosystem finds its plugins: a distribution declares ``[project.entry-points."bat.exporters"]
myfmt = "mypkg:export"``, and ``--to myfmt:out.txt`` calls it. Both are
:class:`importlib.metadata.EntryPoint` objects, loaded by ``EntryPoint.load``. Discovery
is lazy: nothing here runs for ``bat --help``, and an exporter's module is imported only
when it is used (or listed with its description by :func:`available_exporters`).
Importing a plugin runs its code: one whose import does not finish within
:data:`IMPORT_TIMEOUT_S` is reported as such (an OperationError for ``eval.export``, a
warning of ``bat doctor``), never waited for.

An exporter is a callable ``exporter(run, path)``: ``run`` is the :class:`RunData` of the
run folder (read once, by bat's own readers, for every target of the command), ``path``
the file to write. It writes that one file, atomically (:func:`write_text` does). An
entry point may name a class instead; it is instantiated without arguments. Optional
attributes: ``description`` (one line; else the docstring's first line) and
``github_step_summary = True`` (the file is Markdown for a CI job's summary: it is also
appended to ``$GITHUB_STEP_SUMMARY`` when that variable is set).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bat.errors import BatError, InputError, OperationError
from bat.evaluation.present.export.data import ModelData, RunData, load_run
from bat.evaluation.present.export.targets import STDOUT, check_target, path_problem
from bat.version import DISTRIBUTION, installed_version

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

# What an exporter plugin receives and uses, and what a script may call (docs/reuse.md;
# tests/test_reuse.py). InputError and OperationError: what a plugin raises for a
# one-line message (bat.errors' own, here so a plugin needs one import).
__all__ = [
    "GROUP",
    "ExporterInfo",
    "InputError",
    "ModelData",
    "OperationError",
    "RunData",
    "Target",
    "available_exporters",
    "check_targets",
    "export_run",
    "load_exporter",
    "load_run",
    "parse_target",
    "write_text",
]

GROUP = "bat.exporters"
#: How long the exporters' modules may take to import, all together (a blocking one is
#: reported, never waited for).
IMPORT_TIMEOUT_S = 5.0

# The built-in exporters. In code, not in pyproject's entry points: a checkout run without
# reinstalling has every one, and no installed metadata (a stale one, a plugin's) can
# change what ``--to junit:`` writes.
BUILTIN = {
    "junit": "bat.evaluation.present.export.junit:JUnitExporter",
    "csv": "bat.evaluation.present.export.csv_rows:CsvExporter",
    "markdown": "bat.evaluation.present.export.markdown:MarkdownExporter",
    "json": "bat.evaluation.present.export.json_doc:JsonExporter",
}

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
STEP_SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"


class Target(NamedTuple):
    """One ``--to NAME:PATH``; ``stdout`` when PATH is ``-`` (standard output)."""

    name: str
    path: Path
    stdout: bool = False

    @property
    def label(self) -> str:
        """``NAME:PATH`` again (messages, and eval.run handing its --export values on):
        a file named ``-`` stays ``./-``, so it never turns into standard output."""
        path = str(self.path)
        if not self.stdout and path == STDOUT:
            path = f"./{STDOUT}"
        return f"{self.name}:{path}"


class ExporterInfo(NamedTuple):
    """What ``bat doctor`` shows of one exporter (see :func:`available_exporters`)."""

    distribution: str  # the distribution that declares it (``bat-cli`` for the built-ins)
    version: str | None
    description: str  # one line; "cannot be loaded: ..." when its module fails
    value: str  # the entry point's ``module:attribute``
    error: str | None = None  # why it cannot be loaded, or None


class _Entry(NamedTuple):
    """An exporter's entry point and the distribution that provides it."""

    point: EntryPoint
    distribution: str  # ``bat-cli`` for the built-ins
    version: str | None


def parse_target(spec: str, *, flag: str = "--to") -> Target:
    """``NAME:PATH`` as a :class:`Target`; anything else is an InputError naming it
    (``flag``: how the command line spelt it, ``--to`` or ``eval.run``'s ``--export``).
    PATH ``-`` is standard output; a PATH no file can have is refused here
    (:func:`~bat.evaluation.present.export.targets.path_problem`)."""
    name, sep, path = str(spec).partition(":")
    if not sep or not _NAME.fullmatch(name) or not path.strip():
        raise InputError(
            f"{flag} {str(spec)[:200]!r} is not NAME:PATH (for example junit:report.xml; "
            "exporters: " + ", ".join(sorted(_entries())) + ")"
        )
    problem = path_problem(path)
    if problem is not None:
        raise InputError(f"{flag} {str(spec)[:200]!r}: {problem}")
    return Target(name, Path(path), stdout=path == STDOUT)


def check_targets(
    targets: Iterable[str | Target],
    *,
    run_dir: Path | None = None,
    inputs: Iterable[Path] = (),
    flag: str = "--to",
) -> list[tuple[Target, Callable[[RunData, Path], Any]]]:
    """Every target parsed, its exporter loaded and its path checked
    (:func:`~bat.evaluation.present.export.targets.check_target`: a regular file outside
    every run folder and none of ``inputs``), before anything is read or written: what
    ``eval.run --export`` checks before its agent starts, and :func:`export_run` first."""
    parsed = [t if isinstance(t, Target) else parse_target(t, flag=flag) for t in targets]
    chosen = [(target, load_exporter(target.name)) for target in parsed]
    inputs = list(inputs)
    seen: dict[str, Target] = {}
    for target in parsed:
        if target.stdout:
            continue
        label = f"{flag} {target.label}"
        check_target(label, target.path, run_dir=run_dir, inputs=inputs)
        real = os.path.realpath(target.path)
        if real in seen:
            raise InputError(f"{label}: {seen[real].label} writes that file already")
        seen[real] = target
    summary = os.environ.get(STEP_SUMMARY_VARIABLE, "").strip()
    if summary and any(target.name == "markdown" for target in parsed):
        # Appended to, not replaced, but a step summary pointed at eval.yaml or a run's
        # run.json would damage it all the same: the same places are refused.
        label = f"${STEP_SUMMARY_VARIABLE}"
        check_target(label, Path(summary), run_dir=run_dir, inputs=inputs)
    return chosen


def _entries() -> dict[str, _Entry]:
    """Every exporter by name: the built-ins, then the plugins of the entry-point group.

    A built-in name is not a plugin's to take (a plugin cannot silently change what
    ``--to junit:`` writes; an older install of bat itself may still declare them); between
    plugins, the first distribution in name order wins.
    """
    from importlib.metadata import EntryPoint, entry_points

    own = installed_version()
    found = {
        name: _Entry(EntryPoint(name, value, GROUP), DISTRIBUTION, own)
        for name, value in BUILTIN.items()
    }
    plugins = []
    for point in entry_points(group=GROUP):
        if point.name not in found:
            dist = point.dist
            name = dist.metadata["Name"] if dist is not None else "unknown"
            plugins.append(_Entry(point, name, dist.version if dist is not None else None))
    for entry in sorted(plugins, key=lambda e: (_canonical(e.distribution), e.point.name)):
        found.setdefault(entry.point.name, entry)
    return found


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_exporter(name: str) -> Callable[[RunData, Path], Any]:
    """The exporter called ``name``; an unknown name is an InputError listing the known
    ones, a plugin that cannot be loaded an OperationError naming it and its package."""
    entries = _entries()
    entry = entries.get(name)
    if entry is None:
        raise InputError(
            f"no exporter named {name[:60]!r} (exporters: {', '.join(sorted(entries))}; "
            f"a plugin adds one through the {GROUP!r} entry-point group)"
        )
    return _instantiate(entry)


def _instantiate(entry: _Entry) -> Callable[[RunData, Path], Any]:
    """The exporter of ``entry``, loaded within :data:`IMPORT_TIMEOUT_S`."""
    outcome = _load_all({entry.point.name: entry})[entry.point.name]
    if isinstance(outcome, OperationError):
        raise outcome
    return outcome


def _load_all(entries: dict[str, _Entry]) -> dict[str, Any]:
    """Every entry's exporter, or the OperationError saying why not, loaded at the same
    time on daemon threads within one :data:`IMPORT_TIMEOUT_S`.

    A plugin's module runs when it is imported, and one that blocks (a network call, a
    lock, a read of a FIFO) would hang ``eval.export`` and ``bat doctor``. A thread
    cannot be stopped, but it need not be waited for: an import still running after the
    limit is reported, and its daemon thread is left behind, never joined at exit.
    The built-ins are bat's own code, loaded in this thread (no imports racing theirs).
    """
    results: dict[str, Any] = {}
    threads: dict[str, threading.Thread | None] = {}

    def load(name: str, point: EntryPoint) -> None:
        try:
            loaded = point.load()
            results[name] = loaded() if isinstance(loaded, type) else loaded
        except BaseException as exc:  # SystemExit too: a plugin never ends bat
            results[name] = exc

    for name, entry in entries.items():
        if BUILTIN.get(name) == entry.point.value and entry.distribution == DISTRIBUTION:
            load(name, entry.point)
            threads[name] = None
            continue
        thread = threading.Thread(
            target=load, args=(name, entry.point), name=f"bat-exporter-{name}", daemon=True
        )
        thread.start()
        threads[name] = thread
    deadline = time.monotonic() + IMPORT_TIMEOUT_S
    outcomes: dict[str, Any] = {}
    for name, thread in threads.items():
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        entry = entries[name]
        named = f"exporter {name!r} ({entry.point.value}, from {entry.distribution})"
        if thread is not None and thread.is_alive():
            outcomes[name] = OperationError(
                f"{named} did not finish importing within {IMPORT_TIMEOUT_S:g} s "
                "(its module blocks when imported)"
            )
            continue
        loaded = results[name]
        if isinstance(loaded, BaseException):
            outcomes[name] = OperationError(f"{named} cannot be loaded: {_first_line(loaded)}")
        elif not callable(loaded):
            outcomes[name] = OperationError(
                f"{named} is not callable: an exporter is called as exporter(run, path)"
            )
        else:
            outcomes[name] = loaded
    return outcomes


def available_exporters() -> dict[str, ExporterInfo]:
    """Every exporter bat can use, by name, in name order: its distribution and version,
    a one-line description, and the error when it cannot be loaded or its import does
    not finish within :data:`IMPORT_TIMEOUT_S` (``bat doctor``)."""
    entries = dict(sorted(_entries().items()))
    found = {}
    for name, outcome in _load_all(entries).items():
        entry = entries[name]
        if isinstance(outcome, OperationError):
            error = outcome.message
            found[name] = ExporterInfo(
                entry.distribution,
                entry.version,
                f"cannot be loaded: {error}",
                entry.point.value,
                error,
            )
            continue
        found[name] = ExporterInfo(
            entry.distribution, entry.version, describe(outcome), entry.point.value
        )
    return found


def describe(exporter: Any) -> str:
    """An exporter's one-line description: its ``description``, else its docstring's
    first line (a class instance's docstring is its class's)."""
    text = getattr(exporter, "description", None) or getattr(exporter, "__doc__", None) or ""
    lines = [line.strip() for line in str(text).strip().splitlines()]
    return lines[0] if lines else ""


def export_run(
    run_dir: Path,
    targets: Iterable[str | Target],
    *,
    say: Callable[[str], Any] = print,
    inputs: Iterable[Path] = (),
) -> list[Path]:
    """Write every target's export of the run at ``run_dir``; the paths written (a
    ``NAME:-`` target goes to standard output and is not among them).

    Every target is parsed, every exporter loaded and every path checked
    (:func:`check_targets`; ``inputs``: the project's files, never written) before the
    run is read or a file written, so a typo in the last ``--to`` writes nothing. The run
    is read once. ``say`` hears ``Wrote PATH`` per file (and the step-summary line).
    """
    parsed = [t if isinstance(t, Target) else parse_target(t) for t in targets]
    if not parsed:
        raise InputError(
            "nothing to export: give --to NAME:PATH (exporters: "
            + ", ".join(sorted(_entries()))
            + ")"
        )
    exporters = check_targets(parsed, run_dir=Path(run_dir), inputs=inputs)
    run = load_run(Path(run_dir))
    written: list[Path] = []
    for target, exporter in exporters:
        if target.stdout:
            _export_to_stdout(target, exporter, run)
            continue
        path = target.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path.parent)) from None
        _call(target, exporter, run, path)
        written.append(path)
        say(f"Wrote {path}")
        if getattr(exporter, "github_step_summary", False):
            summary = append_step_summary(path)
            if summary is not None:
                say(f"Appended {path} to ${STEP_SUMMARY_VARIABLE} ({summary})")
    return written


def _call(target: Target, exporter: Callable[[RunData, Path], Any], run: RunData, path: Path):
    """Run one exporter; what it raises besides bat's own errors and OSError is one line
    naming it."""
    try:
        exporter(run, path)
    except (BatError, OSError):
        raise
    except Exception as exc:
        where = "standard output" if target.stdout else path
        raise OperationError(
            f"exporter {target.name!r} failed writing {where}: {_first_line(exc)}"
        ) from None


def _export_to_stdout(
    target: Target, exporter: Callable[[RunData, Path], Any], run: RunData
) -> None:
    """``NAME:-``: the exporter writes a private temporary file (an exporter writes a
    path), which is then copied to bat's own standard output; no ``Wrote`` line, so the
    output is the export alone. A Markdown export is still appended to the step summary
    (said on stderr)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bat-export-") as folder:
        path = Path(folder) / f"export.{target.name}"
        _call(target, exporter, run, path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise OperationError(
                f"exporter {target.name!r} wrote nothing to the file it was given"
            ) from None
        _write_stdout(data)
        if getattr(exporter, "github_step_summary", False):
            summary = append_step_summary(path)
            if summary is not None:
                print(
                    f"Appended the export to ${STEP_SUMMARY_VARIABLE} ({summary})", file=sys.stderr
                )


def _write_stdout(data: bytes) -> None:
    """``data`` on standard output, as bytes when it has a binary buffer (a plugin's
    export need not be text), else decoded as UTF-8."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        sys.stdout.write(data.decode("utf-8", "replace"))
        sys.stdout.flush()


def append_step_summary(path: Path) -> Path | None:
    """Append the Markdown file at ``path`` to ``$GITHUB_STEP_SUMMARY`` when it is set
    (GitHub Actions shows that file on the job's page; other steps append to it too, so it
    is appended to, never replaced). Returns the summary file, or None."""
    where = os.environ.get(STEP_SUMMARY_VARIABLE, "").strip()
    if not where:
        return None
    summary = Path(where)
    text = path.read_text(encoding="utf-8")
    try:
        # Opened without blocking: a FIFO nobody reads fails at once (ENXIO) instead of
        # hanging the job; then blocking again, so a pipe that is read gets it all.
        fd = os.open(summary, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
        os.set_blocking(fd, True)
        with open(fd, "a", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(summary)) from None
    return summary


def write_text(path: Path, text: str) -> Path:
    """Write an export atomically (a reader never sees half of it); for plugins too."""
    from bat.atomic import write_text_atomic

    write_text_atomic(Path(path), text)
    return Path(path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
