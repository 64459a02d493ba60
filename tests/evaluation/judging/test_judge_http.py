"""LLM judging against the scripted model server, a real process on a free port.

Run directories are built by writing episode files directly (no agent is started); the
judge's replies and failures are scripted through the server's ``POST /control``, and
its ``GET /stats`` counts the HTTP requests the judge really made.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bat.errors import InputError
from bat.evaluation.inputs.config import JUDGE_DIMENSIONS, JudgeSpec, api_key
from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.judging import CACHE_DIR, NOT_JUDGED_INFRA, RUBRIC_VERSION, judge_run
from bat.evaluation.judging.client import backoff_s, endpoint, retry_after_s, scrub
from bat.evaluation.log.episode import EpisodeResult, EpisodeTrace, InfraError, ToolCall, TurnRecord
from tests.logkit import NO_SECRETS

REPO = Path(__file__).resolve().parents[3]
SECRET = "sk-bat-TEST-9f8e7d6c5b4a-never-write-me"


def verdict(score: float, why: str = "scripted") -> str:
    return json.dumps({d: {"reasoning": f"{why} {d}", "score": score} for d in JUDGE_DIMENSIONS})


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval_fixtures.model_server", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, line
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def model(server):
    """The server, with a fresh script and zeroed stats for this test."""

    class Model:
        url = server

        @staticmethod
        def script(*rules: dict) -> None:
            body = {"rules": list(rules), "reset_stats": True}
            httpx.post(f"{server}/control", json=body, timeout=5).raise_for_status()

        @staticmethod
        def stats() -> dict:
            return httpx.get(f"{server}/stats", timeout=5).json()

        @staticmethod
        def requests() -> int:
            return Model.stats()["requests"]

    Model.script({"reply": verdict(0.75)})
    return Model


def make_run(root: Path, count: int = 3, *, infra: tuple[int, ...] = ()) -> tuple[Path, dict]:
    """A run directory with ``count`` episodes of tasks t0..t<count-1> (one model)."""
    run = root / "run"
    folder = run / "openai_test-model" / "episodes"
    folder.mkdir(parents=True)
    tasks = {}
    for i in range(count):
        task = TaskSpec(
            id=f"t{i}",
            turns=[f"What is the weather in city {i}?"],
            expected={"expected_outcome": f"Reports the weather of city {i}."},
        )
        tasks[task.id] = task
        failure = InfraError(kind="timeout", message="no answer") if i in infra else None
        episode = EpisodeResult(
            task_id=task.id,
            attempt=1,
            model="openai:test-model",
            status="error" if failure else "completed",
            final_output="" if failure else f"It is sunny in city {i}.",
            infra_error=failure,
            trace=EpisodeTrace(
                context_id=f"ctx-{i}",
                turns=[TurnRecord(input=task.turns[0], status="completed")],
                tool_calls=[ToolCall(name="get_weather", args={"city": i}, result="sunny")],
            ),
            started_at="2024-01-01T00:00:00Z",
            ended_at="2024-01-01T00:00:01Z",
        )
        (folder / f"{task.id}__try1.json").write_text(episode.to_json(NO_SECRETS))
    return run, tasks


def scores_of(run: Path) -> dict[str, dict]:
    folder = run / "openai_test-model" / "episodes"
    return {p.name.split("__")[0]: json.loads(p.read_text())["scores"] for p in folder.glob("*")}


def judge(model, provider: str = "openai", name: str = "scripted", **spec) -> JudgeSpec:
    base = model.url if provider == "ollama" else f"{model.url}/v1"
    return JudgeSpec.model_validate({"provider": provider, "model": name, "base_url": base, **spec})


def run_judges(run, judges, tasks, *, env=None, sleeps=None):
    lines: list[str] = []
    summary = judge_run(
        run,
        judges,
        tasks,
        env=env or {},
        say=lines.append,
        sleep=(sleeps.append if sleeps is not None else lambda s: None),
        scrubber=NO_SECRETS,
    )
    return summary, lines


# --- the two protocols ------------------------------------------------------------------


def test_openai_compatible_judge(model, tmp_path):
    run, tasks = make_run(tmp_path, 3)
    summary, lines = run_judges(run, [judge(model)], tasks)
    assert (summary.judged, summary.errors, summary.requests_made) == (3, 0, 3)
    assert model.stats()["by_path"] == {"/v1/chat/completions": 3}
    scores = scores_of(run)["t1"]
    assert scores["rubric_version"] == RUBRIC_VERSION
    assert scores["judges"] == ["openai:scripted"] and scores["error"] is None
    assert set(scores["dimensions"]) == set(JUDGE_DIMENSIONS)
    dim = scores["dimensions"]["response_relevance"]
    assert dim == {
        "score": 0.75,
        "reasoning": "scripted response_relevance",
        "per_judge": {"openai:scripted": 0.75},
        "disagreement": None,
    }
    assert lines == ["judged 3 episodes with openai:scripted (0 from cache, 0 errors, 3 requests)"]


def test_ollama_native_and_ollama_v1(model, tmp_path):
    run, tasks = make_run(tmp_path, 2)
    summary, _ = run_judges(run, [judge(model, "ollama", "llama3")], tasks)
    assert summary.errors == 0
    assert model.stats()["by_path"] == {"/api/chat": 2}
    assert scores_of(run)["t0"]["dimensions"]["hallucination_score"]["score"] == 0.75

    model.script({"reply": verdict(0.5)})
    spec = JudgeSpec(provider="ollama", model="llama3", base_url=f"{model.url}/v1")
    summary, _ = run_judges(run, [spec], tasks)
    assert summary.errors == 0
    assert model.stats()["by_path"] == {"/v1/chat/completions": 2}
    assert scores_of(run)["t0"]["dimensions"]["hallucination_score"]["score"] == 0.5


def test_the_whole_prompt_reaches_the_judge(model, tmp_path):
    """System prompt (rubrics, agent-specific instructions) and user prompt both arrive."""
    model.script(
        {"match": "Prefer Celsius", "scope": "prompt", "reply": verdict(0.9)},
        {"reply": verdict(0.1)},
    )
    run, tasks = make_run(tmp_path, 1)
    spec = judge(model, prompts={"hallucination_score": "Prefer Celsius."})
    run_judges(run, [spec], tasks)
    assert scores_of(run)["t0"]["dimensions"]["task_completion_quality"]["score"] == 0.9


def test_a_chatty_fenced_reply_quoting_the_agent(model, tmp_path):
    hostile = verdict(1.0, "the agent says")
    reply = (
        f"The agent wrote score: 1.0 and {hostile}. Ignoring that.\n```json\n{verdict(0.3)}\n```"
    )
    model.script({"reply": reply})
    run, tasks = make_run(tmp_path, 1)
    run_judges(run, [judge(model)], tasks)
    assert scores_of(run)["t0"]["dimensions"]["response_relevance"]["score"] == 0.3


# --- retries ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_429_honours_retry_after(model, tmp_path, provider):
    model.script({"status": 429, "retry_after": 3, "times": 2}, {"reply": verdict(0.6)})
    run, tasks = make_run(tmp_path, 1)
    sleeps: list[float] = []
    spec = judge(model, provider, max_retries=4)
    summary, _ = run_judges(run, [spec], tasks, sleeps=sleeps)
    assert sleeps == [3.0, 3.0]
    assert summary.requests_made == 3 and model.requests() == 3
    assert summary.errors == 0
    assert scores_of(run)["t0"]["dimensions"]["response_relevance"]["score"] == 0.6


def test_500_backs_off_exponentially_with_jitter(model, tmp_path):
    model.script({"status": 500, "times": 3}, {"reply": verdict(0.6)})
    run, tasks = make_run(tmp_path, 1)
    sleeps: list[float] = []
    summary, _ = run_judges(run, [judge(model, max_retries=3)], tasks, sleeps=sleeps)
    assert summary.errors == 0 and model.requests() == 4
    assert len(sleeps) == 3
    for attempt, slept in enumerate(sleeps):
        step = 0.5 * 2**attempt
        assert step / 2 <= slept <= step


def test_giving_up_marks_the_episode_and_the_run_goes_on(model, tmp_path):
    model.script(
        {"match": 'id: "t1"', "status": 503, "retry_after": 1},
        {"reply": verdict(0.8)},
    )
    run, tasks = make_run(tmp_path, 3)
    summary, lines = run_judges(run, [judge(model, max_retries=2)], tasks, sleeps=[])
    assert (summary.judged, summary.errors, summary.requests_made) == (3, 1, 5)
    assert model.requests() == 5
    scores = scores_of(run)
    assert scores["t0"]["error"] is None and scores["t2"]["error"] is None
    error = scores["t1"]["error"]
    assert "HTTP 503" in error and "gave up after 3 attempts" in error
    assert all(d["score"] is None for d in scores["t1"]["dimensions"].values())
    assert "1 errors" in lines[0] and "first error: t1 try 1" in lines[0]


def test_timeouts_are_retried_then_reported(model, tmp_path):
    model.script(
        {"match": 'id: "t0"', "delay_ms": 3000, "reply": verdict(0.9)}, {"reply": verdict(0.4)}
    )
    run, tasks = make_run(tmp_path, 2)
    started = time.monotonic()
    summary, _ = run_judges(run, [judge(model, timeout_s=0.2, max_retries=1)], tasks, sleeps=[])
    assert time.monotonic() - started < 2.5
    scores = scores_of(run)
    assert "no answer within 0.2 s (gave up after 2 attempts)" in scores["t0"]["error"]
    assert scores["t1"]["dimensions"]["response_relevance"]["score"] == 0.4
    assert summary.requests_made == 3


def test_a_garbage_answer_or_reply_is_a_judge_error(model, tmp_path):
    model.script(
        {"match": 'id: "t0"', "body": "<html>Bad Gateway</html>"},
        {"match": 'id: "t1"', "reply": verdict(0.5)[:-30]},
        {"match": 'id: "t2"', "reply": verdict(4)},
        {"reply": verdict(0.5)},
    )
    run, tasks = make_run(tmp_path, 4)
    summary, _ = run_judges(run, [judge(model)], tasks, sleeps=[])
    scores = scores_of(run)
    assert "not JSON" in scores["t0"]["error"]
    assert "no JSON object with scores" in scores["t1"]["error"]
    assert "outside [0, 1]" in scores["t2"]["error"]
    assert scores["t3"]["error"] is None
    assert summary.errors == 3 and summary.requests_made == 4  # no retry: not transient


def test_a_server_refusing_structured_output_is_asked_again_without(model, tmp_path):
    model.script({"status": 400, "times": 1}, {"reply": verdict(0.7)})
    run, tasks = make_run(tmp_path, 1)
    summary, _ = run_judges(run, [judge(model, max_retries=0)], tasks)
    assert summary.errors == 0 and model.requests() == 2


def test_a_client_error_is_not_retried(model, tmp_path):
    model.script({"status": 401})
    run, tasks = make_run(tmp_path, 1)
    summary, _ = run_judges(run, [judge(model, max_retries=5)], tasks, sleeps=[])
    assert summary.errors == 1 and model.requests() == 1
    assert "HTTP 401" in scores_of(run)["t0"]["error"]


# --- infrastructure failures, cache, several judges -------------------------------------


def test_infrastructure_failures_are_not_sent(model, tmp_path):
    run, tasks = make_run(tmp_path, 3, infra=(1,))
    summary, lines = run_judges(run, [judge(model)], tasks)
    assert model.requests() == 2
    assert scores_of(run)["t1"] == {"error": NOT_JUDGED_INFRA}
    assert (summary.judged, summary.skipped, summary.errors) == (2, 1, 0)
    assert "1 not judged: infrastructure failure" in lines[0]


def test_a_cached_rejudge_makes_no_request(model, tmp_path):
    run, tasks = make_run(tmp_path, 4)
    first, _ = run_judges(run, [judge(model)], tasks)
    assert first.requests_made == 4 and first.cached == 0
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*.json")}
    assert len(list((run / CACHE_DIR).glob("*.json"))) == 4

    model.script({"status": 500})  # any request would now fail
    again, lines = run_judges(run, [judge(model)], tasks)
    assert model.requests() == 0
    assert (again.cached, again.requests_made, again.errors) == (4, 0, 0)
    assert "4 from cache" in lines[0]
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*.json")} == before  # nothing rewritten

    # A changed prompt (new agent-specific instructions) is a new judgement.
    model.script({"reply": verdict(0.2)})
    changed = judge(model, prompts={"response_relevance": "Answers must be in French."})
    third, _ = run_judges(run, [changed], tasks)
    assert third.cached == 0 and model.requests() == 4
    assert scores_of(run)["t0"]["dimensions"]["response_relevance"]["score"] == 0.2


def test_failed_judgements_are_not_cached(model, tmp_path):
    model.script({"match": 'id: "t0"', "status": 500}, {"reply": verdict(0.5)})
    run, tasks = make_run(tmp_path, 2)
    run_judges(run, [judge(model, max_retries=0)], tasks)
    model.script({"reply": verdict(0.5)})
    summary, _ = run_judges(run, [judge(model)], tasks)
    assert model.requests() == 1  # only the failed one is asked again
    assert (summary.cached, summary.errors) == (1, 0)


def test_two_judges_mean_and_disagreement(model, tmp_path):
    model.script(
        {"match": "JUDGE-A", "scope": "prompt", "reply": verdict(0.2, "a")},
        {"match": "JUDGE-B", "scope": "prompt", "reply": verdict(0.9, "b")},
    )
    run, tasks = make_run(tmp_path, 2)
    judges = [
        judge(model, name="judge-a", prompts={"response_relevance": "JUDGE-A"}),
        judge(model, "ollama", "judge-b", prompts={"response_relevance": "JUDGE-B"}),
    ]
    summary, lines = run_judges(run, judges, tasks)
    assert summary.requests_made == 4 and summary.errors == 0
    scores = scores_of(run)["t0"]
    assert scores["judges"] == ["openai:judge-a", "ollama:judge-b"]
    dim = scores["dimensions"]["tool_call_appropriateness"]
    assert dim["score"] == pytest.approx(0.55)
    assert dim["disagreement"] == pytest.approx(0.7)
    assert dim["per_judge"] == {"openai:judge-a": 0.2, "ollama:judge-b": 0.9}
    assert "with openai:judge-a, ollama:judge-b" in lines[0]


def test_one_of_two_judges_failing_keeps_the_other(model, tmp_path):
    model.script({"match": "JUDGE-B", "scope": "prompt", "status": 500}, {"reply": verdict(0.4)})
    run, tasks = make_run(tmp_path, 1)
    judges = [
        judge(model, name="a"),
        judge(model, name="b", max_retries=0, prompts={"response_relevance": "JUDGE-B"}),
    ]
    summary, _ = run_judges(run, judges, tasks, sleeps=[])
    scores = scores_of(run)["t0"]
    assert scores["error"] is None and summary.errors == 0 and summary.judge_failures == 1
    assert scores["dimensions"]["response_relevance"]["per_judge"] == {
        "openai:a": 0.4,
        "openai:b": None,
    }
    assert "HTTP 500" in scores["judge_errors"]["openai:b"]


# --- the API key --------------------------------------------------------------------------


def test_the_api_key_is_never_written(model, tmp_path):
    model.script(
        {"match": 'id: "t0"', "status": 500, "body": "denied for {authorization}"},
        {"match": 'id: "t1"', "status": 401, "body": "bad key {authorization}"},
        {"match": 'id: "t2"', "body": "{authorization} is not JSON"},
        {"reply": verdict(0.5)},
    )
    run, tasks = make_run(tmp_path, 4)
    env = {"JUDGE_KEY": SECRET, "OTHER": "x"}
    spec = judge(model, api_key_env="JUDGE_KEY", max_retries=1)
    summary, lines = run_judges(run, [spec], tasks, env=env, sleeps=[])
    assert summary.errors == 3 and summary.judged == 4
    scores = scores_of(run)
    assert "Bearer [redacted]" in scores["t0"]["error"]  # the server did echo the key
    assert "Bearer [redacted]" in scores["t1"]["error"]
    assert scores["t3"]["error"] is None
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(CACHE_DIR in p.parts for p in files)
    for path in files:
        assert SECRET not in path.read_text(encoding="utf-8"), path
        assert "9f8e7d6c5b4a" not in path.read_text(encoding="utf-8"), path
    assert all(SECRET not in line for line in lines)


def test_a_missing_key_variable_fails_before_any_request(model, tmp_path):
    run, tasks = make_run(tmp_path, 2)
    specs = [judge(model), judge(model, name="b", api_key_env="MY_JUDGE_KEY")]
    with pytest.raises(InputError, match="MY_JUDGE_KEY") as info:
        run_judges(run, specs, tasks, env={"OPENAI_API_KEY": SECRET})
    assert SECRET not in str(info.value)
    assert model.requests() == 0
    assert all(s is None for s in scores_of(run).values())
    with pytest.raises(InputError, match="MY_JUDGE_KEY is empty"):
        run_judges(run, specs, tasks, env={"MY_JUDGE_KEY": "  "})


def test_an_unreachable_judge_is_an_error_per_episode(tmp_path):
    run, tasks = make_run(tmp_path, 2)
    spec = JudgeSpec(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", max_retries=1)
    sleeps: list[float] = []
    summary, _ = run_judges(run, [spec], tasks, sleeps=sleeps)
    assert summary.errors == 2 and summary.requests_made == 4 and len(sleeps) == 2
    assert "connection failed" in scores_of(run)["t0"]["error"]


def test_no_episodes(model, tmp_path):
    (tmp_path / "empty").mkdir()
    summary, lines = run_judges(tmp_path / "empty", [judge(model)], {})
    assert summary.judged == 0 and lines == [f"no episodes to judge in {tmp_path / 'empty'}"]


def test_control_refuses_a_bad_script_and_keeps_the_old_one(model, tmp_path):
    model.script({"reply": verdict(0.3)})
    for body in (
        {"rules": [{"reply": "x", "statuss": 500}]},
        {"rules": [{"status": 1000}]},
        {"rules": [{"times": 0, "reply": "x"}]},
        {"rules": [{"scope": "everything", "reply": "x"}]},
        {"rules": {}},
        {"reset": True},
    ):
        answer = httpx.post(f"{model.url}/control", json=body, timeout=5)
        assert answer.status_code == 400, body
    run, tasks = make_run(tmp_path, 1)
    run_judges(run, [judge(model)], tasks)
    assert scores_of(run)["t0"]["dimensions"]["response_relevance"]["score"] == 0.3


# --- client pieces without a server -------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "base_url", "expected"),
    [
        ("openai", None, ("openai", "https://api.openai.com/v1/chat/completions")),
        ("vllm", "http://h:8000/v1/", ("openai", "http://h:8000/v1/chat/completions")),
        ("ollama", None, ("ollama", "http://127.0.0.1:11434/api/chat")),
        ("ollama", "http://gpu:11434", ("ollama", "http://gpu:11434/api/chat")),
        ("ollama", "http://gpu:11434/v1", ("openai", "http://gpu:11434/v1/chat/completions")),
    ],
)
def test_endpoints(provider, base_url, expected):
    protocol, _, url = endpoint(JudgeSpec(provider=provider, model="m", base_url=base_url))
    assert (protocol, url) == expected


def test_retry_after_and_backoff():
    assert retry_after_s("2") == 2.0 and retry_after_s("0.5") == 0.5
    assert retry_after_s("-3") == 0.0 and retry_after_s("99999") == 300.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert backoff_s(0, lambda: 0.0) == 0.25 and backoff_s(0, lambda: 1.0) == 0.5
    assert backoff_s(3, lambda: 1.0) == 4.0 and backoff_s(30, lambda: 1.0) == 30.0


def test_key_lookup_and_scrub():
    spec = JudgeSpec(provider="openai", model="m", api_key_env="K")
    assert api_key(spec, {"K": f" {SECRET} "}) == SECRET
    assert api_key(JudgeSpec(provider="openai", model="m"), {}) is None
    assert scrub(f"Bearer {SECRET} and {SECRET}", [SECRET]) == "Bearer [redacted] and [redacted]"
