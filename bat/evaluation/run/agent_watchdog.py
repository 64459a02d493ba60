"""The agent's watchdog: the agent bat started must not outlive bat, however bat ends.

bat stops its agent on success, error and Ctrl-C, but a ``kill -9`` (or the OOM killer)
gives it no chance to. So *before* the agent, bat starts this small process and keeps
the only write end of a pipe to its stdin. Before each start of the agent bat writes
``starting`` on a line, then the agent's process-group id once it has one, and ``0``
once it has stopped the agent itself. The kernel closes the pipe when bat ends, in any
way; the watchdog then stops the last group it was told of, the way bat would: SIGTERM
to the whole group (``uv run`` and the server it started), SIGKILL to what is left after
``GRACE_S``. It has its own session, so a Ctrl-C at the terminal does not reach it.

A signal can also land between the agent's start and bat's next line (a ``kill -9``
there, or a Ctrl-C inside ``subprocess.Popen``, which then forgets the child it made).
So every agent carries a mark in its environment, ``BAT_AGENT_LIFELINE=<token>``, a
random token of that bat's; when the pipe closes after ``starting`` or a group, the
watchdog also stops the group of every live process carrying the mark (``sweep``), and
keeps looking for half a second: a process forked just before bat died shows the mark
only once it has become the agent. The pid record of the run folder holds the token too,
so ``--resume`` finds such an agent the same way when the watchdog died as well.

It is run as a script (``python -I .../agent_watchdog.py GRACE_S TOKEN``) and imports
nothing but the standard library: it starts in milliseconds, wherever bat is installed.
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
MARK = "BAT_AGENT_LIFELINE"  # the variable that marks every process of bat's agent
SETTLE_S = 0.5  # how long a start in progress is looked for after bat died
STARTING = -1  # bat said ``starting``: an agent may exist that it has not named yet


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


def marked_groups(token: str) -> set[int]:
    """The process groups of the live processes whose environment holds the mark
    ``MARK=token`` (Linux; elsewhere none). The caller's own group is never one."""
    needle = f"{MARK}={token}".encode()
    groups = set()
    proc = Path("/proc")
    if not token or not proc.is_dir():
        return groups
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue  # not ours (or another user's: unreadable, never touched)
            text = (entry / "stat").read_text()
        except OSError:
            continue  # ended while we looked
        fields = text[text.rfind(")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and fields[0] != "Z" and fields[2].isdigit():
            groups.add(int(fields[2]))
    groups.discard(os.getpgrp())
    return {group for group in groups if group > 1}


def sweep(token: str, grace_s: float, settle_s: float = 0.0) -> set[int]:
    """Stop every group holding a process marked with ``token``; look again until
    ``settle_s`` has passed. Returns the groups stopped."""
    stopped: set[int] = set()
    deadline = time.monotonic() + settle_s
    while True:
        for group in marked_groups(token):
            stop_group(group, grace_s)
            stopped.add(group)
        if time.monotonic() >= deadline:
            return stopped
        time.sleep(POLL_S)


def read_word(word: bytes) -> int:
    """A line from bat: a process group, ``starting`` (STARTING), anything else 0."""
    if word == b"starting":
        return STARTING
    return int(word) if word.isdigit() and len(word) <= 12 else 0


def main(argv: list[str]) -> int:
    grace_s = float(argv[1]) if len(argv) > 1 else 5.0
    token = argv[2] if len(argv) > 2 else ""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    group = 0
    while True:
        line = sys.stdin.buffer.readline()  # blocks until bat says something or is gone
        if not line:
            break
        group = read_word(line.strip())
    if group > 1:
        stop_group(group, grace_s)
    if group != 0:  # bat died with an agent running, or starting: find every marked one
        sweep(token, grace_s, SETTLE_S if group == STARTING else 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
