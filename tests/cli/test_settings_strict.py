"""Every setting read strictly from every source: ``BAT_*`` variables, bat.yaml files, ``-f``.

Booleans are true/false, yes/no, on/off, 1/0 in any case and nothing else (Invoke alone
reads ``BAT_IMAGES_ACCEPT_NEW_HOST_KEY=false`` as *true*); numbers, ports and text are
checked too; a file may hold only bat's keys and Invoke's sections, each of its shape.
A refused value is one ``bat: error:`` line naming the setting and where it came from,
exit 2, before anything is written. The host-key tests use the real sshd of
.ci/services.sh (see tests/imagekit.py).
"""

from __future__ import annotations

import re
import shutil
import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, RootModel

from bat.cli.config import namespace_defaults
from bat.cli.settings import FALSE_WORDS, GROUPS, TRUE_WORDS, settings_model
from tests import fuzzkit as fk
from tests.conftest import run_bat
from tests.imagekit import closed_port, make_context, require, unique_repo

ONE_LINE = re.compile(r"bat: error: [^\n]+\n")


def one_error_line(result) -> str:
    """The stderr of a refused run: exactly one ``bat: error:`` line, exit 2."""
    assert result.code == 2, (result.code, result.err)
    assert ONE_LINE.fullmatch(result.err), result.err
    assert "Traceback" not in result.err
    return result.err


# -- the models cover every setting -------------------------------------------------


