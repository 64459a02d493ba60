"""The test server's failures on cue (eval_fixtures/model_server.py), and that the
product's stand-in model has none of them.

The clients these failures exist for are tested against the server as a process
(tests/evaluation/judging/); here, each failure's shape on both wire protocols.
"""

import pytest
from starlette.testclient import TestClient

from bat.evaluation.inputs.model_script import Rules
from bat.evaluation.run.scripted_model import ScriptedModel
from eval_fixtures.model_server import FaultRules, MisbehavingModel

ASK = {"messages": [{"role": "user", "content": "task-7, please"}], "stream": False}
OPENAI, OLLAMA = "/v1/chat/completions", "/api/chat"


def client(*rules: dict) -> TestClient:
    return TestClient(MisbehavingModel(FaultRules.from_data(list(rules))).app())


def content(response, path: str) -> str:
    body = response.json()
    message = body["choices"][0]["message"] if path == OPENAI else body["message"]
    return message["content"]


def test_a_status_fails_in_each_protocols_own_format_then_times_runs_out():
    rules = ({"match": "task-7", "status": 429, "retry_after": 2, "times": 2}, {"reply": "ok"})
    with client(*rules) as http:
        first, second, third = (http.post(OPENAI, json=ASK) for _ in range(3))
        assert first.status_code == second.status_code == 429
        assert first.headers["retry-after"] == "2"
        assert first.json() == {
            "error": {"message": "scripted error 429", "type": "rate_limit_error"}
        }
        assert third.status_code == 200 and content(third, OPENAI) == "ok"
    with client({"status": 503}) as http:
        failed = http.post(OLLAMA, json=ASK)
        assert failed.status_code == 503 and failed.json() == {"error": "scripted error 503"}
        assert "retry-after" not in failed.headers


@pytest.mark.parametrize("path", [OPENAI, OLLAMA])
def test_a_raw_body_reflects_the_authorization_header(path):
    with client({"status": 401, "body": "bad key {authorization}"}) as http:
        denied = http.post(path, json=ASK, headers={"Authorization": "Bearer sk-1"})
        assert denied.status_code == 401 and denied.text == "bad key Bearer sk-1"
        assert denied.headers["content-type"].startswith("text/plain")
    with client({"body": "<html>oops"}) as http:
        garbage = http.post(path, json=ASK)
        assert garbage.status_code == 200 and garbage.text == "<html>oops"


def test_control_rescripts_and_stats_count_what_was_served():
    with client({"reply": "first"}) as http:
        assert content(http.post(OPENAI, json={**ASK, "model": "m1"}), OPENAI) == "first"
        http.get("/v1/models")
        stats = http.get("/stats").json()
        assert stats == {
            "requests": 2,
            "by_path": {OPENAI: 1, "/v1/models": 1},
            "models": ["m1"],
        }
        rules = [{"status": 500, "times": 1}, {"reply": "second"}]
        assert http.post("/control", json={"rules": rules}).json() == {"rules": 2}
        assert http.post(OLLAMA, json=ASK).status_code == 500
        assert content(http.post(OLLAMA, json=ASK), OLLAMA) == "second"
        assert http.get("/stats").json()["requests"] == 4  # /stats and /control: not counted
        http.post("/control", json={"reset_stats": True})
        assert http.get("/stats").json() == {"requests": 0, "by_path": {}, "models": []}
        # re-scripting restarts every `times` count
        http.post("/control", json={"rules": rules})
        assert http.post(OLLAMA, json=ASK).status_code == 500


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"rules": [{"reply": "x", "statuss": 500}]}, "rule 0: unknown key(s) ['statuss']"),
        ({"rules": [{"status": 1000}]}, "rule 0: status: Input should be less than or equal"),
        ({"rules": [{"times": 0, "reply": "x"}]}, "rule 0: times: Input should be greater"),
        ({"rules": [{"match": "x"}]}, "needs 'reply' or 'tool_calls' or 'status' or 'body'"),
        ({"rules": {}}, "a rule file holds a list of rules"),
        ({"reset": True}, "unknown key(s) ['reset']"),
    ],
)
def test_control_refuses_a_bad_script_and_keeps_the_old_one(body, words):
    with client({"reply": "kept"}) as http:
        refused = http.post("/control", json=body)
        assert refused.status_code == 400 and words in refused.json()["error"]
        assert content(http.post(OPENAI, json=ASK), OPENAI) == "kept"


def test_the_stand_in_model_has_no_failures_and_no_test_routes():
    with TestClient(ScriptedModel(Rules.from_data([{"reply": "fine"}])).app()) as http:
        assert http.get("/stats").status_code == 404
        assert http.post("/control", json={"reset_stats": True}).status_code == 404
        assert content(http.post(OPENAI, json=ASK), OPENAI) == "fine"
