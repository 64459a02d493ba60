"""``bat init.agent``: the generated project is complete, parses and compiles."""

import ast
import json
import re
import tomllib

import pytest
import yaml
from google.protobuf.json_format import Parse

EXPECTED_FILES = {
    ".dockerignore",
    ".env",
    ".gitignore",
    "Dockerfile",
    "Makefile",
    "README.md",
    "__main__.py",
    "agent.json",
    "config.yaml",
    "pyproject.toml",
    "tasks.py",
    "src/__init__.py",
    "src/graph.py",
    "src/state.py",
    "src/llm_clients/__init__.py",
}


def exported_names(source):
    """The literal ``__all__`` of a module's source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__":
            return ast.literal_eval(node.value)
    raise AssertionError("no __all__")


def files_under(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def agent(tmp_path, bat, home):
    result = bat(
        "init.agent",
        "weather-bot",
        "-c",
        "planner,executor",
        "--clients",
        "critic",
        "--port",
        "9123",
        "--model",
        "llama3.1",
        "--model-provider",
        "ollama",
        "-o",
        str(tmp_path),
    )
    assert result.code == 0, result.err
    return tmp_path / "weather-bot"


def test_every_file_is_generated(agent):
    clients = {f"src/llm_clients/{n}_client.py" for n in ("planner", "executor", "critic")}
    assert files_under(agent) == EXPECTED_FILES | clients


def test_agent_card_is_a_valid_a2a_agent_card(agent):
    from a2a.types import AgentCard

    card = Parse((agent / "agent.json").read_text(), AgentCard())
    assert card.name == "Weather Bot"
    assert card.description and card.version
    assert card.capabilities.streaming is True
    assert list(card.default_input_modes) == ["text/plain"]
    assert list(card.default_output_modes) == ["text/plain"]
    assert card.skills and card.skills[0].id and card.skills[0].name
    assert not card.supported_interfaces  # bat-adk adds the interface from config.yaml


def test_config_yaml_has_the_bat_adk_sections(agent):
    text = (agent / "config.yaml").read_text()
    config = yaml.safe_load(text)
    assert config["endpoint"] == {"url": "http://localhost", "port": "${PORT}"}
    assert config["model"] == {"provider": "ollama", "name": "llama3.1"}
    assert config["checkpoints"] is True
    assert config["telemetry"]["output"] == [{"type": "local", "file_path": "spans.jsonl"}]
    assert config["telemetry"]["privacy"] == "none"
    assert "# remote-agents:" in text and "# mcp-servers:" in text


def test_env_carries_the_flags(agent):
    env = dict(
        line.split("=", 1)
        for line in (agent / ".env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env == {"PORT": "9123", "MODEL": "llama3.1", "MODEL_PROVIDER": "ollama"}


def test_env_has_an_empty_key_line_for_providers_that_need_one(tmp_path, bat, home):
    assert bat("init.agent", "a", "-o", str(tmp_path)).code == 0
    text = (tmp_path / "a" / ".env").read_text()
    assert "\nOPENAI_API_KEY=\n" in text
    assert "\nPORT=9900\n" in text and "\nMODEL_PROVIDER=openai\n" in text
    assert "\nMODEL=gpt-4.1-mini\n" in text


def test_pyproject_depends_on_bat_adk_with_the_provider_extra(agent):
    project = tomllib.loads((agent / "pyproject.toml").read_text())["project"]
    assert project["name"] == "weather-bot"
    assert project["requires-python"] == ">=3.12"
    (dependency,) = project["dependencies"]
    assert re.fullmatch(r"bat-adk\[ollama,telemetry\]>=[0-9.]+", dependency)


def test_dockerfile_is_multi_stage_non_root_and_versioned(agent):
    text = (agent / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2
    assert "ARG VERSION" in text
    assert re.search(r"^USER (?!root)\w+", text, re.M)
    assert "EXPOSE 9123" in text


def test_makefile_targets_use_registry_repo_and_version(agent):
    text = (agent / "Makefile").read_text()
    for target in ("build", "run", "push", "clean"):
        assert re.search(rf"^{target}:", text, re.M)
    assert "IMAGE := $(DOCKER_REGISTRY)/$(REPO):$(VERSION)" in text
    assert "\tdocker build --build-arg VERSION=$(VERSION)" in text  # recipes need tabs


def test_dockerignore_keeps_secrets_out(agent):
    assert ".env" in (agent / ".dockerignore").read_text().splitlines()
    assert ".env" in (agent / ".gitignore").read_text().splitlines()


def test_generated_python_compiles(agent):
    for path in agent.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


def test_graph_asks_the_first_client(agent):
    graph = (agent / "src/graph.py").read_text()
    assert "from .llm_clients import PlannerClient" in graph
    assert 'add_edge(START, "answer")' in graph and 'add_edge("answer", END)' in graph
    exports = (agent / "src/llm_clients/__init__.py").read_text()
    for name in ("PlannerClient", "ExecutorClient", "CriticClient"):
        assert f"import {name}" in exports
    assert exported_names(exports) == ["CriticClient", "ExecutorClient", "PlannerClient"]


def test_main_uses_agent_application(agent):
    text = (agent / "__main__.py").read_text()
    assert "AgentApplication(" in text and "WeatherBotGraph" in text and "WeatherBotState" in text


def test_agent_tasks_py_mounts_bat_collections(agent):
    text = (agent / "tasks.py").read_text()
    assert "from bat.tasks import" in text and "Collection(" in text


def test_agent_tasks_py_runs_under_invoke(agent):
    import subprocess
    import sys
    from pathlib import Path

    invoke = Path(sys.executable).with_name("invoke")
    listing = subprocess.run(
        [str(invoke), "--list"], cwd=agent, capture_output=True, text=True, check=False
    )
    assert listing.returncode == 0, listing.stderr
    for name in ("check", "release", "init.agent", "add.client", "set.env", "eval.run", "version"):
        assert name in listing.stdout
    run = subprocess.run(
        [str(invoke), "release"], cwd=agent, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "is ready" in run.stdout and "bat-cli" in run.stdout


def test_default_client_when_none_given(tmp_path, bat, home):
    assert bat("init.agent", "solo", "-o", str(tmp_path)).code == 0
    assert (tmp_path / "solo/src/llm_clients/assistant_client.py").is_file()


def test_output_lists_the_files(tmp_path, bat, home):
    result = bat("init.agent", "listed", "-o", str(tmp_path))
    assert "agent.json" in result.out and "src/graph.py" in result.out


def test_non_empty_directory_needs_force(tmp_path, bat, home):
    target = tmp_path / "taken"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    refused = bat("init.agent", "taken", "-o", str(tmp_path))
    assert refused.code == 2
    assert refused.err.count("\n") == 1 and "--force" in refused.err
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    forced = bat("init.agent", "taken", "-o", str(tmp_path), "--force")
    assert forced.code == 0
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "agent.json").is_file()


def test_empty_existing_directory_is_fine(tmp_path, bat, home):
    (tmp_path / "empty").mkdir()
    assert bat("init.agent", "empty", "-o", str(tmp_path)).code == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["9lives"], "invalid agent name"),
        (["../escape"], "invalid agent name"),
        (["ok", "--port", "70000"], "invalid port"),
        (["ok", "--port", "abc"], "invalid port"),
        (["ok", "--model-provider", "acme"], "unknown model provider"),
        (["ok", "-c", "bad name"], "invalid client name"),
        (["ok", "--model", "two words"], "invalid model name"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, bat, home, args, words):
    result = bat("init.agent", *args, "-o", str(tmp_path))
    assert result.code == 2
    assert result.err.startswith("bat: error: ") and result.err.count("\n") == 1
    assert words in result.err
    assert "Traceback" not in result.err
    assert list(tmp_path.iterdir()) == [home]


def test_output_dir_that_is_a_file_is_refused(tmp_path, bat, home):
    (tmp_path / "clash").write_text("")
    result = bat("init.agent", "clash", "-o", str(tmp_path))
    assert result.code == 2 and "not a directory" in result.err


def test_both_spellings_give_the_same_project(tmp_path, bat, home):
    dotted = bat("init.agent", "same", "-o", str(tmp_path / "a"), "--port", "9999")
    spaced = bat("init", "agent", "same", "-o", str(tmp_path / "b"), "--port", "9999")
    assert dotted.code == spaced.code == 0
    a, b = tmp_path / "a/same", tmp_path / "b/same"
    assert files_under(a) == files_under(b)
    for name in files_under(a):
        assert (a / name).read_text() == (b / name).read_text(), name


def test_agent_json_name_is_json_escaped(tmp_path, bat, home):
    assert bat("init.agent", "quote_test", "-o", str(tmp_path)).code == 0
    assert json.loads((tmp_path / "quote_test/agent.json").read_text())["name"] == "Quote Test"
