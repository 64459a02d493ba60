"""One set of checks: ``eval.show``, ``eval.run --dry-run``, ``bat doctor`` and the real
``eval.run`` warn and refuse alike on the same project (``preflight.project_checks``).

Each project is run through all four commands, in process, against the real echo agent
(an a2a-sdk server) where a run starts one; the compat switch (``compat: {unknown_keys:
warn}``) is checked there too, and its parsing with Hypothesis at the library level.
"""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.errors import InputError
from bat.evaluation.inputs.compat import COMPAT_LINE
from bat.evaluation.inputs.config import load_config
from bat.evaluation.inputs.dataset import DatasetCheck, check_dataset, load_dataset
from tests.conftest import REPO
from tests.evalkit import make_project, run_dirs

BATCLI_RUN = REPO / "tests" / "data" / "bat-cli-2026.10" / "run-echo" / "20261201_033105"
MULTI = {"id": "memory", "turns": ["hi", "HISTORY"], "expected": {"output_must_contain": ["hi"]}}
ONE = {"id": "one", "turns": ["hello"], "expected": {"output_must_contain": ["hello"]}}
CHECKPOINTS = "checkpoints off: the agent may forget earlier turns"
HIDDEN = "the agent's telemetry settings hide what the dataset checks"


def warnings(err: str) -> list[str]:
    return [
        line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warning: ")
    ]


def four(bat, project: Path) -> dict[str, tuple[int, list[str], str]]:
    """What each of the four commands said: (exit status, warnings, error line).

    doctor's warnings and refusal are the details of its "eval.yaml" and "eval checks"
    lines, split where doctor joins them."""
    said = {}
    result = bat("doctor", "--json", cwd=project)  # first: the real run below writes a run
    checks = {check["name"]: check for check in json.loads(result.out)}
    lines = [checks["eval.yaml"], checks["eval checks"]]
    failed = [c for c in lines if c["status"] == "fail"]
    said["doctor"] = (
        1 if failed else 0,
        [w for c in lines if c["status"] == "warn" for w in _doctor_warnings(c)],
        failed[0]["detail"] if failed else "",
    )
    for name, args in (
        ("eval.show", ("eval.show",)),
        ("dry-run", ("eval.run", "--dry-run")),
        ("eval.run", ("eval.run",)),
    ):
        result = bat(*args, cwd=project, timeout=120)
        lines = result.err.splitlines()
        error = next((line for line in lines if line.startswith("bat: error")), "")
        assert "Traceback" not in result.err
        said[name] = (result.code, warnings(result.err), error)
    # doctor names files by their full path, the eval commands as given (eval/eval.yaml)
    return {
        name: (code, [w.replace(f"{project}/", "") for w in found], error)
        for name, (code, found, error) in said.items()
    }


def _doctor_warnings(check: dict) -> list[str]:
    detail = check["detail"]
    if check["name"] == "eval.yaml":  # "eval/eval.yaml: 1 model, ...; warning; warning"
        return detail.split("; ")[1:]
    return detail.split("; ")


def bat_adk(project: Path) -> Path:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\nversion = "0.1.0"\ndependencies = ["bat-adk>=0.3"]\n'
    )
    return project


def test_the_checkpoints_warning_for_a_bat_adk_agent_only_and_alike_everywhere(tmp_path, bat, home):
    config = "telemetry: {privacy: none}\n"  # no checkpoints key: bat-adk's default is off
    plain = make_project(tmp_path / "plain", [MULTI], config_yaml=config)
    adk = bat_adk(make_project(tmp_path / "adk", [MULTI], config_yaml=config))
    said = four(bat, adk)
    for name, (code, found, error) in said.items():
        assert code == 0 and not error, (name, error)
        assert [w for w in found if CHECKPOINTS in w], (name, found)
        assert "1 task has several turns" in found[0] and "(set checkpoints: true)" in found[0]
    # A plain a2a-sdk agent: its config.yaml's missing key says nothing of its memory.
    said = four(bat, plain)
    for name, (code, found, error) in said.items():
        assert code == 0 and not error and not [w for w in found if CHECKPOINTS in w], name
    # checkpoints: true on the bat-adk agent: no warning anywhere.
    (adk / "config.yaml").write_text("checkpoints: true\n")
    for command in (("eval.show",), ("eval.run", "--dry-run")):
        result = bat(*command, cwd=adk)
        assert result.code == 0 and CHECKPOINTS not in result.err


