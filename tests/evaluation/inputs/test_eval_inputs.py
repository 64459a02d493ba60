"""eval.init, eval.show and the validation of eval.yaml and tasks.json (every problem at once)."""

import json

import pytest
import yaml

from bat.evaluation.inputs.dataset import TaskSpec


@pytest.fixture
def project(tmp_path, bat, home):
    result = bat("eval.init", cwd=tmp_path)
    assert result.code == 0, result.err
    return tmp_path


def test_init_writes_the_three_things(project):
    assert (project / "eval/eval.yaml").is_file()
    tasks = json.loads((project / "eval/input/tasks.json").read_text())
    assert (project / "eval/output").is_dir()
    kinds = {key for task in tasks for key in task["expected"]}
    assert kinds >= {
        "status",
        "output_must_contain",
        "output_must_not_contain",
        "output_regex",
        "max_model_calls",
        "max_tokens",
        "no_errors",
        "expected_outcome",
    }
    # Only checks a fresh scaffold can pass: it has no tool, pause or remote agent.
    assert not kinds & {"tool_calls", "tool_call_order", "agent_calls"}
    assert any(len(task.get("turns", [])) > 1 for task in tasks)
    assert all(task["meta"]["teaches"] for task in tasks)
    # the stand-in model: its script answers every sample task's question
    (stand_in,) = yaml.safe_load((project / "eval/eval.yaml").read_text())["models"]
    assert stand_in == {
        "provider": "openai",
        "model": "scripted",
        "script": "eval/scripted-model.yaml",
    }
    rules = yaml.safe_load((project / "eval/scripted-model.yaml").read_text())
    for task in tasks:
        said = task["turns"][-1] if task.get("turns") else task["user"]["first_message"]
        assert any(rule["match"] in said for rule in rules), task["id"]
    # the sample conversation's user is scripted too: a first run needs no key
    (talk,) = [task for task in tasks if "user" in task]
    assert not talk.get("turns") and talk["user"]["first_message"]
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    assert config["user"] == {"script": "eval/scripted-user.yaml"}
    user_rules = yaml.safe_load((project / "eval/scripted-user.yaml").read_text())
    assert [rule["reply"] for rule in user_rules][:2] == [
        "4 people, please.",
        "Thank you! ###STOP###",
    ]


def test_init_writes_no_stand_in_for_a_provider_the_script_does_not_speak(tmp_path, bat, home):
    (tmp_path / ".env").write_text("MODEL_PROVIDER=anthropic\n")
    assert bat("eval.init", cwd=tmp_path).code == 0
    assert yaml.safe_load((tmp_path / "eval/eval.yaml").read_text())["models"] is None


def test_init_comments_every_key(project):
    from bat.evaluation.inputs.config import AgentSpec, EvaluationSection

    text = (project / "eval/eval.yaml").read_text()
    for key in [*EvaluationSection.model_fields, *AgentSpec.model_fields, "models:", "judge:"]:
        assert key.rstrip(":") in text, key


def test_init_refuses_to_overwrite(project, bat):
    (project / "eval/input/tasks.json").write_text("[]")
    refused = bat("eval.init", cwd=project)
    assert refused.code == 2 and "--force" in refused.err
    assert (
        "eval/eval.yaml, eval/input/tasks.json, eval/scripted-model.yaml, "
        "eval/scripted-user.yaml already exist" in refused.err
    )
    assert (project / "eval/input/tasks.json").read_text() == "[]"
    assert bat("eval", "init", "-f", cwd=project).code == 0
    assert (project / "eval/input/tasks.json").read_text() != "[]"


def test_show_text_and_json(project, bat):
    text = bat("eval.show", cwd=project)
    assert text.code == 0, text.err
    for words in (
        "6 tasks",
        "k = 3",
        "concurrency 8",
        "uv run .",
        "http://127.0.0.1:9900",
        "turn 60 s",
    ):
        assert words in text.out
    data = json.loads(bat("eval.show", "--json", cwd=project).out)
    assert data["dataset"]["tasks"] == 6 and data["k"] == 3 and data["concurrency"] == 8
    assert data["agent"]["started_by_bat"] is True and data["agent"]["command"] == "uv run ."


