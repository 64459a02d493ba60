"""``bat add.client``: new client modules, exports kept in step, nothing overwritten."""

import ast

import pytest


@pytest.fixture
def agent(tmp_path, bat, home):
    assert bat("init.agent", "host", "-o", str(tmp_path)).code == 0
    return tmp_path / "host"


def exported(agent):
    tree = ast.parse((agent / "src/llm_clients/__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__":
            return ast.literal_eval(node.value)
    raise AssertionError("no __all__")


def test_adds_clients_and_exports(agent, bat):
    result = bat("add.client", "planner,executor", cwd=agent)
    assert result.code == 0, result.err
    for name in ("planner", "executor"):
        source = (agent / f"src/llm_clients/{name}_client.py").read_text()
        compile(source, name, "exec")
        assert f'client_name="{name}"' in source
    assert exported(agent) == ["AssistantClient", "ExecutorClient", "PlannerClient"]


def test_space_separated_names_and_both_spellings(agent, bat):
    assert bat("add", "client", "alpha", "beta", cwd=agent).code == 0
    assert bat("add.client", "gamma", "--force", cwd=agent).code == 0
    assert exported(agent) == ["AlphaClient", "AssistantClient", "BetaClient", "GammaClient"]


def test_existing_client_needs_force_and_is_left_alone(agent, bat):
    path = agent / "src/llm_clients/assistant_client.py"
    path.write_text("# my edits\n")
    refused = bat("add.client", "newone,assistant", cwd=agent)
    assert refused.code == 2 and "--force" in refused.err and refused.err.count("\n") == 1
    assert path.read_text() == "# my edits\n"
    assert not (agent / "src/llm_clients/newone_client.py").exists()
    assert bat("add.client", "assistant", "-f", cwd=agent).code == 0
    assert "class AssistantClient" in path.read_text()


def test_user_code_around_the_exports_block_survives(agent, bat):
    init = agent / "src/llm_clients/__init__.py"
    init.write_text("import os  # mine\n" + init.read_text() + "HELPER = 1\n")
    assert bat("add.client", "extra", cwd=agent).code == 0
    text = init.read_text()
    assert text.startswith("import os  # mine\n") and text.endswith("HELPER = 1\n")
    assert "from .extra_client import ExtraClient" in text
    assert text.count("__all__") == 1


def test_exports_file_without_markers_gets_a_block(agent, bat):
    init = agent / "src/llm_clients/__init__.py"
    init.write_text('"""Hand-written."""\n')
    assert bat("add.client", "x", cwd=agent).code == 0
    text = init.read_text()
    assert text.startswith('"""Hand-written."""\n')
    assert exported(agent) == ["AssistantClient", "XClient"]


def test_outside_an_agent_is_refused(tmp_path, bat, home):
    result = bat("add.client", "planner", cwd=tmp_path)
    assert result.code == 2
    assert "src/llm_clients" in result.err and result.err.count("\n") == 1
    assert list(tmp_path.iterdir()) == [home]


@pytest.mark.parametrize("names", ["1bad", "with space", "def"])
def test_bad_names_are_refused(agent, bat, names):
    before = sorted(p.name for p in (agent / "src/llm_clients").iterdir())
    result = bat("add.client", names, cwd=agent)
    assert result.code == 2 and "invalid client name" in result.err
    assert sorted(p.name for p in (agent / "src/llm_clients").iterdir()) == before


def test_missing_names_is_a_usage_error(agent, bat):
    result = bat("add.client", cwd=agent)
    assert result.code == 2 and "names" in result.err
