"""``bat eval.run`` over a belt scenario group (eval_fixtures/datasets/belt_group) with a
real program behind the ``command`` adapter: per-turn checks and ``{{prev.reply_text}}``
end to end, passing for an agent that does what is asked and failing, turn by turn, for
one that does not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

GROUP = Path(__file__).parents[2] / "eval_fixtures" / "datasets" / "belt_group"

# Does what the example group's scenarios ask (or, with LAZY in its file name, says it did
# and changes nothing), reporting its tool calls in bat's NDJSON.
AGENT = r"""
import json, pathlib, sys
message = sys.argv[-1]
lazy = "lazy" in sys.argv[0]
emit = lambda **event: print(json.dumps(event), flush=True)
def wrote(tool, path, text):
    if not lazy:
        pathlib.Path(path).write_text(text)
    emit(type="tool_call", id="1", name=tool, args={"path": path})
    emit(type="tool_result", id="1", result="ok")
if message.startswith("Your last reply was: banana\n"):
    wrote("Edit", "notes.txt", "banana\ncherry\n")
    emit(type="text", text="Added cherry.")
elif "notes.txt" in message:
    wrote("Write", "notes.txt", "banana\n")
    emit(type="text", text="banana")
else:
    wrote("Write", "greet.py", "def greet(name):\n    return 'Hello, ' + name + '!'\n")
    emit(type="text", text="Created greet.py.")
"""


def _run(bat, root: Path, program: str) -> dict[str, dict]:
    (root / program).write_text(AGENT)
    config = {
        "evaluation": {
            "dataset": str(GROUP),
            "k": 1,
            "turn_timeout_s": 20,
            "agent": {
                "adapter": "command",
                "options": {"command": [sys.executable, str(root / program), "{message}"]},
                "workspace": {"source": str(GROUP / "workspace")},
            },
        }
    }
    (root / "eval").mkdir()
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    result = bat("eval.run", cwd=root)
    assert result.code == 0, result.err
    run = sorted((root / "eval" / "output").glob("2*"))[-1]
    episodes = {p.stem: json.loads(p.read_text()) for p in run.glob("*/episodes/*.json")}
    snapshot = json.loads((run / "tasks.json").read_text())
    assert [task["id"] for task in snapshot] == ["create_greeting", "notes_two_turns"]
    return episodes


def test_a_belt_group_runs_with_its_per_turn_checks(bat, tmp_path, home):
    episodes = _run(bat, tmp_path, "agent.py")
    greeting, notes = episodes["create_greeting__try1"], episodes["notes_two_turns__try1"]
    assert greeting["verdict"]["passed"], greeting["verdict"]["reason"]
    assert notes["verdict"]["passed"], notes["verdict"]["reason"]
    assert notes["trace"]["turns"][1]["input"].startswith("Your last reply was: banana\n")
    assert "turn 2: diff_contains: '+cherry' found" in notes["verdict"]["reason"]
    assert "turn 1: command_succeeds: 'python3 -c" in greeting["verdict"]["reason"]


def test_an_agent_that_changes_nothing_fails_each_turn_check(bat, tmp_path, home):
    episodes = _run(bat, tmp_path, "lazy_agent.py")
    notes = episodes["notes_two_turns__try1"]
    failed = [c["detail"] for c in notes["verdict"]["checks"] if not c["passed"]]
    assert failed == [
        "turn 1: files_created: notes.txt not created",
        "turn 1: file_contains:notes.txt: no such file",
        "turn 2: files_modified_any: none of notes.txt changed",
        "turn 2: diff_contains: '+cherry' not in the diff (nothing changed)",
    ]
    greeting = episodes["create_greeting__try1"]
    assert not greeting["verdict"]["passed"]
    assert "turn 1: command_succeeds: 'python3 -c" in greeting["verdict"]["reason"]
