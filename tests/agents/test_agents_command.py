"""``bat agents`` / ``bat agents info NAME``, and what doctor says of a CLI agent."""

from __future__ import annotations

import json
import os

from bat.agents import registry


def test_bat_agents_lists_every_adapter_with_its_program(bat, home):
    result = bat("agents")
    assert result.code == 0, result.err
    names = [
        line.split()[0]
        for line in result.out.splitlines()
        if line and not line.startswith("bat agents")
    ]
    assert names == list(registry.entries())
    assert names[0] == "a2a" and {"command", "claude-code", "codex", "qwen-code"} <= set(names)
    rows = json.loads(bat("agents", "--json").out)
    claude = next(row for row in rows if row["name"] == "claude-code")
    assert claude["program"] == "claude" and isinstance(claude["installed"], bool)
    assert "cannot be loaded" not in result.out


def test_info_shows_options_and_variables(bat, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-set-here")
    result = bat("agents", "info", "claude-code")
    assert result.code == 0, result.err
    assert "permission_mode" in result.out and "executable" in result.out
    assert "ANTHROPIC_API_KEY (set)" in result.out
    assert "sk-set-here" not in result.out
    data = json.loads(bat("agents", "codex", "--json").out)
    assert data["name"] == "codex" and {o["name"] for o in data["options"]} >= {
        "executable",
        "sandbox",
    }


def test_an_unknown_adapter_or_two_names_are_one_line(bat, home):
    for words in (
        ("agents", "info", "nope"),
        ("agents", "codex", "claude-code"),
        ("agents", "info"),
    ):
        result = bat(*words)
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1, (words, result.err)
    assert "known: a2a" in bat("agents", "nope").err


def test_doctor_checks_the_program_and_the_key(bat, tmp_path, home, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "eval").mkdir()
    (tmp_path / "tasks.json").write_text('[{"id": "t", "turns": ["hi"]}]')
    (tmp_path / "eval" / "eval.yaml").write_text(
        "evaluation:\n  dataset: tasks.json\n  agent:\n    adapter: claude-code\n"
        "    options: {executable: no-such-claude-here}\n"
    )
    result = bat("doctor", "--json", cwd=tmp_path)
    checks = {check["name"]: check for check in json.loads(result.out)}
    assert checks["agent adapter"]["status"] == "fail"
    assert "'no-such-claude-here' is not on PATH" in checks["agent adapter"]["detail"]
    assert checks["agent key"]["status"] == "warn" and not checks["agent key"]["required"]
    assert checks["agent port"]["status"] == "skip"
    assert result.code == 1
    # Installed, and only scripted models: nothing to say of a key.
    (tmp_path / "eval" / "eval.yaml").write_text(
        "evaluation:\n  dataset: tasks.json\n  agent:\n    adapter: command\n"
        f"    options: {{command: [{json.dumps(os.path.realpath('/bin/sh'))}, -c, 'echo hi']}}\n"
    )
    checks = {
        check["name"]: check for check in json.loads(bat("doctor", "--json", cwd=tmp_path).out)
    }
    assert checks["agent adapter"]["status"] == "ok"
    assert "agent key" not in checks