def leaves(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def model_keys(model, prefix=""):
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        nested = field.annotation
        mapping = isinstance(nested, type) and issubclass(nested, RootModel)  # eval.prices
        if isinstance(nested, type) and issubclass(nested, BaseModel) and not mapping:
            yield from model_keys(nested, f"{key}.")
        else:
            yield key


def test_the_models_hold_every_default_and_nothing_else():
    from bat.tasks import ns

    defaults = {key for key, _ in leaves(namespace_defaults(ns))}
    modelled = {key for group, model in GROUPS.items() for key in model_keys(model, f"{group}.")}
    # eval.prices: a mapping only a file holds, without a default (and no variable)
    assert modelled == defaults | {"eval.prices"}


def test_every_default_is_a_value_its_model_takes_unchanged():
    from bat.tasks import ns

    settings = namespace_defaults(ns)
    read = settings_model(settings).model_validate(settings).model_dump(by_alias=True)
    assert read["eval"].pop("prices") is None  # no default: bat.yaml's only
    assert {group: read[group] for group in settings} == settings


# -- booleans: the host-key trust setting, over a real sshd ----------------------------


@pytest.fixture(scope="module")
def sshd():
    return require("sshd")


def remote_build(sshd, ctx: Path, *more: str, env=None):
    args = ["build", "--host", sshd["BAT_CI_SSH_HOST"], "--identity", sshd["BAT_CI_SSH_KEY"]]
    return run_bat(*more, *args, "--repo", unique_repo("strict"), cwd=ctx, env=env, timeout=120)


@pytest.mark.parametrize("word", ["false", "False", "FALSE", "no", "off", "Off", "0", " no "])
def test_false_words_in_the_environment_keep_trust_on_first_use_off(tmp_path, home, sshd, word):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    result = remote_build(sshd, ctx, env={"BAT_IMAGES_ACCEPT_NEW_HOST_KEY": word})
    assert result.code == 1, result.err
    assert "is not in" in result.err and "--accept-new-host-key" in result.err
    assert not (home / ".ssh" / "known_hosts").exists()


@pytest.mark.parametrize(
    "layer",
    ["project", "user", "runtime"],
)
def test_quoted_false_in_a_file_keeps_trust_on_first_use_off(tmp_path, home, sshd, layer):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    content = "images:\n  accept_new_host_key: 'false'\n"
    extra: list[str] = []
    if layer == "project":
        (ctx / "bat.yaml").write_text(content)
    elif layer == "user":
        (home / ".bat.yaml").write_text(content)
    else:
        (tmp_path / "release.yaml").write_text(content)
        extra = ["-f", str(tmp_path / "release.yaml")]
    result = remote_build(sshd, ctx, *extra)
    assert result.code == 1, result.err
    assert "is not in" in result.err
    assert not (home / ".ssh" / "known_hosts").exists()


def test_a_true_word_in_the_environment_turns_trust_on_first_use_on(tmp_path, home):
    facts = require("sshd", "engine")
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    result = remote_build(facts, ctx, env={"BAT_IMAGES_ACCEPT_NEW_HOST_KEY": "Yes"})
    assert result.code == 0, result.err
    assert "Added the host key of" in result.out
    assert (home / ".ssh" / "known_hosts").read_text().strip()


@pytest.mark.parametrize("word", ["maybe", "ture", "", "2", "nein", "false!"])
def test_an_unknown_word_is_refused_before_connecting(tmp_path, home, word):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    result = run_bat(
        "build",
        "--host",
        f"127.0.0.1:{closed_port()}",
        cwd=ctx,
        env={"BAT_IMAGES_ACCEPT_NEW_HOST_KEY": word},
    )
    err = one_error_line(result)
    assert "BAT_IMAGES_ACCEPT_NEW_HOST_KEY (images.accept_new_host_key)" in err
    assert "expected true or false" in err
    assert not (home / ".ssh").exists() and not (ctx / ".bat").exists()


# -- other kinds from the environment --------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("BAT_INIT_AGENT_PORT", "abc", "'abc' is not a port number (1-65535)"),
        ("BAT_INIT_AGENT_PORT", "70000", "'70000' is not a port number (1-65535)"),
        ("BAT_INIT_AGENT_PORT", "0", "'0' is not a port number"),
        ("BAT_INIT_AGENT_PORT", "", "is not a port number"),
        ("BAT_INIT_AGENT_OUTPUT_DIR", "", "is empty"),
        ("BAT_INIT_AGENT_CLIENTS", "  ", "is empty"),
        ("BAT_INIT_AGENT_MODEL", "", "is empty"),
        ("BAT_INIT_AGENT_MODEL", "gpt\x1b[31m", "control character"),
        ("BAT_IMAGES_NO_CACHE", "nope", "expected true or false"),
    ],
)
def test_bad_variable_names_itself_and_writes_nothing(tmp_path, home, variable, value, words):
    setting = {
        "BAT_INIT_AGENT_PORT": "init.agent.port",
        "BAT_INIT_AGENT_OUTPUT_DIR": "init.agent.output_dir",
        "BAT_INIT_AGENT_CLIENTS": "init.agent.clients",
        "BAT_INIT_AGENT_MODEL": "init.agent.model",
        "BAT_IMAGES_NO_CACHE": "images.no_cache",
    }[variable]
    (home / ".bat.yaml").write_text("init: {agent: {port: 9001}}\n")
    result = run_bat("init.agent", "x", cwd=tmp_path, env={variable: value})
    err = one_error_line(result)
    assert err.startswith(f"bat: error: environment: {variable} ({setting}): ")
    assert words in err
    assert list(tmp_path.iterdir()) == [home]
    assert [p.name for p in home.iterdir()] == [".bat.yaml"]
    assert (home / ".bat.yaml").read_text() == "init: {agent: {port: 9001}}\n"


def test_empty_eval_file_variable_is_named(tmp_path, home):
    result = run_bat("eval.show", cwd=tmp_path, env={"BAT_EVAL_FILE": ""})
    err = one_error_line(result)
    assert "BAT_EVAL_FILE (eval.file): is empty" in err
    assert "is a directory" not in err


def test_every_command_checks_every_variable(tmp_path, home):
    """A bad BAT_* variable is found by any command, not only the one that reads it."""
    result = run_bat("version", cwd=tmp_path, env={"BAT_INIT_AGENT_PORT": "nine"})
    assert "BAT_INIT_AGENT_PORT" in one_error_line(result)


