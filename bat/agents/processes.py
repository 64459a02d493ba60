"""Running a command-line agent's turn (or a check's command) so that it cannot run away.

Real coding CLIs retry for minutes when their model is gone, spawn helpers (node
workers, shells, language servers) and can print without end. So each run is:

* started in a process group of its own (``start_new_session``), so that stopping it
  stops everything it started — a killed parent leaves no orphan behind;
* bounded in time: at ``timeout_s`` the group gets SIGTERM, and SIGKILL ``GRACE_S``
  later if anything of it is still there;
* bounded in output: stdout goes straight to a file (the raw event stream kept beside
  the episode), never through a pipe it could fill, and a run that writes more than
  ``OUTPUT_LIMIT`` bytes is stopped like one that ran out of time;
* stoppable from outside (``stop``, set when bat is interrupted).

The run happens in a worker thread (:func:`run_async`), so the event loop, and Ctrl-C,
stay live.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

GRACE_S = 2.0
POLL_S = 0.02
OUTPUT_LIMIT = 64 * 1024 * 1024  # bytes of stdout a turn may write
READ_LIMIT = 16 * 1024 * 1024  # bytes of it read back for the adapter
STDERR_TAIL = 4_000  # characters of stderr kept


@dataclass
class Ran:
    """How a bounded run ended."""

    exit_code: int | None  # None: stopped (time, output or interruption)
    stdout: str
    stderr_tail: str
    seconds: float
    timed_out: bool = False
    too_much_output: bool = False
    interrupted: bool = False
    missing: bool = False  # the program was not found
    first_output_s: float | None = None


def run_bounded(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    output: Path,
    stdin: str | None = None,
    stop: threading.Event | None = None,
) -> Ran:
    """Run ``argv`` bounded as the module says; stdout is kept in ``output``."""
    started = time.monotonic()
    errors = output.with_suffix(output.suffix + ".stderr")
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("wb") as out, errors.open("wb") as err:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            return Ran(None, "", f"cannot run {argv[0]}: {exc.strerror or exc}", 0.0, missing=True)
        if stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.write(stdin.encode())
                process.stdin.close()
        ran = Ran(None, "", "", 0.0)
        while process.poll() is None:
            now = time.monotonic()
            size = _size(output)
            if ran.first_output_s is None and size:
                ran.first_output_s = now - started
            if now - started >= timeout_s:
                ran.timed_out = True
            elif size > OUTPUT_LIMIT:
                ran.too_much_output = True
            elif stop is not None and stop.is_set():
                ran.interrupted = True
            if ran.timed_out or ran.too_much_output or ran.interrupted:
                _stop_group(process)
                break
            time.sleep(POLL_S)
        else:
            # Whatever it started may live on in its group: a turn leaves nothing behind.
            _kill_group(process.pid, signal.SIGKILL)
    ran.seconds = time.monotonic() - started
    stopped = ran.timed_out or ran.too_much_output or ran.interrupted
    ran.exit_code = None if stopped else process.returncode
    ran.stdout = _read(output, READ_LIMIT)
    ran.stderr_tail = _read_tail(errors, STDERR_TAIL)
    return ran


async def run_async(argv: list[str], **options) -> Ran:
    """:func:`run_bounded` in a worker thread; a cancelled caller stops the run."""
    stop = threading.Event()
    task = asyncio.ensure_future(asyncio.to_thread(run_bounded, argv, stop=stop, **options))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        stop.set()
        with contextlib.suppress(BaseException):
            await task
        raise


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _stop_group(process: subprocess.Popen) -> None:
    _kill_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(GRACE_S)
    _kill_group(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(GRACE_S)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _read(path: Path, limit: int) -> str:
    with path.open("rb") as handle:
        return handle.read(limit).decode("utf-8", errors="replace")


def _read_tail(path: Path, limit: int) -> str:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - limit * 4))
        return handle.read().decode("utf-8", errors="replace")[-limit:]
