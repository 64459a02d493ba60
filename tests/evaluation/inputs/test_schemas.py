"""The JSON Schemas of bat's files (``bat eval.schema``, docs/schemas/, eval.init's copy).

A schema of an input file must accept every file bat ships or documents, and refuse the
typos and wrong types bat refuses; an episode written by the real code must match its.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.schemas import SCHEMAS, file_name, schema, schema_text, write_schemas
from tests.conftest import REPO
from tests.logkit import NO_SECRETS

DOCS = REPO / "docs"
BATCLI = REPO / "tests" / "data" / "bat-cli-2026.10"
DEMO = REPO / "eval_fixtures" / "demo" / "eval"


def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(name))


def problems(name: str, data) -> list[str]:
    return [error.message for error in validator(name).iter_errors(data)]


def doc_block(page: str, heading: str, language: str) -> str:
    """The first ``language`` code block of the section ``heading`` of a docs page."""
    section = (DOCS / page).read_text().split(f"\n{heading}\n", 1)[1]
    return re.search(rf"```{language}\n(.*?)\n```", section, re.S)[1]


@pytest.fixture(scope="module")
def starter(tmp_path_factory) -> Path:
    from bat.evaluation.inputs.starter import init_eval

    root = tmp_path_factory.mktemp("starter")
    init_eval(root)
    return root


# --- the registry and the schemas themselves ---------------------------------------------


def test_registry_names():
    assert list(SCHEMAS) == [
        "eval.yaml",
        "tasks.json",
        "run.json",
        "episode",
        "scores",
        "summary.json",
        "metrics.json",
        "gates.json",
        "export.json",
        "card.json",
    ]
    for entry in SCHEMAS.values():
        assert entry.mode in ("validation", "serialization") and entry.description


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_each_schema_is_a_valid_2020_12_schema(name):
    made = schema(name)
    jsonschema.Draft202012Validator.check_schema(made)
    assert made["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert made["title"] and made["description"] and "$id" not in made
    # Nothing of pydantic's own vocabulary is left (``gt``/``le`` would be ignored).
    text = json.dumps(made)
    assert not re.search(r'"(gt|ge|lt|le)": ', text) and '"format": "path"' not in text


def test_every_key_of_eval_yaml_is_described_for_editors():
    made = schema("eval.yaml")
    blocks = {
        "": made,
        **{
            name: made["$defs"][name]
            for name in ("EvaluationSection", "AgentSpec", "UserModelSpec")
        },
    }
    for name, block in blocks.items():
        for key, value in block["properties"].items():
            assert value.get("description"), f"{name}.{key}"


# --- input files: what bat accepts validates ---------------------------------------------


def eval_yaml_examples(starter: Path) -> dict[str, str]:
    return {
        "eval.init": (starter / "eval" / "eval.yaml").read_text(),
        "bat-cli": (BATCLI / "eval-init" / "eval.yaml").read_text(),
        "bat-cli, every commented key on": re.sub(
            r"(?m)^(\s*)# ", r"\1", (BATCLI / "eval-init" / "eval.yaml").read_text()
        ),
        "docs": doc_block("eval-formats.md", "## `eval/eval.yaml`", "yaml"),
        "demo": (DEMO / "eval.yaml").read_text(),
    }


def test_shipped_and_documented_eval_yaml_validate(starter):
    for where, text in eval_yaml_examples(starter).items():
        assert problems("eval.yaml", yaml.safe_load(text)) == [], where


def test_shipped_and_documented_tasks_validate(starter):
    documented = json.loads(doc_block("eval-formats.md", "## `eval/input/tasks.json`", "json"))
    files = {
        "eval.init": starter / "eval" / "input" / "tasks.json",
        "bat-cli": BATCLI / "eval-init" / "tasks.json",
        "bat-cli run": BATCLI / "run-echo" / "tasks.json",
        "demo": DEMO / "input" / "tasks.json",
        **{path.name: path for path in (REPO / "eval_fixtures" / "datasets").glob("*.json")},
    }
    examples = {where: json.loads(path.read_text()) for where, path in files.items()}
    examples["docs (one task)"] = [documented]
    examples["wrapped"] = {"tasks": [documented]}
    for where, data in examples.items():
        assert problems("tasks.json", data) == [], where


# Each value is accepted by bat's loader and must validate; a key path -> value.
ACCEPTED_CONFIGS = [
    {},
    {"evaluation": None, "models": None, "judge": None},
    {"evaluation": {"agent": None, "extra_spans": None, "agent_url": "${URL:-http://x:1}"}},
    {"models": ["openai:gpt-4.1-mini", "ollama: qwen2.5:7b", {"provider": "a", "model": "b"}]},
    {"models": [{"provider": "a", "model": "b", "env": {"N": 1, "F": True, "E": None}}]},
    {"judge": "openai:gpt-4.1-mini"},
    {"judge": ["openai:a", {"model": "b", "max_trajectory_chars": 24000, "mode": "outcome"}]},
    {"judge": {"model": "m", "prompts": {"relevance": "x", "task_completion_quality": "y"}}},
    {"judge": {"model": "m", "prompts": None, "base_url": "HTTPS://h/v1"}},
    {"evaluation": {"agent_startup_timeout_s": 0.5, "turn_timeout_s": 86400, "k": 1000}},
    {"user": None},
    {"user": "openai:gpt-4.1-mini"},
    {"user": {"script": "user-rules.yaml", "seed": 7, "temperature": 0.7, "env": {"N": 1}}},
    {"user": {"model": "m", "base_url": "http://h/v1", "api_key_env": "K", "concurrency": 2}},
]
REFUSED_CONFIGS = [
    {"evaluation": {"kk": 3}},
    {"evaluation": {"k": "three"}},
    {"evaluation": {"k": True}},
    {"evaluation": {"k": 0}},
    {"evaluation": {"qualitative": "yes"}},
    {"evaluation": {"turn_timeout_s": 0}},
    {"evaluation": {"agent_startup_timeout_s": 86401}},
    {"evaluation": {"dataset": ""}},
    {"evaluation": {"agent_url": "localhost:8000"}},
    {"evaluation": {"agent": {"strat": False}}},
    {"evaluation": {"agent": {"env": {"A-B": "x"}}}},
    {"modles": []},
    {"models": ["gpt-4.1-mini"]},
    {"models": [{"provider": "a", "model": "b", "env": {"PORT": "1"}}]},
    {"models": [{"provider": "a", "model": "b", "name": "../x"}]},
    {"judge": []},
    {"judge": {"model": "m", "budget_chars": 600, "max_trajectory_chars": 600}},
    {"judge": {"model": "m", "prompts": {"relevance": "x", "response_relevance": "y"}}},
    {"judge": {"model": "m", "max_retry_after_s": 3601}},
    {"judge": {"model": "m", "mode": "lenient"}},
    {"judge": {"model": "m", "api_key_env": "MY-KEY"}},
    {"judge": {"provider": "openai"}},
    {"user": []},
    {"user": "gpt-4.1-mini"},
    {"user": {"modle": "m"}},
    {"user": {"model": "m", "temperature": 3}},
    {"user": {"model": "m", "api_key_env": "MY-KEY"}},
    {"user": {"model": "m", "base_url": "localhost:8000"}},
    {"user": {"model": "m", "env": {"A-B": "x"}}},
]


@pytest.mark.parametrize("data", ACCEPTED_CONFIGS, ids=str)
def test_configs_bat_accepts_validate(data):
    from bat.evaluation.inputs.config import EvalConfig

    if "${" not in json.dumps(data):
        EvalConfig.model_validate(copy.deepcopy(data))  # bat's loader accepts it
    assert problems("eval.yaml", data) == []


@pytest.mark.parametrize("data", REFUSED_CONFIGS, ids=str)
def test_configs_bat_refuses_do_not_validate(data):
    from pydantic import ValidationError

    from bat.evaluation.inputs.config import EvalConfig

    with pytest.raises(ValidationError):
        EvalConfig.model_validate(copy.deepcopy(data))
    assert problems("eval.yaml", data) != []


def test_a_typo_and_a_wrong_type_in_the_starter_are_caught(starter):
    text = (starter / "eval" / "eval.yaml").read_text()
    typo = yaml.safe_load(text.replace("  k: 3", "  kk: 3"))
    assert any("kk" in message for message in problems("eval.yaml", typo))
    wrong = yaml.safe_load(text.replace("  k: 3", '  k: "three"'))
    assert any("three" in message for message in problems("eval.yaml", wrong))


TASK = {"id": "t", "turns": ["hi"]}
ACCEPTED_TASKS = [
    [TASK],
    {"tasks": [TASK]},
    [{**TASK, "turns": [{"content": "hi", "role": "user"}, {"text": "x"}, {"message": "y"}]}],
    [{**TASK, "expected": {"status": None}}],
    [{**TASK, "expected": {"status": "failed"}}],
    [{**TASK, "expected": {"status": " Input-Required "}}],
    [{**TASK, "expected": {"agent_calls": [{"agent": "planner", "times": 2}]}}],
    [{"id": "t", "user": {"instructions": "You want a table for 4"}}],
    [{"id": "t", "turns": [], "user": {"instructions": "x", "first_message": "hi"}}],
    [{**TASK, "user": {"instructions": "x", "max_turns": 3}}],
    [{**TASK, "user": None}],
    [
        {
            **TASK,
            "expected": {
                "conversation_must_contain": ["how many"],
                "conversation_must_not_contain": ["error"],
                "assertions": ["The agent asked for the number of people"],
                "assertions_in_verdict": True,
            },
        }
    ],
]
REFUSED_TASKS = [
    [],
    {"tasks": []},
    {"task": [TASK]},
    [{"turns": ["hi"]}],
    [{**TASK, "turns": []}],
    [{**TASK, "id": " t"}],
    [{**TASK, "extra": 1}],
    [{**TASK, "turns": [{"content": "a", "text": "b"}]}],
    [{**TASK, "turns": [{"content": "a", "role": "assistant"}]}],
    [{**TASK, "expected": {"status": "done"}}],
    [{**TASK, "expected": {"max_tokens": "3"}}],
    [{**TASK, "expected": {"no_errors": 1}}],
    [{**TASK, "expected": {"output_must_contian": ["x"]}}],
    [{**TASK, "expected": {"agent_calls": [{"name": "a", "agent": "b"}]}}],
    [{**TASK, "expected": {"tool_calls": [{"name": "f", "times": 0}]}}],
    [{"id": "t"}],
    [{"id": "t", "user": None}],
    [{"id": "t", "user": {}}],
    [{"id": "t", "user": {"instructions": ""}}],
    [{"id": "t", "user": {"instructions": "x", "max_turns": 0}}],
    [{"id": "t", "user": {"instructions": "x", "persona": "y"}}],
    [{**TASK, "expected": {"assertions_in_verdict": True}}],
    [{**TASK, "expected": {"assertions": [""]}}],
    [{**TASK, "expected": {"conversation_must_contain": "how many"}}],
]


@pytest.mark.parametrize("data", ACCEPTED_TASKS, ids=str)
def test_datasets_bat_accepts_validate(data, tmp_path):
    from bat.evaluation.inputs.dataset import load_dataset

    (tmp_path / "tasks.json").write_text(json.dumps(data))
    load_dataset(tmp_path / "tasks.json")
    assert problems("tasks.json", data) == []


@pytest.mark.parametrize("data", REFUSED_TASKS, ids=str)
def test_datasets_bat_refuses_do_not_validate(data, tmp_path):
    from bat.errors import InputError
    from bat.evaluation.inputs.dataset import load_dataset

    (tmp_path / "tasks.json").write_text(json.dumps(data))
    with pytest.raises(InputError):
        load_dataset(tmp_path / "tasks.json")
    assert problems("tasks.json", data) != []


# --- the episode: what bat writes validates -----------------------------------------------


def test_an_episode_written_by_bat_validates():
    from bat.evaluation.log.episode import (
        AgentError,
        Check,
        EpisodeResult,
        EpisodeTrace,
        StatusEvent,
        ToolCall,
        TurnRecord,
        Usage,
        Verdict,
    )

    episode = EpisodeResult(
        task_id="weather",
        attempt=1,
        model="openai:gpt-4.1-mini",
        status="completed",
        final_output="Sunny.",
        agent_error=AgentError(kind="rate_limited", message="slow down", code=429),
        trace=EpisodeTrace(
            context_id="ctx",
            events=[StatusEvent(t=0.1, turn=0, kind="status", status="working", input="hi")],
            turns=[TurnRecord(input="hi", status="completed", output="Sunny.")],
            usage=Usage(prompt_tokens=3, total_tokens=3, model_calls=1),
            tool_calls=[ToolCall(name="get_weather", args={"city": "Rome"}, source="spans")],
        ),
        verdict=Verdict(passed=True, reason="ok", checks=[Check(name="s", passed=True, detail="")]),
        scores={"rubric_version": "bat.rubric/1", "dimensions": {}},
        started_at="2026-12-01T00:00:00Z",
        ended_at="2026-12-01T00:00:01Z",
    )
    data = json.loads(episode.to_json(NO_SECRETS))
    assert data["schema"] == "bat.episode/2"
    assert problems("episode", data) == []
    assert problems("episode", {**data, "attempt": "one"}) != []
    assert problems("episode", {key: v for key, v in data.items() if key != "trace"}) != []


# --- the command, the committed files, eval.init --------------------------------------------


def test_eval_schema_prints_the_schema(bat, tmp_path, home):
    result = bat("eval.schema", "eval.yaml", cwd=tmp_path)
    assert result.code == 0, result.err
    assert json.loads(result.out) == schema("eval.yaml")
    assert bat("eval", "schema", "episode", cwd=tmp_path).out == schema_text("episode")
    assert bat("eval.schema", "--name=episode", cwd=tmp_path).out == schema_text("episode")
    usage = bat("--help", "eval.schema", cwd=tmp_path).out.splitlines()[0]
    assert usage == "Usage: bat eval.schema [--options] [NAME]"


def test_eval_schema_without_a_name_lists_the_names(bat, tmp_path, home):
    result = bat("eval.schema", cwd=tmp_path)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert [line.split()[0] for line in lines] == list(SCHEMAS)
    assert all(len(line.split()) > 1 for line in lines)


def test_eval_schema_of_an_unknown_name_is_one_line_and_exit_2(bat, tmp_path, home):
    result = bat("eval.schema", "run.yaml", cwd=tmp_path)
    assert result.code == 2 and result.out == ""
    assert result.err.splitlines() == [
        "bat: error: no schema named 'run.yaml' (names: eval.yaml, tasks.json, run.json, "
        "episode, scores, summary.json, metrics.json, gates.json, export.json, card.json)"
    ]


def test_docs_schemas_are_up_to_date(tmp_path):
    write_schemas(tmp_path)
    committed = DOCS / "schemas"
    expected = {file_name(name) for name in SCHEMAS}
    assert {path.name for path in tmp_path.iterdir()} == expected
    stale = [
        name
        for name in sorted(expected)
        if not (committed / name).is_file()
        or (committed / name).read_text() != (tmp_path / name).read_text()
    ]
    assert stale == [], (
        f"docs/schemas/ is out of date ({', '.join(stale)}): regenerate it with "
        "`python -m bat.evaluation.inputs.schemas docs/schemas`"
    )


def test_eval_init_writes_the_schema_and_points_eval_yaml_at_it(bat, tmp_path, home):
    from bat.evaluation.inputs.config import load_config

    assert bat("eval.init", cwd=tmp_path).code == 0
    text = (tmp_path / "eval" / "eval.yaml").read_text()
    assert text.splitlines()[0] == "# yaml-language-server: $schema=eval.schema.json"
    assert (tmp_path / "eval" / "eval.schema.json").read_text() == schema_text("eval.yaml")
    load_config(tmp_path / "eval" / "eval.yaml", base=tmp_path)  # the line is a comment


def test_eval_init_refuses_and_forces_as_before(bat, tmp_path, home):
    """eval.schema.json is bat's own file: a stale one is replaced, and it alone makes
    eval.init refuse nothing; eval.yaml and tasks.json still need --force."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "eval.schema.json").write_text("{}")
    assert bat("eval.init", cwd=tmp_path).code == 0
    assert (tmp_path / "eval" / "eval.schema.json").read_text() == schema_text("eval.yaml")
    (tmp_path / "eval" / "eval.schema.json").write_text("{}")
    refused = bat("eval.init", cwd=tmp_path)
    assert refused.code == 2 and "--force" in refused.err
    assert (tmp_path / "eval" / "eval.schema.json").read_text() == "{}"
    assert bat("eval.init", "-f", cwd=tmp_path).code == 0
    assert (tmp_path / "eval" / "eval.schema.json").read_text() == schema_text("eval.yaml")


