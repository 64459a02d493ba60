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
reading are paid once, however many viewers there are. An entry also keeps the
episode's answers (for the run page's search, which then reads no file) and says what
the cell showed before it (``before``), so a page that shows only some rows of the grid
still counts every episode right.
"""

from __future__ import annotations

import json
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
from bat.evaluation.log.outcome import EpisodeOutcome, episode_outcome

# What a grid cell says of an episode: the outcome's class and its word.
OUTCOMES = {
    "pass": "passed",
    "fail": "failed",
    "error": "agent error",
    "infra": "infrastructure failure",
    "unreadable": "unreadable file",
}
# ... and the same words for a count other than one.
OUTCOMES_MANY = {
    "pass": "passed",
    "fail": "failed",
    "error": "agent errors",
    "infra": "infrastructure failures",
    "unreadable": "unreadable files",
}


@dataclass(frozen=True)
class Found:
    """One episode file (or a change of one), as the stream sends it."""

    index: int
    model: str  # the model folder's name (its label)
    name: str  # the episode file's name
    data: dict[str, Any]  # the event's data: see :func:`describe`
    answer: str = field(default="", compare=False, repr=False)  # searched, never streamed
    streamed: bytes = field(default=b"", compare=False, repr=False)  # the event, encoded once


@dataclass
class RunWatch:
    """The episodes of ``run_dir`` found so far; :meth:`refresh` looks for more."""

    run_dir: Path
    interval: float = 0.5
    entries: list[Found] = field(default_factory=list)
    status: str = "running"  # run.json's, read just before the last scan
    _seen: dict[tuple[str, str], int] = field(default_factory=dict)  # -> mtime_ns
    _outcome: dict[tuple[str, str], str] = field(default_factory=dict)  # -> the latest
    _scanned_at: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _memo: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # key -> (stamp, value)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock)

    def memo(self, key: str, paths: list[Path], compute: Any) -> Any:
        """``compute()``, again only when one of ``paths`` changed (by size and time): a
        run's metrics.json or dataset snapshot is read once, not on every page view."""
        stamp = tuple(_stamp(path) for path in paths)
        with self._memo_lock:  # two viewers (or the warm-up) asking at once read it once
            kept = self._memo.get(key)
            if kept is not None and kept[0] == stamp:
                return kept[1]
            value = compute()
            self._memo[key] = (stamp, value)
            return value

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
            self._scan(record)
            # Said only now that the scan is done: a stream that did not wait must not
            # see "ended" before it can see every episode of the run.
            self.status = record.status
            self._scanned_at = time.monotonic()
            return self.status

    def since(self, start: int) -> list[Found]:
        """The entries numbered ``start`` and later. No lock: entries are only ever
        appended, so a reader (on the event loop) never waits for a scan."""
        return self.entries[max(start, 0) :]

    def count(self) -> int:
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
            data, answer = describe(path, m, label, rows)
            data["before"] = self._outcome.get((label, name))
            self._outcome[(label, name)] = data["outcome"]
            index = len(self.entries)
            streamed = encode_event("episode", json.dumps(data), index)
            self.entries.append(Found(index, label, name, data, answer, streamed))


def encode_event(event: str, data: str, ident: int | None = None) -> bytes:
    """One Server-Sent Event as it goes on the wire (``data`` is one line of JSON).

    Encoded once, when the episode is found: every viewer is sent the same bytes, all the
    events of one look at the folder in one write (50 viewers of a run must not cost it
    50 encodings and 50 writes per episode)."""
    head = f"id: {ident}\r\n" if ident is not None else ""
    return f"{head}event: {event}\r\ndata: {data}\r\n\r\n".encode()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_size, found.st_mtime_ns)


def describe(
    path: Path, model_index: int, label: str, rows: dict[str, int]
) -> tuple[dict[str, Any], str]:
    """The stream's data for one episode file (where its cell is and what it says), and
    everything the agent answered in it."""
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
        }, ""
    outcome, why = outcome_of(episode)
    row = rows.get(episode.task_id)
    return {
        "model": label,
        "model_index": model_index,
        "task": episode.task_id,
        "attempt": episode.attempt,
        "cell": None if row is None else cell_id(model_index, row, episode.attempt),
        "outcome": outcome.word,
        "title": f"{episode.task_id} · attempt {episode.attempt}: {why}",
        "episode": path.name,
        "wall_time_s": round(episode.trace.wall_time_s, 3),
        "error": outcome.kind,
    }, answer_of(episode)


def answer_of(episode: EpisodeResult) -> str:
    """Everything the agent answered in an episode: each turn's output, then the last."""
    parts = [turn.output for turn in episode.trace.turns if turn.output]
    if episode.final_output and episode.final_output not in parts:
        parts.append(episode.final_output)
    return "\n".join(parts)


def outcome_of(episode: EpisodeResult) -> tuple[EpisodeOutcome, str]:
    """The outcome of an episode (its ``word`` is the cell's class) and a few words on it."""
    outcome = episode_outcome(episode)
    if outcome.word == "infra":
        return outcome, f"{OUTCOMES['infra']} ({outcome.infra})"
    if outcome.word == "pass":
        return outcome, "passed (vacuous)" if outcome.vacuous else "passed"
    if outcome.word == "error":
        return outcome, f"{OUTCOMES['error']} ({outcome.agent_error})"
    if episode.verdict is None:
        return outcome, "no verdict"
    return outcome, f"failed: {episode.verdict.reason}"[:200]


def cell_id(model_index: int, row: int, attempt: int) -> str:
    """The grid cell of (model, task row, attempt): the page and the stream agree on it."""
    return f"c{model_index}-{row}-{attempt}"
