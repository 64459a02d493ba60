"""Where a started agent listens, ``${VAR}`` in eval.yaml, and blueprint agents.

* The agent's address is read as bat-adk reads it: its config file's ``endpoint``
  (``CONFIG_PATH`` from ``evaluation.agent.env``, else ``config.yaml``), with ``$VAR``
  expanded from the agent's environment, then ``.env``'s ``PORT``, then 9900.
* ``${VAR}`` / ``${VAR:-default}`` in eval.yaml's URLs and env maps come from the shell,
  then the agent's ``.env``; an unset one is an exit-2 error naming it, its key and line.
* A blueprint agent (a sub-folder of a repository, started from the repository root with
  ``CONFIG_PATH`` naming its config) is started with a copy of that config which sends its
  spans into the run folder.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bat.dotenv import read_dotenv
from bat.errors import InputError
from bat.evaluation.inputs.agent_settings import AgentSettings, agent_address
from bat.evaluation.inputs.config import load_config
from bat.evaluation.inputs.variables import UnsetVariable, expand, expand_like_bat_adk
from tests.evalkit import episodes, free_port, make_project, run_dirs

# Variable names no developer's shell sets, so "unset" means unset.
V = "BATTEST_SETTINGS_V"
W = "BATTEST_SETTINGS_W"


def show_json(bat, project: Path, **env: str) -> dict:
    result = bat("eval.show", "--json", cwd=project, env=env)
    assert result.code == 0, result.err
    return json.loads(result.out)


def agent_root(
    root: Path, *, config: str | None = None, dotenv: str | None = None, eval_yaml: str = ""
) -> Path:
    """An agent root with an optional config.yaml and .env, and eval/eval.yaml + a task."""
    (root / "eval" / "input").mkdir(parents=True, exist_ok=True)
    (root / "eval" / "input" / "tasks.json").write_text(
        json.dumps([{"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["hi"]}}])
    )
    (root / "eval" / "eval.yaml").write_text(eval_yaml or "evaluation: {}\n")
    if config is not None:
        (root / "config.yaml").write_text(config)
    if dotenv is not None:
        (root / ".env").write_text(dotenv)
    return root


# --- variables.expand: eval.yaml's ${VAR} -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${A}", {"A": "x"}, "x"),
        ("http://h:${P}/v1", {"P": "9431"}, "http://h:9431/v1"),
        ("${A:-d}", {}, "d"),
        ("${A:-d}", {"A": ""}, "d"),  # empty counts as unset for a default, as in a shell
        ("${A:-d}", {"A": "set"}, "set"),
        ("${A:-}", {}, ""),
        ("${A}", {"A": ""}, ""),  # set but empty, without a default: the empty string
        ("$A and $$ and ${1X}", {"A": "x"}, "$A and $$ and ${1X}"),  # only ${NAME} is ours
        ("${A}${B}", {"A": "1", "B": "2"}, "12"),
        ("${A}", {"A": "${B}"}, "${B}"),  # a value is never expanded again
    ],
)
def test_expand(text, env, expected):
    assert expand(text, env) == expected


def test_expand_unset_without_default_names_the_variable():
    with pytest.raises(UnsetVariable) as info:
        expand("http://127.0.0.1:${SOME_PORT}/x", {"OTHER": "1"})
    assert info.value.name == "SOME_PORT"


NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
PLAIN = st.text(st.characters(blacklist_characters="${}", blacklist_categories=("Cs",)))


@given(text=st.text(), env=st.dictionaries(NAMES, st.text()))
def test_expand_leaves_text_without_a_reference_alone(text, env):
    if "${" not in text:
        assert expand(text, env) == text


@given(
    before=PLAIN,
    after=PLAIN,
    name=NAMES,
    value=st.text(),
    default=st.none() | PLAIN,
    others=st.dictionaries(NAMES, st.text()),
)
def test_expand_one_reference(before, after, name, value, default, others):
    """A reference is replaced by its value verbatim, or by its default when the value is
    unset or empty; the text around it is kept as it is."""
    ref = "${" + name + ("" if default is None else ":-" + default) + "}"
    text = before + ref + after
    set_env = {**others, name: value}
    expected = value if (default is None or value) else default
    assert expand(text, set_env) == before + expected + after
    unset_env = {k: v for k, v in others.items() if k != name}
    if default is None:
        with pytest.raises(UnsetVariable):
            expand(text, unset_env)
    else:
        assert expand(text, unset_env) == before + default + after


ADK_TOKENS = st.sampled_from(
    ["$", "{", "}", "BATQ", "BATR", "_", "1", ":-", "x", "/", " ", "$$", "${", "é"]
)
ADK_ENV = st.dictionaries(
    st.sampled_from(["BATQ", "BATR", "BATQ_1", "BATQ1", "1", "x"]),
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=5),
)


@given(tokens=st.lists(ADK_TOKENS, max_size=12), env=ADK_ENV)
def test_expand_like_bat_adk_is_os_path_expandvars(tokens, env):
    """bat reads the agent's config.yaml with the very expansion bat-adk applies to it."""
    text = "".join(tokens)
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        expected = os.path.expandvars(text)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert expand_like_bat_adk(text, env) == expected


