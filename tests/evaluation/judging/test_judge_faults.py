"""A judged `bat eval.run` whose judge misbehaves in every way at once: rate limits, server
errors, garbage, slowness, a key echoed back. The run's numbers must stay whole: every
episode once, every file valid JSON, the failures named per episode, the key nowhere."""

import json

import yaml

from tests.evalkit import episodes, make_project, run_dirs, start_model_server, summary
from tests.evaluation.judging.test_eval_judge import judge_reply

KEY = "sk-fault-KEY-0123456789"
K = 2
# task id -> how the judge answers the episodes of that task
RULES = [
    {"match": 'id: "rate"', "status": 429, "retry_after": 1, "times": 1},
    {"match": 'id: "flaky"', "status": 500, "times": 1},
    {"match": 'id: "garbage"', "body": "<html>oops"},
    {"match": 'id: "slow"', "delay_ms": 4000, "reply": judge_reply(0.5)},
    {"match": 'id: "echo"', "status": 401, "body": "bad key {authorization}"},
    {"reply": judge_reply(0.75)},
]
FAILING = {"garbage", "slow", "echo"}


def test_a_misbehaving_judge_loses_no_episode_and_leaks_no_key(tmp_path, bat, home):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES))
    server, url = start_model_server(rules)
    try:
        ids = ["rate", "flaky", "garbage", "slow", "echo", "fine"]
        tasks = [
            {"id": i, "turns": [f"hello {i}"], "expected": {"output_must_contain": ["hello"]}}
            for i in ids
        ]
        project = make_project(tmp_path / "p", tasks, k=K)
        config = yaml.safe_load((project / "eval/eval.yaml").read_text())
        config["evaluation"]["qualitative"] = True
        config["judge"] = {
            "model": "judge",
            "base_url": url + "/v1",
            "api_key_env": "JUDGE_KEY",
            "timeout_s": 1,
            "max_retries": 1,
        }
        (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
        (project / ".env").write_text(f"JUDGE_KEY={KEY}\n")

        result = bat("eval.run", cwd=project, timeout=240)
    finally:
        server.terminate()
        server.wait(timeout=10)

    assert result.code == 0, result.err  # judge errors are counted, not a failed run
    assert "Traceback" not in result.err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    per_task = {i: sorted(e["attempt"] for e in found.values() if e["task_id"] == i) for i in ids}
    assert per_task == {i: list(range(1, K + 1)) for i in ids}  # none lost, none twice
    for episode in found.values():
        scores = episode["scores"]
        if episode["task_id"] in FAILING:
            assert scores["judge_errors"], episode["task_id"]
        else:  # a retried 429 or 500 ends in a real score
            assert scores["dimensions"]["response_relevance"]["score"] == 0.75, scores
    totals = summary(run_dir)["totals"]
    assert totals["judge"]["response_relevance"]["count"] == 3 * K
    assert totals["judge"]["response_relevance"]["errors"] == len(FAILING) * K

    for path in run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert KEY not in text, path
            if path.suffix == ".json":
                json.loads(text)  # every JSON file whole
    assert KEY not in result.out + result.err
    assert "[redacted]" in json.dumps(next(e for e in found.values() if e["task_id"] == "echo"))
