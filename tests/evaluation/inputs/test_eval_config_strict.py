"""eval.yaml values mean what they say; ports and env maps are checked before a run starts.

Every bad value fails ``bat eval.run`` with exit 2, one ``bat: error:`` headline naming
the file, the key and its line, no traceback, no run folder, and at once (a bad port
never makes bat wait for an agent that cannot answer).
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.locate import dotted, line_index
from tests.evalkit import make_project, run_dirs

TASKS = [{"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["hi"]}}]
EVAL_YAML = Path("eval") / "eval.yaml"


def edit(project: Path, path: tuple, value) -> str:
    """Set ``path`` of the project's eval.yaml to ``value`` (``...`` removes it), written
    by PyYAML as a user's file would hold it; returns the file's text."""
    file = project / EVAL_YAML
    data = yaml.safe_load(file.read_text())
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if value is ...:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    file.write_text(text, encoding="utf-8")
    return text


def assert_refused(result, file: str, key: tuple, line: int, words: str) -> None:
    """Exit 2, one headline, the key and its line named with what is wrong, no traceback."""
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    assert result.err.startswith("bat: error:"), result.err
    assert result.err.count("bat: error:") == 1, result.err
    assert f"{file}: {dotted(key)} (line {line}): " in result.err, result.err
    assert words in result.err, result.err


def assert_nothing_started(project: Path) -> None:
    output = project / "eval" / "output"
    assert not run_dirs(project)
    assert not output.exists() or not any(output.iterdir())


# (key path set, value, key path named in the error, words of the error)
BAD_VALUES = [
    (("evaluation", "k"), True, None, "expected a whole number, got true"),
    (("evaluation", "k"), 2.0, None, "expected a whole number, got the number 2.0"),
    (("evaluation", "k"), "3", None, "write a plain number without quotes"),
    (("evaluation", "k"), 0, None, "greater than or equal to 1"),
    (("evaluation", "concurrency"), 10**30, None, "less than or equal to 1024"),
    (("evaluation", "turn_timeout_s"), math.inf, None, "expected a number of seconds"),
    (("evaluation", "turn_timeout_s"), math.nan, None, "expected a number of seconds"),
    (("evaluation", "turn_timeout_s"), 86_401, None, "less than or equal to 86400"),
    (("evaluation", "agent_startup_timeout_s"), -1, None, "greater than 0"),
    (("evaluation", "agent_shutdown_timeout_s"), 0, None, "greater than 0"),
    (("evaluation", "agent_startup_timeout_s"), "1e3", None, "got the text '1e3'"),
    (("evaluation", "qualitative"), "yes", None, "expected true or false, got the text 'yes'"),
    (("evaluation", "agent", "start"), "false", None, "expected true or false"),
    (("evaluation", "agent", "max_restarts"), True, None, "expected a whole number"),
    (("judge",), [], None, "an empty list"),
    (("judge",), {"model": "j", "timeout_s": math.inf}, ("judge", "timeout_s"), "seconds"),
    (("judge",), {"model": "j", "max_retries": False}, ("judge", "max_retries"), "whole number"),
    (("judge",), {"model": "j", "api_key_env": "MY KEY"}, ("judge", "api_key_env"), "variable"),
    (("judge",), {"model": "j", "base_url": "localhost:1"}, ("judge", "base_url"), "http(s)"),
    (
        ("judge",),
        {"model": "j", "prompts": {"relevance": "a", "response_relevance": "b"}},
        ("judge", "prompts"),
        "not both",
    ),
    (("evaluation", "agent", "env", "A"), "x\0y", ("evaluation", "agent", "env"), "NUL"),
    (("evaluation", "agent", "env", "A=B"), "x", ("evaluation", "agent", "env"), "variable name"),
    (("evaluation", "agent", "env", "A\0"), "x", ("evaluation", "agent", "env"), "variable name"),
    (
        ("models",),
        [{"provider": "p", "model": "m", "env": {"KEY": "v\0"}}],
        ("models", 0, "env"),
        "the value of KEY contains a NUL character",
    ),
    (
        ("models",),
        [{"provider": "p", "model": "m", "env": {"PORT": 9000}}],
        ("models", 0, "env"),
        "PORT cannot be set per model",
    ),
    (("models",), [{"provider": "p", "model": "m\0"}], ("models", 0, "model"), "NUL"),
    (("evaluation", "agent", "command"), "run\0", None, "NUL"),
    (("evaluation", "dataset"), "", None, "an empty text"),
    (("evaluation", "dataset"), "a\0b", None, "NUL"),
    (("evaluation", "extra_spans"), [None], ("evaluation", "extra_spans", 0), "got nothing"),
    (("evaluation", "agent", "spans_file"), "s.jsonl", ("evaluation", "agent"), "start: false"),
    (("evaluation", "agent_url"), "http://127.0.0.1:70000", None, "'70000' is not a port number"),
    (("evaluation", "agent_url"), "http://127.0.0.1:0", None, "'0' is not a port number (1-65535)"),
    (("evaluation", "agent_url"), "http://127.0.0.1:abc", None, "'abc' is not a port number"),
    (("evaluation", "agent_url"), "http://[::1", None, "not a URL"),
    (("evaluation", "agent", "env", "PORT"), 70000, ("evaluation", "agent", "env"), "'70000'"),
    (("evaluation", "agent", "env", "PORT"), 0, ("evaluation", "agent", "env"), "'0' is not"),
    (("evaluation", "agent", "env", "PORT"), "http", ("evaluation", "agent", "env"), "not a port"),
    (("evaluation", "agent", "env", "PORT"), 1, ("evaluation",), "agent_url has port"),
]


@pytest.mark.parametrize(
    ("key", "value", "named", "words"),
    BAD_VALUES,
    ids=[f"{dotted(k)}={v!r}" for k, v, _, _ in BAD_VALUES],
)
def test_a_bad_value_is_refused_before_a_run_folder_is_made(
    tmp_path, bat, home, key, value, named, words
):
    project = make_project(tmp_path, TASKS)
    text = edit(project, key, value)
    named = named or key
    started = time.monotonic()
    result = bat("eval.run", cwd=project)
    assert time.monotonic() - started < 15
    assert_refused(result, str(EVAL_YAML), named, line_index(text)[named], words)
    assert_nothing_started(project)


@pytest.mark.parametrize(
    ("dotenv", "line", "words"),
    [
        ("PORT=0\n", 1, "PORT (line 1): '0' is not a port number (1-65535)"),
        ("A=1\nPORT=70000\n", 2, "PORT (line 2): '70000' is not a port number"),
        ("PORT=-1\n", 1, "PORT (line 1): '-1' is not a port number"),
        ("PORT=abc\n", 1, "PORT (line 1): 'abc' is not a port number"),
        ("PORT=\u00b2\n", 1, "PORT (line 1): '\u00b2' is not a port number"),
        ("# ports\nPORT=9000\nPORT=99999\n", 3, "PORT (line 3): '99999'"),
        ("A=x\0y\n", 1, "A (line 1): contains a NUL byte"),
        ("B=1\nA B=x\n", 2, "(line 2): 'A B' is not a variable name"),
    ],
)
def test_a_bad_dotenv_of_the_agent_is_refused_at_once(tmp_path, bat, home, dotenv, line, words):
    """Without agent_url, bat reads the port from the agent's .env: PORT=0 must not make
    it wait for an agent it cannot reach, and a value no process can get is named."""
    project = make_project(tmp_path, TASKS)
    edit(project, ("evaluation", "agent_url"), ...)
    (project / ".env").write_text(dotenv, encoding="utf-8")
    started = time.monotonic()
    result = bat("eval.run", cwd=project)
    assert time.monotonic() - started < 10
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    assert result.err.startswith("bat: error:") and result.err.count("bat: error:") == 1
    where = (project / ".env").resolve()  # "FILE: KEY (line N)", or "FILE (line N)"
    assert f"{where}: {words}" in result.err or f"{where} {words}" in result.err, result.err
    assert_nothing_started(project)


def test_good_values_keep_their_meaning(tmp_path, bat, home):
    """What the checks allow still means what it says: YAML's unquoted yes is true, an
    int is a number of seconds, an empty PORT is unset, env values of any type are text."""
    project = make_project(tmp_path, TASKS)
    for key, value in [
        (("evaluation", "k"), 3),
        (("evaluation", "turn_timeout_s"), 86_400),
        (("evaluation", "agent_startup_timeout_s"), 0.5),
        (("evaluation", "agent_url"), ...),
        (("evaluation", "agent", "env", "PORT"), 9431),
        (("evaluation", "agent", "env", "DEBUG"), True),
        (("judge",), {"model": "j", "timeout_s": 5}),
    ]:
        edit(project, key, value)
    file = project / EVAL_YAML
    text = file.read_text().replace("start: true", "start: yes")  # YAML 1.1's true
    assert "start: yes" in text
    file.write_text(text)
    (project / ".env").write_text("PORT=\n")  # empty: unset, as in a shell
    result = bat("eval.show", "--json", cwd=project)
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    assert shown["k"] == 3 and shown["timeouts_s"]["turn"] == 86_400
    assert shown["timeouts_s"]["agent_startup"] == 0.5
    assert shown["agent"]["started_by_bat"] is True
    assert shown["agent"]["url"].endswith(":9431")
    assert shown["judges"][0]["timeout_s"] == 5


# --- random values in every field: the documented meaning, or exit 2 -----------------


def _count(low: int, high: int):
    return lambda v: type(v) is int and low <= v <= high


def _seconds(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and 0 < v <= 86_400


def _flag(v) -> bool:
    return type(v) is bool


def _env_value(v) -> bool:
    return v is None or type(v) in (bool, int, float) or (type(v) is str and "\0" not in v)


def _run_name(v) -> bool:
    if v is None:  # `run_name:` left empty: no name, the default
        return True
    return type(v) is str and 0 < len(v) <= 100 and bool(v.strip()) and v.isprintable()


def _command(v) -> bool:
    return type(v) is str and len(v) > 0 and "\0" not in v


# key path -> (is the value valid, where eval.show --json shows it, the meaning shown)
FIELDS = {
    ("evaluation", "k"): (_count(1, 1000), lambda d: d["k"], None),
    ("evaluation", "concurrency"): (_count(1, 1024), lambda d: d["concurrency"], None),
    ("evaluation", "turn_timeout_s"): (_seconds, lambda d: d["timeouts_s"]["turn"], None),
    ("evaluation", "agent_startup_timeout_s"): (
        _seconds,
        lambda d: d["timeouts_s"]["agent_startup"],
        None,
    ),
    ("evaluation", "agent_shutdown_timeout_s"): (
        _seconds,
        lambda d: d["timeouts_s"]["agent_shutdown"],
        None,
    ),
    ("evaluation", "qualitative"): (_flag, lambda d: d["qualitative"], None),
    ("evaluation", "run_name"): (_run_name, lambda d: d["run_name"], None),
    ("evaluation", "agent", "start"): (_flag, lambda d: d["agent"]["started_by_bat"], None),
    ("evaluation", "agent", "command"): (_command, lambda d: d["agent"]["command"], None),
    ("evaluation", "agent", "max_restarts"): (
        _count(0, 1000),
        lambda d: d["agent"]["max_restarts"],
        None,
    ),
    ("evaluation", "agent", "env", "X"): (
        _env_value,
        lambda d: "X" in d["agent"]["env"],
        lambda v: True,
    ),
    ("judge", "concurrency"): (_count(1, 256), lambda d: d["judges"][0]["concurrency"], None),
    ("judge", "max_retries"): (_count(0, 20), lambda d: d["judges"][0]["max_retries"], None),
    ("judge", "budget_chars"): (
        _count(500, 1_000_000),
        lambda d: d["judges"][0]["budget_chars"],
        None,
    ),
    ("judge", "timeout_s"): (_seconds, lambda d: d["judges"][0]["timeout_s"], None),
}
# Where an error is reported: the env map holds the check of its values.
REPORTED = {("evaluation", "agent", "env", "X"): ("evaluation", "agent", "env")}

SCALARS = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(-5, 2000),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["yes", "no", "false", "1", "0", "1e3", ".inf", "60", "0x10", "", "\0"]),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(key=st.sampled_from(sorted(FIELDS)), value=SCALARS)
def test_any_scalar_in_any_field_loads_as_documented_or_is_refused(tmp_path, bat, home, key, value):
    project = tmp_path / "p"
    if not project.exists():
        make_project(project, TASKS)
        edit(project, ("judge",), {"model": "j"})
    file = project / EVAL_YAML
    original = file.read_text()
    try:
        text = edit(project, key, value)
        written = yaml.safe_load(text)
        for part in key:
            written = written[part]  # the value as bat reads it back from the file
        valid, shown_at, meaning = FIELDS[key]
        result = bat("eval.show", "--json", cwd=project)
        if valid(written):
            assert result.code == 0, result.err
            shown = shown_at(json.loads(result.out))
            expected = (meaning or (lambda v: v))(written)
            assert shown == expected or (
                isinstance(expected, float) and math.isclose(shown, expected)
            )
        else:
            reported = REPORTED.get(key, key)
            assert_refused(result, str(EVAL_YAML), reported, line_index(text)[reported], "")
    finally:
        file.write_text(original)
    assert_nothing_started(project)


@pytest.mark.parametrize(
    "endpoint",
    ["{port: '\u00b2'}", "{url: 'http://[::1'}", "{url: 'http://localhost:0'}", "{port: 0}"],
)
def test_a_config_endpoint_that_is_no_port_is_a_warning_not_a_traceback(
    tmp_path, bat, home, endpoint
):
    """The agent's own config.yaml may hold a ${VAR} bat-adk leaves unset: its endpoint
    is a warning (the next source gives the port), never a crash nor port 0."""
    project = make_project(tmp_path, TASKS, config_yaml=f"endpoint: {endpoint}\n")
    edit(project, ("evaluation", "agent_url"), ...)
    result = bat("eval.show", "--json", cwd=project)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    said = r"(: '.+' is not a port number \(1-65535\)|: not a URL): bat waits on port 9900"
    assert re.search(said, result.err), result.err
    assert json.loads(result.out)["agent"]["url"] == "http://127.0.0.1:9900"
