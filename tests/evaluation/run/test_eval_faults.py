"""Faults from outside (issue 9): Ctrl-C at every stage, kill -9 of bat, a full disk.

Every test runs the real ``bat eval.run`` in the background against a real fixture agent
(and, for the judge, the scripted model server), does something bad to it at a chosen
moment, and then checks what a user relies on: the exit status (130 for Ctrl-C, 1 for a
disk that is full), one ``bat: error:`` line and no traceback, no agent process left
behind, every JSON file of the run valid, and ``--resume`` finishing the run with each
episode exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import fill
from tests.evalkit import (
    episodes,
    free_port,
    make_project,
    run_dirs,
    start_bat,
    start_fixture,
    start_model_server,
)

MODEL = "agent-default"


def tasks(n: int) -> list[dict]:
    return [
        {"id": f"t{i:02d}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(n)
    ]


def wait_until(condition, timeout_s: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def the_run(project: Path) -> Path | None:
    dirs = run_dirs(project)
    return dirs[0] if dirs else None


def episodes_written(project: Path) -> int:
    run_dir = the_run(project)
    folder = run_dir / MODEL / "episodes" if run_dir else None
    return len(list(folder.glob("*.json"))) if folder and folder.is_dir() else 0


def agent_identity(project: Path) -> dict | None:
    """The pid record bat keeps for its running agent, once it names the agent (before
    the start it holds only the agent's mark)."""
    run_dir = the_run(project)
    path = run_dir / f"agent-{MODEL}.process.json" if run_dir else None
    if path is None or not path.is_file():
        return None
    record = json.loads(path.read_text())
    return record if record.get("pid") is not None else None


def group_alive(group: int) -> bool:
    """Whether any process of the group lives (a zombie, already dead, does not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def pid_alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2 :].split()[0] != "Z"


def assert_no_traceback(err: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("bat: error:") == 1, err


def assert_all_json_valid(project: Path) -> None:
    """Every JSON file under the output folder parses (no half-written file)."""
    for path in (project / "eval" / "output").rglob("*.json"):
        json.loads(path.read_text())


def interrupt(proc: subprocess.Popen, *, timeout_s: float = 20) -> tuple[int, str, str]:
    """Ctrl-C, as a terminal sends it; the exit status and the output."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=timeout_s)
    return proc.returncode, out, err


def resume_completes(bat, project: Path, total: int) -> None:
    """``--resume`` finishes the run: every episode once, all passed, one run folder."""
    again = bat("eval.run", "--resume", cwd=project)
    assert again.code == 0, again.out + again.err
    assert len(run_dirs(project)) == 1
    found = episodes(the_run(project))
    assert sorted(found) == [f"t{i:02d}__try1.json" for i in range(total)]
    assert all(e["verdict"]["passed"] for e in found.values())
    assert_all_json_valid(project)


# --- kill -9 of bat ---------------------------------------------------------------------


# Like `uv run`: a first process that starts the server as its child, in its group.
WRAPPED = (
    '{python} -c "import subprocess, sys; '
    "sys.exit(subprocess.call([sys.executable, '-m', 'eval_fixtures.echo_agent']))\""
)


def slow_project(root: Path, n: int = 12, **settings) -> Path:
    env = {"LATENCY_MS": "300", **settings.pop("agent_env", {})}
    return make_project(root, tasks(n), concurrency=2, agent_env=env, **settings)


def started_and_working(project: Path, proc: subprocess.Popen) -> dict:
    """Wait until the agent is recorded and some episodes are written; its record."""
    wait_until(
        lambda: agent_identity(project) is not None and episodes_written(project) >= 2,
        what="the agent to answer",
    )
    assert proc.poll() is None
    return agent_identity(project)


@pytest.mark.parametrize("command", [None, WRAPPED], ids=["direct", "wrapped"])
def test_kill_9_of_bat_takes_the_agent_down_and_resume_finishes(tmp_path, bat, home, command):
    server_pid = tmp_path / "server.pid"  # the process that listens, wrapped or not
    project = slow_project(tmp_path / "p", command=command, agent_env={"PID_FILE": str(server_pid)})
    proc = start_bat("eval.run", cwd=project, home=home)
    agent = started_and_working(project, proc)
    server = int(server_pid.read_text())
    assert group_alive(agent["pgid"]) and pid_alive(server)
    assert (server == agent["pid"]) == (command is None)
    proc.kill()
    proc.communicate(timeout=10)
    wait_until(lambda: not group_alive(agent["pgid"]), 10, "the agent's group to end")
    assert not pid_alive(server)
    wait_until(lambda: not pid_alive(agent["watchdog_pid"]), 5, "the watchdog to go")
    written = episodes_written(project)
    resume_completes(bat, project, 12)
    run = json.loads((the_run(project) / "run.json").read_text())
    assert run["status"] == "completed"
    assert written < 12  # the resume had something left to do


def test_resume_stops_the_agent_a_killed_bat_left_behind(tmp_path, bat, home):
    """The watchdog killed too (say, by the OOM killer): the agent outlives bat, and the
    next start in the run folder recognises it by its recorded pid and start time."""
    project = slow_project(tmp_path)
    proc = start_bat("eval.run", cwd=project, home=home)
    agent = started_and_working(project, proc)
    os.kill(agent["watchdog_pid"], signal.SIGKILL)
    proc.kill()
    proc.communicate(timeout=10)
    time.sleep(0.5)
    assert pid_alive(agent["pid"])  # left behind, still answering on the port
    try:
        again = bat("eval.run", "--resume", cwd=project)
        assert again.code == 0, again.out + again.err
        assert f"stopped the agent an earlier bat left running (pid {agent['pid']})" in again.out
        assert not group_alive(agent["pgid"])
        found = episodes(the_run(project))
        assert len(found) == 12 and all(e["verdict"]["passed"] for e in found.values())
        assert_all_json_valid(project)
    finally:
        if group_alive(agent["pgid"]):
            os.killpg(agent["pgid"], signal.SIGKILL)


def test_a_foreign_process_on_the_port_is_refused_and_left_alone(tmp_path, bat, home):
    """A record whose pid now names another process (its start time differs) is not ours:
    what answers on the port is refused as before, and nothing is killed."""
    port = free_port()
    project = make_project(tmp_path, tasks(2), agent_url=f"http://127.0.0.1:{port}")
    first = bat("eval.run", cwd=project)
    assert first.code == 0, first.err
    run_dir = the_run(project)
    for path in (run_dir / MODEL / "episodes").glob("*.json"):
        path.unlink()  # so --resume has episodes to run
    foreign = start_fixture("echo_agent", port)
    try:
        record = {"pid": foreign.pid, "pgid": foreign.pid, "start_ticks": 1}  # not its start
        (run_dir / f"agent-{MODEL}.process.json").write_text(json.dumps(record))
        again = bat("eval.run", "--resume", cwd=project)
        assert again.code == 1, again.out + again.err
        assert f"something already answers at http://127.0.0.1:{port}" in again.err
        assert foreign.poll() is None  # untouched
    finally:
        foreign.kill()
        foreign.wait(timeout=10)


# --- Ctrl-C -------------------------------------------------------------------------------


def test_ctrl_c_while_the_agent_starts_stops_it(tmp_path, home):
    project = slow_project(tmp_path, command=WRAPPED, agent_env={"STARTUP_DELAY_MS": "60000"})
    proc = start_bat("eval.run", cwd=project, home=home)
    wait_until(lambda: agent_identity(project) is not None, what="the agent to be started")
    agent = agent_identity(project)
    time.sleep(0.5)  # bat waits for the card, which will not answer for a minute
    code, _, err = interrupt(proc)
    assert code == 130, err
    assert_no_traceback(err)
    assert not group_alive(agent["pgid"]) and not pid_alive(agent["watchdog_pid"])
    assert json.loads((the_run(project) / "run.json").read_text())["status"] == "interrupted"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_during_the_episodes_keeps_them_and_stops_the_agent(tmp_path, bat, home, signum):
    """Ctrl-C, or SIGTERM as a cancelled CI job sends it: the same orderly stop."""
    project = slow_project(tmp_path)
    proc = start_bat("eval.run", cwd=project, home=home)
    agent = started_and_working(project, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=20)
    code = proc.returncode
    assert code == 130, err
    assert_no_traceback(err)
    assert "finished episodes are saved in" in err and "--resume" in err
    assert not group_alive(agent["pgid"]) and not pid_alive(agent["watchdog_pid"])
    assert agent_identity(project) is None  # stopped by bat: nothing stale recorded
    run = json.loads((the_run(project) / "run.json").read_text())
    assert run["status"] == "interrupted"
    assert_all_json_valid(project)
    resume_completes(bat, project, 12)


def read_until(proc: subprocess.Popen, text: str, timeout_s: float = 60) -> list[str]:
    """stdout lines up to the first holding ``text`` (the stage that follows has begun)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"bat ended before {text!r}: {lines}\n{proc.stderr.read()}")
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"no {text!r} within {timeout_s} s: {lines}")


@pytest.mark.parametrize("delay_s", [0.0, 0.4, 1.0])
def test_ctrl_c_while_the_report_is_drawn_exits_130_in_one_line(tmp_path, bat, home, delay_s):
    """The last stages (summaries, charts, report) and the interpreter's own shutdown:
    exit 130, never -2 or a traceback from threading's shutdown."""
    project = make_project(tmp_path, tasks(3))
    proc = start_bat("eval.run", cwd=project, home=home)
    read_until(proc, "files in")  # eval.summarize is done: eval.plot begins
    time.sleep(delay_s)
    if proc.poll() is not None:  # a fast machine drew it all first: then it is whole
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert (project / "eval/output/report.html").is_file()
        return
    code, _, err = interrupt(proc)
    if code == 0:  # it finished between the poll and the signal: then it is whole too
        assert "Traceback" not in err and (project / "eval/output/report.html").is_file(), err
        return
    assert code == 130, err
    assert_no_traceback(err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("bat: error: interrupted") and "kept" in last, err
    assert_all_json_valid(project)
    run = json.loads((the_run(project) / "run.json").read_text())
    assert run["status"] == "completed"  # every episode ran: only the charts were cut
    assert len(episodes(the_run(project))) == 3
    again = bat("eval.plot", cwd=project)  # what the message says to run
    assert again.code == 0 and (project / "eval/output/report.html").is_file(), again.err


@pytest.mark.parametrize("delay_s", [0.0, 0.02, 0.05])
def test_ctrl_c_as_bat_exits_is_130_or_a_finished_run_never_death_by_signal(
    tmp_path, home, delay_s
):
    """After its last line, bat used to die of the signal (status -2) in the interpreter's
    shutdown. Now it is either still at work (130, one line) or done (0)."""
    project = make_project(tmp_path, tasks(2))
    proc = start_bat("eval.run", cwd=project, home=home)
    read_until(proc, "report.html")
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode in (0, 130), (proc.returncode, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    if proc.returncode == 130:
        assert err.strip().splitlines()[-1].startswith("bat: error: interrupted"), err
    assert_all_json_valid(project)


# --- the judge: Retry-After -------------------------------------------------------------


def judge_reply(score: float) -> str:
    names = (
        "response_relevance",
        "task_completion_quality",
        "hallucination_score",
        "tool_call_appropriateness",
    )
    return json.dumps({name: {"reasoning": "fine", "score": score} for name in names})


def judged_project(root: Path, rules: list[dict], **judge) -> tuple[Path, subprocess.Popen, str]:
    rules_file = root / "rules.json"
    root.mkdir(parents=True, exist_ok=True)
    rules_file.write_text(json.dumps(rules))
    server, url = start_model_server(rules_file)
    project = make_project(root / "p", tasks(2))
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True
    config["judge"] = {"provider": "openai", "model": "judge", "base_url": url + "/v1", **judge}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    return project, server, url


def requests_served(url: str) -> int:
    import urllib.request

    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/stats") as r:
        return json.loads(r.read())["requests"]


def test_ctrl_c_while_the_judge_waits_on_retry_after_ends_at_once(tmp_path, home):
    rules = [{"status": 429, "retry_after": 300}]  # every request: come back in 5 minutes
    project, server, url = judged_project(tmp_path, rules, max_retry_after_s=600, concurrency=2)
    try:
        proc = start_bat("eval.run", cwd=project, home=home)
        wait_until(lambda: requests_served(url) >= 2, 60, "the judge's first requests")
        time.sleep(0.3)  # both workers are now in their 300 s wait
        started = time.monotonic()
        code, _, err = interrupt(proc)
        assert time.monotonic() - started < 5  # not the 300 s of the wait
    finally:
        server.kill()
        server.wait(timeout=10)
    assert code == 130, err
    assert_no_traceback(err)
    run_dir = the_run(project)
    assert f"interrupted while judging {run_dir.name}" in err
    assert f"bat eval.judge --run {run_dir.name}" in err
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert len(episodes(run_dir)) == 2
    assert_all_json_valid(project)


def test_a_long_retry_after_is_capped_and_the_cap_is_said(tmp_path, bat, home):
    rules = [{"status": 429, "retry_after": 300}]
    project, server, _ = judged_project(tmp_path, rules, max_retry_after_s=0.2, max_retries=2)
    try:
        started = time.monotonic()
        result = bat("eval.run", cwd=project, timeout=60)
        took = time.monotonic() - started
    finally:
        server.kill()
        server.wait(timeout=10)
    assert result.code == 0, result.out + result.err
    assert took < 30  # two capped waits of 0.2 s each, not 300 s
    note = "the server asked to wait 300 s (Retry-After); waited 0.2 s (judge.max_retry_after_s)"
    assert result.out.count(f"judge openai:judge: {note}\n") == 1  # said once, not per request
    for episode in episodes(the_run(project)).values():
        assert note in episode["scores"]["error"]  # and kept in the episode's judge error
        assert "gave up after 3 attempts" in episode["scores"]["error"]


# --- a full disk (small_disk and fill: tests/conftest.py) ---------------------------------


def test_a_full_disk_names_the_file_marks_the_run_failed_and_loses_nothing(
    tmp_path, bat, home, small_disk
):
    output = small_disk / "output"
    project = make_project(
        tmp_path / "p",
        tasks(12),
        concurrency=2,
        agent_env={"LATENCY_MS": "300"},
        output_dir=str(output),
    )
    proc = start_bat("eval.run", cwd=project, home=home)
    wait_until(lambda: len(list(output.glob("*/*/episodes/*.json"))) >= 2, what="episodes")
    (run_dir,) = [p.parent for p in output.glob("*/run.json")]
    agent = json.loads((run_dir / f"agent-{MODEL}.process.json").read_text())
    ballast = fill(small_disk)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert_no_traceback(err)
    line = next(line for line in err.splitlines() if line.startswith("bat: error:"))
    assert f"bat: error: cannot write {run_dir}/" in line, line
    assert "No space left on device" in line and f"--resume {run_dir.name}" in line
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"
    kept = {p.name: json.loads(p.read_text()) for p in run_dir.glob(f"{MODEL}/episodes/*.json")}
    assert 2 <= len(kept) < 12 and all(e["verdict"]["passed"] for e in kept.values())
    assert not list(run_dir.rglob("*.tmp"))  # no temporary file left taking room
    assert not group_alive(agent["pgid"])

    ballast.unlink()
    again = bat("eval.run", "--resume", cwd=project)
    assert again.code == 0, again.out + again.err
    final = {p.name: json.loads(p.read_text()) for p in run_dir.glob(f"{MODEL}/episodes/*.json")}
    assert sorted(final) == [f"t{i:02d}__try1.json" for i in range(12)]
    for name, episode in kept.items():  # what was written before the disk filled stays
        assert final[name]["started_at"] == episode["started_at"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"


# --- the judge client: no wait without an end --------------------------------------------


@pytest.fixture
def slow_judge():
    """A judge server that sends its answer a byte every 0.1 s (``/drip``) or asks to come
    back in 300 s (``/busy``); its base URL."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answer = json.dumps({"choices": [{"message": {"content": judge_reply(0.5)}}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if self.path.startswith("/busy"):
                self.send_response(429)
                self.send_header("Retry-After", "300")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            try:
                for byte in answer:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass  # the client gave up

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_judge_answer_dripping_in_ends_at_the_timeout(slow_judge):
    from bat.evaluation.inputs.config import JudgeSpec
    from bat.evaluation.judging.client import JudgeClient
    from bat.evaluation.judging.parse import JudgeError

    spec = JudgeSpec(provider="openai", model="m", base_url=f"{slow_judge}/drip/v1")
    client = JudgeClient(spec.model_copy(update={"timeout_s": 1, "max_retries": 0}), None)
    started = time.monotonic()
    with pytest.raises(JudgeError, match=r"no answer within 1 s \(gave up after 1 attempt\)"):
        client.chat("system", "user")  # each byte comes well within the read timeout
    assert time.monotonic() - started < 3


def test_cancel_ends_a_retry_after_wait_at_once(slow_judge):
    import threading

    from bat.evaluation.inputs.config import JudgeSpec
    from bat.evaluation.judging.client import JudgeClient
    from bat.evaluation.judging.parse import JudgeError

    spec = JudgeSpec(
        provider="openai", model="m", base_url=f"{slow_judge}/busy/v1", max_retry_after_s=600
    )
    client = JudgeClient(spec, None)
    threading.Timer(0.5, client.cancel).start()
    started = time.monotonic()
    with pytest.raises(JudgeError, match="judging was stopped"):
        client.chat("system", "user")
    assert time.monotonic() - started < 3  # not the 300 s the server asked for
    with pytest.raises(JudgeError, match="judging was stopped"):
        client.chat("system", "user")  # and no new request once cancelled


def test_a_write_that_finds_the_disk_full_names_the_file_and_keeps_the_old_one(small_disk):
    from bat.atomic import write_text_atomic

    path = small_disk / "summary.json"
    write_text_atomic(path, '{"kept": true}\n')
    fill(small_disk)
    with pytest.raises(OSError) as caught:
        write_text_atomic(path, json.dumps({"new": "x" * 100_000}))
    assert caught.value.filename == str(path) and "No space left" in caught.value.strerror
    assert json.loads(path.read_text()) == {"kept": True}
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast", "summary.json"]
