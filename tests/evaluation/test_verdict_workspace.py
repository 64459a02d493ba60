"""belt's workspace checks in the verdict: each passing and failing, per turn and per
episode, an A2A episode without a workspace, no_errors of a CLI agent, vacuous passes.

Episodes are built with the real models (EpisodeResult, WorkspaceRecord, ...), as
bat.agents.cli_session fills them in."""

import pytest

from bat.evaluation.inputs.dataset import TaskExpected, TaskSpec
from bat.evaluation.log.episode import (
    AgentError,
    CommandRun,
    EpisodeResult,
    EpisodeTrace,
    FileChanges,
    ToolCall,
    TurnRecord,
    WorkspaceRecord,
)
from bat.evaluation.verdict import judge_episode

DIFF = "--- a/src/utils.py\n+++ b/src/utils.py\n-    return xs[i:i+n+1]\n+    return xs[i:i+n]\n"


def workspace(**kwargs):
    fields = {
        "source": "/repo",
        "changes": FileChanges(created=["src/new.py"], modified=["src/utils.py"]),
        "git_diff": DIFF,
        "files": {"hello.txt": "hi there", "gone.txt": None},
        "commands": [
            CommandRun(command="pytest -q", exit_code=0, seconds=1.5),
            CommandRun(command="make lint", exit_code=1, output_tail="lint.py:3: E501\n"),
            CommandRun(command="sleep 99", exit_code=None, timed_out=True, seconds=5),
        ],
    }
    return WorkspaceRecord(**{**fields, **kwargs})


def cli_episode(turns=None, tools=(), space="default", agent_error=None, output=None):
    """A command-line agent's episode: two turns by default, the first creating
    src/new.py (Write), the second editing src/utils.py (Read, Edit)."""
    if turns is None:
        turns = [
            TurnRecord(
                input="make new.py",
                status="completed",
                output="Created it.",
                exit_code=0,
                changes=FileChanges(created=["src/new.py"]),
                git_diff="+++ b/src/new.py\n+print('new')\n",
                tool_sequence=["Write"],
            ),
            TurnRecord(
                input="fix utils",
                status="completed",
                output="Fixed the off-by-one.",
                exit_code=0,
                changes=FileChanges(modified=["src/utils.py"]),
                git_diff=DIFF,
                tool_sequence=["Read", "Edit"],
            ),
        ]
    if not tools:
        tools = [("Write", 0, False), ("Read", 1, False), ("Edit", 1, False)]
    trace = EpisodeTrace(
        context_id="c",
        turns=turns,
        tool_calls=[ToolCall(name=n, turn=t, error=e) for n, t, e in tools],
        workspace=workspace() if space == "default" else space,
    )
    return EpisodeResult(
        task_id="t",
        attempt=1,
        model="m",
        status=turns[-1].status if turns else "working",
        final_output=turns[-1].output if output is None and turns else (output or ""),
        trace=trace,
        agent_error=agent_error,
        started_at="",
        ended_at="",
    )


def a2a_episode(output="The answer."):
    trace = EpisodeTrace(
        context_id="c",
        turns=[TurnRecord(input="q", status="completed", output=output)],
        tool_calls=[ToolCall(name="search")],
    )
    return EpisodeResult(
        task_id="t",
        attempt=1,
        model="m",
        status="completed",
        final_output=output,
        trace=trace,
        started_at="",
        ended_at="",
    )


def judge(expected, episode, turns=None):
    """The verdict of a task written as in tasks.json (turn objects carry ``expect``)."""
    task = TaskSpec.model_validate(
        {"id": "t", "turns": turns or ["x"], "expected": {"status": None, **expected}}
    )
    return judge_episode(task.expected, episode, task.turn_expected)


def details(verdict):
    return [check.detail for check in verdict.checks]


