"""``bat doctor`` cannot hang: what it reads is bounded, what it imports has a time limit.

Each hostile input is set up for real (a FIFO, a link to ``/dev/zero``, a file past the
limit, 100,000 levels of nesting, a plugin distribution whose import blocks) and the real
``bat`` runs as a process, so a hang is a time-out of this test (the process is killed),
never of the suite. The Docker config reader has a Hypothesis strategy of its own, with a
canary showing its check can fail.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bat.doctor import images as doctor_images
from bat.doctor.check import Check
from bat.evaluation.present import export as export_module
from tests.evaluation.present.plot.runkit import write_run
from tests.pythons import find_python

# A few seconds of interpreter start-up and doctor's own checks (uv's time-out is 5 s),
# far below a hang.
LIMIT_S = 30
SLEEPING_PLUGIN = "import time\ntime.sleep(3600)\n\ndef export(run, path):\n    pass\n"


@pytest.fixture(scope="module")
def python312() -> str:
    return find_python()


@pytest.fixture
def env(home, python312) -> dict[str, str]:
    """An empty HOME, and UV_PYTHON pointing at a Python 3.12 (uv's search of the
    machine's interpreters is most of doctor's time otherwise)."""
    return {"HOME": str(home), "UV_PYTHON": python312}


def doctor(bat, cwd: Path, env: dict[str, str], *args: str):
    """``bat doctor --json`` as a process: (exit status, {name: check}, seconds)."""
    started = time.monotonic()
    result = bat("doctor", "--json", *args, cwd=cwd, env=env, process=True, timeout=LIMIT_S)
    elapsed = time.monotonic() - started
    assert "Traceback" not in result.err, result.err
    checks = {check["name"]: check for check in json.loads(result.out)}
    return result.code, checks, elapsed


def hostile(kind: str, path: Path) -> str:
    """Make ``path`` a hostile file of ``kind``; the words the finding must contain."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
        return "is not a regular file"
    if kind == "device":
        path.symlink_to("/dev/zero")
        return "is not a regular file"
    if kind == "huge":
        path.write_bytes(b" " * (2 * 2**20))
        return "may be at most 1.0 MiB"
    path.write_text("[" * 100_000 + "]" * 100_000)  # deep
    return "nested too deeply"


@pytest.mark.parametrize("kind", ["fifo", "device", "huge", "deep"])
def test_a_hostile_docker_config_is_a_finding_not_a_hang(kind, tmp_path, bat, home, env):
    words = hostile(kind, home / ".docker" / "config.json")
    code, checks, elapsed = doctor(bat, tmp_path, env, "--build")
    assert elapsed < LIMIT_S
    assert code == 1
    found = checks["docker config"]
    assert found["status"] == "fail" and words in found["detail"], found
    assert str(home / ".docker" / "config.json") in found["detail"]
    assert checks["docker engine"]["status"] == "skip"
    assert "not checked" in checks["docker engine"]["detail"]


def test_a_fifo_pyproject_does_not_hang_doctor(tmp_path, bat, env):
    os.mkfifo(tmp_path / "pyproject.toml")
    _, checks, elapsed = doctor(bat, tmp_path, env)
    assert elapsed < LIMIT_S
    assert checks["agent.json"]["status"] == "skip"  # not taken for an agent project


def test_a_fifo_agent_json_is_named_as_not_a_regular_file(tmp_path, bat, env):
    os.mkfifo(tmp_path / "agent.json")
    code, checks, _ = doctor(bat, tmp_path, env)
    assert code == 1
    assert "is not a regular file" in checks["agent.json"]["detail"], checks["agent.json"]


def _plugin_site(root: Path, body: str, name: str, exporter: str) -> Path:
    """A real installed distribution on a path folder (as tests/evaluation/present/
    test_export.py makes one), declaring ``name:export`` as the exporter ``exporter``."""
    site = root / "site"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(body, encoding="utf-8")
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[bat.exporters]\n{exporter} = {name}:export\n")
    return site