# --- agent_address: the port as bat-adk reads it ----------------------------------------


@pytest.mark.parametrize(
    ("config", "dotenv", "env", "address", "from_endpoint"),
    [
        # bat-cli's agents: the endpoint's port wins over .env's PORT.
        ("endpoint: {url: http://localhost, port: 9431}", "PORT=9900", {}, 9431, True),
        ("endpoint: {url: 'http://127.0.0.5:9555'}", "PORT=9900", {}, ("127.0.0.5", 9555), True),
        ("endpoint: {url: 'http://0.0.0.0:9123'}", "", {}, 9123, True),
        ("endpoint: {url: 'http://localhost:${P}'}", "P=9556", {}, 9556, True),
        ("endpoint: {url: 'http://localhost:$P'}", "P=9557", {}, 9557, True),
        ("endpoint: {port: $P}", "P=9558", {"P": "9559"}, 9559, True),
        ("endpoint: {port: '9432'}", "", {}, 9432, True),
        # Unset in the agent's environment: left literal, so not a port; .env's PORT is next.
        ("endpoint: {url: 'http://localhost:${P}'}", "PORT=9444", {}, 9444, False),
        ("endpoint: {port: 70000}", "PORT=9445", {}, 9445, False),
        ("endpoint: {port: true}", "", {}, 9900, False),
        (None, "PORT=9446", {}, 9446, False),
        (None, None, {}, 9900, False),
    ],
)
def test_agent_address(tmp_path, config, dotenv, env, address, from_endpoint):
    agent_root(tmp_path, config=config, dotenv=dotenv)
    found = read_dotenv(tmp_path / ".env")
    settings = AgentSettings.read(tmp_path, {**found, **env})
    expected = address if isinstance(address, tuple) else ("127.0.0.1", address)
    host, port, source = agent_address(settings, found)
    assert (host, port) == expected
    if from_endpoint:
        assert source == f"{tmp_path / 'config.yaml'}: endpoint"
    elif port != 9900:
        assert source == ".env: PORT"
    assert (settings.endpoint_source == f"{tmp_path / 'config.yaml'}: endpoint") is from_endpoint


def test_config_path_variables_come_from_dotenv_then_shell_then_agent_env(tmp_path, monkeypatch):
    """``$VAR`` in the agent's config is expanded from the environment it will get: its
    .env, overridden by the shell, overridden by evaluation.agent.env."""
    root = agent_root(tmp_path, config=f"endpoint:\n  url: http://localhost\n  port: ${{{V}}}\n")
    file = root / "eval" / "eval.yaml"
    monkeypatch.delenv(V, raising=False)

    def port() -> int:
        return load_config(file, base=root).agent_port

    (root / ".env").write_text(f"{V}=9101\nPORT=9900\n")
    assert port() == 9101
    monkeypatch.setenv(V, "9102")
    assert port() == 9102
    file.write_text(f"evaluation:\n  agent:\n    env: {{{V}: 9103}}\n")
    assert port() == 9103
    resolved = load_config(file, base=root)
    assert resolved.agent_url == "http://127.0.0.1:9103"
    assert resolved.agent_url_source == f"{root / 'config.yaml'}: endpoint"


