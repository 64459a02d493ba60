"""What ``bat agents`` prints: the adapters, and one adapter's options and variables.

Kept apart from the task (bat/tasks/agents.py) so that doctor and tests read the same
facts; importing an adapter's class is cheap (no CLI runs, nothing heavy).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from bat.agents import registry


def rows() -> list[dict[str, Any]]:
    """One row per adapter: name, source, summary, program and whether it is installed."""
    out = []
    for name, entry in registry.entries().items():
        if name == registry.A2A:
            out.append(
                {
                    "name": name,
                    "source": entry.source,
                    "summary": "an A2A server, started by bat or already running (the default)",
                    "program": None,
                    "installed": None,
                }
            )
            continue
        try:
            cls = registry.agent_class(name)
        except Exception as exc:  # a broken plugin is listed with why, never a traceback
            message = getattr(exc, "message", str(exc))
            out.append(
                {
                    "name": name,
                    "source": entry.source,
                    "summary": f"(cannot be loaded: {message})",
                    "program": None,
                    "installed": None,
                }
            )
            continue
        program = cls.executable or None
        out.append(
            {
                "name": name,
                "source": entry.source,
                "summary": cls.summary,
                "program": program,
                "installed": bool(program and shutil.which(program)) if program else None,
            }
        )
    return out


def listing(as_json: bool = False) -> str:
    table = rows()
    if as_json:
        return json.dumps(table, indent=2)
    width = max(len(row["name"]) for row in table)
    lines = []
    for row in table:
        state = ""
        if row["program"]:
            state = f"  [{row['program']}: {'installed' if row['installed'] else 'not on PATH'}]"
        plugin = f" (from {row['source']})" if row["source"] != "bat" else ""
        lines.append(f"{row['name']:<{width}}  {row['summary']}{plugin}{state}")
    lines.append("")
    lines.append("bat agents info NAME: its options and variables; docs/agents.md says more")
    return "\n".join(lines)


def info(name: str, as_json: bool = False) -> str:
    """One adapter: its summary, program, options (default and help), the variables it
    reads (whether each is set here), and how to install its program."""
    if name == registry.A2A:
        text = (
            "a2a: an A2A server (the default adapter)\n"
            "  evaluation.agent: start, command, root, env, image, replicas, spans_file\n"
            "  docs/eval.md says how bat starts and talks to it"
        )
        return json.dumps({"name": name, "summary": "an A2A server"}) if as_json else text
    cls = registry.agent_class(name)
    variables = [
        {"name": var, "what": what, "set": bool(os.environ.get(var))}
        for var, what in (*((key, "the model's key") for key in cls.key_variables), *cls.variables)
    ]
    data = {
        "name": name,
        "summary": cls.summary,
        "program": cls.executable or None,
        "installed": bool(cls.executable and shutil.which(cls.executable))
        if cls.executable
        else None,
        "install": cls.install or None,
        "output": cls.output,
        "options": [{"name": o.name, "default": o.default, "help": o.help} for o in cls.options],
        "variables": variables,
    }
    if as_json:
        return json.dumps(data, indent=2, default=str)
    lines = [f"{name}: {cls.summary}"]
    if data["program"]:
        where = shutil.which(data["program"]) or "not on PATH"
        lines.append(f"  program    {data['program']} ({where})")
    if data["install"]:
        lines.append(f"  install    {data['install']}")
    lines.append(f"  output     {cls.output}")
    lines.append("  options (evaluation.agent.options)")
    for option in cls.options:
        default = json.dumps(option.default, default=str)
        lines.append(f"    {option.name} = {default}: {option.help}")
    if variables:
        lines.append("  variables")
        for var in variables:
            lines.append(f"    {var['name']}{' (set)' if var['set'] else ''}: {var['what']}")
    return "\n".join(lines)
