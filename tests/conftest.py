"""Shared test helpers: run the real ``bat`` console script in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests run the same examples on every machine unless asked to explore, so CI is
# deterministic and a failure seen once is seen again: HYPOTHESIS_PROFILE=explore draws new
# examples on each run (do that locally when changing a parser).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parents[1]
BAT = Path(sys.executable).with_name("bat")


@dataclass
class Result:
    """What one ``bat`` run printed and returned."""

    code: int
    out: str
    err: str


def run_bat(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> Result:
    """Run the installed ``bat`` with ``args``; never raises on a non-zero exit."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = subprocess.run(
        [str(BAT), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


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