def test_config_path_of_agent_env_names_the_config_file(tmp_path):
    root = agent_root(
        tmp_path,
        config="endpoint: {port: 9201}\n",
        dotenv="PORT=9900\n",
        eval_yaml="evaluation:\n  agent:\n    env: {CONFIG_PATH: conf/other.yaml}\n",
    )
    (root / "conf").mkdir()
    (root / "conf" / "other.yaml").write_text("endpoint: {url: 'http://localhost:9202'}\n")
    resolved = load_config(root / "eval" / "eval.yaml", base=root)
    assert resolved.agent_url == "http://127.0.0.1:9202"
    assert resolved.agent_url_source == f"{root / 'conf' / 'other.yaml'}: endpoint"


@pytest.mark.parametrize(
    ("dotenv", "url", "source"),
    [
        ("PORT=9447\n", "http://127.0.0.1:9447", ".env: PORT"),
        ("OTHER=1\n", "http://127.0.0.1:9900", "the default port"),
    ],
)
def test_the_source_of_the_url_is_the_one_that_gave_it(tmp_path, dotenv, url, source):
    root = agent_root(tmp_path, dotenv=dotenv)
    resolved = load_config(root / "eval" / "eval.yaml", base=root)
    assert resolved.agent_url == url
    assert resolved.agent_url_source.endswith(source)


def test_show_uses_the_endpoint_port_of_a_batcli_agent_not_dotenv(tmp_path, bat, home):
    """The real case: bat-cli made the agent with endpoint port 9431 and .env PORT=9900."""
    root = agent_root(
        tmp_path / "agent",
        config="agent_card: ./agent.json\nendpoint:\n  url: http://localhost\n  port: 9431\n",
        dotenv="PORT=9900\nMODEL=x\n",
    )
    data = show_json(bat, root)
    assert data["agent"]["url"] == "http://127.0.0.1:9431"
    assert data["agent"]["url_from"] == f"{root.resolve() / 'config.yaml'}: endpoint"
    text = bat("eval.show", cwd=root)
    assert text.code == 0, text.err
    assert f"http://127.0.0.1:9431 (from {root.resolve() / 'config.yaml'}: endpoint)" in text.out
    # evaluation.agent_url, when given, wins and says so.
    (root / "eval" / "eval.yaml").write_text("evaluation:\n  agent_url: http://127.0.0.1:9999/\n")
    data = show_json(bat, root)
    assert data["agent"]["url"] == "http://127.0.0.1:9999"
    assert data["agent"]["url_from"] == "eval/eval.yaml: evaluation.agent_url"


# --- ${VAR} in eval.yaml, through bat ----------------------------------------------------


EXPANDED_YAML = f"""evaluation:
  agent_url: http://127.0.0.1:${{{V}}}
  agent:
    env:
      FROM_DOTENV: ${{BATTEST_DOTENV_ONLY}}
      WITH_DEFAULT: ${{BATTEST_NOWHERE:-fallback}}
models:
  - provider: openai
    model: m
    base_url: ${{BATTEST_MODEL_URL:-http://127.0.0.1:1/v1}}
    env: {{KEY: "${{{W}}}"}}
judge:
  - model: j
    base_url: http://127.0.0.1:${{{V}}}/judge
    env: {{JK: "${{{W}}}"}}
"""


