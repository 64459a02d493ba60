"""The working copy a command-line agent's episode runs in, and what it changed.

Why a copy per episode: a coding agent edits files, runs commands, commits. Run in the
user's own tree, one episode's edits would be the next one's starting point, two
concurrent episodes would see each other's files, and the user would find their tree
changed. So every episode gets a working copy of its own, made from ``source``:

* a git repository (a folder holding ``.git``, or a fixture repository's URL or path) is
  cloned at ``ref`` (detached): committed files only, exactly as at that commit, the
  same for every attempt, and the user's repository is only read;
* any other folder is copied, and the copy made a git repository with one commit, so
  that every workspace diffs the same way.

Resources (belt's ``resources``: a skill, a corpus) are copied in after that, before the
agent starts, and each one's sha256 is recorded (:class:`ResourceLock`).

**What changed** is read with git, on a private index (``GIT_INDEX_FILE`` in the
episode's scratch folder): after each turn every file of the workspace is added to that
index and written as a tree, so a turn's changes and diff are the difference between two
trees. The workspace's own index, staged files and history are the agent's: nothing bat
does shows in them. Files git ignores (``.gitignore``) are not seen as changes.

The episode's private ``HOME`` and scratch files live beside the workspace, never in it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bat.errors import InputError, OperationError
from bat.evaluation.log.episode import CommandRun, FileChanges, ResourceLock

DIFF_LIMIT = 200_000  # characters of a diff kept in an episode
FILE_LIMIT = 256 * 1024  # bytes of a file a ``file_contains`` check reads
OUTPUT_TAIL = 4_000  # characters kept of a check command's output
GIT_TIMEOUT_S = 120
# A fixed identity and no user or system configuration: the copy's commit is the same on
# every machine, and no hook or setting of the user's runs in an episode's workspace.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bat",
    "GIT_AUTHOR_EMAIL": "bat@localhost",
    "GIT_COMMITTER_NAME": "bat",
    "GIT_COMMITTER_EMAIL": "bat@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


@dataclass(frozen=True)
class Resource:
    """A file or folder copied into every workspace at ``dest``."""

    source: Path
    dest: str
    version: str | None = None


@dataclass(frozen=True)
class Source:
    """Where workspaces come from (``evaluation.agent.workspace``, or a belt group)."""

    path: str  # a folder, or a git URL / path (``fixture_repo``)
    ref: str | None = None  # for a git source: what to check out (default HEAD)
    resources: tuple[Resource, ...] = ()


@dataclass
class Workspace:
    """One episode's working copy, its private HOME and scratch folder."""

    root: Path  # the episode's folder: work/, home/, scratch/
    source: Source
    commit: str | None = None
    trees: list[str] = field(default_factory=list)  # the tree after setup, then each turn
    resources: list[ResourceLock] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    # -- what changed ---------------------------------------------------------------

    def snapshot(self) -> str:
        """The workspace's files as a git tree (on bat's private index); the id."""
        env = {"GIT_INDEX_FILE": str(self.scratch / "index")}
        _git(self.path, ["add", "--all", "--", "."], env=env)
        tree = _git(self.path, ["write-tree"], env=env).strip()
        self.trees.append(tree)
        return tree

    def changes(self, before: str, after: str) -> FileChanges:
        out = _git(self.path, ["diff", "--no-renames", "--name-status", "-z", before, after])
        found = FileChanges()
        parts = out.split("\0")
        for status, name in zip(parts[0::2], parts[1::2], strict=False):
            bucket = {"A": found.created, "D": found.deleted}.get(status[:1], found.modified)
            bucket.append(name)
        return found

    def diff(self, before: str, after: str) -> tuple[str, bool]:
        """The diff between two trees, cut at DIFF_LIMIT characters (and whether it was)."""
        text = _git(self.path, ["diff", "--no-renames", "--no-color", before, after])
        return (text[:DIFF_LIMIT], True) if len(text) > DIFF_LIMIT else (text, False)

    def read(self, relative: str) -> str | None:
        """The text of a workspace file for a check (its first FILE_LIMIT bytes), or None
        when there is no regular file there. A link is followed only while it stays in
        the workspace: a check never copies a file from outside into the episode."""
        root = self.path.resolve()
        try:
            target = (self.path / relative).resolve()
            target.relative_to(root)
            fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (OSError, ValueError, RuntimeError):
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(FILE_LIMIT)
        return data.decode("utf-8", errors="replace")

    def run_check(self, command: str, timeout_s: float, env: Mapping[str, str]) -> CommandRun:
        """A ``command_succeeds`` command, run by ``sh -c`` in the workspace in its own
        process group; the whole group is stopped at ``timeout_s``."""
        from bat.agents.processes import run_bounded

        result = run_bounded(
            ["/bin/sh", "-c", command],
            cwd=self.path,
            env=dict(env),
            timeout_s=timeout_s,
            output=self.scratch / "check-output",
        )
        tail = result.stdout[-OUTPUT_TAIL:]
        return CommandRun(
            command=command,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            seconds=round(result.seconds, 3),
            output_tail=tail,
        )

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def keep(self, where: Path) -> Path:
        """Move the working copy (and only it) to ``where``; the rest is removed."""
        where.parent.mkdir(parents=True, exist_ok=True)
        if where.exists():
            shutil.rmtree(where, ignore_errors=True)
        shutil.move(str(self.path), str(where))
        self.remove()
        return where


