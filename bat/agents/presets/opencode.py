"""opencode (npm ``opencode-ai``), headless: one ``opencode run`` per turn.

A turn runs::

    opencode run --format json --pure --title TITLE [-m PROVIDER/MODEL] [--session ID]

with the message on standard input (as an argument opencode quotes a message holding
spaces before the model sees it). ``--pure`` loads no external plugins; ``--title``
names the session, so opencode makes no extra model call to title it. Later turns
continue the session the events named (``--session``; ``--continue`` when none was).

The model: with a ``base_url`` (bat's scripted model, vLLM, any OpenAI chat server) the
configuration (``OPENCODE_CONFIG_CONTENT``) declares a provider ``bat`` speaking OpenAI
chat at that address, with the entry's ``OPENAI_API_KEY``, and the turn runs
``-m bat/MODEL``; without one, ``-m PROVIDER/MODEL`` names one of opencode's own. The
configuration also sets the tools' ``permission`` (option; default: edits allowed, shell
and web fetches denied) and turns sharing and updates off.

Offline: ``OPENCODE_DISABLE_MODELS_FETCH``, ``..._AUTOUPDATE``, ``..._LSP_DOWNLOAD``,
``..._DEFAULT_PLUGINS`` and ``..._SHARE``; and opencode installs its plugin package into
its config folder at every start, so ``npm_config_registry`` points that install at
127.0.0.1, where it fails at once instead of reaching a registry.

What it prints (``--format json``): one object a line, each with ``sessionID``:
``step_start``; ``text`` (``part.text``); ``tool_use`` (``part.tool``, ``part.callID``,
``part.state`` with ``status`` ``completed``/``error``, ``input``, ``output``/``error``;
a call of a tool that is not offered, or that the permission removed, is the tool
``invalid`` with the name asked for in ``input.tool``); ``step_finish`` (``part.tokens``:
``input``, ``output``, ``cache``) and ``error`` (``error.name``, ``error.data`` with
``message`` and ``statusCode``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bat.agents.kinds import CliAgent, Invocation, Option, TurnInput, TurnOutput
from bat.agents.presets._reading import (
    MAX_EVENTS,
    MAX_TEXT,
    check_common,
    common_options,
    count,
    events,
    kind_of,
    last_line,
    shown,
    status_of,
)
from bat.errors import InputError
from bat.evaluation.log.episode import AgentError, ToolCall, Usage

PERMISSION = {"edit": "allow", "bash": "deny", "webfetch": "deny"}
PERMISSIONS = ("allow", "ask", "deny")
PROVIDER = "bat"  # the provider the configuration declares for a base_url
OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    # its start-up plugin install: refused on loopback at once, never sent out
    "npm_config_registry": "http://127.0.0.1:9/",
    "npm_config_fetch_retries": "0",  # npm would retry it for ~70 s, and opencode waits
}


class Opencode(CliAgent):
    name = "opencode"
    summary = "opencode, headless (opencode run --format json), any OpenAI chat model"
    executable = "opencode"
    key_variables = ("OPENAI_API_KEY",)
    options = (
        common_options("opencode")[0],
        Option("permission", PERMISSION, "its tools' permission: {tool: allow|ask|deny}"),
        Option("title", "bat", "--title: the session's name (no model call to make one)"),
        common_options("opencode")[1],
    )
    variables = (
        ("OPENCODE_CONFIG_CONTENT", "its configuration: the model's provider and permission"),
        ("OPENCODE_DISABLE_MODELS_FETCH", "no download of the model list (and the rest, off)"),
        ("npm_config_registry", "127.0.0.1: its start-up plugin install stays on loopback"),
    )
    install = "npm install -g opencode-ai"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_common(options)
        permission = options.get("permission")
        if not isinstance(permission, dict) or not all(
            isinstance(k, str) and v in PERMISSIONS for k, v in permission.items()
        ):
            raise InputError("options: permission must map tool names to allow, ask or deny")
        if not isinstance(options.get("title"), str) or not options["title"]:
            raise InputError("options: title must be some text")

    def invocation(self, turn: TurnInput) -> Invocation:
        options = {**self.defaults(), **turn.options}
        self.check_options(options)
        config: dict[str, Any] = {
            "autoupdate": False,
            "share": "disabled",
            "permission": options["permission"],
        }
        argv = [options["executable"], "run", "--format", "json", "--pure"]
        argv += ["--title", options["title"]]
        model = turn.model
        if model.base_url and model.model:
            key = model.env.get("OPENAI_API_KEY") or "none"
            config["provider"] = {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": PROVIDER,
                    "options": {"baseURL": model.base_url, "apiKey": key},
                    "models": {model.model: {"name": model.model, "tool_call": True}},
                }
            }
            argv += ["-m", f"{PROVIDER}/{model.model}"]
        elif model.model:
            argv += ["-m", model.model if "/" in model.model else f"{model.provider}/{model.model}"]
        if turn.session is not None:
            argv += ["--session", turn.session]
        elif turn.index > 0:
            argv += ["--continue"]
        argv += options["extra_args"]
        env = {**OFFLINE, "OPENCODE_CONFIG_CONTENT": json.dumps(config)}
        return Invocation(argv=argv, env=env, stdin=turn.message)

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        reading = _Reading()
        for event in events(stdout):
            reading.take(event)
        return reading.output(stderr, exit_code)


@dataclass
class _Reading:
    events: int = 0
    session: str | None = None
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: dict[str, Any] | None = None

    def take(self, event: dict[str, Any]) -> None:
        self.events += 1
        if isinstance(event.get("sessionID"), str) and event["sessionID"]:
            self.session = event["sessionID"][:200]
        part = event.get("part")
        part = part if isinstance(part, dict) else {}
        kind = event.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            self.texts.append(part["text"][:MAX_TEXT])
        elif kind == "tool_use" and len(self.calls) < MAX_EVENTS:
            self.calls.append(_call(part))
        elif kind == "step_finish":
            tokens = part.get("tokens")
            if isinstance(tokens, dict):
                cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
                prompt = count(tokens.get("input")) + count(cache.get("read"))
                prompt += count(cache.get("write"))
                completion = count(tokens.get("output")) + count(tokens.get("reasoning"))
                self.usage = self.usage.add(
                    Usage(
                        prompt_tokens=prompt,
                        completion_tokens=completion,
                        total_tokens=prompt + completion,
                        model_calls=1,
                    )
                )
        elif kind == "error":
            error = event.get("error")
            self.error = error if isinstance(error, dict) else {"message": str(error)[:500]}

    def output(self, stderr: str, exit_code: int | None) -> TurnOutput:
        error = self._error(stderr, exit_code)
        return TurnOutput(
            reply="" if error is not None or not self.texts else self.texts[-1],
            tool_calls=self.calls,
            usage=self.usage if self.usage.model_calls else None,
            session=self.session,
            error=error,
            events=self.events,
        )

    def _error(self, stderr: str, exit_code: int | None) -> AgentError | None:
        if self.error is not None:
            data = self.error.get("data")
            data = data if isinstance(data, dict) else {}
            status = status_of(data.get("statusCode"))
            message = data.get("message") or self.error.get("message") or self.error.get("name")
            said = f"{self.error.get('name') or ''} {message or ''}"
            return AgentError(
                kind=kind_of(status, said),
                message=shown(str(message or "opencode reported an error")),
                code=status,
            )
        if self.events:
            return None
        tail = last_line(stderr)
        code = f" (exit status {exit_code})" if exit_code is not None else ""
        message = f"opencode printed no events{code}" + (f": {tail}" if tail else "")
        return AgentError(kind=kind_of(None, tail), message=message)


def _call(part: dict[str, Any]) -> ToolCall:
    """A ``tool_use`` part: the tool, its input, and what it gave (or why it failed). A
    call of a tool not offered is opencode's ``invalid``: named as asked, failed."""
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    name, args = part.get("tool"), state.get("input")
    failed = state.get("status") == "error"
    if name == "invalid" and isinstance(args, dict) and isinstance(args.get("tool"), str):
        name, failed = args["tool"], True
    result = state.get("output") if "output" in state else state.get("error")
    result = result[:MAX_TEXT] if isinstance(result, str) else result
    return ToolCall(name=str(name)[:200] if name else "?", args=args, result=result, error=failed)
