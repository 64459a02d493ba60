"""A belt scenario group run as it is: the example group of eval_fixtures, its
``_config.json`` choosing the agent (Claude Code, the real one) and the workspace (its
``working_dir``), each scenario's per-turn ``expect`` judged; eval.yaml names only the
dataset and the stand-in model."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.coding_agents import cli_path
from tests.conftest import run_bat

GROUP = Path(__file__).resolve().parents[2] / "eval_fixtures" / "datasets" / "belt_group"
GREET = "def greet(name):\n    return 'Hello, ' + name + '!'\n"
# Claude Code's tools by their own names; {cwd} is the working directory its prompt states.
RULES = [
    {"after_tool": "Write", "reply": "Done."},
    {"after_tool": "Edit", "reply": "Done."},
    {
        "match": "cherry",
        "reply": "Adding the line.",
        "tool_calls": [
            {
                "name": "Write",
                "args": {"file_path": "{cwd}/notes.txt", "content": "banana\ncherry\n"},
            }
        ],
    },
    {
        "match": "banana",
        "reply": "Writing it.",
        "tool_calls": [
            {"name": "Write", "args": {"file_path": "{cwd}/notes.txt", "content": "banana\n"}}
        ],
    },
    {
        "match": "greet.py",
        "reply": "Creating greet.py.",
        "tool_calls": [
            {"name": "Write", "args": {"file_path": "{cwd}/greet.py", "content": GREET}}
        ],
    },
]


def test_a_belt_group_runs_as_it_is(tmp_path):
    claude = cli_path("claude-code", "claude")
    group = tmp_path / "scenarios"
    shutil.copytree(GROUP, group)
    before = sorted(p.name for p in (group / "workspace").iterdir())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(RULES))
    config = {
        "evaluation": {
            "dataset": "scenarios",
            "k": 1,
            "turn_timeout_s": 30,
            "agent": {"options": {"executable": str(claude)}},
        },
        "models": [
            {
                "name": "scripted",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "script": "rules.yaml",
            }
        ],
    }
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    home = tmp_path / "home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for key in [k for k in os.environ if k.startswith(("BAT_", "ANTHROPIC_"))]:
            patch.delenv(key)
        shown = run_bat("eval.show", cwd=tmp_path)
        result = run_bat("eval.run", cwd=tmp_path)
    assert "agent          claude-code" in shown.out, shown.out + shown.err
    assert result.code == 0, result.out + result.err
    (run,) = (tmp_path / "eval" / "output").glob("2*")
    episodes = {p.stem: json.loads(p.read_text()) for p in run.glob("scripted/episodes/*.json")}
    assert set(episodes) == {"create_greeting__try1", "notes_two_turns__try1"}
    for episode in episodes.values():
        assert episode["verdict"]["passed"], episode["verdict"]["reason"]
    greeting = episodes["create_greeting__try1"]
    names = [check["name"] for check in greeting["verdict"]["checks"]]
    assert "turn 1: command_succeeds" in names and "turn 1: files_unchanged" in names
    (command,) = greeting["trace"]["workspace"]["commands"]
    assert command["exit_code"] == 0
    notes = episodes["notes_two_turns__try1"]
    assert notes["trace"]["turns"][1]["input"].startswith("Your last reply was: Done.")
    assert "+cherry" in notes["trace"]["turns"][1]["git_diff"]
    card = json.loads((run / "card.json").read_text())
    assert card["agent"]["adapter"] == "claude-code"
    # The group's own folder is only read.
    assert sorted(p.name for p in (group / "workspace").iterdir()) == before


def _two_groups(root: Path, agents: tuple[str, str]) -> None:
    for name, agent in zip(("one", "two"), agents, strict=True):
        folder = root / "scenarios" / name
        (folder / "ws").mkdir(parents=True)
        (folder / "_config.json").write_text(json.dumps({"agent": agent, "working_dir": "ws"}))
        scenario = {"name": "s", "turns": [{"message": "hi", "expect": {"has_reply": True}}]}
        (folder / "s.json").write_text(json.dumps(scenario))
    (root / "eval").mkdir()


def test_groups_naming_different_agents_are_one_line(bat, tmp_path, home):
    _two_groups(tmp_path, ("claude-code", "codex"))
    (tmp_path / "eval" / "eval.yaml").write_text("evaluation:\n  dataset: scenarios\n")
    result = bat("eval.show", cwd=tmp_path)
    assert result.code == 2 and "the groups name different agents" in result.err
    assert "claude-code (one)" in result.err and "codex (two)" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_eval_yaml_names_the_adapter_for_every_group(bat, tmp_path, home):
    _two_groups(tmp_path, ("claude-code", "codex"))
    (tmp_path / "agent.py").write_text("import sys; print(sys.argv[-1])")
    config = {
        "evaluation": {
            "dataset": "scenarios",
            "agent": {
                "adapter": "command",
                "options": {
                    "command": [sys.executable, str(tmp_path / "agent.py"), "{message}"],
                    "output": "text",
                },
            },
        }
    }
    (tmp_path / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", cwd=tmp_path)
    assert result.code == 0, result.err
    (run,) = (tmp_path / "eval" / "output").glob("2*")
    episodes = [json.loads(p.read_text()) for p in run.glob("*/episodes/*.json")]
    assert sorted(e["task_id"] for e in episodes) == ["one/s", "two/s"]
    assert all(e["verdict"]["passed"] for e in episodes)
    # Each task ran in a copy of its own group's working_dir.
    assert {Path(e["trace"]["workspace"]["source"]).parent.name for e in episodes} == {"one", "two"}


def test_options_without_an_adapter_are_one_line(bat, tmp_path, home):
    (tmp_path / "eval").mkdir()
    (tmp_path / "tasks.json").write_text('[{"id": "t", "turns": ["hi"]}]')
    config = "evaluation:\n  dataset: tasks.json\n  agent:\n    options: {executable: claude}\n"
    (tmp_path / "eval" / "eval.yaml").write_text(config)
    result = bat("eval.show", cwd=tmp_path)
    assert result.code == 2 and "name it in evaluation.agent.adapter" in result.err