def test_good_variables_keep_their_meaning(tmp_path, home):
    env = {"BAT_INIT_AGENT_PORT": " 9123 ", "BAT_INIT_AGENT_MODEL_PROVIDER": "ollama"}
    result = run_bat("init.agent", "ok", cwd=tmp_path, env=env)
    assert result.code == 0, result.err
    dotenv = (tmp_path / "ok" / ".env").read_text()
    assert "PORT=9123\n" in dotenv and "MODEL_PROVIDER=ollama\n" in dotenv


def test_variables_of_keys_that_are_no_settings_are_not_read(tmp_path, home):
    """eval.run_dir is kept by the eval stages while a command line runs, and Invoke's
    own sections come from files only: their variables are left alone, like any BAT_*
    variable that names no setting."""
    env = {"BAT_EVAL_RUN_DIR": "", "BAT_TASKS_DEDUPE": "nah", "BAT_NOT_A_SETTING": ""}
    result = run_bat("version", cwd=tmp_path, env=env)
    assert result.code == 0, result.err


def test_every_problem_of_every_layer_is_told_at_once(tmp_path, home):
    """Several problems: one headline, then one located line each (files, variables)."""
    (home / ".bat.yaml").write_text("images:\n  no_cache: nah\n")
    (tmp_path / "bat.yaml").write_text("eval:\n  fiel: x\ninit:\n  agent:\n    port: 0\n")
    result = run_bat("version", cwd=tmp_path, env={"BAT_IMAGES_HOST": " "})
    assert result.code == 2
    assert result.err.splitlines() == [
        "bat: error: bat's settings have 4 problems",
        f"  - {home / '.bat.yaml'}: images.no_cache (line 2): expected true or false "
        "(also yes/no, on/off, 1/0), got 'nah'",
        f"  - {tmp_path / 'bat.yaml'}: eval.fiel (line 2): unknown setting "
        "(did you mean 'file'?) (eval has: file, image, charts, prices)",
        f"  - {tmp_path / 'bat.yaml'}: init.agent.port (line 5): '0' is not a port number "
        "(1-65535)",
        "  - environment: BAT_IMAGES_HOST (images.host): is empty (to use the default, "
        "leave the setting out or unset it)",
    ]


# -- files: structure and values -------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("eval: {file: null}\n", "eval.file (line 1): must have a value"),
        ("init: 5\n", "init (line 1): expected a mapping of keys, got the number 5"),
        ("eval: [1]\n", "eval (line 1): expected a mapping of keys, got a list"),
        (
            "eval:\n  fiel: x\n",
            "eval.fiel (line 2): unknown setting (did you mean 'file'?) "
            "(eval has: file, image, charts, prices)",
        ),
        ("eval:\n  run_dir: x\n", "eval.run_dir (line 2): unknown setting"),
        ("imagse:\n  host: x\n", "imagse (line 1): unknown section (did you mean 'images'?)"),
        ("project_stuff: 1\n", "project_stuff (line 1): unknown section"),
        ("init:\n  agent:\n    port: abc\n", "init.agent.port (line 3): 'abc' is not a port"),
        ("init:\n  agent:\n    port: true\n", "init.agent.port (line 3): True is not a port"),
        ("init:\n  agent: {model: 4}\n", "init.agent.model (line 2): expected text, got 4"),
        ("images:\n  no_cache: 'perhaps'\n", "images.no_cache (line 2): expected true or false"),
        ("images:\n  host: [a, b]\n", "images.host (line 2): expected text, got a list"),
        ("init: {agent: {clients: []}}\n", "init.agent.clients (line 1): is an empty list"),
        ("init: {agent: {clients: [a, 3]}}\n", "init.agent.clients (line 1): expected text"),
        ("docker: {registry: ''}\n", "docker.registry (line 1): is empty"),
        ("run: 5\n", "run (line 1): expected a mapping of keys, got the number 5"),
        ("run:\n  watchers: {a: 1}\n", "run.watchers (line 2): expected a single value"),
        ("tasks: {dedupe: nah}\n", "tasks.dedupe (line 1): expected true or false"),
    ],
)
def test_bad_project_file_names_file_and_key(tmp_path, home, content, words):
    (tmp_path / "bat.yaml").write_text(content)
    result = run_bat("init.agent", "x", cwd=tmp_path)
    err = one_error_line(result)
    assert err.startswith(f"bat: error: {tmp_path / 'bat.yaml'}: "), err
    assert words in err
    assert not (tmp_path / "x").exists()
    assert (tmp_path / "bat.yaml").read_text() == content


