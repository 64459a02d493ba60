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
    # One place for each setting: .env (and the Dockerfile's block, in an image).
    assert config["endpoint"] == {"url": "${PUBLIC_URL}", "port": "${PORT}"}
    assert config["model"] == {"provider": "${MODEL_PROVIDER}", "name": "${MODEL}"}
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
    assert env == {
        "PORT": "9123",
        "PUBLIC_URL": "http://localhost",
        "MODEL": "llama3.1",
        "MODEL_PROVIDER": "ollama",
    }


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
    block = r"^ENV PORT=9123 \\\n\s+MODEL=llama3.1 \\\n\s+MODEL_PROVIDER=ollama$"
    assert re.search(block, text, re.M)
    # the card of a container advertises the container's host name (or PUBLIC_URL)
    assert "${PUBLIC_URL:-http://$(hostname)}" in text.splitlines()[-1]


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


def test_tools_adds_a_tools_module_and_a_graph_that_uses_it(tmp_path, bat, home):
    result = bat("init.agent", "booker", "--tools", "-c", "planner", "-o", str(tmp_path))
    assert result.code == 0, result.err
    agent = tmp_path / "booker"
    assert files_under(agent) == EXPECTED_FILES | {
        "src/tools.py",
        "src/llm_clients/planner_client.py",
    }
    for path in agent.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    tools = (agent / "src/tools.py").read_text()
    assert "def add(" in tools and "def ask_user(" in tools
    graph = (agent / "src/graph.py").read_text()
    assert "PlannerClient(tools=TOOLS)" in graph and "interrupt(" in graph
    state = (agent / "src/state.py").read_text()
    assert "return self.waiting" in state  # is_waiting_for_human_input
    # eval.init sees the tools and adds the sample tasks that check them; they load
    assert bat("eval.init", cwd=agent).code == 0
    tasks = json.loads((agent / "eval/input/tasks.json").read_text())
    assert [t["id"] for t in tasks][-3:] == [
        "uses-the-add-tool",
        "asks-how-many",
        "books-after-asking",
    ]
    shown = bat("eval.show", cwd=agent)
    assert shown.code == 0 and "9 tasks" in shown.out, shown.out + shown.err
    # --force without --tools keeps the graph with tools: nothing differs, nothing lost
    again = bat("init.agent", "booker", "-f", "-o", str(tmp_path))
    assert again.code == 0, again.err
    assert "(0 files written)" in again.out and "(1 file):" in again.out
    assert (agent / "src/graph.py").read_text() == graph
    # without --tools, the plain graph and no tools module
    assert bat("init.agent", "plain", "-o", str(tmp_path)).code == 0
    assert not (tmp_path / "plain/src/tools.py").exists()
    assert "interrupt(" not in (tmp_path / "plain/src/graph.py").read_text()


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
    names = ("check", "release", "init.agent", "add.client", "set.env", "eval.run", "version")
    for name in (*names, "build", "push"):
        assert re.search(rf"^\s+{re.escape(name)}\b", listing.stdout, re.M), name
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
        (["ok", "--port", "70000"], "'70000' is not a port number (1-65535)"),
        (["ok", "--port", "abc"], "'abc' is not a port number (1-65535)"),
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


# -- --force never loses what the user wrote ---------------------------------------------

import os  # noqa: E402
import stat  # noqa: E402

SIX = "planner,executor,critic,writer,reviewer,router"


