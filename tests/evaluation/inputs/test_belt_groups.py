"""belt scenario groups as a dataset: the example group, folders of groups, warnings for
what bat does not use, one clear line per problem, hostile files, limits, and
Hypothesis over scenario files and _config.json (tasks or one InputError, never a
traceback)."""

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from bat.errors import InputError
from bat.evaluation.inputs import belt_groups
from bat.evaluation.inputs.dataset import check_dataset, load_dataset
from tests import fuzzkit as fk

EXAMPLE = Path(__file__).parents[3] / "eval_fixtures" / "datasets" / "belt_group"


def write(folder: Path, name: str, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=1))
    return path


def group(folder: Path, config=None, **scenarios) -> Path:
    """A group: ``_config.json`` (a working_dir beside it by default) and scenarios."""
    (folder / "repo").mkdir(parents=True, exist_ok=True)
    write(folder, "_config.json", {"working_dir": "repo"} if config is None else config)
    for name, data in scenarios.items():
        write(folder, f"{name}.json", data)
    return folder


def scenario(name, *turns, **extra):
    return {"name": name, "turns": list(turns) or [{"message": "hi"}], **extra}


def problems(path: Path) -> list[str]:
    with pytest.raises(InputError) as caught:
        load_dataset(path)
    return [caught.value.message, *caught.value.details]


def test_the_example_group_loads_as_tasks():
    dataset = load_dataset(EXAMPLE)
    assert [task.id for task in dataset.tasks] == ["create_greeting", "notes_two_turns"]
    greeting, notes = dataset.tasks
    assert greeting.tags == ["belt", "editing", "L1"]
    assert greeting.meta["description"].startswith("Create a small Python module")
    assert greeting.meta["llm_scorer_instruction"].startswith("Reward a minimal module")
    (evidence,) = greeting.meta["llm_scorer_evidence_files"]
    assert evidence["path"] == "rubrics/greeting.md" and "Rubric" in evidence["text"]
    assert greeting.turn_expected[0].files_created == ["greet.py"]
    assert greeting.turn_expected[0].command_succeeds[0].run.startswith("python3 -c")
    assert "{{prev.reply_text}}" in notes.turns[1]
    assert notes.turn_expected[1].diff_contains == ["+cherry"]
    (found,) = dataset.groups
    assert found.agent == "claude-code" and found.name == ""
    assert found.workspace == {"source": str((EXAMPLE / "workspace").resolve())}
    assert found.task_ids == ("create_greeting", "notes_two_turns")
    assert dataset.warnings == []
    checked = check_dataset(EXAMPLE)
    assert checked.count == 2 and checked.sha256 == dataset.sha256 and not checked.weak


def test_the_snapshot_is_a_tasks_file_that_loads_the_same(tmp_path):
    dataset = load_dataset(EXAMPLE)
    snapshot = write(tmp_path, "tasks.json", dataset.snapshot.decode())
    again = load_dataset(snapshot)
    assert again.sha256 == dataset.sha256
    assert [t.turn_expected for t in again.tasks] == [t.turn_expected for t in dataset.tasks]
    assert [t.meta for t in again.tasks] == [t.meta for t in dataset.tasks]


def test_a_folder_of_groups_names_each_task_by_its_group(tmp_path):
    group(tmp_path / "read-only", {"working_dir": "repo", "agent": "codex"}, a=scenario("a"))
    group(
        tmp_path / "editing" / "deep",
        {"fixture_repo": "https://example.com/r.git", "fixture_ref": "v1", "default_tags": ["e"]},
        a=scenario("a", tags=["x"]),
        b=scenario("b"),
    )
    dataset = load_dataset(tmp_path)
    assert [t.id for t in dataset.tasks] == ["editing/deep/a", "editing/deep/b", "read-only/a"]
    assert dataset.tasks[0].tags == ["e", "x"]
    editing, read_only = dataset.groups
    assert editing.workspace == {"source": "https://example.com/r.git", "ref": "v1"}
    assert editing.agent is None and read_only.agent == "codex"


