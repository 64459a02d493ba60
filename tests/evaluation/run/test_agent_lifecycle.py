"""No agent outlives bat, whatever the moment of the signal (issue 27).

Real ``bat eval.run`` processes against the real echo agent. The agent carries a mark of
the test's own in its environment (``BAT_TEST_MARK``), so every process of it (a shell
in front, the server) is found in /proc by the test, whether or not bat recorded it.

The earliest moment is made exact by the agent itself: its command is a shell that
signals its parent, bat, before it becomes the agent (``kill -INT $PPID; exec python
...``), so bat is hit at the instant the agent process exists, before bat has told its
watchdog or written the pid record. The later moments are watched from outside: the
agent's port answering, and a little after (bat printing "agent ready", starting the
episodes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.evalkit import episodes, make_project, port_answers, run_dirs, start_bat

pytestmark = pytest.mark.xdist_group("agent_lifecycle")

MODEL = "agent-default"
SERVE = '"$0" -m eval_fixtures.echo_agent'


def tasks(n: int) -> list[dict]:
    return [
        {"id": f"t{i:02d}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(n)
    ]


def marked(mark: str) -> list[int]:
    """The live processes (zombies left out) whose environment holds ``mark``."""
    needle = f"BAT_TEST_MARK={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def project_with(root: Path, mark: str, *, first: str = "", n: int = 6, latency_ms: int = 200):
    """A project whose agent is the echo agent behind a shell running ``first`` first."""
    command = f"sh -c '{first}exec {SERVE}' {{python}}"
    env = {"BAT_TEST_MARK": mark, "LATENCY_MS": str(latency_ms)}
    return make_project(root, tasks(n), command=command, concurrency=2, agent_env=env)


def no_agent_survives(mark: str, proc: subprocess.Popen) -> None:
    try:
        wait_until(lambda: not marked(mark), 10, "every agent process to end")
    finally:
        for pid in marked(mark):  # do not leave them to the next test
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def ends_in_one_line(proc: subprocess.Popen, signum: int) -> None:
    """Ctrl-C: status 130 and one ``bat: error:`` line; kill -9: death by SIGKILL."""
    _, err = proc.communicate(timeout=30)
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("bat: error:") == 1, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["int", "kill"])
@pytest.mark.parametrize("attempt", range(3))
def test_a_signal_as_the_agent_process_starts_leaves_no_agent(tmp_path, home, signum, attempt):
    mark = uuid.uuid4().hex
    name = signal.Signals(signum).name.removeprefix("SIG")
    project = project_with(tmp_path, mark, first=f"kill -{name} $PPID; ")
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
        ends_in_one_line(proc, signum)
    finally:
        no_agent_survives(mark, proc)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["int", "kill"])
@pytest.mark.parametrize("delay_s", [0, 0.05, 0.15, 0.3])
def test_a_signal_as_the_agent_answers_leaves_no_agent(tmp_path, home, signum, delay_s):
    """From the port's first answer to the first episodes: "agent ready" and the start
    of the episodes' event loop lie in there."""
    mark = uuid.uuid4().hex
    project = project_with(tmp_path, mark)
    url = json.dumps(None)
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
        import yaml

        url = yaml.safe_load((project / "eval" / "eval.yaml").read_text())["evaluation"]
        url = url["agent_url"]
        wait_until(lambda: port_answers(url) or proc.poll() is not None, 30, "the port")
        time.sleep(delay_s)
        proc.send_signal(signum)
        ends_in_one_line(proc, signum)
    finally:
        no_agent_survives(mark, proc)


def test_resume_right_after_a_kill_at_the_agent_start_finishes_the_run(tmp_path, bat, home):
    """kill -9 at the instant the agent starts, then ``--resume`` at once: no agent of the
    dead bat is left to answer on the port, and the run finishes."""
    mark = uuid.uuid4().hex
    project = project_with(tmp_path, mark, first="kill -KILL $PPID; ", latency_ms=0)
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        # The resumed agent must not kill its bat: the same command without the shell's kill.
        config = project / "eval" / "eval.yaml"
        config.write_text(config.read_text().replace("kill -KILL $PPID; ", ""))
        again = bat("eval.run", "--resume", cwd=project)
        assert again.code == 0, again.out + again.err
        found = episodes(run_dirs(project)[0])
        assert len(found) == 6 and all(e["verdict"]["passed"] for e in found.values())
    finally:
        no_agent_survives(mark, proc)
