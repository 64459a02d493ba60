"""`bat eval.run` against a scaffolded agent on the real bat-adk, its model the scripted server.

The whole chain is real: `bat init.agent` renders the agent, `uv sync` installs bat-adk
from PyPI, `bat eval.run` starts it with `uv run .` (the uv bat-cli installed, found
without PATH; MODEL, BASE_URL and a copy of its config.yaml set by the engine) where
its config.yaml's endpoint says it listens, talks A2A to it, and reads token usage from
the span file bat-adk writes where the engine told it to.
"""

import contextlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from tests import adk_bytecode
from tests.evalkit import REPO, episodes, free_port, run_dirs, summary
from tests.pythons import find_python, uv_binary

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def machine_uv_cache(home, uv_cache, monkeypatch):
    """uv sync and the agent's ``uv run .`` use the machine's uv cache, not one in the
    test's empty HOME: bat-adk's packages are linked from there, not downloaded and
    unpacked again by every test."""
    monkeypatch.setenv("UV_CACHE_DIR", uv_cache)


RULES = [{"match": "What did I say first?", "reply": "You first said: {first}"}]
TASKS = [
    {
        "id": "echo",
        "turns": ["Say hello"],
        "expected": {"output_must_contain": ["echo: Say hello"], "max_model_calls": 1},
    },
    {
        "id": "memory",
        "turns": ["The code is 42.", "What did I say first?"],
        "expected": {"output_must_contain": ["You first said: The code is 42."]},
    },
]