def snapshot(root):
    """Every file under ``root`` with its bytes and mode, to compare before and after."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(result, *words):
    assert result.code == 2, result.err
    assert result.err.startswith("bat: error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    for word in words:
        assert word in result.err, result.err


@pytest.fixture
def worked_on(tmp_path, bat, home):
    """An agent with six clients, a key, a registry and a repository set, as in issue 9."""
    assert bat("init.agent", "busy", "-c", SIX, "--port", "9123", "-o", str(tmp_path)).code == 0
    agent = tmp_path / "busy"
    env = agent / ".env"
    env.write_text(env.read_text().replace("OPENAI_API_KEY=\n", "OPENAI_API_KEY=sk-mine\n"))
    set_env = ("set.env", "--docker-registry", "localhost:5000", "--repo", "team/busy")
    assert bat(*set_env, cwd=agent).code == 0
    (agent / "src/llm_clients/planner_client.py").write_text("# my planner\n")
    return agent


def test_new_env_is_private(tmp_path, bat, home):
    assert bat("init.agent", "a", "-o", str(tmp_path)).code == 0
    assert stat.S_IMODE((tmp_path / "a/.env").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a/README.md").stat().st_mode) == 0o666 & ~os.umask(0o22)


def test_force_on_an_agent_keeps_keys_values_and_every_client(worked_on, bat):
    before = snapshot(worked_on)
    result = bat("init.agent", "busy", "-f", "-o", str(worked_on.parent))
    assert result.code == 0, result.err
    assert snapshot(worked_on) == before  # PORT=9123 read back: nothing differs
    assert "0 files written" in result.out and "planner_client.py" in result.out
    text = (worked_on / ".env").read_text()
    for line in ("OPENAI_API_KEY=sk-mine", "BAT_DOCKER_REGISTRY=localhost:5000", "PORT=9123"):
        assert f"\n{line}\n" in text
    exports = exported_names((worked_on / "src/llm_clients/__init__.py").read_text())
    assert len(exports) == 6


def test_force_adds_what_is_missing_and_keeps_the_rest(worked_on, bat):
    env = worked_on / ".env"
    env.write_text(env.read_text().replace("MODEL_PROVIDER=openai\n", "") + "MINE=1\n")
    os.chmod(env, 0o644)
    (worked_on / "Makefile").unlink()
    (worked_on / "src/llm_clients/router_client.py").unlink()
    before = snapshot(worked_on)
    result = bat("init.agent", "busy", "-f", "-o", str(worked_on.parent))
    assert result.code == 0, result.err
    after = snapshot(worked_on)
    assert after["Makefile"] == snapshot_of_a_fresh_agent(bat, worked_on)["Makefile"]
    merged = after[".env"]
    assert merged[1] == 0o644  # an existing .env keeps its mode
    assert merged[0] == before[".env"][0] + b"MODEL_PROVIDER=openai\n"
    exports = exported_names(after["src/llm_clients/__init__.py"][0].decode())
    assert "RouterClient" not in exports and len(exports) == 5
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {"Makefile", ".env", "src/llm_clients/__init__.py"}


def snapshot_of_a_fresh_agent(bat, like):
    fresh = like.parent / "fresh"
    args = ("init.agent", like.name, "-c", SIX, "--port", "9123", "-o", str(fresh))
    assert bat(*args).code == 0
    return snapshot(fresh / like.name)


def test_force_refuses_to_overwrite_files_the_user_changed(worked_on, bat):
    (worked_on / "Dockerfile").write_text("FROM mine\n")
    graph = worked_on / "src/graph.py"
    graph.write_text(graph.read_text() + "# tuned\n")
    (worked_on / "Makefile").unlink()
    before = snapshot(worked_on)
    result = bat("init.agent", "busy", "-f", "-o", str(worked_on.parent))
    one_error_line(result, "would overwrite Dockerfile, src/graph.py", "Nothing was written")
    assert snapshot(worked_on) == before


def test_force_refuses_a_flag_that_contradicts_the_env(worked_on, bat):
    before = snapshot(worked_on)
    result = bat("init.agent", "busy", "-f", "--port", "9200", "-o", str(worked_on.parent))
    one_error_line(result, ".env has PORT=9123 but --port 9200 was given", "bat set.env")
    assert snapshot(worked_on) == before


def test_force_with_other_clients_refuses_to_change_the_graph(worked_on, bat):
    before = snapshot(worked_on)
    result = bat("init.agent", "busy", "-f", "-c", "extra", "-o", str(worked_on.parent))
    one_error_line(result, "src/graph.py", "bat add.client")
    assert snapshot(worked_on) == before


@pytest.mark.parametrize(
    ("spoil", "words"),
    [
        (lambda a: (a / ".env").write_bytes(b"PORT=9123\nKEY=\xff\n"), ".env: KEY (line 2)"),
        (lambda a: (a / ".env").write_bytes(b"PORT=9123\nK=a\x00\n"), "contains a NUL byte"),
        (lambda a: os.chmod(a / ".env", 0o400), ".env: the file is read-only"),
        (lambda a: (a / "Makefile").unlink() or (a / "Makefile").mkdir(), "Makefile: exists and"),
        (
            lambda a: (a / "src/llm_clients/__init__.py").write_text(
                "# >>> bat: clients (maintained by `bat add.client`) >>>\nimport mine\n"
            ),
            "marker lines are damaged",
        ),
    ],
    ids=["env-not-utf8", "env-nul", "env-read-only", "folder-for-file", "markers"],
)
def test_force_refusals_write_nothing(worked_on, bat, spoil, words):
    env = worked_on / ".env"
    # Remove a key so that the merge has to write .env (a read-only one must be refused).
    env.write_text(env.read_text().replace("MODEL_PROVIDER=openai\n", ""))
    spoil(worked_on)
    before = snapshot(worked_on)
    result = bat("init.agent", "busy", "-f", "-o", str(worked_on.parent))
    one_error_line(result, words)
    assert snapshot(worked_on) == before


def test_force_writes_a_symlinked_env_through_the_link(worked_on, bat):
    env = worked_on / ".env"
    kept = worked_on.parent / "kept.env"
    kept.write_text(env.read_text().replace("MODEL_PROVIDER=openai\n", ""))
    os.chmod(kept, 0o640)
    env.unlink()
    env.symlink_to(kept)
    assert bat("init.agent", "busy", "-f", "-o", str(worked_on.parent)).code == 0
    assert env.is_symlink() and "MODEL_PROVIDER=openai\n" in kept.read_text()
    assert "OPENAI_API_KEY=sk-mine\n" in kept.read_text()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640


# -- every bad flag or setting names itself ---------------------------------------------


def test_output_dir_below_a_file_names_the_flag(tmp_path, bat, home):
    (tmp_path / "plain").write_text("x")
    for where in ("plain", "plain/deeper"):
        result = bat("init.agent", "a", "-o", str(tmp_path / where))
        one_error_line(result, f"--output-dir: {tmp_path / 'plain'} is a file, not a folder")
    assert (tmp_path / "plain").read_text() == "x"


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("BAT_INIT_AGENT_MODEL", "a=b", "init.agent.model (configuration"),
        ("BAT_INIT_AGENT_MODEL_PROVIDER", "acme", "BAT_INIT_AGENT_MODEL_PROVIDER"),
        ("BAT_INIT_AGENT_CLIENTS", "bad name", "init.agent.clients (configuration"),
        ("BAT_INIT_AGENT_OUTPUT_DIR", "/dev/null", "init.agent.output_dir (configuration"),
    ],
)
def test_bad_settings_name_the_setting(tmp_path, bat, home, variable, value, words):
    result = bat("init.agent", "a", cwd=tmp_path, env={variable: value})
    one_error_line(result, words)
    assert list(tmp_path.iterdir()) == [home]


def test_bad_yaml_settings_name_the_setting(tmp_path, bat, home):
    (tmp_path / "bat.yaml").write_text("init:\n  agent:\n    clients: 5\n    port: yes\n")
    result = bat("init.agent", "a", cwd=tmp_path)
    assert result.code == 2 and "init.agent." in result.err and "Traceback" not in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bat.yaml", "home"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--port", "٣"], "--port: '٣' is not a port number (1-65535)"),
        (["--port", "0"], "--port: '0' is not a port number (1-65535)"),
        (["--port", "65536"], "--port: '65536' is not a port number (1-65535)"),
        (["--model", "x$y"], "--model: invalid model name"),
        (["-c", "a,,1b"], "--clients: invalid client name '1b'"),
        (["-c", ","], "--clients: invalid client names ',': no name between the commas"),
        (["--model-provider", ""], "--model-provider: unknown model provider"),
    ],
)
def test_bad_flags_name_the_flag(tmp_path, bat, home, args, words):
    one_error_line(bat("init.agent", "a", *args, "-o", str(tmp_path)), words)
    assert list(tmp_path.iterdir()) == [home]
