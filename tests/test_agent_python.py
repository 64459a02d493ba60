"""``bat.agent_python``: the Python uv is given for an agent, found without downloading.

The machines are real folders in tmp_path: ``PATH`` folders, a pyenv and an asdf tree,
/usr/local/bin and /opt stand-ins, holding small executable scripts that answer the
finder's version probe as an interpreter would (and the machine's own interpreters,
linked in, where the test needs a Python that really runs). uv is the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from bat import agent_python
from bat.agent_python import (
    Interpreter,
    NoAgentPython,
    allows,
    candidates,
    find_agent_python,
    newest,
    parse_probe,
    parse_requirement,
    project_requirement,
    runs_uv,
    suggested_minor,
)
from bat.errors import InputError
from bat.uv_binary import find_uv
from tests.evalkit import make_project, run_dirs
from tests.pythons import find_python, python_version


def fake_python(path: Path, version: str, *, kind: str = "cpython") -> Path:
    """An executable that answers the finder's probe as Python ``version`` would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    words = " ".join(version.split("."))
    path.write_text(f'#!/bin/sh\necho "{kind} {words}"\necho "$0"\n')
    path.chmod(0o755)
    return path


def broken_python(path: Path, body: str = "exit 127") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def project(root: Path, requires: str | None = ">=3.12") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    line = f'requires-python = "{requires}"\n' if requires is not None else ""
    (root / "pyproject.toml").write_text(f'[project]\nname = "a"\nversion = "1"\n{line}')
    return root


