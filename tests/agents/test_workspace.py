"""Workspaces: a copy per episode, the user's tree only read, changes seen per turn."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from bat.agents import workspace as ws
from bat.errors import InputError


def _tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **ws.GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("x = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    (root / "a.txt").write_text("two\n")  # committed later: the ref decides what is seen
    _git(root, "commit", "-q", "-am", "second")
    (root / "uncommitted.txt").write_text("mine")  # the user's work in progress
    return root


def test_a_git_source_is_cloned_at_the_ref_and_the_users_tree_is_only_read(repo, tmp_path):
    before = _tree_hash(repo)
    first = _git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    space = ws.make(ws.Source(path="repo", ref=first), tmp_path)
    try:
        assert (space.path / "a.txt").read_text() == "one\n"
        assert not (space.path / "uncommitted.txt").exists()
        assert space.commit == first
        (space.path / "a.txt").write_text("changed by the agent\n")
        (space.path / "new.txt").write_text("new\n")
        (space.path / "src" / "m.py").unlink()
        space.snapshot()
        changes = space.changes(space.trees[0], space.trees[-1])
        assert (changes.created, changes.modified, changes.deleted) == (
            ["new.txt"],
            ["a.txt"],
            ["src/m.py"],
        )
        diff, cut = space.diff(space.trees[0], space.trees[-1])
        assert "+changed by the agent" in diff and not cut
        # The agent's own index saw nothing of bat's bookkeeping.
        assert "new.txt" not in _git(space.path, "diff", "--cached", "--name-only")
    finally:
        space.remove()
    assert _tree_hash(repo) == before
    assert not space.root.exists()


def test_a_plain_folder_is_copied_and_made_a_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("hi")
    space = ws.make(ws.Source(path="plain"), tmp_path)
    try:
        assert (space.path / ".git").is_dir() and (space.path / "f.txt").read_text() == "hi"
        assert space.commit
    finally:
        space.remove()


def test_two_workspaces_never_share_files(repo, tmp_path):
    one = ws.make(ws.Source(path="repo"), tmp_path)
    two = ws.make(ws.Source(path="repo"), tmp_path)
    try:
        (one.path / "only-one.txt").write_text("1")
        assert not (two.path / "only-one.txt").exists()
        assert one.path != two.path
    finally:
        one.remove()
        two.remove()


def test_resources_are_installed_before_the_start_and_locked(repo, tmp_path):
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("do things")
    source = ws.Source(path="repo", resources=(ws.Resource(Path("skill"), ".skills/s", "0.1"),))
    space = ws.make(source, tmp_path)
    try:
        assert (space.path / ".skills" / "s" / "SKILL.md").read_text() == "do things"
        (lock,) = space.resources
        assert lock.sha256 == ws.tree_sha256(skill) and lock.version == "0.1"
        # Installed before the first snapshot: not a change of the agent's.
        space.snapshot()
        assert space.changes(space.trees[0], space.trees[-1]).created == []
        (skill / "SKILL.md").write_text("changed")
        assert ws.tree_sha256(skill) != lock.sha256
    finally:
        space.remove()


def test_a_resource_may_not_leave_the_workspace(repo, tmp_path):
    (tmp_path / "r.txt").write_text("x")
    source = ws.Source(path="repo", resources=(ws.Resource(Path("r.txt"), "../../escape"),))
    with pytest.raises(InputError, match="leaves the workspace"):
        ws.make(source, tmp_path)


def test_a_missing_source_is_one_line(tmp_path):
    with pytest.raises(InputError, match="no folder at"):
        ws.make(ws.Source(path="nowhere"), tmp_path)


def test_reading_a_file_for_a_check_never_leaves_the_workspace(repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not copy me")
    space = ws.make(ws.Source(path="repo"), tmp_path)
    try:
        (space.path / "link").symlink_to(secret)
        (space.path / "inside").symlink_to(space.path / "a.txt")
        os.mkfifo(space.path / "fifo")
        (space.path / "big").write_bytes(b"x" * (ws.FILE_LIMIT + 10))
        assert space.read("link") is None
        assert space.read("inside") == "two\n"
        assert space.read("fifo") is None  # no hang on a FIFO
        assert space.read("src") is None  # a folder
        assert space.read("missing") is None
        assert len(space.read("big")) == ws.FILE_LIMIT
    finally:
        space.remove()


def test_a_check_command_runs_in_the_workspace_bounded(repo, tmp_path):
    space = ws.make(ws.Source(path="repo"), tmp_path)
    try:
        ok = space.run_check("test -f a.txt && echo fine", 10, {"PATH": os.environ["PATH"]})
        assert (ok.exit_code, ok.timed_out) == (0, False) and "fine" in ok.output_tail
        bad = space.run_check("exit 3", 10, {"PATH": os.environ["PATH"]})
        assert bad.exit_code == 3
        slow = space.run_check("sleep 30", 0.5, {"PATH": os.environ["PATH"]})
        assert slow.timed_out and slow.exit_code is None and slow.seconds < 5
    finally:
        space.remove()


def test_keeping_moves_the_working_copy_and_removes_the_rest(repo, tmp_path):
    space = ws.make(ws.Source(path="repo"), tmp_path)
    (space.path / "result.txt").write_text("kept")
    kept = space.keep(tmp_path / "run" / "workspaces" / "t.1")
    assert (kept / "result.txt").read_text() == "kept"
    assert not space.root.exists()
