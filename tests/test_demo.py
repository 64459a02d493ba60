"""The bundled demo of the README's first command: it must evaluate cleanly, offline.

It runs in place (eval_fixtures/demo, whose output folder git ignores), exactly as the
README runs it, and removes the run it made. The demo holds no fixed port (its agent's
is free, its judge is served by bat on a free one) and leaves no process behind however
it ends: run_demo.py becomes bat, and bat's children end with it.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.evalkit import episodes, run_dirs, summary

DEMO = REPO / "eval_fixtures" / "demo"
OLD_PORTS = (9960, 9961)  # the agent's and the judge's before they were free ones


@contextlib.contextmanager
def ports_taken(ports):
    """Another program listening on ``ports`` (those already taken stay so, by whoever)."""
    with contextlib.ExitStack() as stack:
        for port in ports:
            sock = stack.enter_context(socket.socket())
            with contextlib.suppress(OSError):
                sock.bind(("127.0.0.1", port))
                sock.listen()
        yield


def test_demo_evaluates_judges_and_reports_with_its_old_ports_taken(home):
    before = set(run_dirs(DEMO))
    config_before = (DEMO / "config.yaml").read_bytes()
    with ports_taken(OLD_PORTS):
        proc = subprocess.run(
            [sys.executable, str(DEMO / "run_demo.py")],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    made = [d for d in run_dirs(DEMO) if d not in before]
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = made
        model = json.loads((run_dir / "run.json").read_text())["models"][0]["dir"]
        totals = summary(run_dir, model)["totals"]
        assert totals["attempts"] == 54 and totals["passed"] == 44
        # the story the README tells: a flaky task (pass@3 above pass^3), failing ones,
        # an agent error that is not an infrastructure failure, and is not judged
        assert totals["pass_at_k"] > totals["pass_hat_k"]
        assert totals["agent_errors"]["agent_exception"] == 3 and totals["infra_failures"] == 0
        assert totals["judge"]["response_relevance"]["count"] == 51  # 54 less the errors
        # its cost, at the illustrative prices of eval.yaml's prices: (every model of the
        # demo is a stand-in): the agent's, the judge's and the simulated user's apart
        cost = summary(run_dir, model)["cost"]
        assert cost["unpriced"] == [] and cost["episodes"] == 54
        assert min(cost["agent"], cost["judge"], cost["user"]) > 0
        assert cost["total"] == pytest.approx(cost["agent"] + cost["judge"] + cost["user"])
        talked = summary(run_dir, model)["conversation"]  # the simulated user's figures
        assert talked["ended"]["goal_met"] == 3 and talked["turns"]["max"] == 2, talked
        rows = json.loads((run_dir / model / "metrics.json").read_text())["per_episode"]
        passed = {row["task_id"]: 0 for row in rows}
        for row in rows:
            passed[row["task_id"]] += row["success"]
        assert passed["forecast-flaky"] == 2
        assert passed["calculate-power"] == passed["convert-currency"] == 0
        assert passed["weather-on-a-budget"] == 0
        assert passed["remembers-the-name"] == passed["books-a-table"] == 3
        # the simulated user (user-rules.yaml) opens with the task's first message,
        # answers the agent's question once asked, and stops (###STOP###, not sent) with
        # the table booked: 2 user turns sent and a third message that ends it, goal met
        assert passed["books-with-a-simulated-user"] == 3
        found = episodes(run_dir, model).values()
        talks = [e for e in found if e["task_id"] == "books-with-a-simulated-user"]
        assert len(talks) == 3
        for episode in talks:
            record = episode["trace"]["simulated_user"]
            ended = (record["ended"], record["turns"], record["simulated_turns"])
            assert ended == ("goal_met", 2, 1), record
            assert (record["last_words"], record["usage"]["model_calls"]) == ("Thank you!", 2)
            assert record["model"] == "script:user-rules.yaml"
            turns = [(t["author"], t["input"], t["status"]) for t in episode["trace"]["turns"]]
            assert turns == [
                ("dataset", "I'd like to book a table", "input-required"),
                ("simulated_user", "4 people, please.", "completed"),
            ]
            assert episode["final_output"] == "booked a table for 4"
        asked = [row for row in rows if row["task_id"] == "asks-how-many"]
        assert {row["status"] for row in asked} == {"input-required"}
        assert all(row["success"] for row in asked)
        errors = [row for row in rows if row["task_id"] == "convert-currency"]
        assert {row["judge_error"] for row in errors} == {"not judged: agent error"}
        assert all(row["scores"] is None for row in errors)
        assert "44/54 episodes passed" in proc.stdout
        assert "judged 51 episodes" in proc.stdout and "3 not judged: agent error" in proc.stdout
        assert "scripted by bat from judge-rules.json at http://127.0.0.1:" in proc.stdout
        assert "user model: scripted by bat from user-rules.yaml at http://127.0.0.1:" in (
            proc.stdout
        )
        assert "every gate passed" in proc.stdout
        assert not any(f":{port}" in proc.stdout for port in OLD_PORTS)
        output = DEMO / "eval" / "output"
        assert (output / "judge_scores.png").is_file()
        report = (output / "report.html").read_text()
        # the judge disagrees with verdicts both ways, and the report says so (it shows
        # every run of the folder: earlier demo runs too)
        doubt = r'tool-none-needed</b> — (\d+)/\1 attempts passed; <span class="doubt">'
        doubt += r"the judge scored \1 passed attempts below 0\.5"
        assert re.search(doubt, report), report
        praise = r'weather-on-a-budget</b> — 0/(\d+) attempts passed; <span class="doubt">'
        praise += r"the judge scored \1 failed attempts 0\.8 or higher on every dimension"
        assert re.search(praise, report), report
        assert "Simulated users" in report  # the conversation's figures, in a table
        assert (DEMO / "config.yaml").read_bytes() == config_before
    finally:
        for run_dir in made:
            shutil.rmtree(run_dir)


def marked(mark: str) -> dict[int, str]:
    """The live processes whose environment holds ``mark``: pid -> command line."""
    needle = mark.encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                found[int(entry.name)] = command.decode(errors="replace")
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("when", ["agent ready at", "scripted by bat from"])
def test_demo_killed_with_sigkill_leaves_no_process(home, when):
    """kill -9 of run_demo.py, while the agent runs or while the judge is served."""
    before = set(run_dirs(DEMO))
    mark = f"BAT_DEMO_TEST_MARK={uuid.uuid4().hex}"
    name, value = mark.split("=")
    env = {**os.environ, name: value, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(DEMO / "run_demo.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if when in line:
                break
        assert any(when in line for line in seen), "".join(seen)
        alive = marked(mark)
        # what is checked below can see bat's children: the agent at least
        if when == "agent ready at":
            assert any("eval_fixtures.demo_agent" in cmd for cmd in alive.values()), alive
        assert proc.pid in alive  # run_demo.py is bat now: the process killed is bat
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marked(mark) == {}, "".join(seen)
    finally:
        for pid in marked(mark):  # only what this test started, should a check fail
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()
        for run_dir in set(run_dirs(DEMO)) - before:
            shutil.rmtree(run_dir)