def test_a_privacy_floor_that_hides_tool_names_is_refused_everywhere(tmp_path, bat, home):
    tools = {"id": "tool", "turns": ["x"], "expected": {"tool_calls": [{"name": "lookup"}]}}
    project = make_project(tmp_path, [tools], config_yaml="telemetry: {privacy: none}\n")
    (project / "__main__.py").write_text(
        'AgentApplication(agent, telemetry_privacy_floor="full")\n'
    )
    said = four(bat, project)
    for name, (code, _, error) in said.items():
        assert code in (1, 2) and HIDDEN in error, (name, error)
    assert {said[n][0] for n in ("eval.show", "dry-run", "eval.run")} == {2}
    assert not run_dirs(project)  # refused before anything started or was written
    # Lowered in the code: every command lets it through.
    (project / "__main__.py").write_text(
        'AgentApplication(agent, telemetry_privacy_floor="none")\n'
    )
    result = bat("eval.show", cwd=project)
    assert result.code == 0 and HIDDEN not in result.err


def test_keys_batcli_ignored_are_refused_with_the_switch_then_warned_with_it(tmp_path, bat, home):
    task = {**ONE, "description": "says hello back"}
    project = make_project(tmp_path, [task, {**MULTI, "description": "remembers"}])
    eval_yaml = project / "eval" / "eval.yaml"
    data = yaml.safe_load(eval_yaml.read_text())
    data["evaluation"]["timeout_s"] = 30
    eval_yaml.write_text(yaml.safe_dump(data, sort_keys=False))
    # Refused by all four, and each names the one line that lets a migration go on.
    said = four(bat, project)
    for name, (code, _, error) in said.items():
        assert code in (1, 2) and "problem" in error, (name, error)
    for command in (("eval.show",), ("eval.run", "--dry-run")):
        err = bat(*command, cwd=project).err
        assert "evaluation.timeout_s" in err and "unknown key" in err
        assert f"add the line `{COMPAT_LINE}` to eval.yaml" in err
    assert COMPAT_LINE in json.dumps(said["doctor"])
    # eval.yaml passes, the dataset's key is next: refused with the same suggestion.
    del data["evaluation"]["timeout_s"]
    eval_yaml.write_text(yaml.safe_dump(data, sort_keys=False))
    err = bat("eval.show", cwd=project).err
    assert "[0].description (line" in err and COMPAT_LINE in err
    # The switch: every command warns alike, naming each key, and the run goes on.
    data["evaluation"]["timeout_s"] = 30
    data["compat"] = {"unknown_keys": "warn"}
    eval_yaml.write_text(yaml.safe_dump(data, sort_keys=False))
    said = four(bat, project)
    expected = None
    for name, (code, found, error) in said.items():
        assert code == 0 and not error, (name, error)
        keys = [w for w in found if "a key bat does not read" in w]
        assert len(keys) == 2 and all(COMPAT_LINE in w for w in keys), (name, found)
        assert "evaluation.timeout_s (line " in keys[0]
        assert "description in 2 tasks (one, memory)" in keys[1]
        expected = expected or keys
        assert keys == expected, name  # the same words from every command
    (run,) = run_dirs(project)
    assert json.loads((run / "agent-default" / "summary.json").read_text())["totals"]


def test_checks_batcli_ignored_are_named_in_a_project_from_bat_cli(tmp_path, bat, home):
    tasks = [
        {"id": "r1", "turns": ["hello"], "expected": {"output_regex": "^echo"}},
        {"id": "r2", "turns": ["hi"], "expected": {"output_regex": "hi$"}},
        {"id": "n1", "turns": ["hi"], "expected": {"output_must_not_contain": ["sorry"]}},
    ]
    project = make_project(tmp_path, tasks)
    note = (
        "output_regex (2 tasks: r1, r2) and output_must_not_contain (1 task: n1): checks "
        "bat-cli 2026.10 ignored decide verdicts here (a task bat-cli passed may fail)"
    )
    # bat's own project (the scaffold's sample uses both checks): nothing about bat-cli.
    assert note not in bat("eval.show", cwd=project).err
    # bat-cli's run folder in the output folder: a project from bat-cli, told by all four.
    shutil.copytree(BATCLI_RUN, project / "eval" / "output" / BATCLI_RUN.name)
    said = four(bat, project)
    for name, (code, found, error) in said.items():
        assert code == 0 and not error and note in found, (name, found)
    # The compat switch says the same without bat-cli's runs.
    shutil.rmtree(project / "eval" / "output")
    eval_yaml = project / "eval" / "eval.yaml"
    eval_yaml.write_text(eval_yaml.read_text() + f"{COMPAT_LINE}\n")
    for command in (("eval.show",), ("eval.run", "--dry-run")):
        assert note in warnings(bat(*command, cwd=project).err)


