"""Simulated users, end to end: the demo agent (a real a2a-sdk server) talking to a user
model that is bat's scripted model, served by bat from a rule file; and the same tasks
with a user model that is down (an infrastructure failure of its own kind, run again by
``--retry-infra`` alone).

One project, two runs: first with the user model down (the simulated tasks fail as
infrastructure, the fixed-turn task runs), then ``--resume --retry-infra`` with the
scripted user, which runs the simulated tasks only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.inputs.dataset import SimulatedUser
from bat.evaluation.log.episode import TurnRecord
from bat.evaluation.run.simulated_user import (
    NO_REPLY,
    OPENING,
    REPLY_LIMIT,
    STOP,
    UNMET,
    messages_for,
    read_reply,
)
from tests.evalkit import free_port, make_project

# The user: opens with its name, asks for a table, gives the number only when asked.
USER_RULES = """\
- match: waiting
  reply: Hi, my name is Ada.
- match: nice to meet you
  reply: I'd like to book a table.
- match: how many people
  reply: 4 people, please.
- match: booked a table for 4
  reply: 'Thank you! ###STOP###'  # quoted: in YAML, ' #' starts a comment
- match: no tools needed
  reply: 'Tell me more: {last}'
"""

TASKS = [
    {
        "id": "book",
        "user": {
            "instructions": "You are Ada. You want a table for 4 people. Say the number "
            "of people only when you are asked for it.",
            "max_turns": 5,
        },
        "expected": {
            "output_must_contain": ["booked a table for 4"],
            "conversation_must_contain": ["how many people"],
        },
    },
    {
        "id": "chatter",
        "turns": ["hello"],
        "user": {"instructions": "You chat and never stop.", "max_turns": 3},
        "expected": {"status": "completed"},
    },
    {"id": "fixed", "turns": ["my name is Bo"], "expected": {"output_must_contain": ["Bo"]}},
]


def _user_section(project: Path, section: dict) -> None:
    path = project / "eval" / "eval.yaml"
    config = yaml.safe_load(path.read_text())
    config["user"] = section
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _episodes(project: Path) -> dict[str, dict]:
    (run,) = (project / "eval" / "output").glob("2*")
    return {
        path.stem: json.loads(path.read_text())
        for path in (run / "agent-default" / "episodes").glob("*.json")
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project after the two runs, and what the first one printed."""
    root = make_project(tmp_path_factory.mktemp("simulated"), TASKS, agent="demo_agent")
    (root / "user-rules.yaml").write_text(USER_RULES)
    return root


@pytest.fixture(scope="module")
def runs(project):
    from tests.conftest import run_bat

    dead = f"http://127.0.0.1:{free_port()}/v1"
    _user_section(project, {"model": "m", "base_url": dead, "max_retries": 0})
    first = run_bat("eval.run", cwd=project)
    before = _episodes(project)
    _user_section(project, {"script": "user-rules.yaml", "seed": 7})
    second = run_bat("eval.run", "--resume", "--retry-infra", cwd=project)
    return first, before, second, _episodes(project)


def test_a_user_model_that_is_down_is_an_infrastructure_failure(runs):
    first, before, _, _ = runs
    assert first.code == 3, first.err
    for stem in ("book__try1", "chatter__try1"):
        episode = before[stem]
        assert episode["infra_error"]["kind"] == "user_model"
        assert "the user model openai:m failed" in episode["infra_error"]["message"]
        assert episode["agent_error"] is None
        assert episode["trace"]["simulated_user"]["ended"] is None
    assert before["fixed__try1"]["verdict"]["passed"]


def test_retry_infra_runs_the_user_model_failures_again_and_nothing_else(runs):
    _, before, second, after = runs
    assert second.code == 0, second.err
    assert after["fixed__try1"] == before["fixed__try1"]  # not run again
    assert after["book__try1"]["earlier"] and after["chatter__try1"]["earlier"]


def test_a_conversation_that_meets_its_goal_in_three_turns(runs):
    book = runs[3]["book__try1"]
    assert book["verdict"]["passed"], book["verdict"]["reason"]
    turns = book["trace"]["turns"]
    assert [turn["input"] for turn in turns] == [
        "Hi, my name is Ada.",
        "I'd like to book a table.",
        "4 people, please.",
    ]
    assert {turn["author"] for turn in turns} == {"simulated_user"}
    assert turns[1]["status"] == "input-required"  # the agent asked back...
    assert turns[2]["task_id"] == turns[1]["task_id"]  # ...and the answer continued its task
    record = book["trace"]["simulated_user"]
    assert record["ended"] == "goal_met"
    assert record["last_words"] == "Thank you!"
    assert (record["turns"], record["simulated_turns"], record["max_turns"]) == (3, 3, 5)
    assert record["model"] == "script:user-rules.yaml"
    assert record["usage"]["model_calls"] == 4  # three messages and the stop
    assert record["usage"]["prompt_tokens"] > 0
    assert record["instructions_sha256"] == SimulatedUser(**TASKS[0]["user"]).instructions_sha256


