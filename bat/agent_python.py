"""The Python an agent started with ``uv run`` gets: found before it starts, never downloaded.

uv downloads an interpreter when it finds none that the project allows. Offline (a CI
runner, a locked-down laptop) that download is where the first ``bat eval.run`` failed,
twelve seconds in, on a DNS error, while a suitable Python sat under pyenv: uv searches
``PATH`` and its own installs, not pyenv's or asdf's versions. So before bat starts an
agent with uv it finds the interpreter itself, in the order a user expects:

1. ``UV_PYTHON``, when set (the shell, the agent's ``.env``, ``evaluation.agent.env``):
   the user chose; it must satisfy the project, or that is the error;
2. what uv finds itself without downloading (``uv python find --no-python-downloads``
   in the agent's folder: its ``.venv``, ``.python-version``, uv's installs, ``PATH``);
3. installed interpreters uv does not look for: ``PATH``, pyenv
   (``$PYENV_ROOT/versions``, ``~/.pyenv/versions``), asdf, ``/usr/local/bin``,
   ``/opt/*/bin`` (and a CI runner's tool cache): the newest one the project allows.

The project allows what its ``pyproject.toml`` says (``requires-python``). The choice
is given to uv as ``UV_PYTHON=<path>`` with ``UV_PYTHON_DOWNLOADS=never``. None found
is one error line that says how to get one. ``bat doctor`` asks this same finder, so
doctor and ``eval.run`` cannot disagree.

Library code, free of Invoke.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from bat.errors import InputError, OperationError

# What a folder without a pyproject.toml is checked against (``bat doctor`` outside an
# agent project): bat-adk's requirement, the one every scaffold's pyproject.toml states.
BAT_ADK_REQUIREMENT = ">=3.12"
PROBE_TIMEOUT_S = 10.0
UV_FIND_TIMEOUT_S = 20.0
# The Python minors a fix may suggest installing, oldest first.
KNOWN_MINORS = tuple(f"3.{minor}" for minor in range(8, 16))
_PROBE = "import sys; print(sys.implementation.name, *sys.version_info[:3]); print(sys.executable)"
_NAME = re.compile(r"python(3(\.\d+)?)?")
_WHERE = ("UV_PYTHON", "uv", "PATH", "pyenv", "asdf", "/usr/local/bin", "/opt")
# Folders of interpreters outside PATH and the version managers: (a glob of bin
# folders, the name messages give it).
SYSTEM_PLACES = (
    ("/usr/local/bin", "/usr/local/bin"),
    ("/opt/*/bin", "/opt"),
    ("/opt/hostedtoolcache/Python/*/*/bin", "/opt"),  # a GitHub runner's tool cache
)

Probe = Callable[[str], "Interpreter | None"]


@dataclass(frozen=True)
class Interpreter:
    """An installed Python that ran: its path (what it calls itself), version, kind."""

    path: str
    version: Version
    implementation: str = "cpython"

    @property
    def shown(self) -> str:
        kind = "" if self.implementation == "cpython" else f"{self.implementation} "
        return f"{kind}{self.version}"


@dataclass(frozen=True)
class AgentPython:
    """The interpreter chosen for the agent, where it was found, and against what."""

    interpreter: Interpreter
    where: str  # one of _WHERE
    requirement: str  # the requires-python it satisfies ("" when the project has none)
    source: str  # where the requirement comes from: "x/pyproject.toml", or bat-adk's

    @property
    def env(self) -> dict[str, str]:
        """What the agent's uv process is given: this interpreter, and no download."""
        return {"UV_PYTHON": self.interpreter.path, "UV_PYTHON_DOWNLOADS": "never"}

    def why(self) -> str:
        """Where it was found and what it satisfies: ``found in pyenv; x/pyproject.toml
        requires-python >=3.12``."""
        if self.requirement:
            wanted = f"{self.source} requires-python {self.requirement}"
        else:
            wanted = f"{self.source} sets no requires-python"
        return f"{_found_in(self.where)}; {wanted}"

    def line(self) -> str:
        """The one line that says which Python the agent runs on, and why that one."""
        chosen = self.interpreter
        return f"the agent's Python: {chosen.shown} ({chosen.path}, {self.why()})"


class NoAgentPython(OperationError):
    """No Python the agent's project allows is installed where bat and uv look (or
    ``UV_PYTHON`` names an unusable one). ``detail`` and ``fix`` are the two halves of
    the one line, for ``bat doctor``'s columns."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(f"{detail}: {fix}")
        self.detail = detail
        self.fix = fix


def _found_in(where: str) -> str:
    if where == "UV_PYTHON":
        return "from UV_PYTHON"
    if where == "uv":
        return "found by uv"
    return f"found in {where}"


# -- what the project allows --------------------------------------------------------


def parse_requirement(text: str, source: str) -> SpecifierSet:
    """``requires-python`` as a specifier set; anything else is one clear error."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise InputError(f"{source}: requires-python {text[:80]!r} is not valid: {exc}") from None


