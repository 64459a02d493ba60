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
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.evalkit import episodes, make_project, port_answers, run_dirs, start_bat

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
    """Ctrl-C or SIGTERM: status 130 and one ``bat: error:`` line; kill -9: death by it."""
    _, err = proc.communicate(timeout=30)
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("bat: error:") == 1, err


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["int", "term", "kill"]
)
@pytest.mark.parametrize("attempt", range(2))
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
@pytest.mark.parametrize("delay_s", [0, 0.15])
def test_a_signal_as_the_agent_answers_leaves_no_agent(tmp_path, home, signum, delay_s):
    """From the port's first answer to the first episodes: "agent ready" and the start
    of the episodes' event loop lie in there."""
    mark = uuid.uuid4().hex
    project = project_with(tmp_path, mark)
    url = yaml.safe_load((project / "eval" / "eval.yaml").read_text())["evaluation"]["agent_url"]
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
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


def test_resume_stops_an_agent_known_only_by_its_mark(tmp_path, bat, home):
    """bat and its watchdog both killed (the OOM killer) as the agent started, before bat
    learnt its pid: the record holds what bat writes before a start (the mark), and the
    next ``--resume`` finds that agent by it, stops it and finishes the run."""
    mark = uuid.uuid4().hex
    project = project_with(tmp_path, mark, first="kill -STOP $PPID; ", latency_ms=0)
    proc = start_bat("eval.run", cwd=project, home=home)
    try:
        wait_until(lambda: marked(mark), 30, "the agent to start")
        wait_until(lambda: process_state(proc.pid) == "T", 10, "bat to be stopped")
        record_file = run_dirs(project)[0] / f"agent-{MODEL}.process.json"
        record = json.loads(record_file.read_text())
        os.kill(record["watchdog_pid"], signal.SIGKILL)
        proc.kill()
        proc.communicate(timeout=10)
        record.update(pid=None, pgid=None, start_ticks=None)  # as written before the start
        record_file.write_text(json.dumps(record))
        url = yaml.safe_load((project / "eval" / "eval.yaml").read_text())["evaluation"]
        wait_until(lambda: port_answers(url["agent_url"]), 30, "the orphan to answer")
        config = project / "eval" / "eval.yaml"
        config.write_text(config.read_text().replace("kill -STOP $PPID; ", ""))
        orphans = marked(mark)
        again = bat("eval.run", "--resume", cwd=project)
        assert again.code == 0, again.out + again.err
        assert "stopped the agent an earlier bat left running" in again.out
        assert not any(pid_alive(pid) for pid in orphans)
        found = episodes(run_dirs(project)[0])
        assert len(found) == 6 and all(e["verdict"]["passed"] for e in found.values())
    finally:
        no_agent_survives(mark, proc)


def process_state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rfind(")") + 2 :].split()[0]


def pid_alive(pid: int) -> bool:
    return process_state(pid) not in ("", "Z")


def test_the_watchdog_finds_an_agent_that_appears_after_bat_died(tmp_path):
    """bat said ``starting`` and died before it could name the group; the agent it forked
    becomes visible (marked) only a moment later. The watchdog looks for it that long."""
    from bat.evaluation.run import agent_watchdog

    token = uuid.uuid4().hex
    watchdog = subprocess.Popen(
        [sys.executable, "-I", agent_watchdog.__file__, "2", token], stdin=subprocess.PIPE
    )
    watchdog.stdin.write(b"starting\n")
    watchdog.stdin.close()  # bat is gone
    time.sleep(0.1)
    env = {**os.environ, agent_watchdog.MARK: token}
    late = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    try:
        late.wait(timeout=5)
        assert late.returncode == -signal.SIGTERM
        assert watchdog.wait(timeout=5) == 0
    finally:
        late.kill()
        watchdog.kill()
        late.wait()
        watchdog.wait()


def test_the_watchdog_leaves_marked_processes_alone_after_a_clean_stop(tmp_path):
    """``0`` (bat stopped its agent itself): the watchdog exits at once, touching nothing."""
    from bat.evaluation.run import agent_watchdog

    token = uuid.uuid4().hex
    env = {**os.environ, agent_watchdog.MARK: token}
    other = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-I", agent_watchdog.__file__, "2", token], stdin=subprocess.PIPE
        )
        watchdog.communicate(b"starting\n%d\n0\n" % other.pid, timeout=5)
        assert watchdog.returncode == 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


# -- what bat reads back: the pid record, the watchdog's lines (property tests) -------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
FIELDS = ("pid", "pgid", "start_ticks", "lifeline", "watchdog_pid")