@pytest.fixture
def machine(tmp_path, home, monkeypatch):
    """An empty machine: its HOME, one PATH folder, no /usr/local or /opt Pythons (the
    real ones are swapped for folders of tmp_path)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    places = (
        (str(tmp_path / "usr-local" / "bin"), "/usr/local/bin"),
        (str(tmp_path / "opt" / "*" / "bin"), "/opt"),
    )
    monkeypatch.setattr(agent_python, "SYSTEM_PLACES", places)
    return {"HOME": str(home), "PATH": str(bin_dir)}


def test_newest_allowed_of_path_pyenv_asdf_and_opt(tmp_path, machine):
    home = Path(machine["HOME"])
    fake_python(tmp_path / "bin" / "python3", "3.11.9")
    fake_python(home / ".pyenv" / "versions" / "3.12.4" / "bin" / "python3", "3.12.4")
    fake_python(home / ".asdf" / "installs" / "python" / "3.13.1" / "bin" / "python3", "3.13.1")
    fake_python(tmp_path / "opt" / "py314" / "bin" / "python3.14", "3.14.0")
    root = project(tmp_path / "agent", ">=3.12,<3.14")
    found = find_agent_python(root, machine)
    assert (str(found.interpreter.version), found.where) == ("3.13.1", "asdf")
    assert found.env == {"UV_PYTHON": found.interpreter.path, "UV_PYTHON_DOWNLOADS": "never"}
    line = found.line()
    assert line.startswith("the agent's Python: 3.13.1 (") and "\n" not in line
    assert "found in asdf; agent/pyproject.toml requires-python <3.14,>=3.12" in line
    opened = find_agent_python(project(tmp_path / "open", ">=3.12"), machine)
    assert (str(opened.interpreter.version), opened.where) == ("3.14.0", "/opt")


def test_pyenv_root_usr_local_and_the_first_of_equals(tmp_path, machine):
    pyenv = tmp_path / "elsewhere"
    fake_python(pyenv / "versions" / "3.12.1" / "bin" / "python3.12", "3.12.1")
    fake_python(tmp_path / "usr-local" / "bin" / "python3.12", "3.12.1")
    env = {**machine, "PYENV_ROOT": str(pyenv)}
    found = find_agent_python(project(tmp_path / "agent"), env)
    assert found.where == "pyenv"  # pyenv is looked in before /usr/local
    assert found.interpreter.path == str(pyenv / "versions" / "3.12.1" / "bin" / "python3.12")
    del env["PYENV_ROOT"]
    assert find_agent_python(project(tmp_path / "agent"), env).where == "/usr/local/bin"


def test_shims_broken_and_garbage_interpreters_are_passed_over(tmp_path, machine):
    shims = tmp_path / "pyenv" / "shims"
    fake_python(shims / "python3.14", "3.14.0")  # a shim stands for a version: not taken
    broken_python(tmp_path / "bin" / "python3.13")  # pyenv: python3.13: command not found
    broken_python(tmp_path / "bin" / "python3", 'echo "not a version"')
    fake_python(tmp_path / "bin" / "python3.12", "3.12.7")
    (tmp_path / "bin" / "python3.15").symlink_to(tmp_path / "nowhere")  # a dangling link
    (tmp_path / "bin" / "pythonista").write_text("")  # not a Python's name
    env = {**machine, "PATH": f"{shims}{os.pathsep}{tmp_path / 'bin'}"}
    found = find_agent_python(project(tmp_path / "agent"), env)
    assert (str(found.interpreter.version), found.where) == ("3.12.7", "PATH")
    assert [path for path, _ in candidates(env)] == [
        str(tmp_path / "bin" / name) for name in ("python3", "python3.12", "python3.13")
    ]


def test_none_allowed_is_one_line_naming_what_was_found_and_the_fix(tmp_path, machine):
    fake_python(tmp_path / "bin" / "python3", "3.11.2")
    fake_python(tmp_path / "bin" / "pypy3", "3.10.14", kind="pypy")  # not a python name
    fake_python(Path(machine["HOME"]) / ".pyenv/versions/pypy/bin/python", "3.10.14", kind="pypy")
    with pytest.raises(NoAgentPython) as caught:
        find_agent_python(project(tmp_path / "agent", ">=3.12"), machine)
    error = caught.value
    assert error.exit_code == 1 and "\n" not in error.message
    assert "agent/pyproject.toml requires-python >=3.12" in error.detail
    assert "found only pypy 3.10.14, 3.11.2" in error.detail
    assert "uv may not download one" in error.detail
    assert "pyenv install 3.12" in error.fix and "UV_PYTHON" in error.fix
    assert error.message == f"{error.detail}: {error.fix}"


def test_uv_python_is_used_as_set_or_refused(tmp_path, machine):
    old = fake_python(tmp_path / "bin" / "python3", "3.11.2")
    chosen = fake_python(tmp_path / "mine" / "python", "3.12.0")
    fake_python(Path(machine["HOME"]) / ".pyenv/versions/3.13.0/bin/python3", "3.13.0")
    root = project(tmp_path / "agent")
    found = find_agent_python(root, {**machine, "UV_PYTHON": str(chosen)})
    assert (found.interpreter.path, found.where) == (str(chosen), "UV_PYTHON")
    assert "from UV_PYTHON" in found.line()
    with pytest.raises(NoAgentPython, match=r"UV_PYTHON=.* is Python 3\.11\.2 .*>=3\.12"):
        find_agent_python(root, {**machine, "UV_PYTHON": str(old)})
    with pytest.raises(NoAgentPython, match="names no Python that runs here"):
        find_agent_python(root, {**machine, "UV_PYTHON": str(tmp_path / "none" / "python")})
    # set but empty is unset: the search goes on
    assert find_agent_python(root, {**machine, "UV_PYTHON": " "}).where == "pyenv"


def test_what_the_project_allows(tmp_path):
    assert project_requirement(None) == (SpecifierSet(">=3.12"), "bat-adk", False)
    assert project_requirement(tmp_path)[1] == "bat-adk"  # no pyproject.toml: bat-adk's floor
    assert project_requirement(project(tmp_path / "any", None)) == (
        SpecifierSet(),
        "any/pyproject.toml",
        True,
    )
    bad = project(tmp_path / "bad", "3.12 or newer")
    with pytest.raises(InputError, match=r"bad/pyproject.toml: requires-python '3.12 or newer'"):
        project_requirement(bad)
    (bad / "pyproject.toml").write_text("[project\n")
    with pytest.raises(InputError, match="is not valid TOML"):
        project_requirement(bad)
    (bad / "pyproject.toml").write_text("[project]\nrequires-python = 3.12\n")
    with pytest.raises(InputError, match="must be a string"):
        project_requirement(bad)


def test_a_project_without_requires_python_takes_the_newest_of_any(tmp_path, machine):
    fake_python(tmp_path / "bin" / "python3", "3.9.1")
    fake_python(tmp_path / "bin" / "python3.10", "3.10.0")
    found = find_agent_python(project(tmp_path / "agent", None), machine)
    assert str(found.interpreter.version) == "3.10.0"
    assert "agent/pyproject.toml sets no requires-python" in found.line()


def test_real_interpreters_linked_into_pyenv(tmp_path, machine):
    """The machine's own Pythons: bat's on PATH, a Python >= 3.12 under pyenv (its
    installation folder linked there, as pyenv keeps it)."""
    newer = find_python()
    (Path(machine["PATH"]) / "python3").symlink_to(sys.executable)
    prefix = Path(newer).resolve().parent.parent
    major, minor = python_version(newer)
    versions = Path(machine["HOME"]) / ".pyenv" / "versions"
    versions.mkdir(parents=True)
    (versions / f"{major}.{minor}").symlink_to(prefix, target_is_directory=True)
    found = find_agent_python(project(tmp_path / "agent", f">={major}.{minor}"), machine)
    assert found.where == "pyenv" and found.interpreter.path.startswith(str(versions))
    assert found.interpreter.version.release[:2] == (major, minor)
    ran = subprocess.run(
        [found.interpreter.path, "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split() == [str(major), str(minor)]


def test_uv_is_asked_before_the_other_places(tmp_path, machine):
    """The project's own .venv (made by uv from a real Python) is what uv finds there:
    chosen over a newer Python under pyenv, so ``uv run`` keeps that environment."""
    uv = find_uv()
    newer = find_python()
    root = project(tmp_path / "agent", ">=3.12")
    env = {**machine, "UV_PYTHON_DOWNLOADS": "never", "UV_CACHE_DIR": str(tmp_path / "c")}
    made = subprocess.run(
        [uv, "venv", "--python", newer, str(root / ".venv")],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    fake_python(Path(machine["HOME"]) / ".pyenv/versions/3.99.0/bin/python3", "3.99.0")
    found = find_agent_python(root, env, uv=uv)
    assert found.where == "uv" and found.interpreter.path == str(root / ".venv" / "bin" / "python")
    assert "found by uv" in found.line()
    without_uv = find_agent_python(root, env, uv=None)
    assert str(without_uv.interpreter.version) == "3.99.0"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("uv run .", True),
        ("/opt/tools/uv run --frozen .", True),
        ("uv run --python 3.12 .", False),
        ("uv run -p 3.12 .", False),
        ("uv run --python=3.12 .", False),
        ("uvx my-agent", False),
        ("{python} -m eval_fixtures.echo_agent", False),
        ("uv sync", False),
        ("uv 'run", False),
        ("", False),
    ],
)
def test_runs_uv(command, expected):
    assert runs_uv(command) is expected


def test_suggested_minor():
    assert suggested_minor(SpecifierSet(">=3.12")) == "3.12"
    assert suggested_minor(SpecifierSet("~=3.10.4")) == "3.10"
    assert suggested_minor(SpecifierSet("<3")) is None


# -- properties -------------------------------------------------------------------------

OPS = (">=", ">", "<", "<=", "==", "!=", "==*", "~=")


def clause_holds(op: str, minor: int, version: tuple[int, int, int]) -> bool:
    """An independent reading of PEP 440 for 3.MINOR clauses and final releases."""
    bound = (3, minor, 0)
    return {
        ">=": version >= bound,
        ">": version > bound,
        "<": version < bound,
        "<=": version <= bound,
        "==": version == bound,
        "!=": version != bound,
        "==*": version[:2] == (3, minor),
        "~=": version >= bound and version[0] == 3,
    }[op]


def render(op: str, minor: int, pad: str) -> str:
    return f"{pad}=={pad}3.{minor}.*" if op == "==*" else f"{pad}{op}{pad}3.{minor}{pad}"


@given(
    clauses=st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, 15), st.sampled_from(["", " ", "  "])),
        max_size=4,
    ),
    minor=st.integers(0, 16),
    micro=st.integers(0, 12),
)
def test_requires_python_reads_as_pep_440_says(clauses, minor, micro):
    text = ",".join(render(op, m, pad) for op, m, pad in clauses)
    requirement = parse_requirement(text, "p/pyproject.toml")
    version = (3, minor, micro)
    expected = all(clause_holds(op, m, version) for op, m, _ in clauses)
    assert allows(requirement, Version(f"3.{minor}.{micro}")) is expected


@given(st.text(max_size=40))
def test_any_requires_python_text_is_read_or_refused_in_one_line(text):
    try:
        parse_requirement(text, "x/pyproject.toml")
    except InputError as exc:
        assert exc.exit_code == 2 and exc.message.startswith("x/pyproject.toml: requires-python")


@given(st.text(max_size=80))
def test_any_pyproject_is_read_or_refused(tmp_path_factory, text):
    root = tmp_path_factory.mktemp("p")
    (root / "pyproject.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        requirement, source, is_project = project_requirement(root)
    except InputError as exc:
        assert str(root.name) in exc.message
    else:
        assert is_project and source == f"{root.name}/pyproject.toml"
        assert isinstance(requirement, SpecifierSet)


@given(st.text(max_size=60))
def test_any_probe_answer_is_an_interpreter_or_none(text):
    found = parse_probe(text, "/x/python3")
    if found is not None:
        assert isinstance(found.version, Version) and found.path


@given(
    versions=st.lists(st.tuples(st.integers(8, 15), st.integers(0, 20)), max_size=8),
    floor=st.integers(8, 15),
)
def test_newest_is_the_largest_allowed(versions, floor):
    found = [
        (Interpreter(f"/p/{n}", Version(f"3.{m}.{p}")), "PATH") for n, (m, p) in enumerate(versions)
    ]
    best = newest(found, SpecifierSet(f">=3.{floor}"))
    allowed = [v for v in versions if v[0] >= floor]
    if not allowed:
        assert best is None
    else:
        assert best[0].version == Version("3.{}.{}".format(*max(allowed)))
        first = next(i for i, v in enumerate(versions) if v == max(allowed))
        assert best[0].path == f"/p/{first}"


# -- bat's commands ---------------------------------------------------------------------


@pytest.fixture
def scaffold(tmp_path, bat, machine):
    """``bat init.agent x --tools`` and ``bat eval.init``, on a machine that has only a
    Python 3.11 (no pyenv, nothing uv installed)."""
    fake_python(Path(machine["PATH"]) / "python3", "3.11.4")
    env = {**machine, "UV_PYTHON": "", "PYENV_ROOT": ""}
    assert bat("init.agent", "x", "--tools", cwd=tmp_path, env=env).code == 0
    agent = tmp_path / "x"
    assert bat("eval.init", cwd=agent, env=env).code == 0
    return agent, env


def test_no_python_stops_eval_run_before_anything_starts(scaffold, bat):
    agent, env = scaffold
    for args in (["eval.run"], ["eval.run", "--dry-run"]):
        result = bat(*args, cwd=agent, env=env)
        assert result.code == 1, result.out + result.err
        (line,) = result.err.splitlines()
        assert line.startswith("bat: error: no installed Python satisfies x/pyproject.toml")
        assert "found only 3.11.4" in line and "UV_PYTHON" in line and "pyenv install" in line
        assert "starting the agent" not in result.out and "Traceback" not in result.err
    assert not run_dirs(agent)
    doctor = bat("doctor", cwd=agent, env=env)
    assert doctor.code == 1
    assert "✗ uv python: no installed Python satisfies x/pyproject.toml" in doctor.out


def test_doctor_and_eval_run_name_the_same_python(scaffold, bat, tmp_path):
    agent, env = scaffold
    pyenv = Path(env["HOME"]) / ".pyenv" / "versions" / "3.12.9" / "bin" / "python3.12"
    fake_python(pyenv, "3.12.9")
    dry = bat("eval.run", "--dry-run", cwd=agent, env=env)
    assert dry.code == 0, dry.err
    assert f"the agent's Python: 3.12.9 ({pyenv}, found in pyenv;" in dry.out
    doctor = bat("doctor", cwd=agent, env=env)
    assert f"✓ uv python: Python 3.12.9 without downloading ({pyenv}, found in pyenv;" in (
        doctor.out
    )


def test_the_start_line_names_the_interpreter_not_the_placeholder(tmp_path, bat, home):
    tasks = [{"id": "t", "turns": ["hi"], "expected": {"output_must_contain": ["echo: hi"]}}]
    root = make_project(tmp_path, tasks)
    result = bat("eval.run", cwd=root)
    assert result.code == 0, result.out + result.err
    assert f"starting the agent: {sys.executable} -m eval_fixtures.echo_agent (in " in result.out
    assert "{python}" not in result.out and "the agent's Python" not in result.out