def project_requirement(root: Path | None) -> tuple[SpecifierSet, str, bool]:
    """What the project at ``root`` allows: (specifiers, where that is said, whether the
    project has a ``pyproject.toml``). No folder or no ``pyproject.toml``: bat-adk's
    ``>=3.12``, what every bat agent needs; a ``pyproject.toml`` without
    ``requires-python``: any Python."""
    file = root / "pyproject.toml" if root is not None else None
    if file is None or not file.is_file():
        return SpecifierSet(BAT_ADK_REQUIREMENT), "bat-adk", False
    shown = f"{root.name}/pyproject.toml"
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{file} is not valid TOML: {exc}") from None
    project = data.get("project")
    text = project.get("requires-python") if isinstance(project, dict) else None
    if text is None:
        return SpecifierSet(), shown, True
    if not isinstance(text, str):
        raise InputError(f"{shown}: requires-python must be a string, like '>=3.12'")
    return parse_requirement(text, shown), shown, True


def allows(requirement: SpecifierSet, version: Version) -> bool:
    """Whether ``version`` satisfies ``requirement``, as pip and uv read requires-python:
    the release alone (3.13.0rc1 counts as 3.13.0)."""
    return requirement.contains(Version(version.base_version), prereleases=True)


def suggested_minor(requirement: SpecifierSet) -> str | None:
    """The oldest Python minor (3.X) the requirement allows, to name in the fix."""
    for minor in KNOWN_MINORS:
        if any(allows(requirement, Version(f"{minor}.{micro}")) for micro in (0, 20)):
            return minor
    return None


# -- interpreters ---------------------------------------------------------------------


