"""`bat eval.run` with qualitative judging: the scripted model server as the judge."""

import json
import urllib.request

import yaml

from tests.evalkit import episodes, free_port, make_project, run_dirs, start_model_server, summary


def judge_reply(score):
    return json.dumps(
        {
            name: {"reasoning": f"{name} looks fine", "score": score}
            for name in (
                "response_relevance",
                "task_completion_quality",
                "hallucination_score",
                "tool_call_appropriateness",
            )
        }
    )


def requests_served(url):
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/stats") as r:
        return json.loads(r.read())["requests"]


def set_judge(project, url, model):
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True
    config["judge"] = {
        "provider": "openai",
        "model": model,
        "base_url": url + "/v1",
        "api_key_env": "JUDGE_KEY",
    }
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))


TASKS = [
    {
        "id": "a",
        "turns": ["hello"],
        "expected": {"output_must_contain": ["hello"], "expected_outcome": "echoes the greeting"},
    },
    {"id": "b", "turns": ["HANG"], "expected": {}},  # with a short turn timeout: infra
]


def test_run_judges_then_rejudge_is_cached_and_key_never_written(tmp_path, bat, home):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"reply": judge_reply(0.75)}]))
    server, url = start_model_server(rules)
    try:
        project = make_project(tmp_path / "p", TASKS[:1], k=2)
        set_judge(project, url, "judge-one")
        secret = "sk-test-SECRET-123456"
        (project / ".env").write_text(f"JUDGE_KEY={secret}\n")
        result = bat("eval.run", cwd=project)
        assert result.code == 0, result.err
        (run_dir,) = run_dirs(project)
        for episode in episodes(run_dir).values():
            dims = episode["scores"]["dimensions"]
            assert dims["response_relevance"]["score"] == 0.75
            assert dims["hallucination_score"]["reasoning"] == "hallucination_score looks fine"
        stats = summary(run_dir)["totals"]["judge"]
        assert stats["task_completion_quality"] == {
            "mean": 0.75,
            "min": 0.75,
            "max": 0.75,
            "count": 2,
            "errors": 0,
        }
        served = requests_served(url)
        assert served == 2
        # Re-judging an unchanged run makes no request at all.
        assert bat("eval.judge", cwd=project).code == 0
        assert requests_served(url) == served
        # Another judge model: asked again, and the summary follows.
        set_judge(project, url, "judge-two")
        rules.write_text(json.dumps([{"reply": judge_reply(0.25)}]))
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            urllib.request.Request(
                url + "/control",
                data=json.dumps({"rules": [{"reply": judge_reply(0.25)}]}).encode(),
                headers={"Content-Type": "application/json"},
            )
        )
        assert bat("eval.judge", "--run", run_dir.name, cwd=project).code == 0
        assert requests_served(url) == served + 2
        assert summary(run_dir)["totals"]["judge"]["response_relevance"]["mean"] == 0.25
        for path in run_dir.rglob("*"):
            if path.is_file():
                assert secret not in path.read_text(errors="replace"), path
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_infrastructure_failures_are_not_judged(tmp_path, bat, home):
    server, url = start_model_server(None)
    try:
        project = make_project(tmp_path / "p", TASKS[1:], turn_timeout_s=0.5)
        set_judge(project, url, "j")
        result = bat("eval.run", cwd=project, env={"JUDGE_KEY": "x"})
        assert result.code == 3, result.err  # judged, summarized, plotted: then incomplete
        (episode,) = episodes(run_dirs(project)[0]).values()
        assert episode["scores"] == {"error": "not judged: infrastructure failure"}
        assert requests_served(url) == 0
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_qualitative_without_a_judge_or_key(tmp_path, bat, home):
    project = make_project(tmp_path, TASKS[:1])
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and "no judge" in result.err
    set_judge(project, f"http://127.0.0.1:{free_port()}", "j")
    missing = bat("eval.run", cwd=project)
    assert missing.code == 2 and "JUDGE_KEY" in missing.err
    # Both found before the agent started: not after every episode had run.
    assert not run_dirs(project) and "starting the agent" not in result.out + missing.out


def test_judge_of_an_older_run_summarizes_that_run_not_the_latest(tmp_path, bat, home):
    """`eval.judge --run A` chains eval.summarize and eval.plot: on A, not the newest run."""
    project = make_project(tmp_path / "p", TASKS[:1], k=1)
    assert bat("eval.run", cwd=project).code == 0
    older = run_dirs(project)[0]
    (older / "agent-default" / "summary.json").unlink()
    assert bat("eval.run", cwd=project).code == 0
    newer = next(d for d in run_dirs(project) if d != older)
    newer_summary = (newer / "agent-default" / "summary.json").read_bytes()
    result = bat("eval.judge", "--run", older.name, cwd=project)
    assert result.code == 0, result.err
    assert f"Wrote 2 files in {older}" in result.out, result.out
    assert (older / "agent-default" / "summary.json").is_file()
    assert (newer / "agent-default" / "summary.json").read_bytes() == newer_summary