@pytest.mark.parametrize("layer", ["user", "runtime", "runtime-json"])
def test_user_and_dash_f_files_are_checked_alike(tmp_path, home, layer):
    if layer == "user":
        path, args = home / ".bat.yaml", []
        path.write_text("images:\n  accept_new_host_key: nah\n")
    elif layer == "runtime":
        path = tmp_path / "release.yaml"
        path.write_text("images:\n  accept_new_host_key: nah\n")
        args = ["-f", str(path)]
    else:
        path = tmp_path / "release.json"
        path.write_text('{"images": {"accept_new_host_key": "nah"}}')
        args = ["-f", str(path)]
    err = one_error_line(run_bat(*args, "version", cwd=tmp_path))
    line = " (line 1)" if layer == "runtime-json" else " (line 2)"
    assert err.startswith(f"bat: error: {path}: images.accept_new_host_key{line}: expected true")


def test_non_utf8_configuration_file_is_one_line(tmp_path, home):
    (home / ".bat.yaml").write_bytes(b"init:\n  agent:\n    model: caf\xe9\n")
    err = one_error_line(run_bat("version", cwd=tmp_path))
    assert f"{home / '.bat.yaml'}: not UTF-8 text" in err


def test_file_values_are_read_by_their_kind(tmp_path, home):
    """Quoted numbers and boolean words mean what they say; an empty section is empty."""
    (tmp_path / "bat.yaml").write_text(
        "init:\n  agent:\n    port: '9101'\n    model_provider: ollama\n"
        "    clients: [planner, critic]\n"
        "eval:\n"  # every key commented out: an empty section, not an error
        "images:\n  no_cache: 'off'\n  accept_new_host_key: 'NO'\n"
        "tasks:\n  dedupe: 'on'\n"  # Invoke's own section is allowed
    )
    result = run_bat("init.agent", "typed", cwd=tmp_path)
    assert result.code == 0, result.err
    dotenv = (tmp_path / "typed" / ".env").read_text()
    assert "PORT=9101\n" in dotenv and "MODEL_PROVIDER=ollama\n" in dotenv
    assert (tmp_path / "typed/src/llm_clients/critic_client.py").is_file()


# -- known_hosts and .env that are not UTF-8 -------------------------------------------


def test_known_hosts_that_is_not_utf8_is_one_line_and_kept(tmp_path, home):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    known = tmp_path / "known_hosts"
    content = b"[127.0.0.1]:2222 ssh-ed25519 AAAAC3Nza\xff\xfeC1lZDI1NTE5\n"
    known.write_bytes(content)
    result = run_bat(
        "build",
        "--host",
        f"127.0.0.1:{closed_port()}",
        "--accept-new-host-key",
        cwd=ctx,
        env={"BAT_IMAGES_KNOWN_HOSTS": str(known)},
    )
    err = one_error_line(result)
    assert err.startswith(f"bat: error: {known}: not a known_hosts file: not UTF-8 text")
    assert known.read_bytes() == content


def test_dotenv_of_the_context_that_is_not_utf8_is_one_line(tmp_path, home):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    (ctx / ".env").write_bytes(b"BAT_DOCKER_REPO=caf\xe9\n")
    err = one_error_line(run_bat("build", cwd=ctx))
    assert ".env" in err and "not UTF-8 text" in err


# -- property: any value, any source: its documented meaning or one clean error -------

BOOLEANS = {
    "BAT_IMAGES_ACCEPT_NEW_HOST_KEY": "images.accept_new_host_key",
    "BAT_IMAGES_NO_CACHE": "images.no_cache",
}
TEXTS = {
    "BAT_EVAL_FILE": "eval.file",
    "BAT_IMAGES_HOST": "images.host",
    "BAT_INIT_AGENT_MODEL": "init.agent.model",
}
PORTS = {"BAT_INIT_AGENT_PORT": "init.agent.port"}
CONTROL = {chr(code) for code in [*range(0x20), *range(0x7F, 0xA0), 0xFFFE, 0xFFFF]}


