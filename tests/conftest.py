"""Shared test helpers: run ``bat`` as a user would, in this process or as a new one.

Most tests run the real ``BatProgram`` in this process (:func:`run_bat`): the console
script's own steps, with the test's cwd, environment and argv, its stdout and stderr
captured, and a time limit. A new interpreter per call cost a third of a second to a
second of the suite's time each, hundreds of times. Tests about the process itself
(signals, the exit of the interpreter, what ``bat --help`` imports, a memory bomb) ask
for one with ``process=True`` (or ``start_bat`` in tests/evalkit.py).

The run context of a command line lives in that command line's Invoke configuration,
and bat keeps no module state between commands (docs/development.md), so two commands
run in one process see nothing of each other.
"""

from __future__ import annotations

import compileall
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tests.fuzzkit import Hang, time_limit

# Property tests run the same examples on every machine unless asked to explore, so CI is
# deterministic and a failure seen once is seen again: HYPOTHESIS_PROFILE=explore draws new
# examples on each run (do that locally when changing a parser).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parents[1]
BAT = Path(sys.executable).with_name("bat")


# What sys.dont_write_bytecode was before collection (pytest_sessionstart).
_DONT_WRITE_BYTECODE = pytest.StashKey[bool]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Bytecode for bat and the fixtures, made once: every agent and ``bat`` process a
    test starts would otherwise compile what it imports again (the machine may set
    PYTHONDONTWRITEBYTECODE, which stops Python from keeping what it compiled)."""
    for folder in ("bat", "eval_fixtures", "tests"):
        compileall.compile_dir(REPO / folder, quiet=1, workers=1)
    # The same for pytest's assertion rewriting of the test modules: it keeps what it
    # rewrote (a ``-pytest-*.pyc`` beside the module's bytecode) only where Python writes
    # bytecode, and without it every worker of every run rewrites all the test modules
    # again, seconds of CPU each. Only while collecting: a test that imports a module of
    # its own folder still writes nothing there.
    session.config.stash[_DONT_WRITE_BYTECODE] = sys.dont_write_bytecode
    sys.dont_write_bytecode = False


def pytest_collection_finish(session: pytest.Session) -> None:
    """The machine's choice about bytecode again, once the test modules are imported."""
    sys.dont_write_bytecode = session.config.stash.get(_DONT_WRITE_BYTECODE, False)


# What a test module uses when it builds on the Docker engine (tests/imagekit.py and
# the base images of tests/agent_image.py and tests/python_slim.py).
_ENGINE_HELPERS = ("tests.imagekit", "tests.agent_image", "tests.python_slim")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Which tests run on one worker, one after the other (``--dist loadgroup``).

    The tests that build on the Docker engine: they share the engine, its registries and
    the stand-in base images, and two builds of one Dockerfile share cache layers that
    removing one's image takes from the other. And the tests of a module that shares a
    finished run (a module-scoped fixture of its own): on several workers, each would
    make that run again."""
    for item in items:
        module = getattr(item, "module", None)
        used = set()
        for value in vars(module).values():  # the helpers' functions, or the modules
            used |= {getattr(value, "__module__", None), getattr(value, "__name__", None)}
        if "images" in item.path.relative_to(REPO / "tests").parts[:1] or used & set(
            _ENGINE_HELPERS
        ):
            item.add_marker(pytest.mark.xdist_group("docker"))
        elif _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definition.scope == "module" and definition.baseid == item.nodeid.split("::")[0]
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


@dataclass
class Result:
    """What one ``bat`` run printed and returned."""

    code: int
    out: str
    err: str


def run_bat(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    process: bool = False,
    charts: bool = False,
) -> Result:
    """Run ``bat ARGS`` and return what it printed and its exit status; never raises on a
    non-zero exit. In this process unless ``process`` (then the installed console script),
    or unless ``env`` sets a ``PYTHON*`` variable, which only a new interpreter reads.

    The stages after ``eval.run`` draw no charts unless ``charts`` (``eval.charts``: the
    chart renderer is a second or more of every run, and most tests look at none);
    ``bat eval.plot`` always draws."""
    env = {**({} if charts else {"BAT_EVAL_CHARTS": "false"}), **(env or {})}
    if process or any(name.startswith("PYTHON") for name in env):
        proc = subprocess.run(
            [str(BAT), *args],
            cwd=cwd,
            env={**os.environ, "NO_COLOR": "1", **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)
    from bat.cli.program import BatProgram

    out, err = _Stream(), _Stream()
    with _as_a_process(args, cwd, env), time_limit(timeout):
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = BatProgram().run(["bat", *args], exit=False)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Hang:  # a BaseException: no except Exception of bat's takes it for an answer
            raise subprocess.TimeoutExpired(["bat", *args], timeout) from None
        except Exception:  # what a user would see: a traceback on stderr, status 1
            err.write(traceback.format_exc())
            code = 1
    return Result(code, out.getvalue(), err.getvalue())


class _Stream(io.StringIO):
    """What a process's stdout or stderr is when a test reads it: a UTF-8 pipe."""

    encoding = "utf-8"


@contextlib.contextmanager
def _as_a_process(args: tuple[str, ...], cwd: Path | None, env: dict[str, str] | None):
    """The current folder, ``os.environ`` and ``sys.argv`` of a ``bat`` process started
    with ``cwd`` and ``env`` (over this one's environment), restored afterwards."""
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_tempdir = tempfile.tempdir
    try:
        os.environ.update({"NO_COLOR": "1", **(env or {})})
        tempfile.tempdir = None  # a TMPDIR of env is read, as a new process would
        sys.argv = [str(BAT), *args]
        os.chdir(cwd or saved_cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir


@pytest.fixture
def bat():
    """The ``run_bat`` function, as a fixture."""
    return run_bat


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty HOME, so no ~/.bat.yaml of the developer leaks into a test."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    for key in list(os.environ):
        if key.startswith("BAT_"):
            monkeypatch.delenv(key)
    return path


@pytest.fixture(scope="session")
def uv_cache() -> str:
    """The uv cache of the machine, read before any test's empty HOME (``home``) would
    move it: the tests that install bat-adk with that empty HOME take its packages from
    here, where the suite's other bat-adk tests put them, instead of downloading and
    unpacking all of them again into a cache of their own (seconds of CPU each)."""
    from tests.pythons import uv_binary

    found = subprocess.run(
        [uv_binary(), "cache", "dir"], capture_output=True, text=True, check=True
    )
    return found.stdout.strip()


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs (root only: skipped elsewhere), unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to the last byte; the ballast file."""
    ballast = folder / "ballast"
    with ballast.open("wb", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError:
                continue
    return ballast
