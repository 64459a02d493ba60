"""Bytecode for the packages of a scaffolded bat-adk agent, compiled once and kept.

Why: the tests that ``uv sync`` a scaffold each get a fresh ``.venv``, and where the machine
sets PYTHONDONTWRITEBYTECODE (this one does) each start of the agent compiled the ~1,300
modules it imports again: 2.5 s of CPU a start. uv links a package's files from one entry
of its cache into every environment (hardlinks: the same mtime and size), and Python
checks a ``.pyc`` against exactly those, so what was compiled beside one environment's
files is valid beside another's. :func:`seed` copies the kept bytecode into a new
environment; the first time (per set of installed packages) it compiles what the agent
imports and keeps that under ``~/.cache/bat-tests``. A ``.pyc`` that does not match its
source (another uv cache, a package changed in place) is ignored and compiled again, as
without this: the agent runs the same code either way.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.a2a_sdks import CACHE

# What the scaffolds' modules import, and their model client (never the agent's own
# folder: that is the test's, and gets no __pycache__ from here).
IMPORTS = (
    "bat.agent",
    "bat.chat_model_client",
    "langchain_core.messages",
    "langchain_core.tools",
    "langgraph.graph",
    "langgraph.types",
    "langchain_openai",
)


def seed(venv: Path, imports: tuple[str, ...] = IMPORTS) -> None:
    """Put the kept bytecode into the site-packages of ``venv`` (a scaffold's ``.venv``),
    made now by importing ``imports`` there if none is kept for its packages."""
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    kept = CACHE / f"bat-adk-bytecode-{_packages_key(site)}"
    if not kept.is_dir():
        _compile(venv, site, imports)
        _keep(site, kept)
        return
    for cache in kept.rglob("__pycache__"):
        target = site / cache.relative_to(kept)
        if target.parent.is_dir():
            shutil.copytree(cache, target, dirs_exist_ok=True)


def _packages_key(site: Path) -> str:
    """The installed distributions and versions (their dist-info folders), as a hash."""
    names = sorted(path.name for path in site.glob("*.dist-info"))
    return hashlib.sha256("\n".join([site.parent.name, *names]).encode()).hexdigest()[:16]


def _compile(venv: Path, site: Path, imports: tuple[str, ...]) -> None:
    """Import ``imports`` in ``venv``, writing their bytecode (``-I``: no PYTHON*
    variable, PYTHONDONTWRITEBYTECODE among them, and not the current folder)."""
    script = (
        f"import importlib\nfor name in {imports!r}:\n"
        "    try: importlib.import_module(name)\n    except ImportError: pass"
    )
    subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", script],
        cwd=site, capture_output=True, timeout=300, check=False,
    )  # fmt: skip


def _keep(site: Path, kept: Path) -> None:
    """The __pycache__ folders of ``site``, renamed into place whole (another worker may
    be keeping the same: the first rename wins)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{kept.name}-", dir=CACHE))
    try:
        for cache in site.rglob("__pycache__"):
            shutil.copytree(cache, building / cache.relative_to(site))
        building.rename(kept)
    except OSError:
        pass  # kept by another worker meanwhile
    finally:
        shutil.rmtree(building, ignore_errors=True)