def test_show_reads_the_agent_port_from_dotenv(project, bat):
    (project / ".env").write_text("PORT=9123\n")
    assert json.loads(bat("eval.show", "--json", cwd=project).out)["agent"]["url"] == (
        "http://127.0.0.1:9123"
    )


def test_models_as_strings_and_mappings(project, bat):
    (project / "eval/eval.yaml").write_text(
        "models:\n  - openai:gpt-4.1-mini\n"
        "  - {provider: openai, model: qwen, base_url: 'http://127.0.0.1:1/v1', env: {K: v}}\n"
        "judge: ollama:llama3\nevaluation:\n  qualitative: true\n"
        "user: {script: eval/scripted-user.yaml}\n"  # the sample conversation's
    )
    data = json.loads(bat("eval.show", "--json", cwd=project).out)
    assert [m["label"] for m in data["models"]] == ["openai:gpt-4.1-mini", "openai:qwen"]
    assert data["models"][1]["env"] == ["K"]
    assert data["judges"][0]["provider"] == "ollama" and data["judges"][0]["model"] == "llama3"


BAD_YAML = """evaluation:
  k: 0
  concurency: 4
  agent_url: localhost:9900
  agent:
    command: ""
models:
  - nocolon
  - {provider: openai}
"""


def test_every_problem_of_eval_yaml_at_once(project, bat):
    (project / "eval/eval.yaml").write_text(BAD_YAML)
    result = bat("eval.show", cwd=project)
    assert result.code == 2 and "Traceback" not in result.err
    lines = result.err.splitlines()
    assert lines[0] == "bat: error: eval/eval.yaml has 6 problems"
    body = "\n".join(lines[1:])
    for expected in (
        "evaluation.k (line 2)",
        "evaluation.concurency (line 3): unknown key",
        "evaluation.agent_url (line 4)",
        "evaluation.agent.command (line 6)",
        "models[0] (line 8)",
        "models[1].model (line 9)",
    ):
        assert expected in body, expected


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("evaluation: [1, 2]\n", "evaluation"),
        ("k: [unclosed\n", "invalid YAML"),
        ("- a\n", "mapping"),
    ],
)
def test_malformed_eval_yaml(project, bat, content, words):
    (project / "eval/eval.yaml").write_text(content)
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and words in result.err


def test_missing_eval_yaml(tmp_path, bat, home):
    result = bat("eval.show", cwd=tmp_path)
    assert result.code == 2 and "bat eval.init" in result.err


def test_other_eval_file_from_environment(project, bat):
    # (the sample conversation needs a user model: the scripted one eval.init wrote)
    (project / "other.yaml").write_text(
        "evaluation:\n  k: 7\nuser:\n  script: eval/scripted-user.yaml\n"
    )
    data = json.loads(
        bat("eval.show", "--json", cwd=project, env={"BAT_EVAL_FILE": "other.yaml"}).out
    )
    assert data["k"] == 7


