"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Every file bat writes goes through here, so an interrupted command (Ctrl-C, a full
disk) never leaves a truncated ``.env`` or a half-rendered template behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory.

    The permission bits of an existing file are kept (a ``.env`` made private stays
    private); ``mode`` sets them for a new file (default: 0o666 less the umask).
    """
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode)


def write_bytes_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Binary twin of :func:`write_text_atomic`."""
    path = Path(path)
    try:
        keep = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        keep = mode if mode is not None else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process umask (reading it means setting it, so put it straight back)."""
    current = os.umask(0)
    os.umask(current)
    return current
