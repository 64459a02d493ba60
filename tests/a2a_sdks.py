"""Real, older a2a-sdk releases in environments of their own, built once and kept.

Why: bat must speak to agents that run an a2a-sdk other than its own (agents in use
still run 0.2.x, whose schema differs from the 1.x bat's client is written for). Only a
real server of that release shows what it accepts, so the tests install one from PyPI.
An install takes a minute (grpcio, fastapi, ...), so each release gets one venv under
``~/.cache/bat-tests/a2a-sdk-VERSION`` that later runs reuse.

The venv is built in a temporary folder beside its final place and renamed into place
only when the install worked and ``a2a`` imports: an interrupted build is never taken
for a finished one. A lock file serialises builds of the same release (pytest-xdist
workers, or two test runs). Dependencies are resolved as of shortly after the
release (``uv pip install --exclude-newer``), as an agent of that time would have them,
so a later starlette or pydantic release cannot change what the test meets.

A failed install fails the calling test with uv's message: a CI machine that cannot
install the release must show it, never skip the check silently.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Read once, at import: tests replace HOME with an empty folder (conftest's ``home``).
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bat-tests"

# Release -> (what to install beside it, the date its dependencies are resolved at).
RELEASES = {
    "0.2.6": (["uvicorn"], "2025-06-20"),
}


def a2a_sdk_python(version: str) -> str:
    """The path of a Python that has a2a-sdk ``version`` and uvicorn installed."""
    extras, resolved_at = RELEASES[version]
    venv = CACHE / f"a2a-sdk-{version}"
    python = venv / "bin" / "python"
    if _works(python, version):
        return str(python)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"a2a-sdk-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _works(python, version):  # built by another process while this one waited
            return str(python)
        shutil.rmtree(venv, ignore_errors=True)  # a broken leftover (its Python went away)
        building = Path(tempfile.mkdtemp(prefix=f".a2a-sdk-{version}-", dir=CACHE))
        try:
            _build(building, [f"a2a-sdk=={version}", *extras], resolved_at)
            building.rename(venv)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    if not _works(python, version):
        pytest.fail(f"the a2a-sdk {version} environment at {venv} does not import a2a")
    return str(python)


def _build(venv: Path, packages: list[str], resolved_at: str) -> None:
    from bat.uv_binary import find_uv

    uv = find_uv()
    if uv is None:
        pytest.fail("uv not found: it is a dependency of bat-cli (pip install -e '.[dev]')")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    python = str(venv / "bin" / "python")
    steps = [
        [uv, "venv", "-q", "--allow-existing", "-p", sys.executable, str(venv)],
        [uv, "pip", "install", "-q", "-p", python, "--exclude-newer", resolved_at, *packages],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            pytest.fail(f"installing {' '.join(packages)} took more than 15 minutes")
        if done.returncode != 0:
            pytest.fail(
                f"could not install {' '.join(packages)} for the a2a-sdk test "
                f"({' '.join(step[:3])} exited {done.returncode}): {done.stderr.strip()}"
            )


def _works(python: Path, version: str) -> bool:
    """Whether ``python`` runs and imports that a2a-sdk release and uvicorn."""
    if not python.exists():
        return False
    check = (
        "import importlib.metadata as m, uvicorn, a2a.server.apps; "
        f"assert m.version('a2a-sdk') == {version!r}"
    )
    try:
        done = subprocess.run([str(python), "-c", check], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
