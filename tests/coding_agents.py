"""Where the tests find the coding-agent CLIs that .ci/coding_agents.sh installs, pinned:
``${BAT_CODING_AGENTS:-/opt/bat-coding-agents}/<preset-name>/node_modules/.bin/<program>``.

In CI (``CI`` set) a missing CLI fails its tests: a CI that silently skipped them would
prove nothing. Elsewhere they are skipped, saying how to install it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROGRAMS = {"claude-code": "claude", "codex": "codex", "qwen-code": "qwen"}


def cli_path(name: str, program: str | None = None) -> Path:
    """The installed program of preset ``name``; skips (fails in CI) when it is missing."""
    root = Path(os.environ.get("BAT_CODING_AGENTS") or "/opt/bat-coding-agents")
    path = root / name / "node_modules" / ".bin" / (program or PROGRAMS.get(name, name))
    if not (path.exists() and os.access(path, os.X_OK)):
        reason = f"{name} is not installed at {path}: run bash .ci/coding_agents.sh"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path