# --- property: what bat's loader accepts, the schema accepts -------------------------------

PROPERTY = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def starter_documents() -> tuple[dict, list]:
    """The documented eval.yaml (every key, models and judge too) and the starter
    tasks.json: the richest valid documents bat documents and writes."""
    config = yaml.safe_load(doc_block("eval-formats.md", "## `eval/eval.yaml`", "yaml"))
    tasks = json.loads((REPO / "templates" / "eval" / "tasks.json").read_text())
    return config, tasks


@PROPERTY
@given(data=st.data())
def test_every_eval_yaml_bat_accepts_validates(data):
    from pydantic import ValidationError

    from bat.evaluation.inputs.config import EvalConfig
    from tests import fuzzkit

    config, _ = starter_documents()
    doc = fuzzkit.mutate(config, data.draw)
    if "__DEEP_" in json.dumps(doc):
        return
    try:
        EvalConfig.model_validate(copy.deepcopy(doc))
    except (ValidationError, TypeError, ValueError, RecursionError):
        return  # refused: the schema may refuse it or not
    assert problems("eval.yaml", doc) == [], doc


@PROPERTY
@given(data=st.data())
def test_every_dataset_bat_accepts_validates(data):
    import tempfile

    from bat.errors import InputError
    from bat.evaluation.inputs.dataset import load_dataset
    from tests import fuzzkit

    _, tasks = starter_documents()
    doc = fuzzkit.mutate(data.draw(st.sampled_from([tasks, {"tasks": tasks}])), data.draw)
    if "__DEEP_" in json.dumps(doc):
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tasks.json"
        path.write_text(json.dumps(doc))
        try:
            load_dataset(path)
        except InputError:
            return
    assert problems("tasks.json", doc) == [], doc


def test_judge_scores_as_the_judges_combine_them_validate():
    from bat.evaluation.judging.parse import parse_judgement
    from bat.evaluation.judging.scores import Outcome, combine
    from bat.evaluation.log.scores import not_judged

    reply = json.dumps(
        {
            name: {"score": 0.5, "reasoning": "fine"}
            for name in (
                "response_relevance",
                "task_completion_quality",
                "hallucination_score",
                "tool_call_appropriateness",
            )
        }
    )
    scores = combine(
        "bat.rubric/1", {"a:x": Outcome(parse_judgement(reply)), "b:y": Outcome(None, "429")}
    )
    validator = jsonschema.Draft202012Validator(schema("scores"))
    validator.validate(scores.model_dump(mode="json"))
    validator.validate(not_judged().model_dump(mode="json"))
    assert not validator.is_valid({"dimensions": {}, "surprise": 1})
