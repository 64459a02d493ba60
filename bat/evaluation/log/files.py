"""Reading the JSON files of a run folder: an object, or one clear error.

Every reader of the log (bat's own files and bat-cli 2026.10's) starts here, so a file
that is not JSON, not an object, or spells half a UTF-16 pair alone is refused or
repaired the same way whichever part of bat reads it.

It also holds the one rule for what is in a run folder that is not a regular file: a
FIFO, a device, a socket, or a symbolic link to one of them (a crafted or damaged old
run). Such a file is never opened: opening a FIFO for reading blocks until someone
writes to it, so one FIFO among an old run's episodes would hang every later command
that reads that run (``eval.plot`` draws every run of the output folder). It is refused
by :func:`read_regular` with an :class:`InputError` naming it, which each reader treats
as it treats any unreadable file (the report and the judge skip it with a warning).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from bat.errors import InputError


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object; any other content is an :class:`InputError`.

    Strict JSON only: ``NaN``, ``Infinity`` and numbers too large for a float (``1e999``)
    are refused, as they are by every other JSON reader. Python would read them, and a
    NaN compares false with everything: a baseline holding one would let any drop pass.
    """
    try:
        text = read_regular(path).decode("utf-8")
        data = strict_loads(text)
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is malformed: expected a JSON object")
    if SURROGATE_ESCAPE.search(text):
        data = without_surrogates(data)
    return data


def strict_loads(text: str) -> Any:
    """``json.loads`` of strict JSON: a ValueError for ``NaN``, ``Infinity``, ``1e999``,
    and for nesting deeper than the decoder goes (its RecursionError, which every caller
    would otherwise have to know of: ``[`` × 100,000 in a run.json)."""
    try:
        return json.loads(text, parse_constant=_not_a_number, parse_float=finite_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _not_a_number(word: str) -> float:
    raise ValueError(f"{word} is not a number JSON allows")


def finite_float(text: str) -> float:
    """A JSON number as a float; a ValueError when it is too large for one (``1e999``)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


# JSON may spell half of a UTF-16 pair alone ("\ud800"); Python then holds a string that
# cannot be written as UTF-8 at all, so no label, table or file could be made of it.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (``a FIFO``, ``a character
    device``...), a symbolic link followed; None for a regular file or none at all (the
    caller's open then says it is missing). Only the file's metadata is looked at."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    for test, word in _KINDS:
        if test(mode):
            return word
    return "of another kind"


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path``; anything else is an :class:`InputError`
    naming it, and is never opened for reading (see the module). The open itself does
    not block (``O_NONBLOCK``) and is checked again, so a FIFO swapped in after the
    look is refused too; ``OSError`` as :func:`open` raises it."""
    kind = not_regular(path)
    if kind is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return handle.read()
        kind = "no longer a regular file"
    raise InputError(f"{path} is {kind}, not a regular file: skipped (never opened)")
