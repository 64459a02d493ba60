"""Where an export may be written: a regular file, or ``-`` for standard output.

``--to junit:/dev/null`` run as root (most CI containers) once replaced the machine's
``/dev/null`` with a regular file: an export is written atomically, a new file renamed
over the old one, and a rename does not care what it replaces. The same held for a FIFO,
for ``/dev/stdout`` (a link), for the run's own ``run.json`` (the run could no longer be
read) and for ``.env`` (the keys were gone). So every target is checked before the run
is read or anything written, by :func:`check_target`:

* the path is text a file can have: no NUL or control character, at most
  :data:`MAX_PATH_BYTES` bytes, not ending in ``/`` (that names a folder);
* what is there now, if anything, is a regular file: a device, FIFO, socket or folder is
  refused, and so is a symbolic link, whatever it points at (a link's target is the
  user's to name; refusing links is what keeps ``/dev/stdout`` and a planted link alike
  out of reach);
* it is none of bat's inputs (:func:`project_inputs`: eval.yaml, the dataset, the
  agent's ``.env`` and ``config.yaml``, a model's script), compared as files (a hard
  link or another spelling of the same file is the same file);
* it is not inside a run folder: the run being exported, or any folder holding a
  ``run.json`` or a ``summary.json`` (a run of bat's, or a model folder of bat-cli's).

``-`` is standard output, never checked here: the exporter writes a private temporary
file, which ``export_run`` then copies to bat's own standard output. A symbolic link
*above* the target (a ``reports`` folder on another disk) is the user's and followed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bat.errors import UsageError
from bat.evaluation.log import layout

if TYPE_CHECKING:
    from bat.evaluation.inputs.config import ResolvedConfig

STDOUT = "-"
# Linux's PATH_MAX: a longer path cannot be opened anyway, and is refused as text.
MAX_PATH_BYTES = 4096
_CONTROL = {chr(n) for n in range(32)} | {"\x7f"}


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot name an export's file, or None (``-`` is fine: stdout)."""
    if not text.strip():
        return "the path is empty"
    if any(ch in _CONTROL for ch in text):
        return "the path holds a control character"
    if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return f"the path is longer than {MAX_PATH_BYTES:,} bytes"
    if text.endswith("/"):
        return "the path names a folder, not a file"
    return None


def check_target(
    label: str,
    path: Path,
    *,
    run_dir: Path | None = None,
    inputs: Iterable[Path] = (),
) -> None:
    """Raise a :class:`UsageError` (exit 2) starting with ``label`` (``--to junit:PATH``)
    when ``path`` is not a place an export may be written (see the module's doc)."""
    kind = _existing_kind(label, path)
    if kind is not None:
        raise UsageError(
            f"{label}: {path} is {kind}; bat writes an export to a regular file "
            f"only, or to standard output with {STDOUT}"
            + (" (name the file the link points at)" if kind == "a symbolic link" else "")
        )
    _check_parents(label, path)
    real = Path(os.path.realpath(path))
    if run_dir is not None and real.is_relative_to(os.path.realpath(run_dir)):
        raise UsageError(
            f"{label}: {path} is inside the run being exported ({run_dir}); "
            "an export is written outside every run folder"
        )
    folder = run_folder_above(real)
    if folder is not None:
        raise UsageError(
            f"{label}: {path} is inside the run folder {folder}; "
            "an export is written outside every run folder"
        )
    for source in inputs:
        if same_file(real, Path(source)):
            raise UsageError(
                f"{label}: {path} is one of bat's inputs ({source}); "
                "an export never replaces what bat reads"
            )


def _existing_kind(label: str, path: Path) -> str | None:
    """What is at ``path`` when it is not a regular file ("a FIFO"...), else None."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None  # a new file (a parent that is a file fails when it is made)
    except OSError as exc:
        raise UsageError(f"{label}: {path} cannot be used: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return None
    kinds = [
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((word for test, word in kinds if test(mode)), "not a regular file")


def _check_parents(label: str, path: Path) -> None:
    """The nearest parent of ``path`` that exists must be a folder (``.env/x`` or
    ``fifo/x`` names no file bat could make): one line, not a failed ``mkdir``."""
    for parent in Path(path).parents:
        try:
            mode = os.stat(parent).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            raise UsageError(f"{label}: {parent} cannot be used: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(mode):
            raise UsageError(f"{label}: {parent} is not a folder, so {path} cannot be made")
        return


def run_folder_above(path: Path) -> Path | None:
    """The nearest folder above ``path`` (resolved) that is a run folder or a model
    folder of one (it holds ``run.json`` or ``summary.json``), or None."""
    for folder in path.parents:
        if layout.is_run_folder(folder) or layout.has_summary(folder):
            return folder
    return None


def same_file(real: Path, other: Path) -> bool:
    """Whether the resolved path ``real`` and ``other`` name one file: the same path once
    links are followed, or the same inode (a hard link)."""
    if real == Path(os.path.realpath(other)):
        return True
    try:
        mine, theirs = os.stat(real), os.stat(other)
    except (OSError, ValueError):
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


# The project's inputs under their default names, protected even when eval.yaml cannot be
# read (an export given with --run works without it).
DEFAULT_INPUTS = (
    Path("eval/eval.yaml"),
    Path("eval/input/tasks.json"),
    Path(".env"),
    Path("config.yaml"),
)


def project_inputs(config_file: Path | None, resolved: ResolvedConfig | None) -> list[Path]:
    """The files bat reads for this project: the default names, the eval.yaml given,
    and, once it is read, its dataset, the agent's ``.env`` and config file (``config.yaml``
    or the one ``CONFIG_PATH`` names) and each model's script."""
    found = [*DEFAULT_INPUTS]
    if config_file is not None:
        found.append(Path(config_file))
    if resolved is not None:
        root = resolved.root
        found += [resolved.file, resolved.dataset, root / ".env", root / "config.yaml"]
        named = resolved.agent_environment.get("CONFIG_PATH")
        if named:
            found.append(root / named)
        found += [resolved.base / m.script for m in resolved.config.models if m.script]
    return list(dict.fromkeys(found))
