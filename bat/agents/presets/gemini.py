"""Gemini CLI (npm ``@google/gemini-cli``), headless: one ``gemini --prompt=...`` per turn.

A turn runs::

    gemini --prompt=MESSAGE --output-format stream-json --approval-mode auto_edit
           [-m MODEL] [--resume SESSION]

``auto_edit`` lets edits through and refuses what would need a person to approve;
``default`` and ``plan`` refuse writes (a refused call is an error of that call, not of
the turn). Later turns resume the session the ``init`` event named (``--resume latest``
when none was named: the episode's private HOME holds no other session).

The model: Gemini CLI speaks Google's Gemini API, not OpenAI's, so bat's scripted model
cannot stand in for it; the run's ``models:`` entry gives the key (``GEMINI_API_KEY``,
or ``GOOGLE_API_KEY``) and, where set, ``base_url`` as ``GOOGLE_GEMINI_BASE_URL``. The
settings file written into the private HOME (``.gemini/settings.json``) picks the API-key
sign-in (``security.auth.selectedType``), so no browser sign-in is ever tried, and turns
off usage statistics, telemetry and update checks.

What it prints (``stream-json``, documented in its headless reference): ``init``
(``session_id``, ``model``), ``message`` (``role``, ``content``; ``delta: true`` chunks
of one reply), ``tool_use`` (``tool_name``, ``tool_id``, ``parameters``),
``tool_result`` (``tool_id``, ``status`` ``success``/``error``, ``output`` or ``error``),
``error`` (a warning or error, ``severity``, ``message``) and a final ``result``
(``status``, ``error``, ``stats`` with token counts).

Not run for real by bat's tests (no Gemini wire in the scripted model): its command and
its reading are unit-tested on the documented shapes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bat.agents.kinds import CliAgent, Invocation, Option, TurnInput, TurnOutput
from bat.agents.presets._reading import (
    MAX_EVENTS,
    MAX_TEXT,
    check_choice,
    check_common,
    common_options,
    count,
    events,
    kind_of,
    last_line,
    shown,
    status_of,
)
from bat.evaluation.log.episode import AgentError, ToolCall, Usage

APPROVAL_MODES = ("auto_edit", "default", "plan", "yolo")
SETTINGS = ".gemini/settings.json"
KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


class Gemini(CliAgent):
    name = "gemini"
    summary = "Google's Gemini CLI, headless (gemini --prompt, stream-json), resumed by session"
    executable = "gemini"
    key_variables = KEYS
    options = (
        common_options("gemini")[0],
        Option("approval_mode", "auto_edit", f"--approval-mode: {', '.join(APPROVAL_MODES)}"),
        common_options("gemini")[1],
    )
    variables = (
        ("GEMINI_API_KEY", "the Gemini API key (the models: entry's env, or bat's)"),
        ("GOOGLE_GEMINI_BASE_URL", "the API's address, from the models: entry's base_url"),
    )
    install = "npm install -g @google/gemini-cli"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_common(options)
        check_choice(options, "approval_mode", APPROVAL_MODES)

    def invocation(self, turn: TurnInput) -> Invocation:
        options = {**self.defaults(), **turn.options}
        self.check_options(options)
        argv = [options["executable"], f"--prompt={turn.message}"]
        argv += ["--output-format", "stream-json", "--approval-mode", options["approval_mode"]]
        if turn.model.model:
            argv += ["-m", turn.model.model]
        if turn.session is not None:
            argv += ["--resume", turn.session]
        elif turn.index > 0:
            argv += ["--resume", "latest"]
        argv += options["extra_args"]
        env = {key: turn.model.env[key] for key in KEYS if turn.model.env.get(key)}
        if turn.model.base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = turn.model.base_url
        return Invocation(argv=argv, env=env, files={SETTINGS: settings()})

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        reading = _Reading()
        for event in events(stdout):
            reading.take(event)
        return reading.output(stderr, exit_code)


def settings() -> str:
    document = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    return json.dumps(document, indent=2) + "\n"


@dataclass
class _Reading:
    events: int = 0
    session: str | None = None
    replies: list[str] = field(default_factory=list)  # the assistant's messages, deltas joined
    delta: bool = False  # the last assistant message was a delta chunk
    calls: dict[str, ToolCall] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None

    def take(self, event: dict[str, Any]) -> None:
        self.events += 1
        kind = event.get("type")
        if kind == "init" and isinstance(event.get("session_id"), str) and event["session_id"]:
            self.session = event["session_id"][:200]
        elif kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                if event.get("delta") is True and self.delta and self.replies:
                    self.replies[-1] = (self.replies[-1] + content)[:MAX_TEXT]
                else:
                    self.replies.append(content[:MAX_TEXT])
                self.delta = event.get("delta") is True
        elif kind == "tool_use" and len(self.calls) < MAX_EVENTS:
            self.delta = False
            name = event.get("tool_name")
            call = ToolCall(name=str(name)[:200] if name else "?", args=event.get("parameters"))
            self.calls[str(event.get("tool_id", len(self.calls)))] = call
        elif kind == "tool_result":
            call = self.calls.get(str(event.get("tool_id")))
            if call is not None:
                output = event.get("output")
                if output is None and isinstance(event.get("error"), dict):
                    output = event["error"].get("message")
                call.result = output[:MAX_TEXT] if isinstance(output, str) else output
                call.error = event.get("status") == "error"
        elif kind == "error" and len(self.errors) < 100:
            self.errors.append(event)
        elif kind == "result":
            self.result = event

    def output(self, stderr: str, exit_code: int | None) -> TurnOutput:
        error = self._error(stderr, exit_code)
        stats = (self.result or {}).get("stats")
        usage = None
        if isinstance(stats, dict):
            prompt, completion = count(stats.get("input_tokens")), count(stats.get("output_tokens"))
            usage = Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=count(stats.get("total_tokens")) or prompt + completion,
            )
        return TurnOutput(
            reply="" if error is not None or not self.replies else self.replies[-1],
            tool_calls=list(self.calls.values()),
            usage=usage,
            session=self.session,
            error=error,
            events=self.events,
        )

    def _error(self, stderr: str, exit_code: int | None) -> AgentError | None:
        """The result's error; else an error-severity event's when no result came; else,
        with no result at all, stderr's last line."""
        result = self.result
        if result is not None and result.get("status") != "error":
            return None
        failed = result.get("error") if result is not None else None
        if not isinstance(failed, dict):
            severe = [e for e in self.errors if e.get("severity") != "warning"]
            failed = severe[-1] if severe else None
        if isinstance(failed, dict):
            said = " ".join(str(failed.get(key) or "") for key in ("type", "message"))
            status = status_of(failed.get("code") or failed.get("status"))
            message = shown(str(failed.get("message") or said)) or "Gemini CLI reported an error"
            return AgentError(kind=kind_of(status, said), message=message, code=status)
        if result is not None:
            return AgentError(kind="unknown", message="Gemini CLI reported an error")
        tail = last_line(stderr)
        what = "printed no events" if not self.events else "ended without a result"
        code = f" (exit status {exit_code})" if exit_code is not None else ""
        message = f"Gemini CLI {what}{code}" + (f": {tail}" if tail else "")
        return AgentError(kind=kind_of(None, tail), message=message)