@st.composite
def records(draw) -> bytes:
    """A record as bat writes it, then mutated: a field dropped, retyped, or garbage."""
    record = {
        "pid": draw(st.integers(-5, 2**31)),
        "pgid": draw(st.integers(-5, 2**31)),
        "start_ticks": draw(st.none() | st.integers()),
        "lifeline": uuid.UUID(int=draw(st.integers(0, 2**128 - 1))).hex,
        "watchdog_pid": draw(st.none() | st.integers()),
    }
    how = draw(st.sampled_from(["drop", "retype", "whole", "bytes", "as-is"]))
    if how == "drop":
        record.pop(draw(st.sampled_from(FIELDS)))
    elif how == "retype":
        record[draw(st.sampled_from(FIELDS))] = draw(JSON)
    elif how == "whole":
        return json.dumps(draw(JSON)).encode()
    elif how == "bytes":
        return draw(st.binary(max_size=80))
    return json.dumps(record).encode()


def fuzz(examples: int):
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,  # the first failure, as itself (the canary expects it)
    )


def reads_any_record_safely(stop_stale, tmp_path: Path) -> None:
    """The check: any record is read without an exception, and stops nothing but the
    process it names by pid and start time (``stop_group`` only records here)."""
    from bat.evaluation.run import agent_process

    asked = []
    real = agent_process.stop_group
    agent_process.stop_group = lambda group, grace_s, reap=None: asked.append(group)
    try:

        @fuzz(150)
        @given(records())
        def check(data):
            asked.clear()
            record = tmp_path / "agent.process.json"
            record.write_bytes(data)
            stopped = stop_stale(record, 1)
            assert stopped is None or type(stopped) is int
            assert asked == ([stopped] if stopped is not None else [])

        check()
    finally:
        agent_process.stop_group = real


def test_any_pid_record_is_read_safely(tmp_path):
    from bat.evaluation.run.agent_process import stop_stale

    reads_any_record_safely(stop_stale, tmp_path)


def test_the_record_check_catches_a_reader_that_raises(tmp_path):
    """Canary: a reader that trusts the record's shape (a bare KeyError or TypeError on a
    field dropped or retyped) fails the same check."""
    from bat.evaluation.run.agent_process import stop_stale

    def trusting(record: Path, grace_s: float):
        known = json.loads(record.read_text())
        if not isinstance(known["pid"], int):
            raise ValueError("not a pid")
        return stop_stale(record, grace_s)

    with pytest.raises((KeyError, TypeError, ValueError)):
        reads_any_record_safely(trusting, tmp_path)


@fuzz(500)
@given(st.binary(max_size=40))
def test_the_watchdog_reads_any_line(line):
    from bat.evaluation.run.agent_watchdog import STARTING, read_word

    word = read_word(line.strip())
    assert type(word) is int and word >= STARTING


# -- Ctrl-C as the episodes' event loop is made ---------------------------------------------

INTERRUPTED_LOOP = """
import asyncio.selector_events as events, signal, sys
made = events.BaseSelectorEventLoop._make_self_pipe
def interrupted(loop):
    signal.raise_signal(signal.SIGINT)  # Ctrl-C, as asyncio makes the episodes' loop
    made(loop)
events.BaseSelectorEventLoop._make_self_pipe = interrupted
sys.argv = ["bat", "eval.run"]
from bat.cli.program import main
main()
"""


def test_ctrl_c_while_the_event_loop_is_made_is_one_line(tmp_path, home):
    """Seen once in 40 Ctrl-Cs just after "agent ready": the loop half made printed
    "Exception ignored ... '_ssock'" with a traceback after bat's line. Here the Ctrl-C
    lands at that very moment, every time."""
    mark = uuid.uuid4().hex
    project = project_with(tmp_path, mark)
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_LOOP],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
        assert "agent ready" in out
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "Exception ignored" not in err, err
        assert "never awaited" not in err, err
        assert err.count("bat: error:") == 1 and len(err.strip().splitlines()) == 1, err
    finally:
        no_agent_survives(mark, proc)


def test_the_agents_log_is_a_regular_file_or_one_error(tmp_path):
    """An outside probe put a FIFO where a resumed run's agent log goes: bat blocked in
    the open until killed. A FIFO, a link and a device are refused at once."""
    from bat.errors import InputError
    from bat.evaluation.run.agent_process import _open_log

    fifo = tmp_path / "agent-m.log"
    os.mkfifo(fifo)
    link = tmp_path / "agent-l.log"
    link.symlink_to("/dev/null")
    for path, said in ((fifo, "regular file"), (link, "regular file")):
        started = time.monotonic()
        with pytest.raises(InputError, match=said) as caught:
            _open_log(path)
        assert time.monotonic() - started < 1 and str(path) in caught.value.message
    regular = tmp_path / "agent-r.log"
    os.close(_open_log(regular))
    assert regular.is_file() and oct(regular.stat().st_mode & 0o777) == "0o600"