def scaffold_and_sync(tmp_path, bat, name: str, *options: str):
    """``bat init.agent NAME``, then ``uv sync`` of it (bat-adk from the machine's uv
    cache, or from PyPI into it)."""
    python, uv = find_python(), uv_binary()
    made = bat("init.agent", name, "-o", str(tmp_path), "--port", str(free_port()), *options)
    assert made.code == 0, made.err
    agent = tmp_path / name
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PORT", "MODEL", "BASE_URL")
    }
    env.update(UV_PYTHON=python, UV_PYTHON_DOWNLOADS="never")
    synced = subprocess.run(
        [uv, "sync"], cwd=agent, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert synced.returncode == 0, synced.stderr
    adk_bytecode.seed(agent / ".venv")  # what its start would compile, compiled once (see there)
    return agent, python


@contextlib.contextmanager
def model_server(tmp_path, rules):
    """The scripted model server on a free port, answering from ``rules``: its port."""
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_fixtures.model_server",
            "--port",
            str(port),
            "--rules",
            str(tmp_path / "rules.json"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "listening" in server.stdout.readline()
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


def scripted_model(port: int) -> dict:
    return {
        "provider": "openai",
        "model": "scripted",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "env": {"OPENAI_API_KEY": "not-a-real-key"},
    }


def test_eval_run_against_a_real_bat_adk_agent(tmp_path, bat, home):
    agent, python = scaffold_and_sync(tmp_path, bat, "graded")
    # As a bat-cli-made agent has it: a literal port in config.yaml's endpoint, another
    # PORT in .env. bat must reach the agent where bat-adk makes it listen: the endpoint.
    endpoint_port = free_port()
    config_text = (agent / "config.yaml").read_text().replace("${PORT}", str(endpoint_port))
    (agent / "config.yaml").write_text(config_text)
    config_before = (agent / "config.yaml").read_bytes()

    with model_server(tmp_path, RULES) as model_port:
        assert bat("eval.init", cwd=agent).code == 0
        (agent / "eval/input/tasks.json").write_text(json.dumps(TASKS))
        config = yaml.safe_load((agent / "eval/eval.yaml").read_text())
        config["evaluation"].update(k=2, concurrency=2, agent_startup_timeout_s=120)
        config["evaluation"]["agent"]["env"] = {"UV_PYTHON": python, "UV_PYTHON_DOWNLOADS": "never"}
        config["models"] = [scripted_model(model_port)]
        (agent / "eval/eval.yaml").write_text(yaml.safe_dump(config))
        result = bat("eval.run", cwd=agent, timeout=600)
    assert result.code == 0, result.out + result.err
    assert f"agent ready at http://127.0.0.1:{endpoint_port}" in result.out
    (run_dir,) = run_dirs(agent)
    found = episodes(run_dir, "openai_scripted")
    failing = {n: e["verdict"]["reason"] for n, e in found.items() if not e["verdict"]["passed"]}
    assert failing == {}, failing
    assert summary(run_dir, "openai_scripted")["totals"]["passed"] == 4
    # Usage came from bat-adk's own span file, written into the run directory.
    for episode in found.values():
        assert episode["trace"]["usage_source"] == "spans"
        assert episode["trace"]["usage"]["total_tokens"] > 0
    assert (run_dir / "openai_scripted" / "spans.jsonl").stat().st_size > 0
    (model,) = json.loads((run_dir / "run.json").read_text())["models"]
    assert model["spans"] == "expected"  # a bat-adk project: its spans were worth waiting for
    assert (agent / "config.yaml").read_bytes() == config_before
    assert not (agent / "spans.jsonl").exists()
    # The card says what the agent ran with, read from the .venv uv sync made: the
    # Python it was given and the bat-adk uv.lock pinned.
    card = json.loads((run_dir / "card.json").read_text())
    ran = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert card["agent"]["runtime"] == {
        "environment": str(agent / ".venv"),
        "python": ran,
        "bat_adk": card["versions"]["bat_adk_requirement"],
    }
    assert card["versions"]["bat_adk_source"] == "uv.lock"

    # bat set.config writes where bat-adk's own AgentConfig reads (its ModelConfig fields).
    changed = bat(
        "set.config", "model.reasoning_effort=low", "model.service_tier=flex",
        "telemetry.privacy=content", cwd=agent,
    )  # fmt: skip
    assert changed.code == 0, changed.err
    read_back = subprocess.run(
        [str(agent / ".venv" / "bin" / "python"), "-c",
         "from bat.agent.config import AgentConfig; c = AgentConfig.load('config.yaml'); "
         "print(c.model.reasoning_effort, c.model.service_tier, c.telemetry.privacy)"],
        cwd=agent, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert read_back.returncode == 0, read_back.stderr
    assert read_back.stdout.split()[:2] == ["low", "flex"]
    privacy = read_back.stdout.split()[2].lower()  # bat-adk's ladder: content is level 1
    assert privacy == "1" or "content" in privacy, privacy


# What a model would answer the sample tasks; the rest echo, as the server does.
def test_the_sample_evaluation_passes_against_a_fresh_scaffold(tmp_path, bat, home):
    """A new user's first run: init.agent, eval.init, eval.run, nothing edited. The model
    is eval.init's stand-in, the scripted answers of eval/scripted-model.yaml that bat
    serves itself (offline, no key). Every sample task teaches one check and every one
    passes, so a first run shows 100 %, not a failure the user would blame on bat or on
    the agent."""
    agent, python = scaffold_and_sync(tmp_path, bat, "first-hour")
    assert bat("eval.init", cwd=agent).code == 0
    tasks = json.loads((agent / "eval/input/tasks.json").read_text())
    assert all(task["meta"]["teaches"] for task in tasks)
    eval_yaml = (agent / "eval/eval.yaml").read_text()
    for task in tasks:  # eval.yaml's comments name each sample task
        assert task["id"] in eval_yaml
    # only what this machine needs: a Python 3.12 for uv, which may not download one
    env = {"UV_PYTHON": python, "UV_PYTHON_DOWNLOADS": "never"}
    result = bat("eval.run", cwd=agent, timeout=600, env=env)
    assert result.code == 0, result.out + result.err
    assert "scripted model from eval/scripted-model.yaml" in result.out
    (run_dir,) = run_dirs(agent)
    found = episodes(run_dir, "openai_scripted")
    failing = {n: e["verdict"]["reason"] for n, e in found.items() if not e["verdict"]["passed"]}
    assert failing == {}, failing
    totals = summary(run_dir, "openai_scripted")["totals"]
    k = yaml.safe_load(eval_yaml)["evaluation"]["k"]
    assert totals["passed"] == len(tasks) * k
    # a cost from the first run: the stand-ins' illustrative price (eval.yaml's prices:)
    cost = summary(run_dir, "openai_scripted")["cost"]
    assert cost["currency"] == "USD" and cost["total"] > 0 and cost["unpriced"] == []
    # the sample conversation: the scripted user (eval/scripted-user.yaml) opens, the
    # stand-in model asks back in its answer, the user answers that alone, then stops
    assert "user model: scripted by bat from eval/scripted-user.yaml" in result.out
    assert conversation(found) == [
        ("Book a table for dinner tonight.", "completed", "For how many people?"),
        ("4 people, please.", "completed", "Booked a table for 4 people tonight."),
    ]


def test_the_tools_scaffold_calls_its_tool_and_asks_back(tmp_path, bat, home):
    """``init.agent --tools``: the model's tool call runs the real LangChain tool (seen
    in bat-adk's spans), ask_user pauses the graph (input-required) and the next message
    resumes it; eval.init adds the sample tasks that check both, its stand-in model asks
    for the tools, and every task passes as generated."""
    agent, python = scaffold_and_sync(tmp_path, bat, "with-tools", "--tools")
    assert bat("eval.init", cwd=agent).code == 0
    tasks = json.loads((agent / "eval/input/tasks.json").read_text())
    ids = [task["id"] for task in tasks]
    assert {"uses-the-add-tool", "asks-how-many", "books-after-asking"} <= set(ids)
    eval_yaml = (agent / "eval/eval.yaml").read_text()
    assert all(task_id in eval_yaml for task_id in ids)
    env = {"UV_PYTHON": python, "UV_PYTHON_DOWNLOADS": "never"}
    result = bat("eval.run", cwd=agent, timeout=600, env=env)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(agent)
    found = episodes(run_dir, "openai_scripted")
    failing = {n: e["verdict"]["reason"] for n, e in found.items() if not e["verdict"]["passed"]}
    assert failing == {}, failing
    added = [e for e in found.values() if e["task_id"] == "uses-the-add-tool"]
    for episode in added:
        (call,) = episode["trace"]["tool_calls"]
        # the tool's own return value (the ToolMessage's content), from the TOOL span
        assert (call["name"], call["args"], call["result"]) == ("add", {"a": 2, "b": 3}, 5)
        assert episode["final_output"] == "2 plus 3 is 5."
    # the sample conversation: here the model asks through ask_user (input-required)
    assert conversation(found) == [
        ("Book a table for dinner tonight.", "input-required", "For how many people?"),
        ("4 people, please.", "completed", "Booked a table for 4 people, please."),
    ]
    booked = [e for e in found.values() if e["task_id"] == "books-after-asking"]
    for episode in booked:
        turns = [(t["status"], t["output"]) for t in episode["trace"]["turns"]]
        assert turns == [
            ("input-required", "For how many people?"),
            ("completed", "Booked a table for 4 people, please."),
        ]


def conversation(found: dict[str, dict]) -> list[tuple[str, str, str]]:
    """The turns of the sample conversation (input, status, output), the same in every
    attempt, each ended by the user's stop: the goal met."""
    talks = [e for e in found.values() if e["task_id"] == "books-a-table-in-conversation"]
    assert talks
    seen = set()
    for episode in talks:
        record = episode["trace"]["simulated_user"]
        assert (record["ended"], record["last_words"]) == ("goal_met", "Thank you!"), record
        turns = episode["trace"]["turns"]
        seen.add(tuple((t["input"], t["status"], t["output"]) for t in turns))
    (turns,) = seen
    return list(turns)


def test_a_scaffold_without_its_model_key_is_named_classed_and_stopped(tmp_path, bat, home):
    """The issue's first run: a scaffold on openai:gpt-4.1-mini with OPENAI_API_KEY empty
    (as init.agent writes .env). bat warns before the first episode naming the variable;
    the real bat-adk agent fails each request without reaching any network (the OpenAI
    client refuses to start without a key); the episodes are authentication_failed,
    counted against the trust budget (exit 3), and the model stops after its first ones."""
    agent, python = scaffold_and_sync(tmp_path, bat, "keyless")
    assert bat("eval.init", cwd=agent).code == 0
    config = yaml.safe_load((agent / "eval/eval.yaml").read_text())
    config["models"] = [{"provider": "openai", "model": "gpt-4.1-mini"}]
    config["evaluation"].update(k=2, concurrency=1)
    (agent / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    env = {"UV_PYTHON": python, "UV_PYTHON_DOWNLOADS": "never", "OPENAI_API_KEY": ""}
    result = bat("eval.run", cwd=agent, timeout=600, env=env)
    assert result.code == 3, result.out + result.err
    assert "OPENAI_API_KEY" in result.err
    (run_dir,) = run_dirs(agent)
    found = episodes(run_dir, "openai_gpt-4.1-mini")
    failed = [(e.get("agent_error") or {}).get("kind") for e in found.values()]
    not_run = [(e.get("infra_error") or {}).get("kind") for e in found.values()]
    assert failed.count("authentication_failed") >= 1, failed
    assert not_run.count("not_run") >= 1, not_run  # stopped early: the rest never ran
    assert failed.count("authentication_failed") + not_run.count("not_run") == len(found)