def probe(path: str) -> Interpreter | None:
    """Run ``path`` and ask its version; None when it does not run or answers garbage.

    Running it is the only reliable test: a pyenv shim exists for every version pyenv
    knows but fails unless that version is selected; a broken link or an old build
    fails too. It names itself (``sys.executable``): a shim becomes the real thing."""
    try:
        proc = subprocess.run(
            [path, "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return parse_probe(proc.stdout, path) if proc.returncode == 0 else None


def parse_probe(text: str, path: str) -> Interpreter | None:
    """The probe's two lines (``cpython 3 12 1``, then the executable) as an
    Interpreter; None unless they are exactly that."""
    lines = text.splitlines()
    if not lines:
        return None
    words = lines[0].split()
    if len(words) != 4 or not all(w.isascii() and w.isdigit() for w in words[1:]):
        return None
    executable = lines[1].strip() if len(lines) > 1 else ""
    named = executable if executable and os.path.isabs(executable) else path
    return Interpreter(named, Version(".".join(words[1:])), words[0] or "cpython")


def candidates(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Interpreters a user would expect to be found, as (path, where), in the order
    of :data:`_WHERE`; each file once."""
    home = env.get("HOME") or ""
    found: list[tuple[str, str]] = []
    for folder in (env.get("PATH") or "").split(os.pathsep):
        if folder:
            found += [(path, "PATH") for path in _pythons_in(folder)]
    pyenv_roots = [env.get("PYENV_ROOT") or "", os.path.join(home, ".pyenv") if home else ""]
    for root in dict.fromkeys(filter(None, pyenv_roots)):
        found += [(p, "pyenv") for p in _pythons_under(os.path.join(root, "versions", "*"))]
    asdf_roots = [env.get("ASDF_DATA_DIR") or "", os.path.join(home, ".asdf") if home else ""]
    for root in dict.fromkeys(filter(None, asdf_roots)):
        found += [
            (p, "asdf") for p in _pythons_under(os.path.join(root, "installs", "python", "*"))
        ]
    for pattern, where in SYSTEM_PLACES:
        found += [(p, where) for folder in sorted(glob.glob(pattern)) for p in _pythons_in(folder)]
    seen: set[str] = set()
    unique = []
    for path, where in found:
        key = os.path.realpath(path)
        if key not in seen and not _is_a_shim(path):
            seen.add(key)
            unique.append((path, where))
    return unique


def _pythons_under(pattern: str) -> list[str]:
    return [p for prefix in sorted(glob.glob(pattern)) for p in _pythons_in(f"{prefix}/bin")]


def _pythons_in(folder: str) -> list[str]:
    """``python``, ``python3`` and ``python3.X`` in ``folder`` that can be run."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    paths = [os.path.join(folder, name) for name in names if _NAME.fullmatch(name)]
    return [path for path in paths if os.path.isfile(path) and os.access(path, os.X_OK)]


def _is_a_shim(path: str) -> bool:
    """pyenv's and asdf's shims run whichever version is selected, not one of their own:
    the versions they stand for are found in their own folders."""
    return os.path.basename(os.path.dirname(path)) == "shims"


def newest(
    found: Iterable[tuple[Interpreter | None, str]], requirement: SpecifierSet
) -> tuple[Interpreter, str] | None:
    """The newest interpreter ``requirement`` allows (the first found of equal ones)."""
    best: tuple[Interpreter, str] | None = None
    for interpreter, where in found:
        if interpreter is None or not allows(requirement, interpreter.version):
            continue
        if best is None or interpreter.version > best[0].version:
            best = (interpreter, where)
    return best


# -- the finder -----------------------------------------------------------------------


def runs_uv(command: str) -> bool:
    """Whether ``command`` (``evaluation.agent.command``) is ``uv run`` that leaves the
    interpreter to uv (no ``--python`` of its own)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if len(argv) < 2 or Path(argv[0]).name != "uv" or argv[1] != "run":
        return False
    return not any(w in ("-p", "--python") or w.startswith("--python=") for w in argv[2:])


def find_agent_python(
    root: Path | None,
    env: Mapping[str, str],
    *,
    uv: str | None = None,
    probe: Probe = probe,
) -> AgentPython:
    """The Python uv is to run the agent in ``root`` with (see the module docstring);
    :class:`~bat.errors.BatError` when there is none, worded with the fix."""
    requirement, source, is_project = project_requirement(root)
    shown = str(requirement) or "any version"
    wanted = (env.get("UV_PYTHON") or "").strip()
    uv_env = {**env, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}
    uv_env.pop("UV_PYTHON", None)
    cwd = root if root is not None and root.is_dir() else None

    if wanted:  # the user's choice: used, or refused, never replaced
        path = wanted if os.sep in wanted else None
        if path is None and uv is not None:
            path, _ = _uv_find(uv, [wanted], uv_env, cwd)
        chosen = probe(path) if path else None
        if chosen is None:
            raise NoAgentPython(
                f"UV_PYTHON={wanted} names no Python that runs here, and uv may not download one",
                _fix(requirement, source),
            )
        if not allows(requirement, chosen.version):
            raise NoAgentPython(
                f"UV_PYTHON={wanted} is Python {chosen.shown} ({chosen.path}); {source} "
                f"requires-python {shown}",
                _fix(requirement, source),
            )
        return AgentPython(chosen, "UV_PYTHON", str(requirement), source)

    if uv is not None:
        # In the project, with no request, uv asks what the project asks (its .venv,
        # .python-version, requires-python); elsewhere it is asked for bat-adk's floor.
        request = [] if is_project else [str(requirement)]
        path, _ = _uv_find(uv, request, uv_env, cwd)
        chosen = probe(path) if path else None
        if chosen is not None and allows(requirement, chosen.version):
            return AgentPython(chosen, "uv", str(requirement), source)

    paths = candidates(env)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(paths)))) as pool:
        interpreters = list(pool.map(probe, [path for path, _ in paths]))
    best = newest(zip(interpreters, [where for _, where in paths], strict=True), requirement)
    if best is not None:
        return AgentPython(best[0], best[1], str(requirement), source)
    ran = sorted((i for i in interpreters if i is not None), key=lambda i: i.version)
    others = list(dict.fromkeys(i.shown for i in ran))
    seen = f"only {', '.join(others)}" if others else "none"
    raise NoAgentPython(
        f"no installed Python satisfies {source} requires-python {shown} (looked on PATH, "
        f"in uv's, pyenv's and asdf's installs, /usr/local/bin and /opt; found {seen}), "
        "and uv may not download one",
        _fix(requirement, source),
    )


def _fix(requirement: SpecifierSet, source: str) -> str:
    minor = suggested_minor(requirement)
    if minor is None:
        return f"install a Python that satisfies {source}, or set UV_PYTHON to one's path"
    return (
        f"install one (uv python install {minor}, pyenv install {minor}, or your system's "
        f"python{minor} package) or set UV_PYTHON to the path of a Python {minor} or newer"
    )


def _uv_find(
    uv: str, request: list[str], env: Mapping[str, str], cwd: Path | None
) -> tuple[str | None, str]:
    """What ``uv python find --no-python-downloads REQUEST`` answers: (path or None,
    uv's first error line)."""
    try:
        proc = subprocess.run(
            [uv, "python", "find", "--no-python-downloads", *request],
            capture_output=True,
            text=True,
            env=dict(env),
            cwd=cwd,
            timeout=UV_FIND_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"uv took more than {UV_FIND_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, f"cannot run {uv}: {exc.strerror or exc}"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return None, first_error_line(proc.stderr) or f"exit status {proc.returncode}"
    return lines[-1].strip(), ""


def first_error_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("error: ")[:300]
    return ""