def test_a_plugin_whose_import_blocks_is_a_warning_not_a_hang(tmp_path, bat, env):
    site = _plugin_site(tmp_path, SLEEPING_PLUGIN, "sleepyplug", "sleepy")
    env = {**env, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    code, checks, elapsed = doctor(bat, tmp_path, env)
    assert elapsed < LIMIT_S
    assert code == 0  # a plugin is not required: a warning
    found = checks["exporter sleepy"]
    assert found["status"] == "warn", found
    assert "did not finish importing within 5 s" in found["detail"]
    assert "sleepyplug:export, from sleepyplug" in found["detail"]
    assert checks["exporter junit"]["status"] == "info"  # the others still listed


def test_eval_export_to_a_blocking_plugin_is_one_error_line(tmp_path, bat, env):
    site = _plugin_site(tmp_path, SLEEPING_PLUGIN, "sleepyplug", "sleepy")
    write_run(tmp_path, "20260101-000000-a", "openai:gpt-4.1-mini", {"a": "PPF"})
    out = tmp_path / "out.txt"
    started = time.monotonic()
    result = bat(
        "eval.export",
        "--run",
        str(tmp_path / "20260101-000000-a"),
        "--to",
        f"sleepy:{out}",
        cwd=tmp_path,
        env={**env, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])},
        process=True,
        timeout=LIMIT_S,
    )
    assert time.monotonic() - started < LIMIT_S
    assert result.code == 1, result.err
    assert result.err.strip().splitlines() == [
        "bat: error: exporter 'sleepy' (sleepyplug:export, from sleepyplug) did not finish "
        "importing within 5 s (its module blocks when imported)"
    ]
    assert not out.exists()


def test_a_plugin_that_exits_at_import_cannot_end_bat():
    """SystemExit raised by a plugin's module is its failure, not bat's exit."""
    from importlib.metadata import EntryPoint

    point = EntryPoint("quitter", "sys:exit", export_module.GROUP)
    entry = export_module._Entry(_Raises(point), "quitter-dist", "1")
    outcome = export_module._load_all({"quitter": entry})["quitter"]
    assert "cannot be loaded: SystemExit: 3" in outcome.message


class _Raises:
    """An entry point whose load raises SystemExit, as a plugin's module may."""

    def __init__(self, point):
        self.name, self.value = point.name, point.value

    def load(self):
        raise SystemExit(3)


# -- the Docker config reader, fuzzed ------------------------------------------------

CONFIG = {"auths": {"registry.example:5000": {"auth": "dXNlcjpwYXNz"}}, "credsStore": ""}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def docker_configs(draw) -> bytes:
    """A config.json as docker login writes it, mutated: values of the wrong type, keys
    dropped, bytes flipped or cut, deep nesting, duplicate keys, non-UTF-8."""
    doc = json.loads(json.dumps(CONFIG))
    choice = draw(st.integers(0, 5))
    if choice == 0:
        doc["auths"] = draw(json_values)
    elif choice == 1:
        doc[draw(st.sampled_from(["auths", "credsStore", "credHelpers", "proxies"]))] = draw(
            json_values
        )
    elif choice == 2:
        return draw(json_values.map(lambda value: json.dumps(value).encode()))
    elif choice == 3:
        return b"[" * draw(st.integers(1, 5_000)) + b"]"
    elif choice == 4:
        return b'{"auths": {}, "auths": {}}'
    data = json.dumps(doc).encode()
    cut = draw(st.integers(0, len(data)))
    return data[:cut] + draw(st.binary(max_size=8)) + data[cut:]


def read_and_look_up(folder: Path, data: bytes) -> Check | None:
    """Write ``data`` as the Docker config and run doctor's reader and login lookup;
    any exception escaping them is the fuzz check's failure."""
    (folder / "config.json").write_bytes(data)
    config, problem = doctor_images.read_docker_config(required=True)
    if problem is not None:
        assert config is None and problem.status == "fail" and problem.detail
        return problem
    from bat.doctor.check import Options

    options = Options(cwd=folder)
    return doctor_images._login_check(options, "registry.example:5000", None, config)


def fuzz_check(folder: Path, data: bytes) -> str | None:
    """None when the reader answered with a check, else what went wrong."""
    try:
        check = read_and_look_up(folder, data)
    except Exception as exc:  # what the fuzz check exists to catch
        return f"{type(exc).__name__}: {exc}"
    if not isinstance(check, Check):
        return f"not a check: {check!r}"
    return None


# As tests/fuzzkit.py's fuzz(): deterministic, no database, no deadline; FUZZ_SCALE=10
# for a deeper search.
FUZZ = settings(
    max_examples=max(1, int(60 * float(os.environ.get("FUZZ_SCALE", "1")))),
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


@FUZZ
@given(data=docker_configs())
def test_fuzz_docker_config_is_a_check_or_a_finding(data, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert fuzz_check(tmp_path, data) is None


def test_fuzz_check_catches_a_parser_that_raises(tmp_path, monkeypatch):
    """The canary: a broken parser (a bare ValueError) is reported by the same check."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))

    def broken(text, path, **kwargs):
        raise ValueError("broken parser")

    monkeypatch.setattr("bat.input_files.parse_json", broken)
    assert fuzz_check(tmp_path, json.dumps(CONFIG).encode()) == "ValueError: broken parser"
    assert fuzz_check(tmp_path, b"[]") == "ValueError: broken parser"
