"""bat's collections mounted in another project's tasks.py (this repository's own)."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

INVOKE = str(Path(sys.executable).with_name("invoke"))


def invoke(*args, cwd=REPO):
    return subprocess.run([INVOKE, *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_repo_tasks_mount_the_bat_tree():
    listing = invoke("--list")
    assert listing.returncode == 0, listing.stderr
    for name in (
        "test",
        "lint",
        "bench",
        "check",
        "bat.init.agent",
        "bat.add.client",
        "bat.set.env",
        "bat.version",
    ):
        assert name in listing.stdout


def test_mounted_task_runs_with_its_configured_defaults(tmp_path, home):
    result = invoke("bat.init.agent", "mounted", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "PORT=9900" in (tmp_path / "mounted/.env").read_text()


def test_errors_under_invoke_are_one_line_with_bats_status(tmp_path, home):
    result = invoke("bat.init.agent", "9bad", "-o", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("bat: error: invalid agent name")
    assert result.stderr.count("\n") == 1