def accepted(variable: str, value: str) -> bool:
    """What docs/configuration.md promises for a value of ``variable``."""
    if variable in BOOLEANS:
        return value.strip().lower() in (*TRUE_WORDS, *FALSE_WORDS)
    if variable in PORTS:
        digits = value.strip()
        return bool(re.fullmatch(r"[+-]?[0-9]+", digits)) and 1 <= int(digits) <= 65535
    return bool(value.strip()) and not (set(value) & CONTROL)


env_values = st.one_of(
    st.sampled_from(["true", "FALSE", "On", "0", "1", "yes", "9900", "", " ", "x y", "+80"]),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=12,
    ),
    st.text(alphabet=string.digits + "-+ ", max_size=7),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(variable=st.sampled_from([*BOOLEANS, *TEXTS, *PORTS]), value=env_values)
def test_any_environment_value_is_read_as_documented_or_refused(tmp_path, home, variable, value):
    result = run_bat("version", cwd=tmp_path, env={variable: value})
    if accepted(variable, value):
        assert result.code == 0, (variable, value, result.err)
    else:
        err = one_error_line(result)
        setting = {**BOOLEANS, **TEXTS, **PORTS}[variable]
        assert f"environment: {variable} ({setting}): " in err


yaml_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10, max_value=70000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10),
    st.sampled_from(["yes", "Off", "9900", " 80 ", ""]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "file"]), st.integers(), max_size=1),
)
FILE_KEYS = [
    ("images", "accept_new_host_key"),
    ("init", "agent", "port"),
    ("eval", "file"),
    ("images", "host"),
    ("eval", "fiel"),
    ("imagse", "host"),
]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keys=st.sampled_from(FILE_KEYS), value=yaml_values)
def test_any_bat_yaml_value_is_read_as_documented_or_refused(tmp_path, home, keys, value):
    tree: object = value
    for key in reversed(keys):
        tree = {key: tree}
    path = tmp_path / "bat.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    result = run_bat("version", cwd=tmp_path)
    if result.code == 0:
        assert documented_file_value(keys, value), (keys, value)
    else:
        err = one_error_line(result)
        dotted = ".".join(keys)
        assert err.startswith(f"bat: error: {path}: "), err
        # The deepest key the file got wrong is named: the whole path, or the section.
        assert re.match(rf"bat: error: {re.escape(str(path))}: {re.escape(dotted)}", err) or (
            keys[0] == "imagse" and ": imagse (line 1): unknown section" in err
        ), err
        assert not documented_file_value(keys, value), (keys, value, err)


def documented_file_value(keys: tuple[str, ...], value: object) -> bool:
    """Whether docs/configuration.md says bat takes ``value`` at ``keys`` in a file."""
    if keys in {("eval", "fiel"), ("imagse", "host")}:
        return False
    if keys == ("images", "accept_new_host_key"):
        if isinstance(value, bool) or (type(value) is int and value in (0, 1)):
            return True
        words = (*TRUE_WORDS, *FALSE_WORDS)
        return isinstance(value, str) and value.strip().lower() in words
    if keys == ("init", "agent", "port"):
        if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
            value = int(value.strip())
        return type(value) is int and 1 <= value <= 65535
    if value is None:
        return keys == ("images", "host")  # optional: null means "not set"
    return isinstance(value, str) and bool(value.strip()) and not (set(value) & CONTROL)


# -- property: any bat.yaml and any BAT_* values, run in-process ------------------------

SETTING_NAMES = sorted(
    {part for model in GROUPS.values() for key in model_keys(model) for part in key.split(".")}
    | set(GROUPS)
    | {"run", "echo", "env", "watchers", "tasks", "dedupe", "runners", "local", "run_dir"}
)
keys = st.one_of(
    st.sampled_from(SETTING_NAMES), fk.weird_text, st.integers(), st.booleans(), st.none()
)
nodes = st.recursive(
    fk.weird_scalar,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=12,
)
documents = st.one_of(nodes, st.dictionaries(keys, nodes, max_size=5))