def test_variables_in_eval_yaml_come_from_the_shell_then_dotenv(tmp_path, bat, home):
    root = agent_root(
        tmp_path,
        eval_yaml=EXPANDED_YAML,
        dotenv=f"{V}=9301\nBATTEST_DOTENV_ONLY=dot\n{W}=secret-from-dotenv\n",
    )
    data = show_json(bat, root)
    assert data["agent"]["url"] == "http://127.0.0.1:9301"
    assert data["models"][0]["base_url"] == "http://127.0.0.1:1/v1"
    assert data["judges"][0]["base_url"] == "http://127.0.0.1:9301/judge"
    # Env maps are shown by name only.
    assert data["models"][0]["env"] == ["KEY"] and data["judges"][0]["env"] == ["JK"]
    assert "secret-from-dotenv" not in json.dumps(data)
    # The shell wins over .env.
    data = show_json(bat, root, **{V: "9302", "BATTEST_MODEL_URL": "http://127.0.0.1:2/v1"})
    assert data["agent"]["url"] == "http://127.0.0.1:9302"
    assert data["models"][0]["base_url"] == "http://127.0.0.1:2/v1"
    resolved = load_config(root / "eval" / "eval.yaml", base=root)
    assert resolved.evaluation.agent.env == {"FROM_DOTENV": "dot", "WITH_DEFAULT": "fallback"}
    assert resolved.config.models[0].env == {"KEY": "secret-from-dotenv"}
    assert resolved.config.judge[0].env == {"JK": "secret-from-dotenv"}


def test_variables_come_from_the_dotenv_of_the_agent_root(tmp_path, bat, home):
    """evaluation.agent.root names the agent's folder: its .env is the one read."""
    agent_root(
        tmp_path,
        eval_yaml=(
            "evaluation:\n  agent_url: http://127.0.0.1:${BATTEST_ROOT_PORT}\n"
            "  agent: {root: agent}\n"
        ),
    )
    (tmp_path / "agent").mkdir()
    (tmp_path / ".env").write_text("BATTEST_ROOT_PORT=1111\n")  # not the agent's
    (tmp_path / "agent" / ".env").write_text("BATTEST_ROOT_PORT=9451\n")
    assert show_json(bat, tmp_path)["agent"]["url"] == "http://127.0.0.1:9451"


def test_only_urls_and_env_maps_are_expanded(tmp_path, bat, home):
    root = agent_root(
        tmp_path,
        eval_yaml="evaluation:\n  run_name: 'cost ${BATTEST_NOWHERE}'\n  agent_url: http://127.0.0.1:9\n",
    )
    data = show_json(bat, root)
    assert data["run_name"] == "cost ${BATTEST_NOWHERE}"


def test_an_unset_variable_is_an_error_naming_it_its_key_and_line(tmp_path, bat, home):
    root = agent_root(tmp_path, eval_yaml=EXPANDED_YAML.replace(V, "BATTEST_UNSET_PORT"))
    result = bat("eval.show", cwd=root)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    problems = [line for line in result.err.splitlines() if "is not set" in line]
    assert problems == [
        "  - eval/eval.yaml: evaluation.agent_url (line 2): ${BATTEST_UNSET_PORT} is not set "
        "in the shell or the agent's .env (or write ${BATTEST_UNSET_PORT:-default})",
        "  - eval/eval.yaml: evaluation.agent.env.FROM_DOTENV (line 5): "
        "${BATTEST_DOTENV_ONLY} is not set in the shell or the agent's .env "
        "(or write ${BATTEST_DOTENV_ONLY:-default})",
        "  - eval/eval.yaml: models[0].env.KEY (line 11): ${BATTEST_SETTINGS_W} is not set "
        "in the shell or the agent's .env (or write ${BATTEST_SETTINGS_W:-default})",
        "  - eval/eval.yaml: judge[0].base_url (line 14): ${BATTEST_UNSET_PORT} is not set "
        "in the shell or the agent's .env (or write ${BATTEST_UNSET_PORT:-default})",
        "  - eval/eval.yaml: judge[0].env.JK (line 15): ${BATTEST_SETTINGS_W} is not set "
        "in the shell or the agent's .env (or write ${BATTEST_SETTINGS_W:-default})",
    ]
    # A single judge (a mapping, not a list) is named as the file has it.
    (root / "eval" / "eval.yaml").write_text(
        "judge:\n  model: j\n  env:\n    K: ${BATTEST_UNSET_K}\n"
    )
    with pytest.raises(InputError) as info:
        load_config(root / "eval" / "eval.yaml", base=root)
    assert list(info.value.details) == [
        f"{root / 'eval' / 'eval.yaml'}: judge.env.K (line 4): ${{BATTEST_UNSET_K}} is not set "
        "in the shell or the agent's .env (or write ${BATTEST_UNSET_K:-default})"
    ]


