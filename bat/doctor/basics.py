"""The checks every machine needs: Python, bat-cli, uv and a Python uv can use offline,
and the exporters installed."""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping
from pathlib import Path

from bat.doctor.check import Check, failed, info, passed
from bat.errors import BatError

MINIMUM_BAT_PYTHON = (3, 11)


def python_check() -> Check:
    """The Python running bat."""
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] < MINIMUM_BAT_PYTHON:
        return failed(
            "python",
            f"Python {version} ({sys.executable}) is older than bat-cli supports (3.11)",
            "install bat-cli with Python 3.11 or newer",
        )
    return passed("python", f"Python {version} ({platform.python_implementation()})")


def bat_check() -> Check:
    """The installed bat-cli version (what ``bat version`` reads)."""
    from bat.version import installed_version

    found = installed_version()
    if found is None:
        return failed(
            "bat",
            "bat-cli is not installed (running from a source checkout)",
            "pip install -e . in the checkout (or pip install bat-cli)",
        )
    return passed("bat", f"bat-cli {found}")


def uv_check() -> Check:
    """The uv that ``eval.run`` starts agents with (``uv run .``), found as bat finds it."""
    from bat.uv_binary import find_uv

    found = find_uv()
    if found is None:
        return failed(
            "uv",
            "uv not found (beside bat's Python, nor on PATH): agents start with `uv run .`",
            "pip install uv in bat's environment (it is a dependency of bat-cli)",
        )
    return passed("uv", found)


def uv_python_check(env: Mapping[str, str], cwd: Path | None, *, required: bool = True) -> Check:
    """A Python the agent's project allows that uv can use *without downloading one*.

    Asked of the finder ``eval.run`` asks before it starts an agent with ``uv run``
    (``bat.agent_python``), with the same environment (the shell, the agent's ``.env``,
    ``evaluation.agent.env``): ``UV_PYTHON``, then what uv finds, then the interpreters
    installed on ``PATH``, under pyenv, asdf, /usr/local and /opt. So doctor passes
    exactly when ``eval.run`` would find one, and names the same interpreter.
    """
    from bat.agent_python import NoAgentPython, find_agent_python
    from bat.uv_binary import find_uv

    name = "uv python"
    try:
        found = find_agent_python(cwd, env, uv=find_uv())
    except NoAgentPython as exc:
        return failed(name, exc.detail, exc.fix, required=required)
    except BatError as exc:  # the project's requires-python cannot be read
        return failed(name, exc.message, "fix pyproject.toml", required=required)
    chosen = found.interpreter
    detail = f"Python {chosen.shown} without downloading ({chosen.path}, {found.why()})"
    return passed(name, detail)


def exporters_check() -> list[Check]:
    """The exporters ``eval.export`` can use, built-in and third-party (info lines)."""
    try:
        found = _exporters()
    except Exception as exc:  # a broken plugin must not fail doctor: it is listed as such
        return [info("exporters", f"could not be listed: {type(exc).__name__}: {exc}")]
    if not found:
        return [info("exporters", "none installed (entry-point group bat.exporters)")]
    checks = []
    for name, (detail, error) in sorted(found.items()):
        if error:  # cannot be loaded, or its import blocks: eval.export --to NAME: fails
            fix = "fix or uninstall the plugin's distribution (pip uninstall)"
            checks.append(failed(f"exporter {name}", detail, fix, required=False))
        else:
            checks.append(info(f"exporter {name}", detail))
    return checks


def _exporters() -> dict[str, tuple[str, str | None]]:
    """``{name: (one line, why it cannot be used or None)}``: from
    ``bat.evaluation.present.export.available_exporters()`` when that module exists, else
    the entry points of the group ``bat.exporters``. Each plugin's import is given a time
    limit there (``IMPORT_TIMEOUT_S``): a plugin that blocks is a warning, not a hang."""
    try:
        from bat.evaluation.present.export import available_exporters  # type: ignore[attr-defined]
    except ImportError:
        from importlib.metadata import entry_points

        return {ep.name: (ep.value, None) for ep in entry_points(group="bat.exporters")}
    return {
        str(name): (_describe(value), getattr(value, "error", None))
        for name, value in available_exporters().items()
    }


def _describe(value: object) -> str:
    for attribute in ("description", "summary", "help"):
        text = getattr(value, attribute, None)
        if isinstance(text, str) and text.strip():
            return text.strip().splitlines()[0]
    if isinstance(value, dict):
        for key in ("description", "summary", "module", "value"):
            if isinstance(value.get(key), str):
                return value[key]
    return str(value)