def test_every_problem_of_tasks_json_at_once(project, bat):
    (project / "eval/input/tasks.json").write_text(
        json.dumps(
            [
                {"id": "ok", "turns": ["hi"]},
                {"id": "ok", "turns": ["again"]},
                {"turns": []},
                {
                    "id": "x",
                    "turns": ["hi"],
                    "expected": {
                        "status": "done",
                        "tool_calls": [{"times": 0}],
                        "output_regex": "(",
                    },
                },
            ],
            indent=1,
        )
    )
    result = bat("eval.show", cwd=project)
    assert result.code == 2
    body = result.err
    assert "has 7 problems" in body
    for expected in (
        "tasks[1].id",
        "duplicate task id 'ok'",
        "[2].id",
        "[2].turns",
        "[3].expected.status",
        "[3].expected.tool_calls[0].name",
        "[3].expected.tool_calls[0].times",
        "[3].expected.output_regex",
    ):
        assert expected in body, expected
    assert "(line " in body


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "invalid JSON (line 1"),
        ('{"x": 1}', "expected a JSON list"),
        ("[]", "no tasks"),
        # JSON keeps the later of two keys: an expectation written twice would be lost
        (
            '[{"id": "a", "turns": ["x"]},\n {"id": "b", "turns": ["y"],\n'
            '  "expected": {"output_must_contain": ["zzz"]}, "expected": {}}]',
            "[1].expected (line 3): duplicate key (the later one would win)",
        ),
        (
            '[{"id": "a", "turns": ["x"], "meta": {"k": 1, "k": 2}}]',
            "[0].meta.k (line 1): duplicate key",
        ),
        (
            '{"tasks": [{"id": "a", "turns": ["x"],\n "id": "b"}]}',
            "tasks[0].id (line 2): duplicate key",
        ),
        (
            '{"tasks": [{"id": "a", "turns": ["x"]}], "Tasks": [{"id": "b", "turns": ["y"]}]}',
            "holds other keys too, which bat does not read: 'Tasks'",
        ),
        (
            '[{"id": "a", "turns": ["x"], "expected": {"agent_calls": '
            '[{"agent": "planner", "name": "other"}]}}]',
            "agent_calls[0] (line 1): name and agent are one key (bat-cli writes agent)",
        ),
    ],
)
def test_malformed_tasks_json(project, bat, content, words):
    (project / "eval/input/tasks.json").write_text(content)
    for command in ("eval.show", "eval.run"):  # eval.show checks as a run loads
        result = bat(command, cwd=project)
        assert result.code == 2 and words in result.err, result.err
        assert len(result.err.strip().splitlines()) <= 2


@pytest.mark.parametrize(
    "task_id", ["../../escape", "/etc/passwd", "a/b", "..", ".hidden", "x" * 200]
)
def test_task_ids_cannot_leave_the_episodes_folder(task_id):
    stem = TaskSpec(id=task_id, turns=["t"]).file_stem
    assert "/" not in stem and not stem.startswith(".") and len(stem) < 100
    assert stem != TaskSpec(id=task_id[:-1] + "!", turns=["t"]).file_stem


def test_turns_may_be_objects_and_failed_means_error():
    task = TaskSpec.model_validate(
        {"id": "t", "turns": [{"role": "user", "content": "hi"}], "expected": {"status": "failed"}}
    )
    assert task.turns == ["hi"] and task.expected.status == "error"


@pytest.mark.parametrize("name", ["eval/eval.yaml", ".env", "config.yaml"])
def test_a_file_that_is_not_utf8_is_named_not_a_traceback(project, bat, name):
    path = project / name
    path.write_bytes((path.read_bytes() if path.is_file() else b"") + b"\n# caf\xe9\n")
    result = bat("eval.show", cwd=project)
    assert result.code == 2, result.err
    named = f"{name} is not UTF-8 text" in result.err or f"{name}: not UTF-8 text" in result.err
    assert named and "Traceback" not in result.err


def test_a_dataset_nested_too_deeply(project, bat):
    (project / "eval/input/tasks.json").write_text("[" * 100_000 + "]" * 100_000)
    result = bat("eval.show", cwd=project)
    assert result.code == 2 and "nested too deeply" in result.err
    assert "Traceback" not in result.err


def test_what_would_fail_late_is_refused_before_anything_starts(project, bat):
    text = (project / "eval/eval.yaml").read_text()
    broken = text.replace("command: uv run .", 'command: "echo \\"unterminated"')
    (project / "eval/eval.yaml").write_text(broken)
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and "agent.command cannot be parsed" in result.err
    assert not list((project / "eval/output").iterdir())  # no run folder was made


def test_a_port_in_the_agent_config_that_is_not_one_is_said(project, bat):
    (project / "config.yaml").write_text("endpoint: {url: http://localhost, port: abc}\n")
    result = bat("eval.show", cwd=project)
    assert result.code == 0
    said = "endpoint.port: 'abc' is not a port number (1-65535): bat waits on port 9900"
    assert said in result.err


def test_a_model_folder_cannot_be_the_judge_cache(project, bat):
    path = project / "eval/eval.yaml"
    entry = "models:\n  - {provider: x, model: y, name: judge-cache}\n"
    path.write_text(path.read_text().replace("models:\n", entry, 1))
    result = bat("eval.show", cwd=project)
    assert result.code == 2 and "'judge-cache' is reserved" in result.err


