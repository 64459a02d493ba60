"""A turn's process: bounded in time and output, its whole group stopped."""

from __future__ import annotations

import os
import sys
import threading
import time

from bat.agents import processes
from bat.agents.processes import run_bounded

ENV = {"PATH": os.environ["PATH"]}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def test_a_hanging_run_is_stopped_at_its_timeout_with_everything_it_started(tmp_path):
    pidfile = tmp_path / "child.pid"
    # The program starts a child that ignores SIGTERM, then hangs: both must go.
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    ran = run_bounded(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=ENV,
        timeout_s=1.5,
        output=tmp_path / "out",
    )
    took = time.monotonic() - started
    assert ran.timed_out and ran.exit_code is None
    assert took < 1.5 + processes.GRACE_S + 2
    assert "started" in ran.stdout and ran.first_output_s is not None
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_exit_status_stdout_file_and_stderr_tail(tmp_path):
    code = "import sys; print('out'); print('e' * 10000, file=sys.stderr); sys.exit(4)"
    ran = run_bounded(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, timeout_s=10, output=tmp_path / "o"
    )
    assert ran.exit_code == 4 and ran.stdout == "out\n"
    assert (tmp_path / "o").read_text() == "out\n"
    assert len(ran.stderr_tail) == processes.STDERR_TAIL


def test_a_missing_program_is_said(tmp_path):
    ran = run_bounded(
        ["no-such-program-here"], cwd=tmp_path, env=ENV, timeout_s=5, output=tmp_path / "o"
    )
    assert ran.missing and "no-such-program-here" in ran.stderr_tail


def test_endless_output_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(processes, "OUTPUT_LIMIT", 200_000)
    code = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    ran = run_bounded(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, timeout_s=20, output=tmp_path / "o"
    )
    assert ran.too_much_output and ran.exit_code is None and ran.seconds < 15


def test_a_stop_from_outside_ends_the_run(tmp_path):
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    ran = run_bounded(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
        output=tmp_path / "o",
        stop=stop,
    )
    assert ran.interrupted and ran.seconds < 10


def test_stdin_is_given_or_closed(tmp_path):
    code = "import sys; print(repr(sys.stdin.read()))"
    fed = run_bounded(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=ENV,
        timeout_s=10,
        output=tmp_path / "a",
        stdin="hi",
    )
    closed = run_bounded(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, timeout_s=10, output=tmp_path / "b"
    )
    assert fed.stdout.strip() == "'hi'" and closed.stdout.strip() == "''"
