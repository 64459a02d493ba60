"""The build context as one tar archive, and the log files of builds and pushes.

The archive is what the Docker engine receives, locally through the docker SDK or, for a
remote host, uploaded over SFTP: the context folder less what ``.dockerignore`` excludes
(Docker's own pattern rules, through the docker SDK's matcher) and less ``.bat/``, where
bat keeps its logs, so no log ever ends up in an image.

Logs go to ``<context>/.bat/logs/<kind>-<time>.log`` (``build`` or ``push``): every line
the engine sent, kept whether the operation worked or not. ``.bat/`` holds a
``.gitignore`` of ``*`` so git leaves it alone, and only the newest 20 logs of each kind
are kept. A context that cannot be written to logs to the system's temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import IO

from bat.errors import OperationError

STATE_DIR = ".bat"
KEEP_LOGS = 20


def dockerignore_patterns(context: Path) -> list[str]:
    """The patterns of ``<context>/.dockerignore`` (blank lines and comments dropped)."""
    try:
        lines = (context / ".dockerignore").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise OperationError(f"{context / '.dockerignore'}: cannot read: {exc.strerror}") from None
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def context_archive(context: Path, dockerfile: str = "Dockerfile") -> IO[bytes]:
    """An uncompressed tar of the build context in a temporary file, at position 0."""
    from docker.utils.build import tar

    patterns = [*dockerignore_patterns(context), STATE_DIR]
    archive = tempfile.TemporaryFile(prefix="bat-context-", suffix=".tar")  # noqa: SIM115 (returned)
    try:
        tar(str(context), exclude=patterns, dockerfile=(dockerfile, None), fileobj=archive)
    except OSError as exc:
        archive.close()
        raise OperationError(f"cannot pack the build context {context}: {exc}") from None
    archive.seek(0)
    return archive


class LogFile:
    """One operation's full output, line by line, flushed as it comes."""

    def __init__(self, context: Path, kind: str) -> None:
        self.path = _new_log_path(context, kind)
        self._handle = self.path.open("w", encoding="utf-8")

    def write(self, line: str) -> None:
        self._handle.write(line.rstrip("\n") + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()

    def shown(self) -> str:
        """The path as the user would type it (relative to the current folder if inside)."""
        try:
            return str(self.path.relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _new_log_path(context: Path, kind: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in (context / STATE_DIR / "logs", Path(tempfile.gettempdir()) / "bat-logs"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            ignore = folder.parent / ".gitignore"
            if folder.parent.name == STATE_DIR and not ignore.exists():
                ignore.write_text("# bat's logs: not for git\n*\n", encoding="utf-8")
            _prune(folder, kind)
            for n in range(1, 1000):
                path = folder / (f"{kind}-{stamp}.log" if n == 1 else f"{kind}-{stamp}-{n}.log")
                try:
                    with path.open("x", encoding="utf-8"):
                        return path
                except FileExistsError:
                    continue
        except OSError:
            continue
    raise OperationError(f"cannot write a {kind} log in {context / STATE_DIR} or the temp folder")


def _prune(folder: Path, kind: str) -> None:
    logs = sorted(folder.glob(f"{kind}-*.log"), key=lambda p: p.stat().st_mtime)
    for old in logs[: max(0, len(logs) - (KEEP_LOGS - 1))]:
        with contextlib.suppress(OSError):
            os.unlink(old)
