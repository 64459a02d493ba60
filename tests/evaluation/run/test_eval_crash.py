"""One crash must not poison the rest of a run (issue 8, part 3).

When the agent bat started dies, it is restarted; the episodes in flight run again, each
alone; the one that takes the agent down again is the cause (an agent error ``crashed``,
in pass@k); everything else is scored as if nothing had happened. When the restart
budget is spent, what is left is an infrastructure failure that ``--resume --retry-infra``
runs again, keeping the earlier record. An incomplete run exits 3.
"""

import json
import os
import signal
import time

import pytest

from tests.evalkit import episodes, make_project, run_dirs, start_bat, start_fixture, summary


def twenty_tasks(crash: bool) -> list[dict]:
    """20 tasks (19 without the crash); every fifth expects a phrase the echo lacks."""
    tasks = []
    for i in range(20):
        if i == 7:
            if crash:
                tasks.append({"id": "t07-crash", "turns": ["CRASH here"], "expected": {}})
            continue
        phrase = f"echo: question {i}" if i % 5 else "never said"
        tasks.append(
            {
                "id": f"t{i:02d}",
                "turns": [f"question {i}"],
                "expected": {"output_must_contain": [phrase]},
            }
        )
    return tasks


def verdicts(run_dir) -> dict[str, tuple[bool, str]]:
    return {
        name: (e["verdict"]["passed"], e["verdict"]["reason"])
        for name, e in episodes(run_dir).items()
    }


def test_a_crashing_task_leaves_the_other_episodes_scored_as_without_it(tmp_path, bat, home):
    settings = {"k": 3, "concurrency": 4, "agent_env": {"LATENCY_MS": "30"}}
    without = make_project(tmp_path / "without", twenty_tasks(crash=False), **settings)
    with_crash = make_project(tmp_path / "with", twenty_tasks(crash=True), **settings)
    assert bat("eval.run", cwd=without).code == 0
    result = bat("eval.run", cwd=with_crash)
    assert result.code == 0, result.out + result.err
    (baseline,) = run_dirs(without)
    (run_dir,) = run_dirs(with_crash)
    found = verdicts(run_dir)
    crashed = {name: found.pop(name) for name in list(found) if name.startswith("t07-crash")}
    assert found == verdicts(baseline)  # all 57, exactly as without the crash
    assert len(found) == 57 and sum(passed for passed, _ in found.values()) == 45
    for name in crashed:
        episode = episodes(run_dir)[name]
        assert episode["status"] == "error" and episode["agent_error"]["kind"] == "crashed"
        assert episode["infra_error"] is None and not episode["verdict"]["passed"]
    assert len(crashed) == 3
    totals = summary(run_dir)["totals"]
    assert totals["infra_failures"] == 0 and totals["agent_errors"]["crashed"] == 3
    assert totals["passed"] == 45 and totals["attempts"] == 60
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["restarts"] == 6  # per crash: after the wave, after its run alone