def test_a_conversation_that_reaches_max_turns(runs):
    chatter = runs[3]["chatter__try1"]
    turns = chatter["trace"]["turns"]
    assert [turn["author"] for turn in turns] == ["dataset", "simulated_user", "simulated_user"]
    assert turns[1]["input"].startswith("Tell me more: ")
    record = chatter["trace"]["simulated_user"]
    assert (record["ended"], record["turns"], record["simulated_turns"]) == ("max_turns", 3, 2)
    assert record["usage"]["model_calls"] == 2  # not asked again at the limit


def test_a_task_without_a_user_has_no_trace_of_one(runs):
    fixed = runs[3]["fixed__try1"]
    assert "simulated_user" not in fixed["trace"]
    assert all("author" not in turn for turn in fixed["trace"]["turns"])


def test_simulated_users_need_a_user_model_and_an_a2a_agent(tmp_path, bat):
    project = make_project(tmp_path, TASKS[:1], start=False)
    result = bat("eval.run", "--dry-run", cwd=project)
    assert result.code == 2
    assert "1 task (book) has a simulated user, but there is no user: section" in result.err
    assert "Traceback" not in result.err
    _user_section(project, {"model": "m", "api_key_env": "BAT_TEST_NO_SUCH_KEY"})
    result = bat("eval.run", "--dry-run", cwd=project)
    assert result.code == 2 and "BAT_TEST_NO_SUCH_KEY" in result.err
    path = project / "eval" / "eval.yaml"
    config = yaml.safe_load(path.read_text())
    config["user"] = {"model": "m"}
    config["evaluation"]["agent"] = {
        "adapter": "command",
        "options": {"command": ["/bin/echo", "{message}"], "output": "text"},
        "workspace": {"source": "."},
    }
    path.write_text(yaml.safe_dump(config))
    result = bat("eval.run", "--dry-run", cwd=project)
    assert result.code == 2, result.err
    assert "has a simulated user, which talks to A2A agents only" in result.err


def test_the_user_model_sees_the_conversation_with_roles_flipped():
    user = SimulatedUser(instructions="You are Ada.")
    opening = messages_for(user, [])
    assert opening[0]["role"] == "system" and "You are Ada." in opening[0]["content"]
    assert STOP in opening[0]["content"] and UNMET in opening[0]["content"]
    assert opening[1:] == [{"role": "user", "content": OPENING}]
    turns = [TurnRecord(input="hi", status="completed", output="hello! who are you?")]
    turns.append(TurnRecord(input="Ada", status="completed", output="  "))
    assert messages_for(user, turns)[1:] == [
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "hello! who are you?"},
        {"role": "assistant", "content": "Ada"},
        {"role": "user", "content": NO_REPLY},
    ]
    huge = [TurnRecord(input="hi", status="completed", output="z" * (REPLY_LIMIT + 5))]
    shown = messages_for(user, huge)[-1]["content"]
    assert shown.startswith("z" * REPLY_LIMIT) and shown.endswith(
        "[... 5 more characters not shown]"
    )


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        ("4 people", ("4 people", None)),
        (" Thanks! ###STOP### ", ("Thanks!", "goal_met")),
        ("###STOP###", ("", "goal_met")),
        ("I give up. ###UNMET###", ("I give up.", "stopped_unmet")),
        ("###STOP### ###UNMET###", ("", "stopped_unmet")),
    ],
)
def test_stop_signals(reply, read):
    assert read_reply(reply) == read


@given(st.text(max_size=200), st.sampled_from(["", STOP, UNMET]), st.text(max_size=50))
def test_any_reply_reads_as_a_message_or_an_end(before, signal, after):
    text, ended = read_reply(before + signal + after)
    if signal:
        assert ended in ("goal_met", "stopped_unmet")
    if ended is None:
        assert text == (before + after).strip()


# One misbehaving model server for the cases below: each case's rule is chosen by a
# marker in the user's instructions, which the user model's system prompt holds.
MISBEHAVING = [
    ({"body": "<html>busy</html>"}, "answer is not JSON"),
    ({"status": 400}, "HTTP 400"),
    ({"reply": "  "}, "wrote an empty message"),
    ({"reply": "x" * 50_001}, "wrote a message of 50,001 characters"),
    ({"body": "y" * 5000}, "answer is over 4,096 bytes"),
]


