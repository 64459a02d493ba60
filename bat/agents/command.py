"""The ``command`` adapter: any program as an agent, one run per turn.

For a CLI bat has no preset for (or your own): ``command`` is an argv template for a
turn, ``resume_command`` one for the turns after the first (default: ``command``). The
placeholders, filled in each turn::

    {message}        the turn's text            {workspace}  the episode's working copy
    {session}        the session to continue    {home}       the episode's private HOME
    {model}          the models: entry's model  {model_base_url}  its base URL
    {turn}           the turn's number, from 1

``{session}`` is the id the program reported in an earlier turn (a ``session`` event),
else an id bat made for the episode. A placeholder is replaced inside an argument, never
split it: a message with spaces or quotes stays one argument, and no shell ever sees it.

What the program prints is read as ``ndjson`` (default) or ``text``. ``text``: the reply
is all of stdout, trimmed. ``ndjson``: one JSON object per line, lines that are not are
skipped; bat reads these events::

    {"type": "session", "id": "..."}
    {"type": "text", "text": "..."}              the reply: the last text event's
    {"type": "tool_call", "id": "1", "name": "write_file", "args": {...}}
    {"type": "tool_result", "id": "1", "result": "...", "error": false}
    {"type": "usage", "input_tokens": 12, "output_tokens": 5}    summed over the turn
    {"type": "error", "kind": "rate_limited", "message": "..."}

A program that prints other names maps them: ``fields`` renames the keys bat reads
(``{"type": "event", "text": "content"}``) and ``types`` the event types
(``{"assistant": "text"}``). An ``error`` kind outside bat's closed set is ``unknown``.
"""

from __future__ import annotations

import shlex
from typing import Any

from bat.agents.kinds import CliAgent, Invocation, Option, TurnInput, TurnOutput
from bat.agents.presets._reading import count, events
from bat.errors import InputError
from bat.evaluation.log.episode import AGENT_ERROR_KINDS, AgentError, ToolCall, Usage

KEYS = ("type", "id", "text", "name", "args", "result", "error", "kind", "message")
KEYS += ("input_tokens", "output_tokens")
TYPES = ("session", "text", "tool_call", "tool_result", "usage", "error")
PLACEHOLDERS = ("message", "session", "workspace", "home", "model", "model_base_url", "turn")


