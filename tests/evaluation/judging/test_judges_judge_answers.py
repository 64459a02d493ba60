"""Judges judge answers: a real run whose agent errors on some tasks, with a scripted judge.

The echo agent raises or fails on cue; the scripted judge would praise those episodes
(1.0 everywhere) if it were asked. It must not be: their scores say why, no request is
made for them, and every judge mean (pooled, per task, a gate's) is the judged ones'.
The report names the failed attempt the judge scored well, as it names doubted passes.
"""

import json
import statistics

import yaml

from tests.evalkit import episodes, make_project, run_dirs, start_model_server, summary
from tests.evaluation.judging.test_eval_judge import judge_reply, requests_served, set_judge

K = 2
TASKS = [
    # passes; the judge is lukewarm
    {"id": "ok", "turns": ["hello"], "expected": {"output_must_contain": ["hello"]}},
    # fails a check too strict; the judge likes the answer: failed but judged well
    {"id": "strict", "turns": ["greetings friend"], "expected": {"output_must_contain": ["x"]}},
    # agent errors that fail their episode: never judged
    {"id": "raises", "turns": ["RAISE model down"], "expected": {}},
    {"id": "fails", "turns": ["FAIL: disk gone"], "expected": {}},
    # an agent error the task expects: the refusal is the agent's answer, and is judged
    {"id": "refuses", "turns": ["REJECT this"], "expected": {"status": "error"}},
]
RULES = [
    {"scope": "prompt", "match": "RAISE", "reply": judge_reply(1.0)},
    {"scope": "prompt", "match": "disk gone", "reply": judge_reply(1.0)},
    {"scope": "prompt", "match": "greetings", "reply": judge_reply(0.9)},
    {"reply": judge_reply(0.5)},
]
JUDGED_MEAN = round(statistics.mean([0.5, 0.9, 0.5]), 4)  # ok, strict, refuses


def test_errored_episodes_are_not_judged_and_lift_no_mean(tmp_path, bat, home):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    server, url = start_model_server(rules)
    try:
        project = make_project(tmp_path / "p", TASKS, k=K)
        set_judge(project, url, "judge")
        config = yaml.safe_load((project / "eval/eval.yaml").read_text())
        # Holds only when the agent errors (1.0 if judged: a mean of 0.78) are left out.
        config["gates"] = [f"judge.task_completion_quality <= {JUDGED_MEAN}"]
        (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
        result = bat("eval.run", cwd=project, env={"JUDGE_KEY": "x"}, charts=True)
        assert result.code == 0, result.out + result.err
        assert "judged 6 episodes" in result.out and "4 not judged: agent error" in result.out
        (run_dir,) = run_dirs(project)

        by_task: dict[str, list[dict]] = {}
        for episode in episodes(run_dir).values():
            by_task.setdefault(episode["task_id"], []).append(episode)
        for task_id in ("raises", "fails"):
            for episode in by_task[task_id]:
                assert episode["status"] == "error" and episode["agent_error"]
                assert episode["scores"] == {"error": "not judged: agent error"}
        refused = by_task["refuses"][0]
        assert refused["agent_error"]["kind"] == "refused" and refused["verdict"]["passed"]
        assert refused["scores"]["dimensions"]["task_completion_quality"]["score"] == 0.5
        # ok, strict, refuses: nothing for the errors. Two attempts with the same answer
        # make the same prompt, which the judge cache may answer once the first is back.
        assert 3 <= requests_served(url) <= 3 * K

        totals = summary(run_dir)["totals"]
        quality = totals["judge"]["task_completion_quality"]
        assert quality == {"mean": JUDGED_MEAN, "min": 0.5, "max": 0.9, "count": 6, "errors": 0}
        assert summary(run_dir)["qualitative_scores"]["response_relevance"] == JUDGED_MEAN
        per_task = {task["task_id"]: task["judge"] for task in summary(run_dir)["attempts"]}
        assert per_task["raises"] is None and per_task["fails"] is None
        assert per_task["strict"]["task_completion_quality"] == 0.9
        (gate,) = json.loads((run_dir / "gates.json").read_text())["gates"]
        assert gate["passed"] and gate["value"] == JUDGED_MEAN

        report = (project / "eval" / "output" / "report.html").read_text()
        assert "<b>strict</b> — 0/2 attempts passed; <span" in report
        assert "the judge scored 2 failed attempts 0.8 or higher on every dimension" in report
        assert report.count("or higher on every dimension</span>") == 1  # strict's alone
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_scripted_judge_is_served_by_bat_and_cached_by_its_script(tmp_path, bat, home):
    """``judge: script:`` as a model's: no judge server to start, no port to choose."""
    project = make_project(tmp_path / "p", TASKS[:2], k=1)
    (project / "eval" / "judge.yaml").write_text(yaml.safe_dump(RULES))
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True
    config["judge"] = {"provider": "openai", "model": "stand-in", "script": "eval/judge.yaml"}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    shown = bat("eval.show", cwd=project)
    assert "openai:stand-in (scripted by bat from eval/judge.yaml)" in shown.out, shown.out
    doctor = bat("doctor", cwd=project).out
    assert "✓ judge openai:stand-in: scripted by bat from eval/judge.yaml" in doctor, doctor
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    assert "judge openai:stand-in: scripted by bat from eval/judge.yaml at http://127.0.0.1:" in (
        result.out
    )
    assert "judged 2 episodes with openai:stand-in (0 from cache" in result.out
    (run_dir,) = run_dirs(project)
    quality = summary(run_dir)["totals"]["judge"]["task_completion_quality"]
    assert quality["mean"] == 0.7 and quality["count"] == 2  # 0.5 and 0.9
    # Served on another port next time, yet the same script: every judgement cached.
    again = bat("eval.judge", cwd=project)
    assert again.code == 0 and "(2 from cache" in again.out, again.out
    # An edited script is asked again.
    (project / "eval" / "judge.yaml").write_text(yaml.safe_dump(RULES[-1:]))
    assert "(0 from cache" in bat("eval.judge", cwd=project).out
    assert summary(run_dir)["totals"]["judge"]["task_completion_quality"]["mean"] == 0.5


def test_a_judge_script_that_cannot_be_read_is_one_line_before_any_agent(tmp_path, bat, home):
    project = make_project(tmp_path / "p", TASKS[:1], k=1)
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True
    config["judge"] = {"provider": "anthropic", "model": "x", "script": "nope.yaml"}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    refused = bat("eval.run", cwd=project)
    assert refused.code == 2 and "speaks openai and ollama, not 'anthropic'" in refused.err
    config["judge"]["provider"] = "ollama"
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    missing = bat("eval.run", cwd=project)
    assert missing.code == 2 and "judge.script: nope.yaml: No such file" in missing.err
    assert "Traceback" not in refused.err + missing.err and not run_dirs(project)
