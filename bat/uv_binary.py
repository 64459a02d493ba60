"""Where the ``uv`` program is: the one installed with bat-cli, found the way the install has it.

bat starts agents with ``uv run .`` and tells users to do the same, but ``uv`` comes with
bat-cli as a Python package (a runtime dependency), so it sits in the environment's
scripts folder, which is often not on ``PATH`` (a user running ``.venv/bin/bat``, a CI job
that never activates the venv). Looking only on ``PATH`` made ``eval.run`` fail with
"'uv' not found" on such machines. The order: the ``uv`` package's own idea of its binary,
then next to the Python running bat, then ``PATH``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def find_uv() -> str | None:
    """The path of the ``uv`` executable, or None when there is none anywhere."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    beside = shutil.which("uv", path=str(Path(sys.executable).parent))
    return beside or shutil.which("uv")


def uv_for_humans() -> str:
    """How to write ``uv`` in an instruction: ``uv`` when ``PATH`` finds that same program,
    else its full path (so the line can be pasted as it is)."""
    found = find_uv()
    on_path = shutil.which("uv")
    if found is None or (on_path and Path(on_path).resolve() == Path(found).resolve()):
        return "uv"
    return found
