"""The benchmark card (``card.json``, the ``tasks.json`` snapshot, report.html's section and
``eval.compare``'s warnings), made by real ``bat eval.run`` runs of the echo fixture agent."""

import hashlib
import json
import platform
import re
import shutil
import subprocess
import sys
from datetime import datetime
from importlib.metadata import version

import jsonschema
import pytest
import yaml

from bat.evaluation.inputs.schemas import schema
from tests.evalkit import make_project, run_dirs

TASKS = [
    {"id": "hello", "turns": ["hello"], "expected": {"output_must_contain": ["echo: hello"]}},
    {"id": "world", "turns": ["world"], "expected": {"output_must_contain": ["echo: world"]}},
]
MODEL_PASS = "model-pass-Q7w6"
JUDGE_PASS = "judge-pass-Z9x8"
JUDGE_KEY = "sk-judge-KEY-77a1b2c3"
HOSTILE_NAME = "<script>alert(1)</script>"


def edit_config(project, change) -> None:
    path = project / "eval" / "eval.yaml"
    config = yaml.safe_load(path.read_text())
    change(config)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def card_of(run_dir) -> dict:
    return json.loads((run_dir / "card.json").read_text())


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def git(project, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=project, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_card_records_what_the_run_measured(tmp_path, bat, home):
    project = make_project(tmp_path, TASKS, k=2, run_name=HOSTILE_NAME)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "agent"\nversion = "0.1.0"\ndependencies = ["bat-adk>=0.3.1"]\n'
    )

    def configure(config):
        config["models"] = [
            {"provider": "openai", "model": "m-one"},
            {
                "provider": "openai",
                "model": "m-two",
                "base_url": f"http://muser:{MODEL_PASS}@127.0.0.1:9/v1",
            },
        ]
        config["judge"] = {
            "provider": "openai",
            "model": "judge-model",
            "base_url": f"http://juser:{JUDGE_PASS}@127.0.0.1:9/v1",
            "api_key_env": "JUDGE_KEY",
        }
        config["prices"] = {"openai:m-one": {"input": 0.5, "output": 2, "note": "ours"}}

    edit_config(project, configure)
    # A team's prices (bat.yaml): m-two's is used, m-one's is eval.yaml's to set.
    team = {"openai:m-two": {"input": 1, "output": 3}, "m-one": {"input": 9, "output": 9}}
    (project / "bat.yaml").write_text(yaml.safe_dump({"eval": {"prices": team}}))
    result = bat("eval.run", cwd=project, env={"JUDGE_KEY": JUDGE_KEY}, timeout=120, charts=True)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    text = (run_dir / "card.json").read_text()
    assert (run_dir / "card.json").stat().st_mode & 0o777 == 0o600  # private, as run.json
    card = json.loads(text)
    jsonschema.Draft202012Validator(schema("card.json")).validate(card)

    # No secret: neither the passwords of the URLs nor the judge's key from the shell.
    for secret in (MODEL_PASS, JUDGE_PASS, JUDGE_KEY, "muser", "juser"):
        assert secret not in text, secret

    dataset_bytes = (project / "eval/input/tasks.json").read_bytes()
    assert card["schema"] == "bat.card/1"
    assert card["run_id"] == run_dir.name and card["run_name"] == HOSTILE_NAME
    assert card["dataset"] == {
        "path": str(project / "eval/input/tasks.json"),
        "sha256": hashlib.sha256(dataset_bytes).hexdigest(),
        "tasks": 2,
        "snapshot": "tasks.json",
    }
    assert (run_dir / "tasks.json").read_bytes() == dataset_bytes

    agent = card["agent"]
    assert (agent["name"], agent["version"]) == ("EchoAgent", "1.0.0")
    assert agent["card"]["name"] == "EchoAgent"
    assert agent["card"]["capabilities"] == {"streaming": True}
    assert agent["url"].startswith("http://127.0.0.1:") and agent["start"] is True
    assert agent["command"] == "{python} -m eval_fixtures.echo_agent"
    assert agent["root"] == str(project) and agent["git"] is None
    # What the agent ran with: `{python}` is bat's interpreter, read from its environment
    # (no bat-adk installed there); bat-adk's requirement is under a name of its own.
    assert agent["runtime"] == {
        "environment": sys.prefix,
        "python": platform.python_version(),
        "bat_adk": None,
    }

    assert card["versions"] == {
        "bat": version("bat-cli"),
        "a2a_sdk": version("a2a-sdk"),
        "bat_adk_requirement": "bat-adk>=0.3.1",
        "bat_adk_source": "pyproject.toml",
        "python": card["host"]["python"],
    }
    assert card["models"] == [
        {"label": "openai:m-one", "provider": "openai", "model": "m-one", "base_url": None},
        {
            "label": "openai:m-two",
            "provider": "openai",
            "model": "m-two",
            "base_url": "http://127.0.0.1:9/v1",
        },
    ]
    # The prices the cost was figured at, and where each came from (none guessed).
    assert card["prices"] == {
        "library": "genai-prices",
        "version": version("genai-prices"),
        "auto_update": False,
        "currency": "USD",
        "models": {
            "openai:judge-model": None,
            "openai:m-one": {
                "input": 0.5,
                "output": 2.0,
                "cached_input": 0.5,
                "currency": "USD",
                "source": "eval.yaml",
                "note": "ours",
            },
            "openai:m-two": {
                "input": 1.0,
                "output": 3.0,
                "cached_input": 1.0,
                "currency": "USD",
                "source": "bat.yaml",
            },
        },
    }
    (judge,) = card["judges"]
    assert judge["provider"] == "openai" and judge["model"] == "judge-model"
    assert judge["base_url"] == "http://127.0.0.1:9/v1"
    assert judge["rubric_version"] == "bat.rubric/1"
    assert re.fullmatch(r"[0-9a-f]{64}", judge["prompt_sha256"])
    assert (judge["timeout_s"], judge["max_retries"]) == (60, 4)
    assert card["qualitative"] is False
    assert (card["k"], card["concurrency"], card["warm_latency"]) == (2, 4, True)
    assert card["timeouts"] == {"turn_s": 10, "agent_startup_s": 20, "agent_shutdown_s": 5}
    assert card["retries"] == {"agent_max_restarts": 20}
    assert card["command"] == ["bat", "eval.run"]
    host = card["host"]
    assert host["os"] and host["machine"] and host["cpu_count"] >= 1
    assert re.fullmatch(r"3\.\d+\.\d+.*", host["python"])
    assert card["selection"] is None
    record = json.loads((run_dir / "run.json").read_text())
    assert card["started_at"] == record["started_at"]
    assert card["ended_at"] == record["ended_at"]
    assert when(card["started_at"]) <= when(card["ended_at"])

    # report.html: the card, escaped (the hostile run name shows as text).
    report = (project / "eval/output/report.html").read_text()
    assert 'id="benchmark-card"' in report
    assert card["dataset"]["sha256"] in report and f"bat {version('bat-cli')}" in report
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    assert "<script>" not in report
    for secret in (MODEL_PASS, JUDGE_PASS, JUDGE_KEY):
        assert secret not in report


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_commit_dirty_tree_and_compare_warnings(tmp_path, bat, home):
    project = make_project(tmp_path, TASKS)
    (project / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "bat-adk"\nversion = "0.4.2"\n\n'
        '[[package]]\nname = "httpx"\nversion = "0.28.1"\n'
    )
    (project / "README.md").write_text("an agent\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "first")
    head = git(project, "rev-parse", "HEAD")

    assert bat("eval.run", cwd=project).code == 0
    assert bat("eval.run", cwd=project).code == 0
    first, second = run_dirs(project)
    card = card_of(first)
    # The run's own output (eval/output, untracked) does not make the project dirty.
    assert card["agent"]["git"] == {"commit": head, "dirty": False}
    assert card_of(second)["agent"]["git"] == {"commit": head, "dirty": False}
    assert (card["versions"]["bat_adk_requirement"], card["versions"]["bat_adk_source"]) == (
        "0.4.2",
        "uv.lock",
    )

    same = bat("eval.compare", first.name, second.name, cwd=project)
    assert same.code == 0, same.err
    assert "warning" not in same.err

    (project / "README.md").write_text("an agent, changed\n")
    edit_config(project, lambda config: config["evaluation"].update(k=2))
    assert bat("eval.run", cwd=project).code == 0
    third = run_dirs(project)[-1]
    assert card_of(third)["agent"]["git"] == {"commit": head, "dirty": True}

    differs = bat("eval.compare", first.name, third.name, cwd=project)
    assert differs.code == 0, differs.err
    warnings = [line for line in differs.err.splitlines() if line.startswith("warning: ")]
    assert f"warning: k differs: 1 in {first.name}, 2 in {third.name}" in warnings
    assert any(third.name in w and "uncommitted changes" in w for w in warnings), warnings
    assert len(warnings) == 2, warnings  # nothing else differs

    # A side without a card (an older run, say) is compared without a word about cards.
    (third / "card.json").unlink()
    quiet = bat("eval.compare", first.name, third.name, cwd=project)
    assert quiet.code == 0 and "warning" not in quiet.err


def test_a_resumed_run_keeps_its_card_and_snapshot(tmp_path, bat, home):
    project = make_project(tmp_path, TASKS)
    assert bat("eval.run", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    before = card_of(run_dir)
    snapshot = (run_dir / "tasks.json").read_bytes()

    grown = [*TASKS, {"id": "more", "turns": ["more"], "expected": {"status": "completed"}}]
    (project / "eval/input/tasks.json").write_text(json.dumps(grown))
    result = bat("eval.run", "--resume", run_dir.name, cwd=project)
    assert result.code == 0, result.err
    assert run_dirs(project) == [run_dir]
    after = card_of(run_dir)
    assert (run_dir / "tasks.json").read_bytes() == snapshot
    assert after["dataset"] == before["dataset"] and after["started_at"] == before["started_at"]
    assert after["agent"]["card"] == before["agent"]["card"]
    assert when(after["ended_at"]) > when(before["ended_at"])
    record = json.loads((run_dir / "run.json").read_text())
    assert after["ended_at"] == record["ended_at"]


def test_compare_says_when_the_agent_ran_on_another_python_or_bat_adk(tmp_path, bat, home):
    project = make_project(tmp_path, TASKS)
    assert bat("eval.run", cwd=project).code == 0
    assert bat("eval.run", cwd=project).code == 0
    first, second = run_dirs(project)
    assert card_of(first)["agent"]["runtime"] == card_of(second)["agent"]["runtime"]
    assert "warning" not in bat("eval.compare", first.name, second.name, cwd=project).err

    # The second as if its agent's environment had been rebuilt on another Python and
    # bat-adk (its card as bat wrote it, those two values changed).
    card = card_of(second)
    card["agent"]["runtime"].update(python="3.13.1", bat_adk="0.5.0")
    card["warm_latency"] = False  # and run with its cold starts in the latency figures
    (second / "card.json").write_text(json.dumps(card))
    differs = bat("eval.compare", first.name, second.name, cwd=project)
    assert differs.code == 0, differs.err
    warnings = [line for line in differs.err.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: warm_latency differs (cold starts in the latency figures or not): True in "
        f"{first.name}, False in {second.name}",
        f"warning: the agent's Python differs: {platform.python_version()} in {first.name}, "
        f"3.13.1 in {second.name}",
        f"warning: the agent's bat-adk differs: none in {first.name}, 0.5.0 in {second.name}",
    ]