def test_resources_and_refs_map_to_the_workspace_keys(tmp_path):
    config = {
        "working_dir": "repo",
        "workspace_ref": "HEAD",
        "resources": [{"kind": "file", "source": "skills/x", "dest": ".skills/x", "version": "0.3.1"}],  # noqa: E501
    }  # fmt: skip
    group(tmp_path, config, a=scenario("a"))
    (found,) = load_dataset(tmp_path).groups
    assert found.workspace == {
        "source": str((tmp_path / "repo").resolve()),
        "ref": "HEAD",
        "resources": [
            {
                "source": str((tmp_path / "skills/x").resolve()),
                "dest": ".skills/x",
                "kind": "file",
                "version": "0.3.1",
            }
        ],
    }


def test_what_bat_does_not_use_is_warned_one_line_per_key(tmp_path):
    config = {"working_dir": "repo", "workspace_isolation": "none", "timeout": 5}
    turn = {"message": "hi", "timeout": 3}
    group(tmp_path, config, a=scenario("a", turn, flags=["--model", "x"], paraphrases=[]))
    warnings = load_dataset(tmp_path).warnings
    assert warnings == [
        f"{tmp_path}/_config.json: timeout: not a key bat reads, ignored",
        f"{tmp_path}/_config.json: workspace_isolation 'none': bat gives every episode a "
        "working copy of its own (a clone or a copy), whatever this says",
        f"{tmp_path}/a.json: flags: not a key bat reads, ignored",
        f"{tmp_path}/a.json: paraphrases: not a key bat reads, ignored",
        f"{tmp_path}/a.json: turns[0].timeout: not a key bat reads, ignored",
    ]
    assert check_dataset(tmp_path).warnings == warnings


def test_a_raw_transcript_for_the_judge_is_warned(tmp_path):
    turn = {"message": "hi"}
    group(tmp_path, {"working_dir": "repo"}, a=scenario("a", turn, llm_scorer_raw_transcript=True))
    (warning,) = load_dataset(tmp_path).warnings
    assert warning.startswith(f"{tmp_path}/a.json: llm_scorer_raw_transcript: bat's judges")