def test_run_json_keeps_only_the_names_of_env_maps(tmp_path, bat, home):
    """Expanded values reach the agent, and no value of any env map is written to run.json."""
    secret = "sk-BATTEST-not-a-real-key-31337"
    project = make_project(
        tmp_path,
        [{"id": "model", "turns": ["MODEL?"], "expected": {"output_must_contain": ["model: m1/"]}}],
        agent_env={"API_KEY": f"${{{W}}}", "ANSWER_IN": "${BATTEST_NOWHERE:-status}"},
        models=[
            {
                "provider": "openai",
                "model": "m1",
                "env": {"MODEL_PROVIDER": f"${{{V}}}", "OPENAI_API_KEY": f"${{{W}}}"},
            }
        ],
    )
    config = yaml.safe_load((project / "eval" / "eval.yaml").read_text())
    config["judge"] = {"model": "j", "env": {"JUDGE_KEY": f"${{{W}}}"}}
    (project / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    (project / ".env").write_text(f"{W}={secret}\n")
    result = bat("eval.run", cwd=project, env={V: "prov-from-shell"})
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    (episode,) = episodes(run_dir, "openai_m1").values()
    # The model's env reached the agent, expanded from the shell.
    assert episode["final_output"] == "model: m1/prov-from-shell"
    assert episode["verdict"]["passed"] is True
    record = json.loads((run_dir / "run.json").read_text())
    assert record["config"]["evaluation"]["agent"]["env"] == ["ANSWER_IN", "API_KEY", "PYTHONPATH"]
    assert record["config"]["models"][0]["env"] == ["MODEL_PROVIDER", "OPENAI_API_KEY"]
    assert record["config"]["judge"][0]["env"] == ["JUDGE_KEY"]
    assert "prov-from-shell" not in (run_dir / "run.json").read_text()
    for path in (project / "eval" / "output").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".yaml", ".log", ".jsonl", ".html"):
            assert secret not in path.read_text(errors="replace"), path


# --- blueprint agents ------------------------------------------------------------------


