"""Cold episodes: the first wave after an agent start is marked and left out of latency.

The echo agent is a real A2A server whose first request waits ``COLD_MS`` (a cold start);
bat starts it, runs six episodes two at a time, and the two of the first wave must be
the cold ones: marked in their episode files and the CSV export, counted in
metrics.json and named in the report, out of the p90 and of a ``latency.p90`` gate,
still in the verdicts. With ``evaluation.warm_latency: false`` the same run measures
them, as bat did before.
"""

import csv
import io
import json

import yaml

from tests.evalkit import episodes, free_port, make_project, run_dirs, start_fixture

COLD_MS = 1500
TASKS = [
    {
        "id": f"t{n}",
        "turns": [f"hello {n}"],
        "expected": {"status": "completed", "output_must_contain": [f"echo: hello {n}"]},
    }
    for n in range(3)
]


def cold_project(root, **evaluation):
    return make_project(
        root, TASKS, k=2, concurrency=2, agent_env={"COLD_MS": str(COLD_MS)}, **evaluation
    )


def metrics(run_dir):
    return json.loads((run_dir / "agent-default" / "metrics.json").read_text())


def test_the_first_wave_is_cold_marked_and_left_out_of_the_p90(tmp_path, bat, home):
    project = cold_project(tmp_path)
    result = bat("eval.run", "--gate", "latency.p90 < 1", cwd=project, charts=True)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    cold = {name for name, episode in found.items() if episode["cold"]}
    # the plan interleaves attempts: the first wave is attempt 1 of t0 and t1
    assert cold == {"t0__try1.json", "t1__try1.json"}, {
        n: (e["cold"], e["trace"]["wall_time_s"], e["started_at"]) for n, e in found.items()
    }
    for name in cold:
        assert found[name]["trace"]["wall_time_s"] >= COLD_MS / 1000
        assert found[name]["verdict"]["passed"] is True  # verdicts count cold episodes
    summary = metrics(run_dir)["summary"]
    assert summary["cold_episodes"] == 2 and summary["passed"] == 6
    assert summary["wall_time_s"]["count"] == 4
    assert summary["wall_time_s"]["p90"] < 1 and summary["wall_time_s"]["max"] < 1
    assert [row["cold"] for row in metrics(run_dir)["per_episode"]].count(True) == 2
    gates = json.loads((run_dir / "gates.json").read_text())["gates"]
    assert [gate["passed"] for gate in gates] == [True]
    report = (project / "eval" / "output" / "report.html").read_text()
    assert "(2 cold left out)" in report

    exported = tmp_path / "episodes.csv"
    assert bat("eval.export", "--to", f"csv:{exported}", cwd=project).code == 0
    rows = list(csv.DictReader(io.StringIO(exported.read_text())))
    assert sorted(row["task_id"] for row in rows if row["cold"] == "true") == ["t0", "t1"]
    assert sum(row["cold"] == "false" for row in rows) == 4


def test_warm_latency_off_measures_the_cold_start(tmp_path, bat, home):
    project = cold_project(tmp_path, warm_latency=False)
    assert (
        yaml.safe_load((project / "eval/eval.yaml").read_text())["evaluation"]["warm_latency"]
        is False
    )
    result = bat("eval.run", "--gate", "latency.p90 < 1", cwd=project)
    assert result.code == 1, result.out + result.err  # the cold start fails the gate
    (run_dir,) = run_dirs(project)
    assert not any(episode["cold"] for episode in episodes(run_dir).values())
    summary = metrics(run_dir)["summary"]
    assert summary["cold_episodes"] == 0 and summary["wall_time_s"]["count"] == 6
    assert summary["wall_time_s"]["p90"] >= COLD_MS / 1000


def test_an_agent_bat_did_not_start_has_no_cold_episodes(tmp_path, bat, home):
    """bat saw no start of an agent already running: it marks nothing."""
    port = free_port()
    agent = start_fixture("echo_agent", port)
    try:
        project = make_project(
            tmp_path, TASKS, start=False, concurrency=2, agent_url=f"http://127.0.0.1:{port}"
        )
        assert bat("eval.run", cwd=project).code == 0
    finally:
        agent.terminate()
        agent.wait(10)
    (run_dir,) = run_dirs(project)
    assert metrics(run_dir)["summary"]["cold_episodes"] == 0


def test_each_restart_of_the_agent_starts_cold_again(tmp_path, bat, home):
    """One at a time: ``a`` is the first after the start; ``CRASH`` kills the agent, runs
    again alone on the restarted one (cold) and kills it again; ``b`` is the first on the
    agent's third start; ``c`` follows a finished episode."""
    tasks = [
        {"id": name, "turns": [text]}
        for name, text in [("a", "a"), ("x", "CRASH"), ("b", "b"), ("c", "c")]
    ]
    project = make_project(tmp_path, tasks, concurrency=1)
    bat("eval.run", cwd=project)
    (run_dir,) = run_dirs(project)
    found = {e["task_id"]: e for e in episodes(run_dir).values()}
    assert found["x"]["agent_error"]["kind"] == "crashed"
    assert {task: e["cold"] for task, e in found.items()} == {
        "a": True,
        "x": True,
        "b": True,
        "c": False,
    }
    assert metrics(run_dir)["summary"]["cold_episodes"] == 3
