"""Finding a Python >= 3.12 (BAT-ADK needs one) and uv for the tests that install BAT-ADK.

bat itself runs on 3.11, so the test interpreter may be too old for bat-adk. These tests
must never download an interpreter (uv could): they use one already installed, and fail
(not skip) with a clear message when there is none, so a missing interpreter is noticed.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MINIMUM = (3, 12)
# Oldest first: the oldest supported Python is the one bat-adk's dependencies best support.
NAMES = ("python3.12", "python3.13", "python3")
PYENV_ROOTS = (os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv")
PYENV_GLOB = "versions/3.1[2-9]*/bin/python3"


def python_version(candidate: str | Path) -> tuple[int, int] | None:
    """(major, minor) of an interpreter, or None if it does not run.

    Running it is the only reliable check: a pyenv shim is on PATH for every version
    pyenv knows, but fails unless that version is selected.
    """
    try:
        proc = subprocess.run(
            [str(candidate), "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    parts = proc.stdout.split()
    if proc.returncode != 0 or len(parts) != 2:
        return None
    return int(parts[0]), int(parts[1])


def candidates() -> list[str]:
    """Interpreters worth trying, in order of preference, without duplicates."""
    found = [sys.executable]
    found += [path for name in NAMES if (path := shutil.which(name))]
    for root in filter(None, PYENV_ROOTS):
        found += sorted(glob.glob(os.path.join(root, PYENV_GLOB)))
    return list(dict.fromkeys(os.path.realpath(path) for path in found))


def find_python() -> str:
    """The path of an installed Python >= 3.12; fails the calling test if there is none."""
    tried = []
    for candidate in candidates():
        version = python_version(candidate)
        tried.append(f"{candidate} ({'.'.join(map(str, version)) if version else 'does not run'})")
        if version is not None and version >= MINIMUM:
            return candidate
    pytest.fail(
        "no Python >= 3.12 found on this machine (BAT-ADK needs one, and the test never "
        "downloads one). Install one (e.g. `pyenv install 3.12`) or put python3.12 on PATH. "
        "Tried: " + ", ".join(tried or ["nothing"])
    )


def uv_binary() -> str:
    """The uv bat itself would use (bat.uv_binary: the uv package, beside Python, PATH)."""
    from bat.uv_binary import find_uv

    uv = find_uv()
    if uv is None:
        pytest.fail("uv not found: it is a dependency of bat-cli (pip install -e '.[dev]')")
    return uv
