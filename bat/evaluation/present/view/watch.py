"""The episodes of one run in the order the viewer found them: what the live stream sends.

The runner writes each episode file atomically as the episode ends; the viewer learns of
it by looking at the run folder (a scan at most every ``interval`` seconds), so a run
started anywhere (another terminal, CI, ``--resume``) is watched the same way, and the
runner is not touched.

Every episode file found, and every later change of one (the judge adding its scores,
``--retry-infra`` replacing a record), is one event, numbered from 0 in the order found:
the first scan numbers what is already there by file time then name, and later scans
append. The numbers are what the stream's event ids are, so a client that reconnects
with ``Last-Event-ID: n`` is sent exactly the events after ``n``. One :class:`RunWatch`
per run is shared by every viewer of it: a scan and each episode's reading are paid
once, however many viewers there are. An event says what the cell showed before it
(``before``), so a page that shows only some rows of the grid still counts every
episode right. What is kept per episode is small and bounded (see :class:`RunWatch`):
the answers, for a search, are read from the files when a search asks.
"""

from __future__ import annotations

import json
import os
import threading
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation.log import batcli, layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import EpisodeResult
from bat.evaluation.log.outcome import EpisodeOutcome, episode_outcome
from bat.numbers import whole_number

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


WHYS = 1024  # distinct texts of a cell's outcome kept (most runs have a few dozen)
RECENT = 1024  # events kept encoded: what a live page's stream is sent next


class Found:
    """One episode file as a page sees it: made when a page asks, from the watch's
    compact columns (nothing of it is kept); ``data`` is the stream's event data."""

    __slots__ = (
        "_watch",
        "attempt",
        "error",
        "index",
        "model_index",
        "name",
        "outcome",
        "slot",
        "task",
    )

    def __init__(self, watch: RunWatch, slot: int, index: int | None = None) -> None:
        self._watch, self.slot, self.index = watch, slot, index
        self.model_index = watch._model[slot]
        self.name = watch._name[slot]
        self.task = watch._task[slot]
        self.attempt = watch._attempt[slot]
        self.outcome = OUTCOME_WORDS[watch._outcome[slot]]
        self.error = watch._kind[slot]

    @property
    def model(self) -> str:
        return self._watch._labels[self.model_index]

    @property
    def cell(self) -> str | None:
        row = self._watch.rows.get(self.task)
        return None if row is None else cell_id(self.model_index, row, self.attempt)

    @property
    def path(self) -> Path:
        return layout.episodes_dir(self._watch.run_dir / self.model) / self.name

    @property
    def data(self) -> dict[str, Any]:
        """The stream's data for this file: where its cell is and what it says; an event
        of the log (``index``) says the outcome it had then, and what the cell showed
        before it."""
        watch, slot = self._watch, self.slot
        outcome = self.outcome
        before = None
        if self.index is not None:
            outcome = OUTCOME_WORDS[watch._entry_outcome[self.index]]
            code = watch._entry_before[self.index]
            before = None if code < 0 else OUTCOME_WORDS[code]
        return {
            "model": self.model,
            "model_index": self.model_index,
            "task": self.task,
            "attempt": self.attempt,
            "cell": self.cell,
            "outcome": outcome,
            "title": watch.title(slot),
            "episode": self.name,
            "wall_time_s": round(watch._wall[slot], 3),
            "error": self.error,
            "before": before,
        }

    def answer(self) -> str:
        """Everything the agent answered in this episode, read from its file now ("" when
        it cannot be read): answers are never kept in memory, a run can have millions."""
        try:
            return answer_of(store.read_any_episode(self.path))
        except (InputError, OSError):
            return ""


OUTCOME_WORDS = tuple(OUTCOMES)  # an outcome's code (kept per episode) is its place here


