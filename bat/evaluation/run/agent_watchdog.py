"""The agent's watchdog: the agent bat started must not outlive bat, however bat ends.

bat stops its agent on success, error and Ctrl-C, but a ``kill -9`` (or the OOM killer)
gives it no chance to. So next to the agent, bat starts this small process and keeps
the only write end of a pipe to its stdin. Each time bat starts the agent it writes the
agent's process-group id on a line (``0``: no agent running now). The kernel closes the
pipe when bat ends, in any way; the watchdog then stops the last group it was told of,
the way bat would: SIGTERM to the whole group (``uv run`` and the server it started),
SIGKILL to what is left after ``GRACE_S``. It has its own session, so a Ctrl-C at the
terminal does not reach it.

It is run as a script (``python -I .../agent_watchdog.py GRACE_S``) and imports nothing
but the standard library: it starts in milliseconds, wherever bat is installed.
(Linux's parent-death signal would not do: it fires when the *thread* that started the
child ends, and bat restarts agents from worker threads.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.05


def stop_group(group: int, grace_s: float, reap: Callable[[], object] | None = None) -> None:
    """SIGTERM process group ``group``, SIGKILL what is left after ``grace_s`` seconds.

    ``reap`` collects the group leader when the caller is its parent (a zombie would keep
    the group alive to ``killpg``).
    """
    try:
        os.killpg(group, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):  # gone, or not ours to stop
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(group):
            return
        time.sleep(POLL_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs.

    A member that has ended but was not reaped yet (a zombie) still counts for ``killpg``;
    it cannot be reaped here (it is not our child: its parent, bat, may be gone, and the
    system's reaper takes its time), so on Linux the members are looked up in /proc.
    """
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # ended while we looked
        fields = text[text.rfind(")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
            return True
    return False


def main(argv: list[str]) -> int:
    grace_s = float(argv[1]) if len(argv) > 1 else 5.0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = 0
    while True:
        line = sys.stdin.buffer.readline()  # blocks until bat says something or is gone
        if not line:
            break
        word = line.strip()
        group = int(word) if word.isdigit() else 0
    if group > 1:
        stop_group(group, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