# --- the switch, at the library level (Hypothesis) --------------------------------------

KNOWN_TASK_KEYS = {"id", "turns", "expected", "meta", "tags", "turn_templates"}
KNOWN_EXPECTED_KEYS = {
    "status",
    "output_must_contain",
    "output_must_not_contain",
    "output_regex",
    "tool_calls",
    "tool_call_order",
    "max_model_calls",
    "max_tokens",
    "no_errors",
    "agent_calls",
    "expected_outcome",
    "final_status",
}
names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=12)
values = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    top=st.dictionaries(names.filter(lambda n: n not in KNOWN_TASK_KEYS), values, max_size=3),
    inner=st.dictionaries(names.filter(lambda n: n not in KNOWN_EXPECTED_KEYS), values, max_size=3),
)
def test_any_unknown_task_keys_are_refused_or_left_out_and_named(tmp_path, top, inner):
    base = {"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["hi"]}}
    task = {**base, **top, "expected": {**base["expected"], **inner}}
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task]))
    unknown = {*top, *(f"expected.{key}" for key in inner)}
    if not unknown:
        assert load_dataset(path).ignored == {}
        return
    with pytest.raises(InputError) as refused:
        load_dataset(path)
    assert COMPAT_LINE in refused.value.details[-1]
    assert len(refused.value.details) == len(unknown) + 1  # each key, then the switch
    dataset = load_dataset(path, unknown_keys="warn")
    assert dataset.ignored == {key: ["t"] for key in unknown}
    path.write_text(json.dumps([base]))
    assert dataset.tasks == load_dataset(path).tasks  # as if the keys were not there


EVAL_SPOTS = [(), ("evaluation",), ("evaluation", "agent"), ("models", 0), ("judge",)]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extra=st.lists(
        st.tuples(st.sampled_from(EVAL_SPOTS), names.map(lambda n: f"x_{n}"), values),
        max_size=4,
        unique_by=lambda item: (item[0], item[1]),
    )
)
def test_any_unknown_eval_yaml_keys_are_refused_or_warned_each_with_its_line(tmp_path, extra):
    data = {
        "evaluation": {"k": 2, "agent": {"start": True}},
        "models": [{"provider": "openai", "model": "m", "temperature": 0.2}],
        "judge": {"provider": "ollama", "model": "j"},
    }
    for spot, key, value in extra:
        holder = data
        for part in spot:
            holder = holder[part]
        holder[key] = value
    file = tmp_path / "eval.yaml"
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError) as refused:
        load_config(file, base=tmp_path)
    assert refused.value.details[-1].startswith("keys bat-cli ignored?")
    assert "models[0].temperature" in "\n".join(refused.value.details)
    file.write_text(yaml.safe_dump({**data, "compat": {"unknown_keys": "warn"}}, sort_keys=False))
    resolved = load_config(file, base=tmp_path)
    named = [w for w in resolved.warnings if "a key bat does not read" in w]
    assert len(named) == len(extra) + 1
    assert any("models[0].temperature (line " in w for w in named)
    for spot, key, _ in extra:
        shown = ".".join(str(p) for p in (*spot, key)).replace(".0", "[0]")
        assert any(f"{shown} (line " in w for w in named), (shown, named)
    assert resolved.config.evaluation.k == 2 and resolved.unknown_keys == "warn"


def test_the_facts_of_a_checked_dataset_keep_a_few_ids_and_count_the_rest(tmp_path):
    """eval.show and doctor check a dataset without keeping its tasks: what the checks
    need of it is counted, with five ids to name, the same as from the loaded tasks."""
    tasks = [
        {"id": f"r{i}", "turns": ["a", "b"], "expected": {"output_regex": "a"}} for i in range(8)
    ]
    tasks.append({"id": "tool", "turns": ["x"], "expected": {"tool_calls": [{"name": "t"}]}})
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks))
    checked = check_dataset(path, chunk=3)
    loaded = DatasetCheck.of(load_dataset(path))
    for facts in (checked.facts, loaded.facts):
        assert len(facts.regex) == 8 and facts.regex.named() == "r0, r1, r2, r3, r4 and 3 more"
        assert len(facts.multi_turn) == 8 and not facts.must_not
        assert facts.tool_names and not facts.tool_args