class CommandAgent(CliAgent):
    name = "command"
    summary = "any program, one run per turn: an argv template and bat's NDJSON (or text)"
    options = (
        Option(
            "command",
            None,
            "argv template of a turn (a list, or one string split as a shell would)",
        ),
        Option(
            "resume_command", None, "argv template of the turns after the first (default: command)"
        ),
        Option("output", "ndjson", "what the program prints: ndjson events, or text"),
        Option("fields", {}, "rename the keys bat reads, e.g. {type: event, text: content}"),
        Option("types", {}, "rename the event types, e.g. {assistant: text}"),
        Option("env", {}, "variables for the program; values may use the placeholders"),
    )
    variables = (
        ("BAT_MODEL", "the models: entry's model"),
        ("BAT_MODEL_BASE_URL", "its base URL (bat's scripted model's, with script:)"),
        ("BAT_MODEL_PROVIDER", "its provider"),
    )

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Refuse options that cannot make a command, before any episode runs."""
        for key in ("command", "resume_command"):
            value = options.get(key)
            if value is None and key == "resume_command":
                continue
            argv = _argv(value, key)
            for part in argv:
                _fill(part, {name: "" for name in PLACEHOLDERS}, key)
        if options.get("output") not in ("ndjson", "text"):
            raise InputError(f"output: {options.get('output')!r}: ndjson or text")
        for key, allowed in (("fields", KEYS), ("types", TYPES)):
            mapping = options.get(key) or {}
            if not isinstance(mapping, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
            ):
                raise InputError(f"{key}: a mapping of names to names")
            unknown = sorted(set(mapping.values() if key == "types" else mapping) - set(allowed))
            if unknown:
                raise InputError(f"{key}: {unknown[0]!r} is none of {', '.join(allowed)}")
        env = options.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise InputError("env: a mapping of variable names to text")

    def invocation(self, turn: TurnInput) -> Invocation:
        options = turn.options
        values = {
            "message": turn.message,
            "session": turn.session or turn.new_session,
            "workspace": str(turn.workspace),
            "home": str(turn.home),
            "model": turn.model.model or "",
            "model_base_url": turn.model.base_url or "",
            "turn": str(turn.index + 1),
        }
        key = "resume_command" if turn.index and options.get("resume_command") else "command"
        argv = [_fill(part, values, key) for part in _argv(options.get(key), key)]
        env = {
            name: _fill(value, values, "env") for name, value in (options.get("env") or {}).items()
        }
        return Invocation(argv=argv, env=env)

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        if self.settings.get("output") == "text":
            return TurnOutput(reply=stdout.strip())
        return read_events(
            stdout, self.settings.get("fields") or {}, self.settings.get("types") or {}
        )


def read_events(stdout: str, fields: dict[str, str], types: dict[str, str]) -> TurnOutput:
    """bat's NDJSON events (renamed by ``fields`` and ``types``) into a turn's output."""
    key = {name: fields.get(name, name) for name in KEYS}
    kind_of = {theirs: ours for theirs, ours in types.items()}
    out = TurnOutput()
    calls: dict[str, ToolCall] = {}
    usage = Usage()
    seen_usage = False
    for event in events(stdout):
        out.events += 1
        kind = event.get(key["type"])
        kind = kind_of.get(kind, kind) if isinstance(kind, str) else None
        if kind == "session" and isinstance(event.get(key["id"]), str | int):
            out.session = str(event[key["id"]])
        elif kind == "text" and isinstance(event.get(key["text"]), str):
            out.reply = event[key["text"]]
        elif kind == "tool_call" and isinstance(event.get(key["name"]), str):
            call = ToolCall(name=event[key["name"]][:200], args=event.get(key["args"]))
            out.tool_calls.append(call)
            calls[str(event.get(key["id"], len(calls)))] = call
        elif kind == "tool_result":
            call = calls.get(str(event.get(key["id"])))
            if call is None and out.tool_calls:
                call = out.tool_calls[-1]
            if call is not None:
                call.result = event.get(key["result"])
                call.error = event.get(key["error"]) is True
        elif kind == "usage":
            seen_usage = True
            usage = usage.add(
                _usage(event.get(key["input_tokens"]), event.get(key["output_tokens"]))
            )
        elif kind == "error":
            word = event.get(key["kind"])
            message = event.get(key["message"])
            out.error = AgentError(
                kind=word if word in AGENT_ERROR_KINDS else "unknown",
                message=(message if isinstance(message, str) else "the program reported an error")[
                    :500
                ],
            )
    out.usage = usage if seen_usage else None
    return out


def _usage(prompt: Any, completion: Any) -> Usage:
    p, c = count(prompt), count(completion)
    return Usage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c, model_calls=1)


def _argv(value: Any, key: str) -> list[str]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise InputError(f"{key}: {exc}") from None
    elif isinstance(value, list) and all(isinstance(part, str) for part in value):
        argv = list(value)
    else:
        raise InputError(f"{key}: an argv (a list of strings, or one string)")
    if not argv:
        raise InputError(f"{key}: empty: name the program to run")
    return argv


def _fill(template: str, values: dict[str, str], key: str) -> str:
    """``template`` with its placeholders replaced (``{{`` and ``}}`` are braces); an
    unknown placeholder is an InputError naming it."""
    out: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            out.append(char)
            i += 2
        elif char == "{":
            end = template.find("}", i)
            name = template[i + 1 : end] if end > 0 else template[i + 1 :]
            if end < 0 or name not in values:
                known = ", ".join("{" + n + "}" for n in PLACEHOLDERS)
                raise InputError(f"{key}: unknown placeholder {{{name[:40]}}} (known: {known})")
            out.append(values[name])
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)