def setting_variable_names() -> list[str]:
    """``BAT_INIT_AGENT_PORT``, ...: every key of the defaults, as docs/configuration.md
    names its variable (the run-time key eval.run_dir too, which is not read)."""
    from bat.tasks import ns

    keys = leaves(namespace_defaults(ns))
    return sorted("BAT_" + key.replace(".", "_").upper() for key, _ in keys)


variables = st.dictionaries(
    st.sampled_from([*setting_variable_names(), "BAT_RUN_ECHO", "BAT_NOT_A_SETTING"]),
    fk.weird_text.filter(lambda value: "\x00" not in value),
    max_size=3,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(document=documents, raw=st.booleans(), data=st.data(), env=variables)
def test_any_settings_are_taken_or_refused_in_one_located_line(document, raw, data, env):
    """Arbitrary YAML as ./bat.yaml (also broken at the byte level) and arbitrary BAT_*
    values: exit 0, or exit 2 with one ``bat: error:`` headline where every problem
    names the file or the variable; never a traceback, nothing written outside."""
    text = fk.to_yaml(document)
    if raw:
        text = data.draw(fk.byte_mutations(text))
    root = Path(tempfile.mkdtemp(prefix="settings-"))
    try:
        (root / "home").mkdir()
        (root / "project").mkdir()
        path = root / "project" / "bat.yaml"
        path.write_bytes(text)
        outcome = fk.run_in_process(["version"], cwd=root / "project", scratch=root, env=env)
        what = f"bat.yaml: {text[:400]!r}\nenvironment: {env!r}"
        fk.check_outcome(outcome, what)
        lines = outcome.err.splitlines()
        if outcome.code == 2:
            headline = lines[0].removeprefix("bat: error: ")
            problems = [line.removeprefix("  - ") for line in lines[1:]] or [headline]
            for problem in problems:
                assert problem.startswith((str(path), "environment: BAT_")), what
        else:
            assert outcome.out.startswith("bat-cli "), what
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- a program built on bat, with a group of its own ------------------------------------


def own_program():
    """``BatProgram(namespace=...)`` with a ``deploy`` group whose task prints its settings."""
    from invoke import Collection, task

    from bat.cli.program import BatProgram

    @task
    def show(c):
        print(sorted(c.config.deploy.items()))

    deploy = Collection("deploy", show)
    deploy.configure({"deploy": {"replicas": 2, "dry": False, "ratio": 0.5, "target": None}})
    return BatProgram(namespace=Collection(deploy))


def test_a_group_of_another_program_is_typed_by_its_defaults(tmp_path, home, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bat.yaml").write_text("deploy:\n  replicas: '3'\n  dry: 'on'\n")
    monkeypatch.setenv("BAT_DEPLOY_TARGET", "prod")
    assert own_program().run(["bat", "deploy.show"], exit=False) == 0
    shown = "[('dry', True), ('ratio', 0.5), ('replicas', 3), ('target', 'prod')]"
    assert capsys.readouterr().out.strip() == shown

    (tmp_path / "bat.yaml").write_text("deploy:\n  ratio: .inf\n  replica: 3\ninit: {}\n")
    assert own_program().run(["bat", "deploy.show"], exit=False) == 2
    assert capsys.readouterr().err.splitlines()[1:] == [
        f"  - {tmp_path / 'bat.yaml'}: deploy.ratio (line 2): expected a finite number, got inf",
        f"  - {tmp_path / 'bat.yaml'}: deploy.replica (line 3): unknown setting (did you mean "
        "'replicas'?) (deploy has: replicas, dry, ratio, target)",
        f"  - {tmp_path / 'bat.yaml'}: init (line 4): unknown section "
        "(bat's sections: deploy; Invoke's: run, runners, sudo, tasks, timeouts)",
    ]
