"""The episodes of one run in the order the viewer found them: what the live stream sends.

The runner writes each episode file atomically as the episode ends; the viewer learns of
it by looking at the run folder (a scan at most every ``interval`` seconds), so a run
started anywhere (another terminal, CI, ``--resume``) is watched the same way, and the
runner is not touched.

Every episode file found, and every later change of one (the judge adding its scores,
``--retry-infra`` replacing a record), is one :class:`Found`, numbered from 0 in the
order found: the first scan numbers what is already there by file time then name, and
later scans append. The numbers are what the stream's event ids are, so a client that
reconnects with ``Last-Event-ID: n`` is sent exactly the entries after ``n``. One
:class:`RunWatch` per run is shared by every viewer of it: a scan and each episode's
reading are paid once, however many viewers there are.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import EpisodeResult

# What a grid cell says of an episode: the outcome's class and its word.
OUTCOMES = {
    "pass": "passed",
    "fail": "failed",
    "error": "agent error",
    "infra": "infrastructure failure",
    "unreadable": "unreadable file",
}


@dataclass(frozen=True)
class Found:
    """One episode file (or a change of one), as the stream sends it."""

    index: int
    model: str  # the model folder's name (its label)
    name: str  # the episode file's name
    data: dict[str, Any]  # the event's data: see :func:`describe`


@dataclass
class RunWatch:
    """The episodes of ``run_dir`` found so far; :meth:`refresh` looks for more."""

    run_dir: Path
    interval: float = 0.5
    entries: list[Found] = field(default_factory=list)
    status: str = "running"  # run.json's, read just before the last scan
    _seen: dict[tuple[str, str], int] = field(default_factory=dict)  # -> mtime_ns
    _scanned_at: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self) -> str:
        """Scan the run folder when the last scan is ``interval`` old; the run's status.

        The status is read *before* the scan: a run that says it ended has every episode
        file written, so the scan after it has found them all.
        """
        with self._lock:
            if time.monotonic() - self._scanned_at < self.interval:
                return self.status
            try:
                record = rundir.read_run(self.run_dir)
            except InputError:
                self._scanned_at = time.monotonic()
                return self.status
            self.status = record.status
            self._scan(record)
            self._scanned_at = time.monotonic()
            return self.status

    def since(self, start: int) -> list[Found]:
        """The entries numbered ``start`` and later."""
        with self._lock:
            return self.entries[max(start, 0) :]

    def count(self) -> int:
        with self._lock:
            return len(self.entries)

    def _scan(self, record: rundir.RunRecord) -> None:
        rows = {task: n for n, task in enumerate(record.tasks)}
        changed: list[tuple[int, int, str, Path]] = []
        for m, model in enumerate(record.models):
            try:
                model_dir = rundir.model_dir(self.run_dir, model, m)
            except InputError:
                continue
            folder = layout.episodes_dir(model_dir)
            if folder.is_symlink() or not folder.is_dir():
                continue
            try:
                listing = list(os.scandir(folder))
            except OSError:
                continue
            for entry in listing:
                if not layout.EPISODE_NAME.match(entry.name) or entry.is_symlink():
                    continue
                try:
                    mtime = entry.stat().st_mtime_ns
                except OSError:
                    continue  # replaced between the listing and now: the next scan sees it
                if self._seen.get((model.dir, entry.name)) != mtime:
                    changed.append((mtime, m, entry.name, Path(entry.path)))
        for mtime, m, name, path in sorted(changed):
            label = record.models[m].dir
            self._seen[(label, name)] = mtime
            data = describe(path, m, label, rows)
            self.entries.append(Found(len(self.entries), label, name, data))


def describe(path: Path, model_index: int, label: str, rows: dict[str, int]) -> dict[str, Any]:
    """The stream's data for one episode file: where its cell is and what it says."""
    match = layout.EPISODE_NAME.match(path.name)
    attempt = int(match["attempt"]) if match else 0
    try:
        episode = store.read_episode(path)
    except InputError:
        return {
            "model": label,
            "model_index": model_index,
            "task": match["stem"] if match else path.stem,
            "attempt": attempt,
            "cell": None,
            "outcome": "unreadable",
            "title": f"{path.name}: {OUTCOMES['unreadable']}",
            "episode": path.name,
        }
    outcome, why = outcome_of(episode)
    row = rows.get(episode.task_id)
    return {
        "model": label,
        "model_index": model_index,
        "task": episode.task_id,
        "attempt": episode.attempt,
        "cell": None if row is None else cell_id(model_index, row, episode.attempt),
        "outcome": outcome,
        "title": f"{episode.task_id} · attempt {episode.attempt}: {why}",
        "episode": path.name,
        "wall_time_s": round(episode.trace.wall_time_s, 3),
        "error": error_class(episode),
    }


def outcome_of(episode: EpisodeResult) -> tuple[str, str]:
    """The outcome class of an episode and a few words on it."""
    if episode.infra_error is not None:
        return "infra", f"{OUTCOMES['infra']} ({episode.infra_error.kind})"
    if episode.verdict is not None and episode.verdict.passed:
        return "pass", "passed (vacuous)" if episode.verdict.vacuous else "passed"
    if episode.agent_error is not None:
        return "error", f"{OUTCOMES['error']} ({episode.agent_error.kind})"
    if episode.verdict is None:
        return "fail", "no verdict"
    return "fail", f"failed: {episode.verdict.reason}"[:200]


def error_class(episode: EpisodeResult) -> str | None:
    """The infrastructure failure's or the agent error's kind, if either."""
    if episode.infra_error is not None:
        return str(episode.infra_error.kind)
    if episode.agent_error is not None:
        return str(episode.agent_error.kind)
    return None


def cell_id(model_index: int, row: int, attempt: int) -> str:
    """The grid cell of (model, task row, attempt): the page and the stream agree on it."""
    return f"c{model_index}-{row}-{attempt}"
