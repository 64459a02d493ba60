"""``bat eval.run`` with ``adapter: opencode``: the real opencode (pinned by
.ci/coding_agents.sh) against bat's scripted model, offline, under ``strace`` (the
``executable`` option names a wrapper): a file created and checked, a resumed second
turn whose request carries the first, and every connect(2) of every process it started
going to loopback (its start-up plugin install included: the preset points it there)."""

from __future__ import annotations

from tests.agents.test_qwen_code_e2e import SCRIPTED, _eval_run, _project
from tests.coding_agents import beyond_loopback, cli_path, connects, traced

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


def test_a_file_made_a_resumed_turn_and_no_connection_beyond_loopback(tmp_path):
    opencode = cli_path("opencode", "opencode")
    wrapper, traces = traced(opencode, tmp_path)
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

    seen = connects(traces)
    assert seen, "strace saw no connect at all"
    outside = beyond_loopback(seen)
    assert not outside, outside