@pytest.mark.parametrize(
    ("config", "files", "wanted"),
    [
        (None, {"a.json": '{"name": "a", "turns": [}'}, "a.json: invalid JSON (line 1, column 25)"),
        (None, {"a.json": scenario("a", {"message": "x", "expect": {"files_touched": ["y"]}})}, "a.json: turns[0].expect.files_touched (line 7): unknown key"),  # noqa: E501
        (None, {"a.json": scenario("a", {"message": "x", "expect": {"files_created": ["../y"]}})}, "a.json: turns[0].expect.files_created[0] (line 8): '../y': a workspace path may not contain '..'"),  # noqa: E501
        (None, {"a.json": scenario("b")}, "a.json: name (line 2): 'b': a scenario's name is its file's name ('a')"),  # noqa: E501
        (None, {"a.json": {"turns": [{"message": "x"}]}}, "a.json: name: missing: a scenario's name is its file's name ('a')"),  # noqa: E501
        (None, {"a.json": scenario("a", "just text")}, "a.json: turns.0 (line 4): expected {message, expect}"),  # noqa: E501
        (None, {"a.json": {"name": "a", "turns": []}}, "a.json: turns (line 3): expected a list of turns ({message, expect})"),  # noqa: E501
        (None, {"a.json": scenario("a", {"expect": {}})}, "a.json: turns.0 (line 4): message: missing"),  # noqa: E501
        (None, {"a.json": scenario("a", tags="x")}, "a.json: tags (line 8): expected a list of tags"),  # noqa: E501
        ({"working_dir": "repo", "fixture_repo": "https://x/y.git"}, {"a.json": scenario("a")}, "_config.json: fixture_repo (line 3): working_dir and fixture_repo are exclusive: give one"),  # noqa: E501
        ({"agent": "claude-code"}, {"a.json": scenario("a")}, "_config.json: working_dir: missing: a group names its workspace"),  # noqa: E501
        ({"working_dir": "nowhere"}, {"a.json": scenario("a")}, "_config.json: working_dir (line 2): "),  # noqa: E501
        ([], {"a.json": scenario("a")}, "_config.json: expected a JSON object of the group's settings"),  # noqa: E501
        (None, {"a.json": scenario("a", llm_scorer_instruction="x" * 10_001)}, "a.json: llm_scorer_instruction (line 8): expected text of at most 10,000 characters"),  # noqa: E501
        (None, {"a.json": scenario("a", llm_scorer_evidence_files=["../secret.md"])}, "a.json: llm_scorer_evidence_files.0 (line 9): '../secret.md': '..' is not allowed"),  # noqa: E501
        (None, {"a.json": scenario("a", llm_scorer_evidence_files=["/etc/passwd"])}, "a.json: llm_scorer_evidence_files.0 (line 9): '/etc/passwd': an absolute path"),  # noqa: E501
        (None, {"a.json": scenario("a", llm_scorer_evidence_files=["rubric.md"])}, "a.json: llm_scorer_evidence_files.0 (line 9): 'rubric.md': no such file"),  # noqa: E501
        (None, {"a.json": '{"name": "a", "name": "a", "turns": [{"message": "x"}]}'}, "a.json: name (line 1): duplicate key"),  # noqa: E501
        (None, {"a.json": '{"name": "a", "turns": [{"message": "x"}], "tags": [NaN]}'}, "a.json: NaN (line 1): not JSON"),  # noqa: E501
        (None, {"a.json": '{"name": "a",\n "turns": [{"message": "x \\udc00"}]}'}, "a.json: turns[0].message (line 2): holds half of a UTF-16 surrogate pair (U+DC00)"),  # noqa: E501
    ],
)  # fmt: skip
def test_each_problem_is_one_clear_line_naming_file_and_key(tmp_path, config, files, wanted):
    group(tmp_path, config)
    for name, data in files.items():
        write(tmp_path, name, data)
    found = problems(tmp_path)
    assert found[0] == f"{tmp_path} has 1 problem"
    assert len(found) == 2
    assert found[1].startswith(f"{tmp_path}/{wanted}"), found[1]


def test_every_problem_of_every_file_is_listed_at_once(tmp_path):
    group(
        tmp_path,
        a=scenario("b"),
        c=scenario("c", {"message": "x", "expect": {"nope": 1, "has_reply": "yes"}}),
        d="not json",
    )
    found = problems(tmp_path)
    assert found[0] == f"{tmp_path} has 4 problems"
    assert sorted(line.removeprefix(f"{tmp_path}/").split(": ")[:2] for line in found[1:]) == [
        ["a.json", "name (line 2)"],
        ["c.json", "turns[0].expect.has_reply (line 8)"],
        ["c.json", "turns[0].expect.nope (line 7)"],
        ["d.json", "invalid JSON (line 1, column 1)"],
    ]


def test_a_wrong_name_does_not_hide_the_turns_problems(tmp_path):
    group(tmp_path, a=scenario("b", {"message": "x", "expect": {"bogus": 1}}))
    assert problems(tmp_path)[1:] == [
        f"{tmp_path}/a.json: name (line 2): 'b': a scenario's name is its file's name ('a')",
        f"{tmp_path}/a.json: turns[0].expect.bogus (line 7): unknown key",
    ]


def test_a_wrong_config_does_not_hide_the_scenarios_problems(tmp_path):
    group(tmp_path, {"agent": 3, "working_dir": "repo"}, a=scenario("b"))
    found = problems(tmp_path)
    assert found[1:] == [
        f"{tmp_path}/_config.json: agent (line 2): expected the agent's name (text)",
        f"{tmp_path}/a.json: name (line 2): 'b': a scenario's name is its file's name ('a')",
    ]


def test_a_folder_without_groups_says_what_a_group_is(tmp_path):
    write(tmp_path, "a.json", scenario("a"))
    (message,) = problems(tmp_path)
    assert message == (
        f"{tmp_path} is a folder without _config.json: a dataset folder is a belt group (a "
        "folder holding _config.json and scenario files) or a folder of groups"
    )
    group(tmp_path / "g")
    assert problems(tmp_path) == [
        f"{tmp_path} has 1 problem",
        f"{tmp_path}: no scenario files (NAME.json beside _config.json)",
    ]


