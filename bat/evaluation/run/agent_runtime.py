"""What the agent really ran with: its Python and its bat-adk, read from its environment.

The card used to record bat's own Python and the bat-adk *requirement* of the agent's
pyproject.toml (``bat-adk>=0.3``): neither says what served the episodes. An agent bat
starts runs in an environment on disk, and that environment says it all in two files,
no subprocess needed:

* ``pyvenv.cfg`` at its root: ``version_info`` (uv) or ``version`` (``python -m venv``),
  the Python it was made with;
* ``bat_adk-<version>.dist-info/METADATA`` in its site-packages: ``Version:``, the
  bat-adk installed.

Which environment: the interpreter running bat for a ``{python} ...`` command (its
``sys.prefix``); the virtual environment of an interpreter the command names by path
(``.venv/bin/python -m agent``); else the project's, which ``uv run`` uses
(``UV_PROJECT_ENVIRONMENT``, else ``.venv`` in the agent's root). An agent in a
container, or one bat does not start, has no environment bat can read: no runtime.
"""

from __future__ import annotations

import platform
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.evaluation.log.card import CardRuntime, note_agent_runtime
from bat.secrets import Scrubber

MAX_FILE_BYTES = 1_000_000  # a pyvenv.cfg or METADATA header is a few kB
_VERSION = re.compile(r"^Version:\s*(\S+)\s*$", re.MULTILINE)
_NAME = re.compile(r"^Name:\s*(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Runtime:
    environment: str  # the environment's folder
    python: str | None  # its Python's version, e.g. "3.12.3"
    bat_adk: str | None  # the bat-adk installed in it; None: none is


def environment_of(command: str, root: Path, env: Mapping[str, str]) -> Path | None:
    """The folder of the Python environment ``command`` runs the agent in (see the
    module's doc); None when it cannot be told or does not exist."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if not argv:
        return None
    if argv[0] == "{python}":
        return Path(sys.prefix)
    named = Path(argv[0])
    if named.name.startswith("python") and len(named.parts) > 1:
        interpreter = named if named.is_absolute() else Path(root) / named
        venv = interpreter.parent.parent
        return venv if (venv / "pyvenv.cfg").is_file() else None
    project = env.get("UV_PROJECT_ENVIRONMENT", "").strip()
    venv = Path(project) if project else Path(".venv")
    venv = venv if venv.is_absolute() else Path(root) / venv
    return venv if (venv / "pyvenv.cfg").is_file() else None


def read_runtime(prefix: Path) -> Runtime:
    """The Python and bat-adk of the environment at ``prefix``."""
    return Runtime(
        environment=str(prefix),
        python=_python_of(prefix),
        bat_adk=_dist_version(prefix, "bat_adk"),
    )


def agent_runtime(command: str, root: Path, env: Mapping[str, str]) -> Runtime | None:
    """The runtime of the agent ``command`` starts in ``root``; None when its
    environment cannot be found."""
    prefix = environment_of(command, root, env)
    return None if prefix is None else read_runtime(prefix)


def note_runtime(run_dir: Path, resolved: Any, scrubber: Scrubber) -> None:
    """Once the agent bat started from ``evaluation.agent.command`` is up, record in the
    run's card what it runs with (its environment exists by then: ``uv run`` makes it on
    the first start). Nothing for an image's containers."""
    agent = resolved.evaluation.agent
    if not agent.start or agent.image is not None:
        return
    found = agent_runtime(agent.command, resolved.root, resolved.agent_environment)
    if found is not None:
        runtime = CardRuntime(
            environment=found.environment, python=found.python, bat_adk=found.bat_adk
        )
        note_agent_runtime(run_dir, runtime, scrubber=scrubber)


def _python_of(prefix: Path) -> str | None:
    config = _small_text(prefix / "pyvenv.cfg")
    if config is not None:
        values = {}
        for line in config.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip().lower()] = value.strip()
        found = values.get("version_info") or values.get("version")
        if found:
            return found
    if Path(prefix).resolve() == Path(sys.prefix).resolve():
        return platform.python_version()  # bat's own interpreter, not a virtual env
    # No pyvenv.cfg: the minor version its site-packages folder is named after.
    folders = sorted((prefix / "lib").glob("python3.*")) if (prefix / "lib").is_dir() else []
    return folders[-1].name.removeprefix("python") if folders else None


def _dist_version(prefix: Path, name: str) -> str | None:
    """The version of distribution ``name`` (normalized: ``bat_adk``) installed under
    ``prefix``, from its dist-info's METADATA; None when it is not installed."""
    found = []
    for packages in _site_packages(prefix):
        for info in packages.glob("*.dist-info"):
            if _normal(info.name.partition("-")[0]) != name:
                continue
            metadata = _small_text(info / "METADATA")
            if metadata is None:
                continue
            head = metadata.split("\n\n", 1)[0]  # the headers, not the description
            named, version = _NAME.search(head), _VERSION.search(head)
            if named and version and _normal(named.group(1)) == name:
                found.append(version.group(1))
    return found[0] if found else None


def _site_packages(prefix: Path) -> list[Path]:
    """The site-packages folders of an environment: POSIX ``lib/python3.X/`` (and
    ``lib64``), Windows ``Lib/``."""
    folders = []
    for lib in ("lib", "lib64"):
        if (prefix / lib).is_dir():
            folders += sorted((prefix / lib).glob("python3*/site-packages"))
    if (prefix / "Lib" / "site-packages").is_dir():
        folders.append(prefix / "Lib" / "site-packages")
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _small_text(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
