"""``bat eval.run`` against real fixture agents (processes on 127.0.0.1)."""

import json
import signal
import time

import pytest
import yaml

from tests.evalkit import (
    episodes,
    free_port,
    make_project,
    port_answers,
    run_dirs,
    start_bat,
    start_fixture,
    summary,
)


def agent_url(project):
    return yaml.safe_load((project / "eval/eval.yaml").read_text())["evaluation"]["agent_url"]


def test_echo_dataset_passes_every_expectation(tmp_path, bat, home):
    project = make_project(tmp_path, "echo_tasks.json", k=2)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "completed" and record["k"] == 2
    totals = summary(run_dir)["totals"]
    tasks = json.loads((project / "eval/input/tasks.json").read_text())
    assert totals["attempts"] == 2 * len(tasks)
    failing = {
        n: e["verdict"]["reason"]
        for n, e in episodes(run_dir).items()
        if not e["verdict"]["passed"]
    }
    assert failing == {}
    assert totals["passed"] == totals["attempts"] and totals["pass_at_k"] == 1.0
    assert "episodes passed (100.0 %)" in result.out
    assert (run_dir / "agent-default" / "metrics.json").is_file()
    assert not port_answers(agent_url(project)), "the agent must be stopped"


@pytest.mark.parametrize(
    "agent_env",
    [{"ANSWER_IN": "message"}, {"ANSWER_IN": "status"}, {"NO_STREAMING": "1"}],
    ids=["answer-in-message", "answer-in-status", "not-streaming"],
)
def test_every_answer_channel_and_non_streaming(tmp_path, bat, home, agent_env):
    tasks = [
        {
            "id": "plain",
            "turns": ["hello there"],
            "expected": {"output_must_contain": ["echo: hello there"]},
        },
        {
            "id": "memory",
            "turns": ["a", "b", "HISTORY"],
            "expected": {"output_regex": "^history: a \\| b$"},
        },
        {
            "id": "ask",
            "turns": ["ASK x", "this"],
            "expected": {"output_must_contain": ["got it: this"]},
        },
    ]
    project = make_project(tmp_path, tasks, agent_env=agent_env)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    verdicts = {n: e["verdict"] for n, e in episodes(run_dir).items()}
    assert all(v["passed"] for v in verdicts.values()), verdicts


def test_wrong_answers_are_failures_with_reasons_not_infrastructure(tmp_path, bat, home):
    tasks = [
        {
            "id": "paris",
            "turns": ["hello"],
            "expected": {
                "status": "completed",
                "output_must_contain": ["Paris"],
                "tool_calls": [{"name": "search"}],
            },
        }
    ]
    project = make_project(tmp_path, tasks)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    (episode,) = episodes(run_dir).values()
    assert episode["infra_error"] is None
    assert episode["verdict"]["reason"] == (
        "status: 'completed'; output: missing 'Paris'; tool_call:search: called 0×, expected ≥1×"
    )
    assert summary(run_dir)["totals"]["infra_failures"] == 0


def test_trace_records_events_turns_and_timing(tmp_path, bat, home):
    tasks = [{"id": "t", "turns": ["ASK please", "now"], "expected": {}}]
    project = make_project(tmp_path, tasks)
    assert bat("eval.run", cwd=project).code == 0
    (episode,) = episodes(run_dirs(project)[0]).values()
    trace = episode["trace"]
    assert [t["status"] for t in trace["turns"]] == ["input-required", "completed"]
    assert trace["turns"][0]["task_id"] == trace["turns"][1]["task_id"]  # continued the task
    assert trace["turns"][0]["output"] == "What exactly do you mean?"
    opened = [e["user_input"] for e in trace["events"] if e["user_input"]]
    assert opened == ["ASK please", "now"]
    assert (
        trace["time_to_first_event_s"] > 0
        and trace["wall_time_s"] >= trace["time_to_first_event_s"]
    )
    assert episode["final_output"] == "got it: now"
    # bat-cli 2026.10's keys, with its meaning and units, beside bat's own
    assert episode["final_status"] == episode["status"] == "completed"
    assert episode["model_name"] == episode["model"]
    assert episode["aux"] == {"agent_url": episode["aux"]["agent_url"], "attempt_index": 0}
    assert episode["aux"]["agent_url"].startswith("http://127.0.0.1:")
    assert trace["wall_ms"] == round(trace["wall_time_s"] * 1000, 3)
    assert all(e["t_ms"] == round(e["t"] * 1000, 3) for e in trace["events"])
    assert {e["task_status"] for e in trace["events"]} >= {"input-required", "completed"}