@pytest.fixture(scope="module")
def misbehaving(tmp_path_factory):
    """The test model server (eval_fixtures.model_server), one rule per case."""
    from tests.evalkit import start_model_server

    rules = [
        {"match": f"case-{index}-end", "scope": "prompt", **rule}
        for index, (rule, _) in enumerate(MISBEHAVING)
    ]
    path = tmp_path_factory.mktemp("misbehaving") / "rules.json"
    path.write_text(json.dumps(rules))
    server, base_url = start_model_server(path)
    yield base_url
    server.terminate()
    server.wait()


@pytest.mark.parametrize("case", range(len(MISBEHAVING)))
def test_a_user_model_that_misbehaves_is_its_failure_in_one_line(misbehaving, monkeypatch, case):
    """Malformed, refusing, empty and oversized answers of a real HTTP server:
    UserModelFailed, whose one line the episode's infrastructure failure quotes. (The
    answer's size limit is lowered to 4 KB here: 16 MB of test data is no better test.)"""
    import asyncio

    from bat.evaluation.inputs.config import UserModelSpec
    from bat.evaluation.run import chat_client as client
    from bat.evaluation.run.simulated_user import UserModel, UserModelFailed

    rule, words = MISBEHAVING[case]
    if "body" in rule:
        monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 4096)
    spec = UserModelSpec(model="m", base_url=f"{misbehaving}/v1", max_retries=0)
    model = UserModel(spec, None, spec.shown)
    user = SimulatedUser(instructions=f"case-{case}-end")
    try:
        with pytest.raises(UserModelFailed) as failed:
            asyncio.run(model.next_message(user, []))
    finally:
        model.close()
    message = str(failed.value)
    assert message.startswith("the user model openai:m ") and words in message
    assert "\n" not in message


def test_the_judge_knows_a_model_played_the_user_and_its_goal(runs):
    """The judge's prompt of a simulated conversation marks the simulated turns and says
    the user's instructions and how the conversation ended; a fixed-turn task's prompt
    has none of it."""
    from bat.evaluation.inputs.config import JudgePrompts
    from bat.evaluation.inputs.dataset import TaskSpec
    from bat.evaluation.judging.rubrics import build_prompt
    from bat.evaluation.log.episode import EpisodeResult

    episodes = runs[3]
    book = EpisodeResult.model_validate(episodes["book__try1"])
    prompt = build_prompt(book, TaskSpec.model_validate(TASKS[0]), JudgePrompts(), 12_000).user
    assert '[turn 3] user (simulated): "4 people, please."' in prompt
    assert "simulated user (a model played the user, from these instructions): " in prompt
    assert "You are Ada." in prompt and "the user said its goal was met" in prompt
    fixed = EpisodeResult.model_validate(episodes["fixed__try1"])
    prompt = build_prompt(fixed, TaskSpec.model_validate(TASKS[2]), JudgePrompts(), 12_000).user
    assert "simulated" not in prompt and '[turn 1] user: "my name is Bo"' in prompt


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda path: None, "No such file or directory"),
        (lambda path: os.mkfifo(path), "not a regular file"),
        (lambda path: path.mkdir(), "a directory, not a model script"),
        (lambda path: path.symlink_to("/dev/zero"), "not a regular file"),
        (lambda path: path.write_text("- match: x\n  replay: y\n"), "unknown key(s) ['replay']"),
        (lambda path: path.write_text("[" * 5000), "user.script"),
        (lambda path: path.write_text("- reply: " + "x" * 11_000_000), "user.script"),
    ],
    ids=["missing", "fifo", "folder", "device-link", "typo", "nested", "huge"],
)
def test_a_bad_user_script_is_one_line_before_anything_runs(tmp_path, bat, make, words):
    project = make_project(tmp_path, TASKS[:1], start=False)
    make(project / "user.yaml")
    _user_section(project, {"script": "user.yaml"})
    result = bat("eval.show", cwd=project, timeout=20)
    assert result.code == 2, result.err
    assert "user.script: user.yaml: " in result.err and words in result.err
    assert "Traceback" not in result.err
    assert not (project / "eval" / "output").exists()


def test_a_served_script_never_takes_the_agents_port():
    """bat serves the stand-in model and the simulated user before it starts the agent,
    whose port is free until then: a port of the kernel's choosing that is the agent's
    is refused, and another one taken (CI once saw the agent fail to bind its port)."""
    from bat.evaluation.run.scripted_model import _listen_avoiding

    asked: list[int] = []

    class FirstTwo:
        def __contains__(self, port: object) -> bool:
            asked.append(port)
            return len(asked) <= 2

    sock = _listen_avoiding(FirstTwo())
    try:
        assert len(asked) == 3 and sock.getsockname()[1] == asked[-1]
        assert len(set(asked)) == 3  # the refused ones were held, so none came back
    finally:
        sock.close()
