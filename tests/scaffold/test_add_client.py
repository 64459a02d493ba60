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


# -- a refusal leaves the agent exactly as it was ------------------------------------------


def snapshot(root):
    """Every file under ``root`` with its bytes and mode, to compare before and after."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(result, *words):
    assert result.code == 2, result.err
    assert result.err.startswith("bat: error: ") and result.err.count("\n") == 1, result.err
    for word in words:
        assert word in result.err


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text.replace("# <<< bat: clients <<<\n", ""),
        lambda text: text.replace("# >>> bat: clients (maintained by `bat add.client`) >>>\n", ""),
        lambda text: text + "# >>> bat: clients (maintained by `bat add.client`) >>>\n",
        lambda text: (
            text.replace("# <<< bat: clients <<<\n", "") + "# <<< bat: clients <<<\n"
            "# <<< bat: clients <<<\n"
        ),
    ],
    ids=["no-end", "no-begin", "two-begins", "two-ends"],
)
def test_damaged_markers_are_refused_and_nothing_written(agent, bat, damage):
    init = agent / "src/llm_clients/__init__.py"
    init.write_text(damage(init.read_text()))
    before = snapshot(agent)
    one_error_line(bat("add.client", "extra", cwd=agent), "marker lines are damaged")
    assert snapshot(agent) == before


def test_exports_file_that_is_not_utf8_is_refused_before_any_client_is_written(agent, bat):
    init = agent / "src/llm_clients/__init__.py"
    init.write_bytes(init.read_bytes() + b"# caf\xe9\n")
    before = snapshot(agent)
    one_error_line(bat("add.client", "extra", cwd=agent), "__init__.py (line", "not UTF-8")
    assert snapshot(agent) == before


def test_read_only_exports_file_is_refused_before_any_client_is_written(agent, bat):
    init = agent / "src/llm_clients/__init__.py"
    init.chmod(0o444)
    before = snapshot(agent)
    one_error_line(bat("add.client", "extra", cwd=agent), "__init__.py: the file is read-only")
    assert snapshot(agent) == before


def test_read_only_client_is_refused_even_with_force(agent, bat):
    client = agent / "src/llm_clients/assistant_client.py"
    client.chmod(0o400)
    before = snapshot(agent)
    one_error_line(bat("add.client", "assistant", "-f", cwd=agent), "read-only (mode 0400)")
    assert snapshot(agent) == before


def test_a_folder_where_a_client_module_goes_is_refused(agent, bat):
    (agent / "src/llm_clients/extra_client.py").mkdir()
    before = snapshot(agent)
    one_error_line(bat("add.client", "extra", "-f", cwd=agent), "exists and is not a file")
    assert snapshot(agent) == before
