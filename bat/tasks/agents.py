"""``bat agents``: the agent adapters bat has, and ``bat agents info NAME``."""

from __future__ import annotations

from invoke import Context

from bat.errors import UsageError
from bat.tasks._options import command


@command(
    positional=["what"],
    variadic=True,  # `bat agents info codex` means `bat agents --what=info,codex`
    optional_positional=True,
    help={
        "what": "Nothing: list the adapters. info NAME (or NAME): that adapter's options.",
        "json": "Print JSON instead of lines.",
    },
)
def agents(c: Context, what: str | None = None, json: bool = False) -> None:
    """List the agent adapters (a2a, command, claude-code, codex, ...): which program
    each runs and whether it is installed; `bat agents info NAME` shows one's options."""
    from bat.agents.describe import info, listing
    from bat.terminal import safe

    words = [word for word in (what or "").split(",") if word]
    if words[:1] == ["info"]:
        words = words[1:]
        if not words:
            raise UsageError("bat agents info NAME: name an adapter (bat agents lists them)")
    if len(words) > 1:
        raise UsageError(f"bat agents: one adapter at a time, got {', '.join(words)}")
    print(safe(info(words[0], as_json=json) if words else listing(as_json=json)))


__all__ = ["agents"]
