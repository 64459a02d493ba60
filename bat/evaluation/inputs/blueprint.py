"""``bat eval run AGENT``: one agent of a blueprint repository, found by its folder name.

A blueprint repository keeps several agents, one per sub-folder (``agents/weather/``,
``weather/``), each with its own ``eval/eval.yaml``. bat-cli users run one of them from
the repository's root with ``bat eval run weather``; bat finds the folder and evaluates
from there, exactly as ``cd agents/weather && bat eval.run`` would (docs/eval.md).

The search is bounded: ``AGENT`` itself, ``agents/AGENT``, then folders named ``AGENT`` at
most :data:`MAX_DEPTH` levels down, skipping hidden folders, virtual environments and
``node_modules``, and looking at no more than :data:`MAX_FOLDERS` folders, so a huge tree
(or a link loop) cannot make it run long.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from bat.errors import InputError

MAX_DEPTH = 3
MAX_FOLDERS = 5000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_SKIPPED = {"node_modules", "__pycache__", "venv", "site-packages", "output"}


def agent_folder(name: str, root: Path, eval_file: str = "eval/eval.yaml") -> Path:
    """The folder of agent ``name`` under ``root`` that holds ``eval_file``."""
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InputError(
            f"{name[:60]!r} is not an agent's folder name (letters, digits, '.', '_', '-')"
        )
    named = [root / name, root / "agents" / name]
    found = [folder for folder in named if (folder / eval_file).is_file()]
    if not found:
        found = [folder for folder in _folders_named(root, name) if (folder / eval_file).is_file()]
    found = sorted(set(found))
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        shown = ", ".join(str(folder.relative_to(root)) for folder in found[:5])
        raise InputError(f"several agents named {name!r} here: {shown}; cd into the one you mean")
    others = sorted(str(folder.relative_to(root)) for folder in agents_under(root, eval_file))
    hint = f" (agents here: {', '.join(others[:8])})" if others else ""
    bare = next((f for f in named if f.is_dir()), None)
    if bare is not None:
        raise InputError(
            f"{bare.relative_to(root)} has no {eval_file}: run bat eval.init there first{hint}"
        )
    raise InputError(f"no agent folder named {name!r} with {eval_file} under {root}{hint}")


def agents_under(root: Path, eval_file: str = "eval/eval.yaml") -> list[Path]:
    """The folders under ``root`` (itself excluded) that hold ``eval_file``."""
    return [folder for folder in _walk(root) if (folder / eval_file).is_file()]


def _folders_named(root: Path, name: str) -> list[Path]:
    return [folder for folder in _walk(root) if folder.name == name]


def _walk(root: Path) -> list[Path]:
    """Sub-folders of ``root`` to :data:`MAX_DEPTH` levels, links not followed, bounded."""
    seen: list[Path] = []
    level = [root]
    for _ in range(MAX_DEPTH):
        following = []
        for folder in level:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in sorted(entries, key=lambda e: e.name):
                if len(seen) >= MAX_FOLDERS:
                    return seen
                if entry.name.startswith(".") or entry.name in _SKIPPED:
                    continue
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                path = Path(entry.path)
                seen.append(path)
                following.append(path)
        level = following
    return seen