@pytest.mark.parametrize(
    ("expected", "passed", "detail"),
    [
        ({"tools_invoked": ["Edit"]}, True, "tools_invoked: Edit called 1×"),
        ({"tools_invoked": ["Bash"]}, False, "tools_invoked: Bash not called (Write, Read, Edit was)"),  # noqa: E501
        ({"files_modified_any": ["README.md", "src/utils.py"]}, True, "files_modified_any: src/utils.py changed"),  # noqa: E501
        ({"files_modified_any": ["src/*.py"]}, True, "files_modified_any: src/utils.py, src/new.py changed"),  # noqa: E501
        ({"files_modified_any": ["README.md"]}, False, "files_modified_any: none of README.md changed"),  # noqa: E501
        ({"files_created": ["src/new.py"]}, True, "files_created: src/new.py created"),
        ({"files_created": ["src/utils.py"]}, False, "files_created: src/utils.py not created (it existed and was modified)"),  # noqa: E501
        ({"files_created": ["docs/x.md"]}, False, "files_created: docs/x.md not created"),
        ({"files_unchanged": ["README.md"]}, True, "files_unchanged: README.md unchanged"),
        ({"files_unchanged": ["src/utils.py"]}, False, "files_unchanged: src/utils.py modified"),
        ({"files_unchanged": ["src/*"]}, False, "files_unchanged: src/utils.py modified"),
        ({"file_contains": {"hello.txt": "hi"}}, True, "file_contains:hello.txt: contains 'hi'"),
        ({"file_contains": {"hello.txt": ["bye"]}}, False, "file_contains:hello.txt: missing 'bye'"),  # noqa: E501
        ({"file_contains": {"gone.txt": "x"}}, False, "file_contains:gone.txt: no such file"),
        ({"file_contains": {"other.txt": "x"}}, False, "file_contains:other.txt: the workspace record holds no copy of it"),  # noqa: E501
        ({"diff_contains": "+    return xs[i:i+n]"}, True, "diff_contains: '+    return xs[i:i+n]' found"),  # noqa: E501
        ({"diff_contains": ["+import os"]}, False, "diff_contains: '+import os' not in the diff"),
        ({"has_reply": True}, True, "has_reply: a reply"),
        ({"has_reply": False}, False, "has_reply: a reply, expected none"),
        ({"command_succeeds": "pytest -q"}, True, "command_succeeds: 'pytest -q' exited 0"),
        ({"command_succeeds": ["make lint"]}, False, "command_succeeds: 'make lint' exited 1: lint.py:3: E501"),  # noqa: E501
        ({"command_succeeds": [{"run": "sleep 99", "timeout_s": 5}]}, False, "command_succeeds: 'sleep 99' did not end in time (5 s)"),  # noqa: E501
        ({"command_succeeds": "true"}, False, "command_succeeds: 'true' was not run"),
    ],
)  # fmt: skip
def test_each_workspace_check_passes_and_fails(expected, passed, detail):
    verdict = judge(expected, cli_episode())
    assert details(verdict) == [detail]
    assert verdict.passed is passed


def test_every_check_of_a_task_is_listed_in_order():
    verdict = judge(
        {
            "status": "completed",
            "files_created": ["src/new.py", "src/other.py"],
            "file_contains": {"hello.txt": ["hi", "there", "bye"]},
            "command_succeeds": ["pytest -q"],
        },
        cli_episode(),
    )
    assert not verdict.passed
    assert details(verdict) == [
        "status: 'completed'",
        "files_created: src/new.py created",
        "files_created: src/other.py not created",
        "file_contains:hello.txt: contains 'hi'",
        "file_contains:hello.txt: contains 'there'",
        "file_contains:hello.txt: missing 'bye'",
        "command_succeeds: 'pytest -q' exited 0",
    ]
    assert [c.name for c in verdict.checks if not c.passed] == [
        "files_created",
        "file_contains:hello.txt",
    ]


