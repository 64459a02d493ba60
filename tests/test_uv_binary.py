"""``uv`` is found the way bat-cli's install has it, not only on PATH (issue 8, part 0)."""

import os
import subprocess
from pathlib import Path

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def test_uv_is_found_without_path(monkeypatch):
    from bat.uv_binary import find_uv

    monkeypatch.setenv("PATH", "")
    found = find_uv()
    assert found is not None and Path(found).is_file() and os.access(found, os.X_OK)
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("uv ")


def test_init_agent_tells_the_uv_that_exists(tmp_path, bat, home):
    """With only the system directories on PATH, the instruction names uv by its full path."""
    from bat.uv_binary import find_uv

    result = bat("init.agent", "pathless", "-o", str(tmp_path), env={"PATH": SYSTEM_PATH})
    assert result.code == 0, result.err
    (line,) = [line for line in result.out.splitlines() if line.startswith("Next:")]
    uv = find_uv()
    on_system_path = any(Path(d, "uv").is_file() for d in SYSTEM_PATH.split(":"))
    assert f" {'uv' if on_system_path else uv} run ." in line