def make(source: Source, base: Path, *, parent: Path | None = None) -> Workspace:
    """A fresh workspace from ``source`` (relative paths taken from ``base``), under
    ``parent`` (default: the system's temporary folder)."""
    root = Path(tempfile.mkdtemp(prefix="bat-ws-", dir=parent))
    workspace = Workspace(root=root, source=source)
    try:
        for sub in ("home", "scratch"):
            (root / sub).mkdir()
        origin = _origin(source.path, base)
        if isinstance(origin, Path) and not (origin / ".git").exists():
            _copy_tree(origin, workspace.path)
            _git(workspace.path, ["init", "-q"])
            _git(workspace.path, ["add", "--all"])
            _git(workspace.path, ["commit", "-q", "--allow-empty", "-m", "bat: the workspace"])
        else:
            _git(root, ["clone", "-q", "--no-checkout", str(origin), "work"])
            ref = source.ref or "HEAD"
            _git(workspace.path, ["checkout", "-q", "--detach", ref])
        workspace.commit = _git(workspace.path, ["rev-parse", "HEAD"]).strip()
        for resource in source.resources:
            workspace.resources.append(_install(resource, base, workspace.path))
        workspace.snapshot()
    except BaseException:
        workspace.remove()
        raise
    return workspace


def _origin(path: str, base: Path) -> Path | str:
    """The folder (or URL) a workspace is made from; an InputError if it is not there."""
    if "://" in path or path.startswith("git@"):
        return path
    folder = (base / path).resolve()
    if not folder.is_dir():
        raise InputError(f"workspace source {path!r}: no folder at {folder}")
    return folder


def _copy_tree(origin: Path, into: Path) -> None:
    """Copy a plain folder; links are copied as links (never followed out of it)."""
    try:
        shutil.copytree(origin, into, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    except (OSError, shutil.Error) as exc:
        raise OperationError(f"cannot copy {origin} into a workspace: {exc}") from None


def _install(resource: Resource, base: Path, work: Path) -> ResourceLock:
    source = (base / resource.source).resolve()
    dest = (work / resource.dest).resolve()
    try:
        dest.relative_to(work.resolve())
    except ValueError:
        raise InputError(f"resource {resource.dest!r}: its dest leaves the workspace") from None
    if source.is_dir():
        _copy_tree(source, dest)
    elif source.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
    else:
        raise InputError(f"resource {str(resource.source)!r}: no file or folder at {source}")
    return ResourceLock(
        source=str(resource.source),
        dest=resource.dest,
        sha256=tree_sha256(source),
        version=resource.version,
    )


def tree_sha256(path: Path) -> str:
    """The sha256 of a file, or of a folder: over each file's relative path and sha256,
    in order, so a renamed file changes it as an edited one does."""
    if path.is_file():
        return _file_sha256(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        relative = item.relative_to(path).as_posix()
        digest.update(f"{relative}\0{_file_sha256(item)}\n".encode())
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _git(cwd: Path, args: list[str], env: Mapping[str, str] | None = None) -> str:
    """Run git for bat's own bookkeeping; an OperationError with git's words if it fails."""
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "LANG": "C.UTF-8",
        **GIT_ENV,
        **(env or {}),
    }
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=environment,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise OperationError("git is not installed: workspaces need it") from None
    except subprocess.TimeoutExpired:
        raise OperationError(f"git {args[0]} took over {GIT_TIMEOUT_S} s in {cwd}") from None
    if done.returncode != 0:
        words = done.stderr.decode(errors="replace").strip().splitlines()
        raise OperationError(f"git {args[0]} failed in {cwd}: {words[-1] if words else ''}")
    return done.stdout.decode(errors="replace")
