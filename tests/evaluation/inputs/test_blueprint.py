"""``bat eval run AGENT``: one agent of a blueprint repository, found by its folder name."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.errors import InputError
from bat.evaluation.inputs.blueprint import MAX_FOLDERS, agent_folder
from tests.evalkit import make_project, run_dirs, summary

TASKS = [{"id": "hello", "turns": ["hi"], "expected": {"output_must_contain": ["echo: hi"]}}]


def _agent(root, *parts):
    folder = root.joinpath(*parts)
    (folder / "eval").mkdir(parents=True)
    (folder / "eval" / "eval.yaml").write_text("evaluation: {}\n")
    return folder


def test_found_at_the_usual_places(tmp_path):
    for parts in (("agents", "weather"), ("news",), ("src", "team", "deep")):
        folder = _agent(tmp_path, *parts)
        assert agent_folder(parts[-1], tmp_path) == folder


def test_a_name_twice_is_refused_naming_both(tmp_path):
    _agent(tmp_path, "a", "x")
    _agent(tmp_path, "b", "x")
    with pytest.raises(InputError, match=r"several agents named 'x' here: a/x, b/x"):
        agent_folder("x", tmp_path)


def test_missing_agent_names_those_that_exist(tmp_path):
    _agent(tmp_path, "agents", "weather")
    with pytest.raises(
        InputError, match=r"no agent folder named 'nope'.*agents here: agents/weather"
    ):
        agent_folder("nope", tmp_path)
    (tmp_path / "agents" / "bare").mkdir()
    with pytest.raises(InputError, match=r"agents/bare has no eval/eval\.yaml: run bat eval\.init"):
        agent_folder("bare", tmp_path)


@pytest.mark.parametrize("name", ["../x", "/etc", "a/b", "..", "", "x" * 200, "-x", "a\nb"])
def test_names_that_are_not_folder_names_are_refused(tmp_path, name):
    with pytest.raises(InputError, match="not an agent's folder name"):
        agent_folder(name, tmp_path)


def test_links_hidden_and_venv_folders_are_not_searched(tmp_path):
    real = _agent(tmp_path / "elsewhere", "x", "hid")
    (tmp_path / "repo").mkdir()
    os.symlink(real.parent, tmp_path / "repo" / "link")
    _agent(tmp_path / "repo", ".hidden", "hid")
    _agent(tmp_path / "repo", "node_modules", "hid")
    with pytest.raises(InputError, match="no agent folder named 'hid'"):
        agent_folder("hid", tmp_path / "repo")


def test_the_search_is_bounded(tmp_path):
    for i in range(MAX_FOLDERS + 50):
        (tmp_path / f"d{i:05d}").mkdir()
    _agent(tmp_path, "zzz", "late")
    with pytest.raises(InputError, match="no agent folder named 'late'"):
        agent_folder("late", tmp_path)


@given(st.text(max_size=120))
@settings(max_examples=200, deadline=None)
def test_any_name_is_found_or_refused_in_one_line(tmp_path_factory, name):
    root = tmp_path_factory.getbasetemp() / "empty-repo"
    root.mkdir(exist_ok=True)
    try:
        agent_folder(name, root)
    except InputError as exc:
        assert "\n" not in exc.message.replace(repr(name)[:60], "")


def test_eval_run_agent_evaluates_that_folder_and_chains_its_stages(bat, home, tmp_path):
    repo = tmp_path / "repo"
    project = make_project(repo / "agents" / "echo", TASKS)
    (repo / "agents" / "other").mkdir()
    result = bat("eval", "run", "echo", "--limit", "1", "eval.summarize", cwd=repo)
    assert result.code == 0, result.err
    assert f"Agent echo: {project}" in result.out, result.out
    (run,) = run_dirs(project)
    assert summary(run)["passed"] == 1
    assert not (repo / "eval").exists()  # nothing written at the repository's root
    dotted = bat("eval.run", "echo", "--dry-run", cwd=repo)
    assert dotted.code == 0 and "1 model × 1 task" in dotted.out


def test_eval_run_unknown_agent_is_one_line_exit_2(bat, home, tmp_path):
    result = bat("eval.run", "ghost", cwd=tmp_path)
    assert result.code == 2 and result.err.count("\n") == 1
    assert "no agent folder named 'ghost'" in result.err
    assert json.dumps(result.out) == '""'