def test_the_agent_killed_from_outside_is_restarted_and_nobody_is_blamed(tmp_path, home):
    pid_file = tmp_path / "agent.pid"
    tasks = [
        {"id": f"t{i:02d}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(16)
    ]
    agent_env = {"LATENCY_MS": "200", "PID_FILE": str(pid_file)}
    project = make_project(tmp_path / "p", tasks, concurrency=4, agent_env=agent_env)
    proc = start_bat("eval.run", cwd=project, home=home)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        dirs = run_dirs(project)
        done = list((dirs[0] / "agent-default" / "episodes").glob("*.json")) if dirs else []
        if len(done) >= 4 and pid_file.is_file():
            break
        time.sleep(0.02)
    first_pid = int(pid_file.read_text())
    os.kill(first_pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    assert len(found) == 16 and all(e["verdict"]["passed"] for e in found.values())
    assert all(e["agent_error"] is None and e["infra_error"] is None for e in found.values())
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["restarts"] == 1
    assert "killed by SIGKILL" in out
    assert int(pid_file.read_text()) != first_pid  # the restarted agent wrote its own


def test_spent_restarts_leave_infrastructure_failures_that_retry_infra_runs(tmp_path, bat, home):
    tasks = [
        {"id": "t0", "turns": ["a"], "expected": {"output_must_contain": ["echo: a"]}},
        {"id": "t1-crash", "turns": ["CRASH"], "expected": {}},
        {"id": "t2", "turns": ["b"], "expected": {"output_must_contain": ["echo: b"]}},
        {"id": "t3-hang", "turns": ["HANG"], "expected": {}},
    ]
    project = make_project(tmp_path, tasks, concurrency=1, turn_timeout_s=1)
    config = (project / "eval/eval.yaml").read_text()
    (project / "eval/eval.yaml").write_text(
        config.replace("agent:\n", "agent:\n    max_restarts: 1\n")
    )
    first = bat("eval.run", cwd=project)
    assert first.code == 3, first.out + first.err
    assert "restarts are spent" in first.out and "--retry-infra" in first.err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    assert found["t1-crash__try1.json"]["agent_error"]["kind"] == "crashed"
    not_run = [n for n, e in found.items() if (e["infra_error"] or {}).get("kind") == "not_run"]
    assert sorted(not_run) == ["t2__try1.json", "t3-hang__try1.json"]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "completed" and record["infra_failures"] == 2

    again = bat("eval.run", "--resume", "--retry-infra", cwd=project)
    assert again.code == 3, again.out + again.err  # the hang is still a timeout
    found = episodes(run_dir)
    assert found["t2__try1.json"]["verdict"]["passed"]
    assert found["t2__try1.json"]["earlier"] == ["retried/t2__try1.1.json"]
    earlier = json.loads((run_dir / "agent-default/retried/t2__try1.1.json").read_text())
    assert earlier["infra_error"]["kind"] == "not_run"
    assert found["t3-hang__try1.json"]["infra_error"]["kind"] == "timeout"
    assert found["t0__try1.json"].get("earlier") == []  # not touched: it had passed
    totals = summary(run_dir)["totals"]
    assert totals["infra_failures"] == 1 and totals["passed"] == 2

    third = bat("eval.run", "--retry-infra", cwd=project)  # the latest run, once more
    assert third.code == 3
    hang = episodes(run_dir)["t3-hang__try1.json"]
    assert hang["earlier"] == ["retried/t3-hang__try1.1.json", "retried/t3-hang__try1.2.json"]


@pytest.mark.parametrize("transport", ["jsonrpc", "grpc"])
def test_an_agent_bat_did_not_start_that_dies_is_an_infrastructure_failure(
    tmp_path, bat, home, transport
):
    """Its death under a request is a crash on every binding (gRPC says UNAVAILABLE both
    for a stream cut under a call and for nobody listening: the words tell them apart)."""
    from tests.evalkit import free_port

    port = free_port()
    agent = start_fixture("echo_agent", port, TRANSPORT=transport)
    try:
        tasks = [
            {"id": "a", "turns": ["one"], "expected": {"output_must_contain": ["echo: one"]}},
            {"id": "b-crash", "turns": ["CRASH"], "expected": {}},
            {"id": "c", "turns": ["two"], "expected": {"output_must_contain": ["echo: two"]}},
        ]
        project = make_project(
            tmp_path, tasks, start=False, agent_url=f"http://127.0.0.1:{port}", concurrency=1
        )
        result = bat("eval.run", cwd=project)
    finally:
        agent.kill()
        agent.wait(timeout=10)
    assert result.code == 3, result.err
    found = episodes(run_dirs(project)[0])
    assert found["a__try1.json"]["verdict"]["passed"]
    assert found["b-crash__try1.json"]["infra_error"]["kind"] == "crash"
    assert found["c__try1.json"]["infra_error"]["kind"] == "unreachable"
