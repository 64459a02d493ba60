"""Which agent adapters exist: bat's own, and plugins' (entry-point group ``bat.agents``).

An adapter is named by the ``adapter`` key of ``evaluation.agent`` (eval.yaml) or the
``agent`` key of a belt group's ``_config.json``. bat's own are listed here by module
path and imported only when used, so ``bat --help`` and ``bat agents`` stay light. A
plugin names a :class:`~bat.agents.kinds.CliAgent` subclass in its pyproject::

    [project.entry-points."bat.agents"]
    my-cli = "my_package.agent:MyCli"
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from bat.errors import InputError

GROUP = "bat.agents"
A2A = "a2a"

# name -> "module:Class"; "a2a" is no CliAgent: it is the A2A client bat always had.
BUILTIN: dict[str, str] = {
    "command": "bat.agents.command:CommandAgent",
    "claude-code": "bat.agents.presets.claude_code:ClaudeCode",
    "codex": "bat.agents.presets.codex:Codex",
    "qwen-code": "bat.agents.presets.qwen_code:QwenCode",
    "gemini": "bat.agents.presets.gemini:Gemini",
    "opencode": "bat.agents.presets.opencode:Opencode",
    "aider": "bat.agents.presets.aider:Aider",
}


@dataclass(frozen=True)
class Entry:
    name: str
    target: str  # "module:Class"
    source: str  # "bat" or the distribution that registers it


def entries() -> dict[str, Entry]:
    """Every adapter by name: bat's own first; a plugin cannot replace one of them."""
    found = {name: Entry(name, target, "bat") for name, target in BUILTIN.items()}
    found[A2A] = Entry(A2A, "bat.evaluation.run.adapter:A2ASession", "bat")
    from importlib.metadata import entry_points

    for point in entry_points(group=GROUP):
        if point.name not in found:
            dist = point.dist.name if point.dist is not None else "a plugin"
            found[point.name] = Entry(point.name, point.value, dist)
    return dict(sorted(found.items(), key=lambda item: (item[0] != A2A, item[0])))


def options_problem(name: str, options: dict) -> str | None:
    """Why ``options`` cannot configure adapter ``name`` (unknown adapter or option, a
    value its ``check_options`` refuses), or None."""
    try:
        cls = agent_class(name)
        known = {option.name for option in cls.options}
        unknown = sorted(set(options) - known, key=str)
        if unknown:
            names = ", ".join(sorted(known)) or "none"
            return (
                f"options: {str(unknown[0])[:60]!r} is no option of {name} (its options: {names})"
            )
        cls.check_options({**cls.defaults(), **options})
    except InputError as exc:
        return exc.message
    return None


def load(name: str, options: dict | None = None):
    """The CliAgent for ``name``, made with ``options``; an InputError if it cannot be."""
    return agent_class(name)(options)


def agent_class(name: str):
    """The CliAgent class for ``name``; an InputError naming the known ones."""
    known = entries()
    entry = known.get(name)
    if entry is None:
        raise InputError(f"no agent adapter {name!r}; known: {', '.join(known)} (bat agents)")
    if name == A2A:
        raise InputError("the a2a adapter is bat's A2A client, not a command-line agent")
    module_name, _, attribute = entry.target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # a broken plugin: one line, never a traceback
        problem = f"agent adapter {name!r} ({entry.target}) cannot be loaded: {exc}"
        raise InputError(problem) from None
    from bat.agents.kinds import CliAgent

    if not (isinstance(cls, type) and issubclass(cls, CliAgent)):
        raise InputError(f"agent adapter {name!r} ({entry.target}) is not a bat CliAgent")
    return cls


def ready(name: str, options: dict):
    """The run's CLI adapter, made with its options; an InputError if its program is not
    installed (said once, before any episode, rather than by every episode)."""
    import shutil

    adapter = load(name, options)
    program = program_of(adapter)
    if program and shutil.which(program) is None:
        how = f"; install it: {adapter.install}" if adapter.install else ""
        raise InputError(
            f"agent adapter {adapter.name}: the program {program!r} is not installed "
            f"(not found on PATH){how}; or set evaluation.agent.options.executable"
        )
    return adapter


def program_of(adapter) -> str | None:
    """The program a turn runs (what doctor and the run check is installed)."""
    if adapter.name == "command":
        command = adapter.settings.get("command")
        if isinstance(command, list) and command:
            return command[0]
        if isinstance(command, str):
            import shlex

            parts = shlex.split(command)
            return parts[0] if parts else None
        return None
    return adapter.settings.get("executable") or adapter.executable or None