def test_an_empty_diff_and_a_cut_diff_say_so():
    empty = judge({"diff_contains": ["x"]}, cli_episode(space=workspace(git_diff="")))
    assert details(empty) == ["diff_contains: 'x' not in the diff (nothing changed)"]
    cut = judge(
        {"diff_contains": ["x"]},
        cli_episode(space=workspace(git_diff="y" * 10, diff_truncated=True)),
    )
    assert details(cut) == [
        "diff_contains: 'x' not in the diff (the diff was cut at 10 characters)"
    ]


def test_an_agent_without_a_workspace_fails_the_workspace_checks_saying_why():
    """An A2A episode records no workspace: each check that reads one fails, named;
    tools_invoked and has_reply read the trace and work for any agent."""
    verdict = judge(
        {
            "files_created": ["a.py"],
            "files_modified_any": ["a.py"],
            "files_unchanged": ["b.py"],
            "file_contains": {"a.py": "x"},
            "diff_contains": ["x"],
            "command_succeeds": ["pytest"],
            "tools_invoked": ["search"],
            "has_reply": True,
        },
        a2a_episode(),
    )
    assert not verdict.passed
    failed = [c.detail for c in verdict.checks if not c.passed]
    assert len(failed) == 6
    assert all("the agent has no workspace" in detail for detail in failed)
    assert failed[0] == (
        "files_modified_any: a.py: the agent has no workspace "
        "(only a command-line agent's episode records one)"
    )
    assert [c.detail for c in verdict.checks if c.passed] == [
        "tools_invoked: search called 1×",
        "has_reply: a reply",
    ]


def test_per_turn_expectations_read_only_their_turn():
    turns = [
        {"message": "make new.py", "expect": {"files_created": ["src/new.py"], "tools_invoked": ["Write"], "has_reply": True}},  # noqa: E501
        {"message": "fix utils", "expect": {"files_unchanged": ["src/new.py"], "tools_invoked": ["Edit"], "diff_contains": ["+    return xs[i:i+n]"]}},  # noqa: E501
    ]  # fmt: skip
    verdict = judge({}, cli_episode(), turns)
    assert verdict.passed, verdict.reason
    assert details(verdict) == [
        "turn 1: tools_invoked: Write called 1×",
        "turn 1: files_created: src/new.py created",
        "turn 1: has_reply: a reply",
        "turn 2: tools_invoked: Edit called 1×",
        "turn 2: files_unchanged: src/new.py unchanged",
        "turn 2: diff_contains: '+    return xs[i:i+n]' found",
    ]
    assert verdict.checks[0].name == "turn 1: tools_invoked"


def test_a_turn_check_fails_on_what_another_turn_did():
    turns = [
        {"message": "make new.py", "expect": {"files_modified_any": ["src/utils.py"], "tools_invoked": ["Edit"]}},  # noqa: E501
        {"message": "fix utils", "expect": {"files_created": ["src/new.py"], "diff_contains": ["new"]}},  # noqa: E501
    ]  # fmt: skip
    verdict = judge({}, cli_episode(), turns)
    assert not verdict.passed
    assert details(verdict) == [
        "turn 1: tools_invoked: Edit not called (Write was)",
        "turn 1: files_modified_any: none of src/utils.py changed",
        "turn 2: files_created: src/new.py not created",
        "turn 2: diff_contains: 'new' not in the diff",
    ]


def test_a_turn_reads_files_and_commands_from_the_final_workspace():
    turns = [
        {"message": "a", "expect": {"file_contains": {"hello.txt": "hi"}, "command_succeeds": "pytest -q"}},  # noqa: E501
        "b",
    ]  # fmt: skip
    verdict = judge({}, cli_episode(), turns)
    assert details(verdict) == [
        "turn 1: file_contains:hello.txt: contains 'hi'",
        "turn 1: command_succeeds: 'pytest -q' exited 0",
    ]