def test_agent_that_exits_during_start_up_shows_its_log(tmp_path, bat, home):
    project = make_project(tmp_path, "echo_tasks.json", agent_env={"EXIT_ON_START": "1"})
    result = bat("eval.run", cwd=project)
    assert result.code == 1
    assert "exited with status 4 before it was ready" in result.err
    assert "exiting during start-up" in result.err  # a line of the agent's own log
    assert "Traceback" not in result.err
    (run_dir,) = run_dirs(project)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"


def test_agent_not_ready_in_time(tmp_path, bat, home):
    project = make_project(
        tmp_path,
        "echo_tasks.json",
        agent_startup_timeout_s=1,
        agent_env={"STARTUP_DELAY_MS": "5000"},
    )
    started = time.monotonic()
    result = bat("eval.run", cwd=project)
    assert result.code == 1 and "did not answer" in result.err
    assert time.monotonic() - started < 10
    assert not port_answers(agent_url(project))


def test_agent_crashing_mid_run_is_restarted_and_the_cause_found(tmp_path, bat, home):
    tasks = [{"id": f"ok-{i}", "turns": [f"hello {i}"], "expected": {}} for i in range(6)]
    tasks.insert(2, {"id": "crash", "turns": ["CRASH now"], "expected": {}})
    project = make_project(tmp_path, tasks, concurrency=1)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    assert len(found) == 7  # the run completed: every episode has a file
    assert all(e["infra_error"] is None for e in found.values())
    crash = found["crash__try1.json"]
    assert crash["status"] == "error" and crash["agent_error"]["kind"] == "crashed"
    assert "exit status 3" in crash["agent_error"]["message"]
    assert not crash["verdict"]["passed"]
    # The episodes after the crash ran on the restarted agent as if nothing happened.
    assert all(found[f"ok-{i}__try1.json"]["verdict"]["passed"] for i in range(6))
    totals = summary(run_dir)["totals"]
    assert totals["infra_failures"] == 0 and totals["agent_errors"]["crashed"] == 1
    assert totals["pass_at_k"] == round(6 / 7, 4)
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["restarts"] == 2  # after the crash, and after its run alone
    assert "crashes the agent" in result.out and "restarting it" in result.out


def test_hanging_agent_is_timed_out_and_stopped(tmp_path, bat, home):
    tasks = [
        {"id": "hang", "turns": ["HANG"], "expected": {}},
        {"id": "fine", "turns": ["hi"], "expected": {"output_must_contain": ["echo: hi"]}},
    ]
    project = make_project(tmp_path, tasks, turn_timeout_s=1, agent_shutdown_timeout_s=2)
    started = time.monotonic()
    result = bat("eval.run", cwd=project)
    # Everything is written and summarized, but a timeout is not the agent's number: exit 3.
    assert result.code == 3, result.err
    assert "the run's numbers are incomplete" in result.err and "--retry-infra" in result.err
    assert time.monotonic() - started < 15
    found = episodes(run_dirs(project)[0])
    assert found["hang__try1.json"]["infra_error"]["kind"] == "timeout"
    assert found["fine__try1.json"]["verdict"]["passed"]
    assert not port_answers(agent_url(project))


