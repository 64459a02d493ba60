"""Where the tests find the real coding CLIs that .ci/coding_agents.sh installs.

Each CLI is installed pinned in its own npm prefix,
``$BAT_CODING_AGENTS/<preset>/node_modules/.bin/<program>`` (default
``/opt/bat-coding-agents``). In CI (``CI`` set) a CLI that is missing fails the test
that needs it — these are core tests, never skipped there; elsewhere the test is
skipped with the command that installs it.
"""

from __future__ import annotations

import os
import re
import shutil
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


# strace's line for an IPv4/IPv6 connect(2); ``where`` holds the address it named.
INET = re.compile(r"connect\(\d+, \{sa_family=AF_INET6?, (?P<where>[^}]*)\}")
WRAPPER = """#!/bin/sh
exec strace -f -qq -e trace=connect -o "{traces}/connect.$$" {program} "$@"
"""


def traced(program: Path, folder: Path) -> tuple[Path, Path]:
    """A wrapper that runs ``program`` under ``strace -f -e trace=connect`` (to give as the
    adapter's ``executable``), and the folder its traces go to. strace is needed: in CI a
    missing one fails the test, elsewhere it skips."""
    if shutil.which("strace") is None:
        reason = "strace is not installed (apt-get install strace)"
        pytest.fail(reason) if os.environ.get("CI") else pytest.skip(reason)
    traces = folder / "traces"
    traces.mkdir(parents=True)
    wrapper = folder / f"{program.name}-traced"
    wrapper.write_text(WRAPPER.format(traces=traces, program=program))
    wrapper.chmod(0o755)
    return wrapper, traces


def connects(traces: Path) -> list[str]:
    """The address of every IPv4/IPv6 connect the traced processes made."""
    lines = [line for path in traces.iterdir() for line in path.read_text().splitlines()]
    return [m.group("where") for line in lines if (m := INET.search(line))]


def beyond_loopback(addresses: list[str]) -> list[str]:
    return [a for a in addresses if '"127.0.0.1"' not in a and '"::1"' not in a]
