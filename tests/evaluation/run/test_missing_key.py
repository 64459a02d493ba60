"""A model whose key is missing (issue 28): warned before the run, classed
``authentication_failed``, counted against the trust budget (exit 3), the variable named
at the end, the model stopped after its first failures, and ``--retry-infra`` runs the
rest once the key is set.

The agent is the echo fixture, whose ``CHAT`` turn fails as a BAT-ADK agent on the
OpenAI client does without ``OPENAI_API_KEY`` ("Agent execution failed (OpenAIError)"),
and asks the scripted model server for real once the key is there.
"""

from __future__ import annotations

import json

import pytest

from bat.evaluation.run.runner import CREDENTIAL_STOP_AFTER
from tests.evalkit import episodes, make_project, run_dirs, start_model_server

MODEL = "openai_gpt-4.1-mini"
TASKS = [
    {"id": f"t{n}", "turns": [f"CHAT hello {n}"], "expected": {"output_regex": "^model: "}}
    for n in range(6)
]


@pytest.fixture(scope="module")
def model_url():
    proc, url = start_model_server(None)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def keyed_project(root, model_url, **model):
    models = [
        {"provider": "openai", "model": "gpt-4.1-mini", "base_url": f"{model_url}/v1", **model}
    ]
    return make_project(root, TASKS, models=models, concurrency=1)


def test_missing_key_warned_classed_stopped_and_retried(tmp_path, bat, home, no_key, model_url):
    project = keyed_project(tmp_path, model_url)
    result = bat("eval.run", cwd=project)
    assert result.code == 3, result.err
    # warned (on stderr) before the first episode, naming the variable
    assert result.err.index("needs OPENAI_API_KEY") < result.err.index("failed")
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir, MODEL)
    kinds = sorted(
        (e["agent_error"] or {}).get("kind") or e["infra_error"]["kind"] for e in found.values()
    )
    stopped = len(TASKS) - CREDENTIAL_STOP_AFTER
    assert kinds == ["authentication_failed"] * CREDENTIAL_STOP_AFTER + ["not_run"] * stopped
    not_run = [e for e in found.values() if e["infra_error"]]
    assert all("OPENAI_API_KEY" in e["infra_error"]["message"] for e in not_run)
    totals = json.loads((run_dir / MODEL / "summary.json").read_text())["totals"]
    assert totals["infra_failures_by_kind"] == {
        "authentication_failed": CREDENTIAL_STOP_AFTER,
        "not_run": stopped,
    }
    assert totals["agent_errors_total"] == 0  # counted once, as what kept bat from observing
    record = json.loads((run_dir / "run.json").read_text())
    assert record["models"][0]["key_env"] == "OPENAI_API_KEY"
    # the closing line names the variable
    closing = result.err[result.err.index("incomplete") :]
    assert "authentication_failed: is OPENAI_API_KEY set and valid" in closing
    assert "--retry-infra" in closing

    again = bat(
        "eval.run", "--resume", "--retry-infra", cwd=project, env={"OPENAI_API_KEY": "sk-test"}
    )
    assert again.code == 0, again.err
    assert "needs OPENAI_API_KEY" not in again.out + again.err
    found = episodes(run_dir, MODEL)
    assert all(e["verdict"]["passed"] for e in found.values()), [
        e["final_output"] for e in found.values()
    ]
    assert len(list((run_dir / MODEL / "retried").iterdir())) == len(TASKS)


def test_key_warning_alike_in_dry_run_and_show(tmp_path, bat, home, no_key, model_url):
    project = keyed_project(tmp_path / "a", model_url)
    for args in (("eval.run", "--dry-run"), ("eval.show",)):
        result = bat(*args, cwd=project)
        assert result.code == 0, result.err
        assert "provider openai needs OPENAI_API_KEY" in result.err, args
    held = keyed_project(tmp_path / "b", model_url, env={"OPENAI_API_KEY": "sk-test"})
    assert "OPENAI_API_KEY" not in bat("eval.run", "--dry-run", cwd=held).err
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "rules.yaml").write_text("rules: []\n")
    scripted = make_project(
        tmp_path / "c",
        TASKS,
        models=[{"provider": "openai", "model": "stand-in", "script": "rules.yaml"}],
    )
    assert "OPENAI_API_KEY" not in bat("eval.show", cwd=scripted).err


def test_one_success_first_keeps_the_model_running(tmp_path, bat, home, no_key, model_url):
    """Only a model whose *first* episodes all fail on credentials is stopped."""
    tasks = [
        {"id": "ok", "turns": ["hello"], "expected": {"output_must_contain": ["echo"]}},
        *TASKS,
    ]
    models = [{"provider": "openai", "model": "gpt-4.1-mini", "base_url": f"{model_url}/v1"}]
    project = make_project(tmp_path, tasks, models=models, concurrency=1)
    result = bat("eval.run", cwd=project)
    assert result.code == 3, result.err
    found = episodes(run_dirs(project)[0], MODEL)
    assert not any(
        e["infra_error"] and e["infra_error"]["kind"] == "not_run" for e in found.values()
    )
    assert sum(bool(e["agent_error"]) for e in found.values()) == len(TASKS)


def test_the_agents_own_provider_is_checked_without_models(tmp_path, bat, home, no_key):
    """No ``models:``: the agent's MODEL_PROVIDER (here from its .env) decides."""
    project = make_project(tmp_path, TASKS)
    (project / ".env").write_text("MODEL_PROVIDER=anthropic\n")
    result = bat("eval.show", cwd=project, env={"ANTHROPIC_API_KEY": ""})
    assert "model agent-default: provider anthropic needs ANTHROPIC_API_KEY" in result.err
    (project / ".env").write_text("MODEL_PROVIDER=ollama\n")
    assert "needs" not in bat("eval.show", cwd=project).err