def test_blueprint_agent_started_from_the_repository_root(tmp_path, bat, home):
    """An agent in agents/weather/ of a repository, started from the repository root with
    CONFIG_PATH naming its config: its port is that config's, its spans come into the run
    folder through a copy of that config, and the repository's files stay as they are."""
    repo = tmp_path / "repo"
    port, other_port = free_port(), free_port()
    make_project(
        repo,
        "tool_tasks.json",
        agent="tool_agent",
        agent_env={"CONFIG_PATH": "agents/weather/config.yaml", "NO_STREAM_METADATA": "1"},
    )
    config = yaml.safe_load((repo / "eval" / "eval.yaml").read_text())
    del config["evaluation"]["agent_url"]  # the port comes from the agent's own config
    (repo / "eval" / "eval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    sub = repo / "agents" / "weather"
    sub.mkdir(parents=True)
    own_config = (
        "# the weather agent's own config\n"
        "checkpoints: true\n"
        f"endpoint:\n  url: http://localhost\n  port: {port}\n"
        "telemetry:\n  output:\n    - type: local\n      file_path: weather-spans.jsonl\n"
    )
    (sub / "config.yaml").write_text(own_config)
    (repo / "config.yaml").write_text(f"endpoint: {{port: {other_port}}}\n")  # not this one
    (repo / ".env").write_text(f"PORT={other_port}\n")

    data = show_json(bat, repo)
    assert data["agent"]["url"] == f"http://127.0.0.1:{port}"
    assert data["agent"]["url_from"] == f"{repo.resolve() / 'agents/weather/config.yaml'}: endpoint"

    result = bat("eval.run", cwd=repo)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(repo)
    assert json.loads((run_dir / "run.json").read_text())["agent_url"] == (
        f"http://127.0.0.1:{port}"
    )
    assert f"agent ready at http://127.0.0.1:{port}" in result.out
    found = episodes(run_dir)
    failing = {n: e["verdict"]["reason"] for n, e in found.items() if not e["verdict"]["passed"]}
    assert failing == {}
    # Without stream metadata, tool calls and usage can only have come from the span file.
    tasks = json.loads((repo / "eval" / "input" / "tasks.json").read_text())
    tool_tasks = {t["id"] for t in tasks if t["expected"].get("tool_calls")}
    assert len(tool_tasks) >= 5
    for name, episode in found.items():
        if episode["task_id"] in tool_tasks:
            assert episode["trace"]["tool_calls"], name
            assert episode["trace"]["tool_source"] == "spans", name
    assert all(e["trace"]["usage_source"] == "spans" for e in found.values())
    assert all(e["trace"]["usage"]["total_tokens"] > 0 for e in found.values())
    # The copy the agent ran with sends spans into the run folder; the original is as it was.
    copy = yaml.safe_load((run_dir / "agent-default" / "agent-config.yaml").read_text())
    spans = run_dir / "agent-default" / "spans.jsonl"
    assert copy["telemetry"]["output"] == [{"type": "local", "file_path": str(spans.resolve())}]
    assert copy["endpoint"] == {"url": "http://localhost", "port": port}
    assert spans.stat().st_size > 0
    assert (sub / "config.yaml").read_text() == own_config
    assert sorted(p.name for p in sub.iterdir()) == ["config.yaml"]
    assert not list(repo.glob("*.jsonl"))


def test_a_missing_config_path_file_is_refused_by_eval_run(tmp_path, bat, home):
    root = agent_root(
        tmp_path,
        eval_yaml="evaluation:\n  agent:\n    env: {CONFIG_PATH: agents/a/config.yaml}\n",
        dotenv="PORT=9448\n",
    )
    # eval.run refuses to start an agent without it, and eval.show says so alike.
    for command in ("eval.run", "eval.show"):
        refused = bat(command, cwd=root)
        assert refused.code == 2 and "CONFIG_PATH names" in refused.err
        assert "agents/a/config.yaml, which does not exist" in refused.err
    (root / "agents" / "a").mkdir(parents=True)
    (root / "agents" / "a" / "config.yaml").write_text("endpoint: {port: '${A_PORT}'}\n")
    (root / ".env").write_text("PORT=9448\nA_PORT=9449\n")
    data = show_json(bat, root)
    assert data["agent"]["url"] == "http://127.0.0.1:9449"
    assert re.search(r"agents/a/config\.yaml: endpoint$", data["agent"]["url_from"])


def test_the_port_set_for_the_agent_in_eval_yaml_comes_before_dotenv(tmp_path, bat, home):
    root = agent_root(
        tmp_path, eval_yaml="evaluation:\n  agent:\n    env: {PORT: 9461}\n", dotenv="PORT=9448\n"
    )
    data = show_json(bat, root)
    assert data["agent"]["url"] == "http://127.0.0.1:9461"
    assert data["agent"]["url_from"].endswith("eval.yaml: evaluation.agent.env: PORT")


def test_a_port_left_to_bat_is_no_problem_of_the_agents_config(tmp_path):
    """The scaffold's (and the demo's) ``port: ${PORT}`` with PORT unset: bat sets PORT
    when it starts the agent, so it is no error (an outside probe found ``bat doctor``
    failing the demo on it); a word there still is one."""
    agent_root(tmp_path, config="endpoint: {port: '${PORT}'}", dotenv=None)
    settings = AgentSettings.read(tmp_path, {})
    assert settings.endpoint_problem is None and settings.endpoint_port is None
    agent_root(tmp_path, config="endpoint: {port: '${OTHER}'}", dotenv=None)
    assert "is not a port number" in AgentSettings.read(tmp_path, {}).endpoint_problem
