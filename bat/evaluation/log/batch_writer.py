"""Episode files written on a thread of their own, many to one filesystem sync.

Why: an episode file used to be made durable on the event loop, one ``fsync`` per file
(about 0.25 ms of CPU and 0.45 ms of wall-clock on this machine's ext4, a tenth of bat's
cost per episode at a few hundred episodes a second, with the loop stalled meanwhile).
Here the loop only hands over the bytes; the writer thread takes whatever has queued up
while it was busy and writes it as one batch:

1. each file to a temporary file beside it (never a half-written episode under its name);
2. one ``syncfs`` of the filesystem (Linux; elsewhere an ``fsync`` of each file), so the
   data is on disk before any name points at it;
3. each temporary file renamed to its name, then one ``fsync`` of each folder the batch
   touched, so the names are on disk too.

Batches form by themselves: under a light load each file is its own batch, as before;
under a heavy one a sync covers all that ended during the previous one.

**The guarantee on a crash** (the process killed, the machine losing power): a file under
an episode's name is always whole. What can be missing is the batch that was being
written (episodes that ended in the last moment, counted by the progress line but not yet
named on disk); ``eval.run --resume`` runs them again, as it runs any episode without a
file. Nothing is ever lost once :meth:`BatchWriter.flush` returned: the runner flushes at
the end of each model's episodes, on error and on Ctrl-C.

A write that fails (a full disk, a folder made read-only) is kept and raised, naming the
file, by the next :meth:`~BatchWriter.put` or by :meth:`~BatchWriter.flush`; the writer
stops writing from then on, as the run stops.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from pathlib import Path

MAX_BATCH = 512
MAX_QUEUED = 4 * MAX_BATCH  # files waiting before a put waits for room
IDLE_S = 2.0  # an idle writer thread ends after this long


class BatchWriter:
    """A queue of (path, bytes) made durable in batches by one thread (started by a put,
    ended after ``IDLE_S`` seconds with nothing to write)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Path, bytes]] = deque()
        self._changed = threading.Condition()
        self._busy = False  # the thread holds a batch taken from the queue
        self._error: OSError | None = None
        self._thread: threading.Thread | None = None
        self._count = 0

    def put(self, path: Path, data: bytes) -> None:
        """Queue ``data`` for the new file ``path`` (it must not exist yet). When
        ``MAX_QUEUED`` files wait already (the disk slower than the episodes), this waits
        for room: the queue, and bat's memory, stay bounded."""
        with self._changed:
            self._raise_error()
            while len(self._queue) >= MAX_QUEUED and self._error is None:
                self._changed.wait()
            self._raise_error()
            self._queue.append((path, data))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="bat-episode-writer", daemon=True
                )
                self._thread.start()
            self._changed.notify_all()

    def flush(self) -> None:
        """Wait until everything queued is durable under its name; raise a failed write."""
        with self._changed:
            while (self._queue or self._busy) and self._error is None:
                self._changed.wait()
            self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise OSError(self._error.errno, self._error.strerror, self._error.filename)

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._queue:
                    if not self._changed.wait(IDLE_S) and not self._queue:
                        self._thread = None  # idle: the next put starts another
                        return
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
                self._busy = True
                self._changed.notify_all()  # room in the queue for a waiting put
            try:
                self._write(batch)
            except OSError as exc:
                with self._changed:
                    self._error = exc
                    self._queue.clear()
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
            if self._error is not None:
                return

    def _write(self, batch: list[tuple[Path, bytes]]) -> None:
        staged: list[tuple[str, Path]] = []
        try:
            for path, data in batch:
                self._count += 1
                folder, name = os.path.split(path)
                tmp = os.path.join(folder, f".{name}.{os.getpid()}.{self._count}.tmp")
                try:
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                    try:
                        staged.append((tmp, path))
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view) :]
                    finally:
                        os.close(fd)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(path)) from None
            _sync_data([tmp for tmp, _ in staged], {path.parent for path, _ in batch})
            folders = []
            while staged:
                tmp, path = staged[0]
                try:
                    os.replace(tmp, path)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(path)) from None
                staged.pop(0)
                if path.parent not in folders:
                    folders.append(path.parent)
            for folder in folders:
                _fsync_path(folder)
        finally:
            for tmp, _ in staged:  # a batch that failed leaves no temporary file behind
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _sync_data(files: list[str], folders: set[Path]) -> None:
    """Make the data of ``files`` durable: a syncfs of the filesystem of each folder where
    Linux has it (one, in practice: a batch holds one model's episodes), else an fsync of
    each file."""
    if _syncfs is not None:
        synced = True
        for folder in folders:
            fd = os.open(folder, os.O_RDONLY)
            try:
                synced &= _syncfs(fd) == 0
            finally:
                os.close(fd)
        if synced:
            return
    for name in files:
        _fsync_path(Path(name), os.O_WRONLY)


def _fsync_path(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError as exc:
        if not path.is_dir():  # some filesystems cannot sync a folder: the data is synced
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)


def _find_syncfs():
    """libc's ``syncfs(fd)`` (Linux), or None."""
    if not hasattr(os, "sched_getaffinity"):  # not Linux
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


_syncfs = _find_syncfs()
