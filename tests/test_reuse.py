"""bat's collections mounted in another project's tasks.py (this repository's own), and
the names another project may import (docs/reuse.md's table, each module's __all__)."""

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def documented_surface() -> dict[str, list[str]]:
    """docs/reuse.md's "What you may import" table: module -> names."""
    text = (REPO / "docs/reuse.md").read_text(encoding="utf-8")
    section = text.split("## What you may import", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| (.+) \|$", section, flags=re.MULTILINE)
    return {module: re.findall(r"`(\w+)`", names) for module, names in rows}


# What the surface must cover: the collections, the log a plugin reads, the export interface.
REQUIRED = ["bat.tasks", "bat.tasks.eval", "bat.evaluation.log", "bat.evaluation.log.run"]
REQUIRED += ["bat.evaluation.log.summary", "bat.evaluation.log.episode"]
REQUIRED += ["bat.evaluation.log.scores"]
REQUIRED += ["bat.evaluation.present.export"]


def test_the_documented_surface_covers_what_another_project_imports():
    surface = documented_surface()
    assert set(REQUIRED) <= set(surface), sorted(set(REQUIRED) - set(surface))
    for module in ("init", "add", "set", "images", "version", "doctor"):
        assert f"bat.tasks.{module}" in surface  # every collection of the tree


@pytest.mark.parametrize("module", sorted(documented_surface()))
def test_each_modules_all_is_what_docs_reuse_lists_and_exists(module):
    imported = importlib.import_module(module)
    public = imported.__all__
    assert len(public) == len(set(public)), public
    assert sorted(documented_surface()[module]) == sorted(public)
    for name in public:  # a name, or a submodule of a package
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), name
