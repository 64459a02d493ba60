"""Where the tests find the real coding CLIs that .ci/coding_agents.sh installs.

Each CLI is installed pinned in its own npm prefix,
``$BAT_CODING_AGENTS/<preset>/node_modules/.bin/<program>`` (default
``/opt/bat-coding-agents``). In CI (``CI`` set) a CLI that is missing fails the test
that needs it — these are core tests, never skipped there; elsewhere the test is
skipped with the command that installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("BAT_CODING_AGENTS", "/opt/bat-coding-agents"))


def cli_path(preset: str, program: str) -> Path:
    """The installed ``program`` of ``preset``, or the test fails (CI) / skips (else)."""
    path = ROOT / preset / "node_modules" / ".bin" / program
    if path.exists():
        return path
    message = f"{program} is not installed at {path}: run bash .ci/coding_agents.sh"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