def test_a_turn_that_did_not_run_fails_its_expectations():
    episode = cli_episode()
    episode.trace.turns = episode.trace.turns[:1]
    turns = ["a", "b", {"message": "c", "expect": {"has_reply": True}}]
    verdict = judge({}, episode, turns)
    assert not verdict.passed
    assert details(verdict) == [
        "turn 3: not checked: the turn did not run (the episode ended after turn 1)"
    ]


def test_no_errors_of_a_command_line_agent():
    """A failed tool call, or the agent's error (its process failed): per episode and
    per turn (only that turn's tool calls, the error of the turn it ended)."""
    clean = judge({"no_errors": True}, cli_episode())
    assert clean.passed and details(clean) == ["no_errors: none"]

    tools = [("Write", 0, True), ("Read", 1, False)]
    failed_tool = judge(
        {}, cli_episode(tools=tools), [{"message": "a", "expect": {"no_errors": True}}, {"message": "b", "expect": {"no_errors": True}}]  # noqa: E501
    )  # fmt: skip
    assert details(failed_tool) == [
        "turn 1: no_errors: failed tool calls: Write",
        "turn 2: no_errors: none",
    ]
    assert failed_tool.checks[0].name == "turn 1: no_errors"

    episode = cli_episode(agent_error=AgentError(kind="rate_limited", message="slow down"))
    episode.trace.turns[1].status = "error"
    verdict = judge({"no_errors": True}, episode)
    assert details(verdict) == [
        "no_errors: turns ended in error: 2; agent error rate_limited: slow down"
    ]
    per_turn = judge({}, episode, ["a", {"message": "b", "expect": {"no_errors": True}}])
    assert details(per_turn) == [
        "turn 2: no_errors: turns ended in error: 2; agent error rate_limited: slow down"
    ]


def test_a2a_no_errors_is_unchanged_by_the_agent_error():
    episode = a2a_episode()
    episode.agent_error = AgentError(kind="refused", message="no")
    assert details(judge({"no_errors": True}, episode)) == ["no_errors: none"]


def test_a_pass_is_vacuous_only_when_nothing_shows_the_agent_acted():
    """An empty reply with a file created and checked is a real pass; an empty reply with
    only files_unchanged (an agent that did nothing passes it) is vacuous."""
    silent = cli_episode(output="")
    silent.final_output = ""
    acted = judge({"files_created": ["src/new.py"]}, silent)
    assert acted.passed and not acted.vacuous
    idle = judge({"files_unchanged": ["README.md"]}, silent)
    assert idle.passed and idle.vacuous
    said = judge({"files_unchanged": ["README.md"]}, cli_episode())
    assert said.passed and not said.vacuous
    per_turn = judge({}, silent, [{"message": "a", "expect": {"tools_invoked": ["Write"]}}, "b"])
    assert per_turn.passed and not per_turn.vacuous
    nothing = judge({}, cli_episode(), [{"message": "a", "expect": {}}, "b"])
    assert nothing.passed and nothing.vacuous and details(nothing) == []


def test_a_task_with_only_turn_checks_is_not_weak():
    task = TaskSpec.model_validate(
        {"id": "t", "turns": [{"message": "a", "expect": {"has_reply": True}}]}
    )
    assert not task.expected.checks_beyond_status and task.checks_beyond_status
    plain = TaskSpec.model_validate({"id": "t", "turns": [{"message": "a", "expect": {}}]})
    assert not plain.checks_beyond_status


def test_judging_again_from_the_episode_file_gives_the_same_verdict():
    """The verdict is a pure function of the episode: the file read back judges alike."""
    episode = cli_episode()
    again = EpisodeResult.model_validate_json(episode.model_dump_json(by_alias=True))
    expected = TaskExpected.model_validate(
        {"files_created": ["src/new.py"], "command_succeeds": "make lint"}
    )
    assert judge_episode(expected, again) == judge_episode(expected, episode)
