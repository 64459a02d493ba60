"""``bat eval.run`` with ``adapter: opencode``: the real opencode (pinned by
.ci/coding_agents.sh) against bat's scripted model, offline, under ``strace`` (the
``executable`` option names a wrapper): a file created and checked, a resumed second
turn whose request carries the first, and every connect(2) of every process it started
going to loopback (its start-up plugin install included: the preset points it there)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.agents.test_qwen_code_e2e import INET, SCRIPTED, _eval_run, _project
from tests.coding_agents import cli_path

RULES = [
    {"after_tool": "write", "reply": "Wrote it: {result}"},
    {
        "match": "make hello",
        "tool_calls": [
            {"name": "write", "args": {"filePath": "{cwd}/hello.txt", "content": "hi there\n"}}
        ],
    },
    {"regex": "(?s)remember apples.*what fruit", "scope": "prompt", "reply": "You said apples."},
    {"match": "remember", "reply": "Noted."},
]
TASKS = [
    {
        "id": "creates",
        "turns": ["please make hello"],
        "expected": {
            "files_created": ["hello.txt"],
            "file_contains": {"hello.txt": "hi there"},
            "tools_invoked": ["write"],
            "output_must_contain": ["Wrote file successfully"],
        },
    },
    {
        "id": "resumes",
        "turns": ["remember apples", "what fruit did I name?"],
        "expected": {"output_must_contain": ["You said apples."], "no_errors": True},
    },
]
WRAPPER = """#!/bin/sh
exec strace -f -qq -e trace=connect -o "{traces}/connect.$$" {opencode} "$@"
"""


def test_a_file_made_a_resumed_turn_and_no_connection_beyond_loopback(tmp_path):
    opencode = cli_path("opencode", "opencode")
    if shutil.which("strace") is None:
        reason = "strace is not installed (apt-get install strace)"
        pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)
    traces = tmp_path / "traces"
    traces.mkdir()
    wrapper = tmp_path / "opencode-traced"
    wrapper.write_text(WRAPPER.format(traces=traces, opencode=opencode))
    wrapper.chmod(0o755)
    options = {"executable": str(wrapper)}
    root = _project(tmp_path / "p", TASKS, options, [SCRIPTED], adapter="opencode", rules=RULES)
    episodes, _ = _eval_run(root, tmp_path)

    made = episodes[("scripted", "creates__try1")]
    assert made["status"] == "completed" and made["verdict"]["passed"], made["verdict"]
    (call,) = made["trace"]["tool_calls"]
    assert call["name"] == "write" and call["error"] is False
    assert made["trace"]["workspace"]["changes"]["created"] == ["hello.txt"]

    resumed = episodes[("scripted", "resumes__try1")]
    assert resumed["verdict"]["passed"], resumed["verdict"]
    first, second = resumed["trace"]["turns"]
    assert (first["output"], second["output"]) == ("Noted.", "You said apples.")

    lines = [line for path in traces.iterdir() for line in path.read_text().splitlines()]
    connects = [m.group("where") for line in lines if (m := INET.search(line))]
    assert connects, "strace saw no connect at all"
    outside = [c for c in connects if '"127.0.0.1"' not in c and '"::1"' not in c]
    assert not outside, outside
