"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Every file bat writes goes through here, so an interrupted command (Ctrl-C, a full
disk) never leaves a truncated ``.env`` or a half-rendered template behind.

Two rules protect what a user set up around a file:

* a symbolic link is written through only when the caller asks (``follow_links=True``,
  for the files a user owns: ``.env``, an agent's sources): the temporary file goes beside
  the link's final target and is renamed over that target, so the link (say ``.env``
  pointing at a shared secrets file) stays a link and the target keeps its mode. By
  default a link is replaced by the new file and its target left alone, so a link planted
  in a folder bat writes (a run folder) can never lead a write elsewhere;
* a file the user made read-only (no write bit, or not writable by us) is refused with
  :class:`ReadOnlyFile` unless the caller passes ``allow_read_only=True``: renaming over it
  would work, since only the folder's permission counts, and silently undo the user's
  ``chmod``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from bat.errors import OperationError, UsageError

# Mode for a new file that may hold a secret (an API key in ``.env``).
PRIVATE = 0o600


class ReadOnlyFile(UsageError):
    """The file to replace is read-only: the user chose that, so bat does not write it."""

    def __init__(self, path: Path, mode: int) -> None:
        super().__init__(
            f"{path}: the file is read-only (mode {mode:04o}); bat leaves it as it is "
            f"(make it writable first, e.g. chmod u+w {path})"
        )
        self.path = path


def resolved(path: Path) -> Path:
    """The file a write to ``path`` lands in: symbolic links followed to their end."""
    return Path(os.path.realpath(path))


def check_writable(path: Path, *, allow_read_only: bool = False, follow_links: bool = True) -> None:
    """Raise :class:`ReadOnlyFile` if ``path`` exists and is read-only (see module doc).

    Callers that write several files call this for each before writing the first, so a
    refusal leaves every file as it was. A link that is not followed is replaced, whatever
    its target's mode.
    """
    if allow_read_only or (not follow_links and Path(path).is_symlink()):
        return
    target = resolved(Path(path))
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return
    # Root may write anything, so the bits themselves say what the user meant.
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise ReadOnlyFile(Path(path), mode)


def write_text_atomic(
    path: Path,
    text: str,
    *,
    mode: int | None = None,
    allow_read_only: bool = False,
    follow_links: bool = False,
) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory.

    The permission bits of an existing file are kept (a ``.env`` made private stays
    private); ``mode`` sets them for a new file (default: 0o666 less the umask; pass
    :data:`PRIVATE` for a file that can hold a secret). ``follow_links``: see the module
    doc.
    """
    write_bytes_atomic(
        path,
        text.encode("utf-8"),
        mode=mode,
        allow_read_only=allow_read_only,
        follow_links=follow_links,
    )


def write_bytes_atomic(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    allow_read_only: bool = False,
    follow_links: bool = False,
) -> None:
    """Binary twin of :func:`write_text_atomic`."""
    check_writable(path, allow_read_only=allow_read_only, follow_links=follow_links)
    target = resolved(Path(path)) if follow_links else Path(path)
    try:
        info = target.stat() if follow_links else target.lstat()
    except FileNotFoundError:
        info = None
    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        # A rename replaces anything: as root, /dev/null itself. Never a device or FIFO.
        raise UsageError(f"{path} is not a regular file; bat writes regular files only")
    if info is not None and not stat.S_ISLNK(info.st_mode):
        keep = stat.S_IMODE(info.st_mode)
    else:  # a new file, or a link to replace: the new file's own mode
        keep = mode if mode is not None else 0o666 & ~_umask()
    # mkstemp creates the file 0600, so a secret is never readable by others, even briefly.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _naming(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, keep)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from None
        raise


def _naming(exc: OSError, path: Path) -> OSError:
    """The error with ``path`` as its file: a full disk fails on the temporary file, or
    names no file at all, and the user must hear which of their files was not written."""
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def _umask() -> int:
    """The process umask (reading it means setting it, so put it straight back)."""
    current = os.umask(0)
    os.umask(current)
    return current


def write_private(path: Path, text: str) -> None:
    """Write a file that may hold a secret: atomically, readable by its owner only
    (0600), whatever the mode of the file it replaces or the umask."""
    path = Path(path)
    if path.exists() and not path.is_symlink():
        os.chmod(path, 0o600)  # narrowed before the new content goes in
    write_text_atomic(path, text, mode=PRIVATE)


class NotStrictJson(OperationError):
    """A number JSON cannot hold (NaN, an infinity) was about to be written: refused, so
    every JSON file bat writes can be read by a strict reader (``jq``, a browser, Go)."""


def json_text(data: Any, *, what: str = "the file", **options: Any) -> str:
    """``data`` as strict JSON text ending in a newline (``options`` as for
    ``json.dumps``: ``indent``, ``ensure_ascii``, ``default``, ...).

    Python's ``json.dumps`` writes ``NaN`` and ``Infinity`` unless told not to, and no
    other JSON reader accepts them; here they raise :class:`NotStrictJson` naming where
    the number sits in ``what``, before anything is written."""
    try:
        return json.dumps(data, allow_nan=False, **options) + "\n"
    except ValueError:
        where = _non_finite(data)
        if where is None:
            raise
        raise NotStrictJson(
            f"{what}: {where[0] or 'the value'} is {where[1]}, which JSON cannot hold; "
            "nothing was written"
        ) from None


def _non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """Where the first NaN or infinity in ``value`` sits (``gates[0].value``), and it."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items: Any = ()
    if isinstance(value, dict):
        items = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    for where, item in items:
        found = _non_finite(item, where)
        if found is not None:
            return found
    return None