@dataclass
class RunWatch:
    """The episodes of ``run_dir`` found so far; :meth:`refresh` looks for more.

    Memory per episode file is a few hundred bytes (issue 27: it was 3.5 KB): its name,
    and a handful of numbers in columns (``array``) or references to strings kept once
    (task ids, error kinds, the short texts of outcomes). What a page shows of one
    episode beyond that (its answers, a failure's reason not among the first ``WHYS``
    texts) is read from its file when a page needs it.
    """

    run_dir: Path
    interval: float = 0.5
    status: str = "running"  # run.json's, read just before the last scan
    rows: dict[str, int] = field(default_factory=dict)  # task id -> run.json's row
    # One slot per episode file (model, name), in columns:
    _name: list[str] = field(default_factory=list)
    _model: array = field(default_factory=lambda: array("H"))  # index of run.json's models
    _mtime: array = field(default_factory=lambda: array("q"))
    _outcome: array = field(default_factory=lambda: array("b"))  # code: OUTCOME_WORDS
    _why: array = field(default_factory=lambda: array("i"))  # in _whys; -1: in the file
    _wall: array = field(default_factory=lambda: array("d"))
    _attempt: list[int] = field(default_factory=list)
    _task: list[str] = field(default_factory=list)  # one string per task id (_kept)
    _kind: list[str | None] = field(default_factory=list)  # one string per kind (_kept)
    _slots: dict[str, dict[str, int]] = field(default_factory=dict)  # model -> name -> slot
    _labels: list[str] = field(default_factory=list)  # run.json's model folders, in order
    _kept: dict[str, str] = field(default_factory=dict)  # the one copy of a repeated string
    _whys: list[str] = field(default_factory=list)
    _why_code: dict[str, int] = field(default_factory=dict)
    # The event log (what the stream's ids count): the slot, its outcome then, and before.
    _entry_slot: array = field(default_factory=lambda: array("I"))
    _entry_outcome: array = field(default_factory=lambda: array("b"))
    _entry_before: array = field(default_factory=lambda: array("b"))  # -1: nothing before
    _recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))  # (index, bytes)
    _complete: int = 0  # the slots whose columns are all written
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
                record = batcli.read_record(self.run_dir)
            except InputError:
                self._scanned_at = time.monotonic()
                return self.status
            self._scan(record)
            # Said only now that the scan is done: a stream that did not wait must not
            # see "ended" before it can see every episode of the run.
            self.status = record.status
            self._scanned_at = time.monotonic()
            return self.status

    def count(self) -> int:
        """The events found so far (the next one's id)."""
        return len(self._entry_slot)

    def since(self, start: int, end: int | None = None) -> list[Found]:
        """The events numbered ``start`` and later (to ``end``). No lock: the columns are
        only ever appended to, so a reader (on the event loop) never waits for a scan."""
        end = self.count() if end is None else end
        return [Found(self, self._entry_slot[i], i) for i in range(max(start, 0), end)]

    def stream_since(self, start: int) -> tuple[bytes, int]:
        """The events numbered ``start`` and later as they go on the wire, and the number
        of the next. The latest ``RECENT`` were encoded once, as they were found (fifty
        viewers of a live run share them); older ones are encoded again for whoever asks."""
        end = self.count()  # read first: every event counted is in _recent already
        start = max(start, 0)
        recent = list(self._recent)
        first_recent = recent[0][0] if recent else end
        parts = [
            encode_event("episode", json.dumps(found.data), found.index)
            for found in self.since(start, min(first_recent, end))
        ]
        parts += [data for index, data in recent if start <= index < end]
        return b"".join(parts), end

    def latest(self) -> tuple[int, list[Found]]:
        """The events counted so far, and the latest record of every episode file they
        found (in the order found): taken together, so a page's grid and the stream it
        continues from (its first event) agree."""
        with self._lock:
            return self.count(), [Found(self, slot) for slot in range(self._complete)]

    def title(self, slot: int) -> str:
        """A cell's hover text: which episode, and a few words on its outcome."""
        name = self._name[slot]
        if OUTCOME_WORDS[self._outcome[slot]] == "unreadable":
            return f"{name}: {OUTCOMES['unreadable']}"
        code = self._why[slot]
        if code >= 0:
            why = self._whys[code]
        else:  # a reason of its own: read again (never more than a page of cells)
            try:
                why = outcome_of(store.read_any_episode(Found(self, slot).path))[1]
            except (InputError, OSError):
                why = OUTCOMES["unreadable"]
        return f"{self._task[slot]} · attempt {self._attempt[slot]}: {why}"

    def _scan(self, record: rundir.RunRecord) -> None:
        self.rows = {task: n for n, task in enumerate(record.tasks)}
        self._labels = [model.dir for model in record.models]
        changed: list[tuple[int, int, str, str]] = []
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
            slots = self._slots.get(model.dir, {})
            for entry in listing:
                if not layout.EPISODE_NAME.match(entry.name) or entry.is_symlink():
                    continue
                try:
                    mtime = entry.stat().st_mtime_ns
                except OSError:
                    continue  # replaced between the listing and now: the next scan sees it
                slot = slots.get(entry.name)
                if slot is None or self._mtime[slot] != mtime:
                    changed.append((mtime, m, entry.name, entry.path))
        # A Path made only as each file is read: pathlib interns its parts, and 20,000
        # of them alive at once would leave the interpreter's table of them that large.
        for mtime, m, name, path in sorted(changed):
            self._found(m, name, mtime, describe_compact(Path(path)))

    def _found(self, m: int, name: str, mtime: int, seen: Seen) -> None:
        """Record one file found or changed: its slot's columns, then one event. Readers
        take no lock: a slot is counted (``_complete``) once all its columns hold it, and
        an event once it is encoded."""
        slots = self._slots.setdefault(self._labels[m], {})
        slot = slots.get(name)
        outcome = OUTCOME_WORDS.index(seen.outcome)
        values = (
            (self._model, m),
            (self._mtime, mtime),
            (self._outcome, outcome),
            (self._why, self._why_of(seen.why)),
            (self._wall, seen.wall),
            (self._attempt, seen.attempt),
            (self._task, self._one(seen.task)),
            (self._kind, None if seen.kind is None else self._one(seen.kind)),
            (self._name, name),
        )
        before = -1
        if slot is None:
            slot = len(self._name)
            for column, value in values:
                column.append(value)
            slots[name] = slot
            self._complete = slot + 1
        else:
            before = self._outcome[slot]
            for column, value in values:
                column[slot] = value
        index = self.count()
        self._entry_outcome.append(outcome)
        self._entry_before.append(before)
        found = Found(self, slot, index)
        self._recent.append((index, encode_event("episode", json.dumps(found.data), index)))
        self._entry_slot.append(slot)  # now count() says it is there

    def _one(self, text: str) -> str:
        """The one copy of a string many episodes share (a task id, an error's kind)."""
        return self._kept.setdefault(text, text)

    def _why_of(self, why: str) -> int:
        """``why``'s number among the texts kept (-1: too many kept: read it again)."""
        code = self._why_code.get(why)
        if code is None and len(self._whys) < WHYS:
            code = self._why_code[why] = len(self._whys)
            self._whys.append(why)
        return -1 if code is None else code


@dataclass(frozen=True)
class Seen:
    """What the watch keeps of one episode file: where its cell is and what it says."""

    task: str
    attempt: int
    outcome: str  # a word of OUTCOMES
    why: str  # a few words on the outcome (:func:`outcome_of`)
    kind: str | None  # an infrastructure failure's or agent error's kind
    wall: float


def describe_compact(path: Path) -> Seen:
    """Read one episode file for the watch (an unreadable one is said to be so)."""
    match = layout.EPISODE_NAME.match(path.name)
    try:
        episode = store.read_any_episode(path)
    except InputError:
        try:
            attempt = whole_number(match["attempt"]) if match else 0
        except ValueError:
            attempt = 0
        stem = match["stem"] if match else path.stem
        return Seen(stem, attempt, "unreadable", OUTCOMES["unreadable"], None, 0.0)
    outcome, why = outcome_of(episode)
    return Seen(
        episode.task_id,
        episode.attempt,
        outcome.word,
        why,
        outcome.kind,
        float(episode.trace.wall_time_s),
    )


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