def test_hostile_files_are_one_line_each(tmp_path):
    """A FIFO, a device, a link out of the folder, a huge file, deep nesting: each one
    line, and nothing hangs or overflows."""
    group(tmp_path, a=scenario("a"))
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "null.json").symlink_to("/dev/null")
    outside = write(tmp_path.parent / f"{tmp_path.name}-outside", "x.json", scenario("x"))
    (tmp_path / "x.json").symlink_to(outside)
    (tmp_path / "huge.json").write_bytes(b" " * (belt_groups.SCENARIO_LIMIT + 1))
    write(tmp_path, "deep.json", fk.nested_json(100_000))
    write(tmp_path, "bad.json", b"\xff".decode("latin-1"))
    (tmp_path / "bad.json").write_bytes(b'{"name": "\xff"}')
    found = problems(tmp_path)
    assert found[0] == f"{tmp_path} has 6 problems"
    lines = sorted(found[1:])
    assert lines[0].startswith(f"{tmp_path}/bad.json: not UTF-8 text (line 1")
    assert lines[1] == f"{tmp_path}/deep.json: invalid JSON: nested too deeply"
    assert lines[2].startswith(f"{tmp_path}/fifo.json is not a regular file")
    assert lines[3].startswith(f"{tmp_path}/huge.json is 1.0 MiB; a belt scenario file may be")
    assert lines[4].startswith(f"{tmp_path}/null.json: a link that leads out of {tmp_path}")
    assert lines[5].startswith(f"{tmp_path}/x.json: a link that leads out of")
    assert all("\n" not in line for line in lines)


def test_an_evidence_link_out_of_the_folder_is_refused(tmp_path):
    group(tmp_path, a=scenario("a", llm_scorer_evidence_files=["rubric.md"]))
    (tmp_path / "rubric.md").symlink_to("/etc/hostname")
    assert problems(tmp_path)[1] == (
        f"{tmp_path}/a.json: llm_scorer_evidence_files.0 (line 9): 'rubric.md': leads out of "
        f"the dataset folder {tmp_path}"
    )


def test_linked_folders_are_not_followed(tmp_path):
    group(tmp_path / "real", a=scenario("a"))
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert [t.id for t in load_dataset(tmp_path).tasks] == ["real/a"]


def test_limits(tmp_path, monkeypatch):
    group(tmp_path, a=scenario("a", *[{"message": "x"}] * 101))
    assert problems(tmp_path)[1] == (
        f"{tmp_path}/a.json: turns (line 3): 101 turns; a scenario has at most 100"
    )
    monkeypatch.setattr(belt_groups, "MAX_SCENARIOS", 2)
    shutil.rmtree(tmp_path)
    group(tmp_path, a=scenario("a"), b=scenario("b"), c=scenario("c"))
    assert problems(tmp_path) == [f"{tmp_path} holds more than 2 scenario files, the limit"]


# -- Hypothesis: scenario files and _config.json -------------------------------------------

EXAMPLE_SCENARIO = json.loads((EXAMPLE / "create_greeting.json").read_text())
EXAMPLE_CONFIG = {"working_dir": "repo", "default_tags": ["t"], "workspace_ref": "HEAD"}


@settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    files=fk.belt_group_files(
        {"_config.json": EXAMPLE_CONFIG, "create_greeting.json": EXAMPLE_SCENARIO}
    )
)
def test_any_scenario_or_config_gives_tasks_or_one_input_error(tmp_path_factory, files):
    folder = tmp_path_factory.mktemp("belt")
    (folder / "repo").mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    try:
        dataset = load_dataset(folder)
    except InputError as exc:
        assert exc.message.strip() and "\n" not in exc.message
        assert all(line.strip() and "Traceback" not in line for line in exc.details)
        assert len(exc.details) <= belt_groups.MAX_PROBLEMS + 1
    else:
        assert [task.id for task in dataset.tasks] == ["create_greeting"]
        assert dataset.snapshot is not None and dataset.groups