@pytest.mark.parametrize("where", ["eval/output", "eval/output/runs"])
def test_output_dir_that_is_or_lies_below_a_file_is_named(project, bat, where):
    """A file where the runs' folder should be is bad input naming the key, and no run
    folder is begun anywhere."""
    output = project / "eval/output"
    output.rmdir()
    output.write_text("not a folder")
    yaml = project / "eval/eval.yaml"
    yaml.write_text(yaml.read_text().replace("output_dir: eval/output", f"output_dir: {where}"))
    result = bat("eval.run", cwd=project)
    assert result.code == 2, result.err
    assert result.err.startswith("bat: error: evaluation.output_dir ")
    assert "is a file, not a folder" in result.err and "Traceback" not in result.err
    assert output.read_text() == "not a folder"


def test_control_characters_from_a_file_are_escaped_in_errors(project, bat):
    """An error quoting a key read from a file prints its ESC as text, so a crafted file
    cannot drive the user's terminal."""
    (project / "eval/bad.yaml").write_text('evaluation:\n  "k\\e[31mx": 1\n')
    result = bat("eval.show", cwd=project, env={"BAT_EVAL_FILE": "eval/bad.yaml"})
    assert result.code == 2
    assert "evaluation.k\\x1b[31mx (line 2): unknown key" in result.err
    assert "\x1b" not in result.err


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ({"turns": [{"role": "assistant", "content": "x"}]}, "role 'assistant': every turn is"),
        ({"turns": [{"content": "x", "text": "y"}]}, "exactly one of content, text, message"),
        ({"turns": [{"content": "x", "lang": "en"}]}, "unknown key(s) 'lang'"),
        ({"turns": ["x"], "expected": {"no_errors": "yes"}}, "expected.no_errors"),
        ({"turns": ["x"], "expected": {"max_tokens": True}}, "expected.max_tokens"),
        ({"turns": ["x"], "expected": {"max_model_calls": 2.0}}, "expected.max_model_calls"),
        (
            {"turns": ["x"], "expected": {"tool_calls": [{"name": "t", "times": True}]}},
            "expected.tool_calls[0].times",
        ),
    ],
)
def test_tasks_json_values_are_not_bent_into_shape(project, bat, item, words):
    """A turn object or a value of the wrong kind is refused, not read as something else
    (an assistant message sent as the user's, `true` counted as 1)."""
    (project / "eval/input/tasks.json").write_text(json.dumps([{"id": "t1", **item}]))
    result = bat("eval.show", cwd=project)
    assert result.code == 2, result.out
    assert "[0]." in result.err and words in result.err
    assert "Traceback" not in result.err


def test_turn_objects_of_user_messages_are_read(tmp_path):
    from bat.evaluation.inputs.dataset import load_dataset

    turns = [{"role": "user", "content": "one"}, {"text": "two"}, {"message": "three"}, "four"]
    (tmp_path / "tasks.json").write_text(json.dumps([{"id": "t1", "turns": turns}]))
    dataset = load_dataset(tmp_path / "tasks.json")
    assert dataset.tasks[0].turns == ["one", "two", "three", "four"]


def test_half_a_surrogate_pair_in_a_task_is_refused_before_a_run_starts(project, bat):
    """JSON can spell "\\ud800", which no episode file could be written with: the run
    once failed at its first write with a traceback and run.json left 'running'."""
    tasks = project / "eval/input/tasks.json"
    tasks.write_text('[{"id": "t1", "turns": ["a\\ud800b"]}]')
    result = bat("eval.run", cwd=project)
    assert result.code == 2 and "Traceback" not in result.err
    assert "[0].turns[0] (line 1): holds half of a UTF-16 surrogate pair (U+D800)" in result.err
    assert not any((project / "eval/output").iterdir())
    tasks.write_text('[{"id": "t1", "turns": ["a\\ud83d\\ude00b"]}]')  # a whole pair: 😀
    assert bat("eval.show", cwd=project).code == 0
