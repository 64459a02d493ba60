"""The check of simulated users: does the verdict tell an agent that asks from one that guesses?

An agent that asks for a missing detail before it acts (the demo agent: "For how many
people?") and its broken twin that guesses instead (the same agent with
``GUESS_PEOPLE=2``: it books for 2 at once), each run through ``bat eval.run`` against
the same task and the same simulated user. That user holds the detail (4 people) and
gives it only when asked; its rules are the demo's own (eval_fixtures/demo/
user-rules.yaml), served by bat's scripted model server. A fixed-turn script could not
tell the two apart without guessing the agent's question in advance; the user can.
"""

from __future__ import annotations

import shutil

import yaml

from tests.evalkit import REPO, episodes, make_project, run_dirs

USER_RULES = REPO / "eval_fixtures" / "demo" / "user-rules.yaml"
TASK = {
    "id": "book",
    "user": {
        "instructions": "You want a table for 4 people tonight. Say the number of people "
        "only when you are asked for it.",
        "first_message": "I'd like to book a table",
        "max_turns": 4,
    },
    "expected": {
        "output_must_contain": ["booked a table for 4"],
        "conversation_must_contain": ["how many people"],
    },
}


def evaluate(tmp_path, bat, agent_env: dict[str, str]) -> dict:
    """One attempt of TASK against the demo agent with ``agent_env``: its episode."""
    project = make_project(tmp_path, [TASK], agent="demo_agent", agent_env=agent_env)
    shutil.copy(USER_RULES, project / "user-rules.yaml")
    path = project / "eval" / "eval.yaml"
    config = yaml.safe_load(path.read_text())
    config["user"] = {"script": "user-rules.yaml"}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err  # failing tasks, no gate: exit 0
    (episode,) = episodes(run_dirs(project)[0]).values()
    assert episode["infra_error"] is None and episode["agent_error"] is None
    return episode


def test_the_agent_that_asks_passes(tmp_path, bat, home):
    episode = evaluate(tmp_path, bat, {})
    assert episode["verdict"]["passed"], episode["verdict"]["reason"]
    turns = [(t["author"], t["input"], t["output"]) for t in episode["trace"]["turns"]]
    assert turns == [
        ("dataset", "I'd like to book a table", "For how many people?"),
        ("simulated_user", "4 people, please.", "booked a table for 4"),
    ]
    record = episode["trace"]["simulated_user"]
    # the third message of the user is its stop, which ends the conversation unsent
    assert (record["ended"], record["turns"], record["last_words"]) == (
        "goal_met",
        2,
        "Thank you!",
    )
    assert record["usage"]["model_calls"] == 2


def test_the_agent_that_guesses_fails(tmp_path, bat, home):
    episode = evaluate(tmp_path, bat, {"GUESS_PEOPLE": "2"})
    verdict = episode["verdict"]
    assert not verdict["passed"]
    # both checks name what went wrong: the wrong booking and the question never asked
    assert "booked a table for 4" in verdict["reason"], verdict["reason"]
    assert "how many people" in verdict["reason"], verdict["reason"]
    turns = [(t["author"], t["input"], t["output"]) for t in episode["trace"]["turns"]]
    assert turns == [("dataset", "I'd like to book a table", "booked a table for 2")]
    record = episode["trace"]["simulated_user"]
    assert (record["ended"], record["turns"]) == ("stopped_unmet", 1)
    assert record["last_words"] == "That is not the number of people I wanted."