def test_interrupt_keeps_finished_episodes_and_resume_completes(tmp_path, bat, home):
    tasks = [
        {"id": f"t{i:02d}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(30)
    ]
    project = make_project(tmp_path, tasks, concurrency=2, agent_env={"LATENCY_MS": "200"})
    proc = start_bat("eval.run", cwd=project, home=home)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        dirs = run_dirs(project)
        if dirs and len(list((dirs[0] / "agent-default" / "episodes").glob("*.json"))) >= 4:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "bat eval.run --resume" in err and "Traceback" not in err
    (run_dir,) = run_dirs(project)
    kept = episodes(run_dir)
    assert 4 <= len(kept) < 30
    assert all(e["verdict"]["passed"] for e in kept.values())  # every kept file is whole
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert not port_answers(agent_url(project))

    resumed = bat("eval.run", "--resume", cwd=project, timeout=120)  # in this process
    assert resumed.code == 0, resumed.err
    assert run_dirs(project) == [run_dir]
    final = episodes(run_dir)
    assert len(final) == 30
    for name, episode in kept.items():  # finished episodes were not run again
        assert final[name]["started_at"] == episode["started_at"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert summary(run_dir)["totals"]["passed"] == 30


def test_resume_of_a_complete_run_runs_nothing(tmp_path, bat, home):
    project = make_project(tmp_path, [{"id": "a", "turns": ["x"], "expected": {}}])
    assert bat("eval.run", cwd=project).code == 0
    again = bat("eval.run", "--resume", cwd=project)
    assert again.code == 0 and "already there" in again.out


def test_resume_with_another_k_is_refused_before_anything_runs(tmp_path, bat, home):
    """An outside probe changed k from 3 to 5 and resumed: try4 and try5 were added while
    run.json and the summaries said k=3, so pass@3 was computed from 5 attempts."""
    project = make_project(tmp_path, [{"id": "a", "turns": ["x"], "expected": {}}], k=1)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    before = (run_dir / "run.json").read_bytes()
    config = project / "eval" / "eval.yaml"
    config.write_text(config.read_text().replace("k: 1", "k: 2"))
    again = bat("eval.run", "--resume", cwd=project)
    assert again.code == 2, again.err
    assert again.err.strip().splitlines()[-1].startswith(f"bat: error: {run_dir.name} runs k=1")
    assert (run_dir / "run.json").read_bytes() == before
    assert not list(run_dir.glob("*/episodes/a__try2.json"))


def test_models_each_start_the_agent_with_their_settings(tmp_path, bat, home):
    tasks = [
        {
            "id": "which",
            "turns": ["MODEL?"],
            "expected": {"output_regex": "^model: m-(one|two)/openai$"},
        }
    ]
    project = make_project(
        tmp_path, tasks, models=["openai:m-one", {"provider": "openai", "model": "m-two"}]
    )
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    one = episodes(run_dir, "openai_m-one")["which__try1.json"]
    two = episodes(run_dir, "openai_m-two")["which__try1.json"]
    assert one["final_output"] == "model: m-one/openai" and one["model"] == "openai:m-one"
    assert two["final_output"] == "model: m-two/openai"
    assert (run_dir / "agent-openai_m-one.log").is_file() and (
        run_dir / "agent-openai_m-two.log"
    ).is_file()
    assert (run_dir / "openai_m-two" / "summary.json").is_file()


def test_refuses_when_something_already_answers(tmp_path, bat, home):
    tasks = [{"id": "a", "turns": ["x"], "expected": {}}]
    port = free_port()
    blocker = start_fixture("echo_agent", port)
    try:
        project = make_project(tmp_path, tasks, agent_url=f"http://127.0.0.1:{port}")
        result = bat("eval.run", cwd=project)
        assert result.code == 1 and "already answers" in result.err
        # ...but evaluates it when told the agent is already running.
        (project / "eval/eval.yaml").write_text(
            yaml.safe_dump(
                {"evaluation": {"agent_url": f"http://127.0.0.1:{port}", "agent": {"start": False}}}
            )
        )
        assert bat("eval.run", cwd=project).code == 0
        assert blocker.poll() is None  # not stopped by bat
    finally:
        blocker.terminate()
        blocker.wait(timeout=10)


def test_external_agent_that_is_not_there(tmp_path, bat, home):
    project = make_project(tmp_path, [{"id": "a", "turns": ["x"], "expected": {}}], start=False)
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and "no agent answers" in result.err


def test_stages_run_alone_on_the_latest_run(tmp_path, bat, home):
    tasks = [{"id": "a", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}}]
    project = make_project(tmp_path, tasks, k=2)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    (run_dir / "agent-default" / "summary.json").unlink()
    assert bat("eval.summarize", cwd=project).code == 0
    assert summary(run_dir)["totals"]["passed"] == 2
    # Correct an expectation: eval.verdict re-checks without running the agent again.
    tasks[0]["expected"]["output_must_contain"] = ["Paris"]
    (project / "eval/input/tasks.json").write_text(json.dumps(tasks))
    checked = bat("eval.verdict", "--run", run_dir.name, cwd=project)
    assert checked.code == 0 and "2 verdicts changed" in checked.out
    assert bat("eval.summarize", "--run", str(run_dir), cwd=project).code == 0
    assert summary(run_dir)["totals"]["passed"] == 0
    missing = bat("eval.summarize", "--run", "nope", cwd=project)
    assert missing.code == 2 and "no run 'nope'" in missing.err


def test_stage_without_any_run(tmp_path, bat, home):
    project = make_project(tmp_path, [{"id": "a", "turns": ["x"], "expected": {}}])
    result = bat("eval.summarize", cwd=project)
    assert result.code == 2 and "no runs" in result.err


def test_task_ids_with_slashes_stay_inside_the_run(tmp_path, bat, home):
    tasks = [
        {"id": "../../escape", "turns": ["a"], "expected": {}},
        {"id": "/etc/passwd", "turns": ["b"], "expected": {}},
        {"id": "..", "turns": ["c"], "expected": {}},
    ]
    project = make_project(tmp_path, tasks)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    written = sorted(p for p in tmp_path.rglob("*.json") if "episodes" in p.parts)
    assert len(written) == 3
    assert all(p.parent == run_dir / "agent-default" / "episodes" for p in written)
    assert {json.loads(p.read_text())["task_id"] for p in written} == {t["id"] for t in tasks}


def test_compare_two_runs_in_the_terminal_and_as_json(tmp_path, bat, home):
    tasks = [
        {"id": "stable", "turns": ["a"], "expected": {"output_must_contain": ["echo: a"]}},
        {"id": "flips", "turns": ["b"], "expected": {"output_must_contain": ["echo: b"]}},
    ]
    project = make_project(tmp_path, tasks, k=2)
    assert bat("eval.run", cwd=project).code == 0
    tasks[1]["expected"]["output_must_contain"] = ["nope"]
    (project / "eval/input/tasks.json").write_text(json.dumps(tasks))
    assert bat("eval.run", cwd=project).code == 0
    first, second = run_dirs(project)
    text = bat("eval.compare", first.name, second.name, cwd=project)
    assert text.code == 0, text.err
    assert "flips" in text.out and "regressed" in text.out and "McNemar" in text.out
    data = json.loads(bat("eval.compare", first.name, second.name, "--json", cwd=project).out)
    assert data["regressed"] == ["flips"] and data["improved"] == []
    assert {r["task_id"]: r["change"] for r in data["tasks"]} == {"stable": 0.0, "flips": -1.0}
    bad = bat("eval.compare", first.name, "missing-run", cwd=project)
    assert bad.code == 2 and "no run 'missing-run'" in bad.err


def test_verdict_with_a_malformed_episode_of_ours_changes_nothing(tmp_path, bat, home):
    tasks = [{"id": f"t{i}", "turns": [f"q{i}"], "expected": {}} for i in range(3)]
    project = make_project(tmp_path, tasks)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    folder = run_dir / "agent-default" / "episodes"
    changed = [{**t, "expected": {"output_must_contain": ["never"]}} for t in tasks]
    (project / "eval/input/tasks.json").write_text(json.dumps(changed))
    (folder / "t2__try1.json").write_text("{")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    result = bat("eval.verdict", cwd=project)
    assert result.code == 2 and "t2__try1.json is not an episode file" in result.err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_broken_old_run_does_not_fail_a_new_one(tmp_path, bat, home):
    """The charts draw every run of the folder; an old run whose metrics.json is broken
    is left out with a warning, and the new run still ends 0 with its report."""
    project = make_project(tmp_path, "echo_tasks.json", k=1)
    assert bat("eval.run", cwd=project, charts=True).code == 0
    (old,) = run_dirs(project)
    broken = old / "agent-default" / "metrics.json"
    broken.write_text("{not json")
    result = bat("eval.run", cwd=project, charts=True)
    assert result.code == 0, result.err
    assert f"warning: left out of the charts and report: {broken} is not valid JSON" in (result.err)
    report = (project / "eval/output/report.html").read_text()
    new = next(d for d in run_dirs(project) if d != old)
    assert new.name in report and old.name not in report


def test_the_agent_environment_follows_the_documented_order(tmp_path, bat, home):
    """agent.env, then MODEL/MODEL_PROVIDER of the model, then the model's env, then PORT."""
    tasks = [{"id": "which", "turns": ["MODEL?"], "expected": {}}]
    models = [{"provider": "openai", "model": "m-x", "env": {"MODEL_PROVIDER": "from-model-env"}}]
    project = make_project(
        tmp_path,
        tasks,
        models=models,
        agent_env={"MODEL": "from-agent-env", "MODEL_PROVIDER": "from-agent-env"},
    )
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err  # PORT last: bat found it where it waits
    (run_dir,) = run_dirs(project)
    [found] = episodes(run_dir, "openai_m-x").values()
    assert found["final_output"] == "model: m-x/from-model-env"


def test_stages_chained_after_judge_work_on_the_run_it_was_given(tmp_path, bat, home):
    """``bat eval.judge --run OLD`` summarizes OLD, not the latest run."""
    project = make_project(tmp_path, [{"id": "a", "turns": ["x"], "expected": {}}])
    assert bat("eval.run", cwd=project).code == 0
    assert bat("eval.run", cwd=project).code == 0
    old, latest = run_dirs(project)
    for run_dir in (old, latest):
        (run_dir / "agent-default" / "summary.json").unlink()
    result = bat("eval.judge", "--run", old.name, cwd=project)
    assert result.code == 0, result.out + result.err
    assert "qualitative judging is off" in result.out
    assert (old / "agent-default" / "summary.json").is_file()
    assert not (latest / "agent-default" / "summary.json").exists()
    result = bat("eval.summarize", "--run", str(latest), cwd=project)
    assert result.code == 0 and (latest / "agent-default" / "summary.json").is_file()
