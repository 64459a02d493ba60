"""The checks every machine needs: Python, bat-cli, uv and a Python uv can use offline,
and the exporters installed."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from bat.doctor.check import Check, failed, info, passed

MINIMUM_BAT_PYTHON = (3, 11)
MINIMUM_AGENT_PYTHON = (3, 12)  # bat-adk's requirement: what `uv run .` must find
UV_TIMEOUT_S = 5.0


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
    """A Python >= 3.12 that uv can use *without downloading one*.

    uv fetches a missing interpreter from the internet by default; offline (a CI runner,
    a locked-down laptop) that is where ``uv run .`` hangs or fails. uv is asked the way
    the agent would ask it, with downloads forbidden: ``UV_PYTHON`` (from the shell, the
    agent's ``.env`` or ``evaluation.agent.env``) when set, else ``>=3.12``.
    """
    from bat.uv_binary import find_uv

    uv = find_uv()
    name = "uv python"

    def fail(detail: str, fix: str) -> Check:  # a warning when nothing here starts uv
        return failed(name, detail, fix, required=required)

    fix = (
        "install a Python >= 3.12 (e.g. apt install python3.12, pyenv install 3.12) and "
        "point UV_PYTHON at it (in the shell or the agent's .env)"
    )
    if uv is None:
        return fail("no uv to ask (see the uv check)", fix)
    wanted = (env.get("UV_PYTHON") or "").strip()
    request = wanted or ">=3.12"
    full_env = {**env, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}
    if not wanted:
        full_env.pop("UV_PYTHON", None)  # set but empty: unset for uv too
    try:
        proc = subprocess.run(
            [uv, "python", "find", "--no-python-downloads", request],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd if cwd is not None and cwd.is_dir() else None,
            timeout=UV_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return fail(f"uv took more than {UV_TIMEOUT_S:g} s to find {request}", fix)
    except OSError as exc:
        return fail(f"cannot run {uv}: {exc.strerror or exc}", fix)
    source = f"UV_PYTHON={wanted}" if wanted else "'>=3.12'"
    if proc.returncode != 0 or not proc.stdout.strip():
        reason = _first_error_line(proc.stderr) or f"exit status {proc.returncode}"
        return fail(f"uv finds no Python for {source} without downloading: {reason}", fix)
    path = proc.stdout.strip().splitlines()[-1]
    version = _version_of(path, full_env)
    if version is None:
        return fail(f"uv found {path} for {source}, but it does not run", fix)
    shown = ".".join(map(str, version))
    if version < MINIMUM_AGENT_PYTHON:
        return fail(
            f"uv would use Python {shown} ({path}) for {source}; bat-adk agents need >= 3.12",
            fix,
        )
    return passed(name, f"Python {shown} without downloading ({path}, for {source})")


def _version_of(path: str, env: Mapping[str, str]) -> tuple[int, ...] | None:
    try:
        proc = subprocess.run(
            [path, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=UV_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    parts = proc.stdout.split()
    if proc.returncode != 0 or len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(part) for part in parts)


def _first_error_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("error: ")[:300]
    return ""


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
