"""Claude Code (npm ``@anthropic-ai/claude-code``), headless: one ``claude -p`` per turn.

A turn runs::

    claude -p --output-format stream-json --verbose --session-id ID   -- MESSAGE   (turn 1)
    claude -p --output-format stream-json --verbose --resume ID       -- MESSAGE   (later)

with ``--permission-mode`` (default ``acceptEdits``: file edits in the workspace go
through, other tools are denied without a prompt, as nobody is there to answer one),
``--model`` when the run names one, ``--max-turns`` when set, then ``extra_args``. The
message comes after ``--``, so one starting with a dash is never read as a flag.

Offline and bounded: the run's model goes to ``ANTHROPIC_BASE_URL`` (Claude Code adds
``/v1/messages``) and its key to ``ANTHROPIC_API_KEY``; ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``
turns off telemetry, error reports and update checks, so the model's address is the only
one it connects to; ``CLAUDE_CODE_MAX_RETRIES=0`` (option ``max_retries``) makes a dead or
failing model an error of the turn at once instead of minutes of retries.
``bypassPermissions`` is refused as root unless ``IS_SANDBOX=1``, set only then.

What it prints (``stream-json``) is one JSON object per line: ``system``/``init`` (the
session id), ``assistant`` messages (text and ``tool_use`` blocks; a failed API call is a
synthetic one with ``error`` and ``api_error_status``), ``user`` messages carrying the
``tool_result`` of each call (``is_error`` for a denied or failed one), and a final
``result`` (the reply, ``is_error``, usage). A denied write is *not* an error of the turn:
Claude Code answers it and exits 0; the workspace checks fail instead.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from bat.agents.kinds import CliAgent, Invocation, Option, TurnInput, TurnOutput
from bat.agents.presets._reading import (
    MAX_EVENTS,
    MAX_MESSAGE,
    MAX_TEXT,
    check_common,
    count,
    kind_of,
)
from bat.agents.presets._reading import events as _events
from bat.errors import InputError
from bat.evaluation.log.episode import AgentError, ToolCall, Usage

PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "manual")
PERMISSION_MODES += ("plan",)
SKIPS = ("bypassPermissions",)  # modes (and the flag below) Claude Code refuses as root
SKIP_FLAG = "--dangerously-skip-permissions"
# What an error said, when its event carries no status: the words of Claude Code's messages.
WORDS = (
    (re.compile(r"authenticat|invalid api key|\b401\b|\b403\b", re.I), "authentication_failed"),
    (re.compile(r"rate.?limit|\b429\b|overloaded|\b529\b", re.I), "rate_limited"),
    (re.compile(r"api error|connection|econnrefused|timed? ?out|\b5\d\d\b", re.I), "model_error"),
)


class ClaudeCode(CliAgent):
    name = "claude-code"
    summary = "Anthropic's Claude Code, headless (claude -p, stream-json), resumed by session id"
    executable = "claude"
    key_variables = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    options = (
        Option("executable", "claude", "the claude program (a path, or a name on PATH)"),
        Option(
            "permission_mode",
            "acceptEdits",
            f"--permission-mode: {', '.join(PERMISSION_MODES)}",
        ),
        Option("max_turns", None, "--max-turns: model calls of one turn at most (null: no limit)"),
        Option("max_retries", 0, "CLAUDE_CODE_MAX_RETRIES: retries of a failed model call"),
        Option("extra_args", [], "more arguments, before the message"),
    )
    variables = (
        ("ANTHROPIC_BASE_URL", "the model's address (the run's models: entry)"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "no telemetry, error reports or updates"),
        ("CLAUDE_CODE_MAX_RETRIES", "retries of a failed model call"),
        ("IS_SANDBOX", "lets bypassPermissions run as root"),
    )
    install = "npm install -g @anthropic-ai/claude-code (bat's CI: .ci/coding_agents.sh)"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        mode = options.get("permission_mode")
        if mode not in PERMISSION_MODES:
            raise InputError(
                f"options: permission_mode {str(mode)[:40]!r} is none of "
                f"{', '.join(PERMISSION_MODES)}"
            )
        turns = options.get("max_turns")
        if turns is not None and (type(turns) is not int or turns < 1):
            raise InputError("options: max_turns must be a whole number from 1, or null")
        retries = options.get("max_retries")
        if type(retries) is not int or not 0 <= retries <= 10:
            raise InputError("options: max_retries must be a whole number from 0 to 10")
        check_common(options)

    def invocation(self, turn: TurnInput) -> Invocation:
        options = {**self.defaults(), **turn.options}
        self.check_options(options)
        argv = [options["executable"], "-p", "--output-format", "stream-json", "--verbose"]
        if turn.session is None:
            argv += ["--session-id", turn.new_session]
        else:
            argv += ["--resume", turn.session]
        argv += ["--permission-mode", options["permission_mode"]]
        if turn.model.model:
            argv += ["--model", turn.model.model]
        if options["max_turns"] is not None:
            argv += ["--max-turns", str(options["max_turns"])]
        argv += [*options["extra_args"], "--", turn.message]
        env = {
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_MAX_RETRIES": str(options["max_retries"]),
        }
        if turn.model.base_url:
            env["ANTHROPIC_BASE_URL"] = turn.model.base_url
        key = turn.model.env.get("ANTHROPIC_API_KEY")
        if key:
            env["ANTHROPIC_API_KEY"] = key
        skips = options["permission_mode"] in SKIPS or SKIP_FLAG in options["extra_args"]
        if skips and hasattr(os, "geteuid") and os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"
        return Invocation(argv=argv, env=env)

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        reading = _Reading()
        for event in _events(stdout):
            reading.take(event)
        return reading.output(stderr, exit_code)


@dataclass
class _Reading:
    """What the events of one turn said, as they come."""

    events: int = 0
    session: str | None = None
    texts: list[str] = field(default_factory=list)
    calls: dict[str, ToolCall] = field(default_factory=dict)  # by tool_use id, in order
    messages: set[str] = field(default_factory=set)  # the model calls' message ids
    api_error: dict[str, Any] | None = None  # the last synthetic API-error message
    result: dict[str, Any] | None = None

    def take(self, event: dict[str, Any]) -> None:
        self.events += 1
        if isinstance(event.get("session_id"), str):
            self.session = event["session_id"][:200]
        kind = event.get("type")
        message = event.get("message")
        message = message if isinstance(message, dict) else {}
        if kind == "assistant":
            self._assistant(event, message)
        elif kind == "user":
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_result":
                    call = self.calls.get(str(block.get("tool_use_id")))
                    if call is not None:
                        call.result = _text(block.get("content"))[:MAX_TEXT]
                        call.error = block.get("is_error") is True
        elif kind == "result":
            self.result = event

    def _assistant(self, event: dict[str, Any], message: dict[str, Any]) -> None:
        if event.get("error") or event.get("is_api_error_message"):
            self.api_error = {**event, "text": _text(message.get("content"))}
            return
        if isinstance(message.get("id"), str) and len(self.messages) < MAX_EVENTS:
            self.messages.add(message["id"])
        for block in _blocks(message.get("content")):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                self.texts.append(block["text"][:MAX_TEXT])
            elif block.get("type") == "tool_use" and len(self.calls) < MAX_EVENTS:
                name = block.get("name")
                call = ToolCall(name=str(name)[:200] if name else "?", args=block.get("input"))
                self.calls[str(block.get("id", len(self.calls)))] = call

    def output(self, stderr: str, exit_code: int | None) -> TurnOutput:
        result = self.result or {}
        error = self._error(result, stderr, exit_code)
        reply = result.get("result") if isinstance(result.get("result"), str) else None
        if reply is None or error is not None:
            reply = "" if error is not None else (self.texts[-1] if self.texts else "")
        return TurnOutput(
            reply=reply[:MAX_TEXT],
            tool_calls=list(self.calls.values()),
            usage=self._usage(result),
            session=self.session,
            error=error,
            events=self.events,
        )

    def _usage(self, result: dict[str, Any]) -> Usage | None:
        usage = result.get("usage")
        if not isinstance(usage, dict):
            return None
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        prompt = sum(count(usage.get(key)) for key in keys)
        completion = count(usage.get("output_tokens"))
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            model_calls=len(self.messages),
        )

    def _error(
        self, result: dict[str, Any], stderr: str, exit_code: int | None
    ) -> AgentError | None:
        """The turn's error from the closed set, or None: read from the result event and
        the synthetic API-error message; a turn without a result from its words."""
        if self.result is not None and result.get("is_error") is not True:
            return None
        failed = self.api_error or {}
        status = result.get("api_error_status") or failed.get("api_error_status")
        status = status if type(status) is int else None
        tail = stderr.strip().splitlines()[-1:] if self.result is None else []
        words = (result.get("result"), failed.get("text"), result.get("errors"), *tail)
        shown = next((_one_line(str(w)) for w in words if w and _one_line(str(w))), "")
        labels = (failed.get("error"), result.get("api_error") or failed.get("api_error"))
        labels += (result.get("api_error_type") or failed.get("api_error_type"),)
        said = " ".join(str(part) for part in (shown, *labels) if part)
        if self.result is None and not said:
            what = "printed no events" if not self.events else "ended without a result"
            code = f" (exit status {exit_code})" if exit_code is not None else ""
            return AgentError(kind="unknown", message=f"Claude Code {what}{code}")
        message = shown[:MAX_MESSAGE] or "Claude Code reported an error"
        if result.get("subtype") == "error_max_turns":
            return AgentError(kind="unknown", message=message, code=status)
        return AgentError(kind=_kind(status, said), message=message, code=status)


def _kind(status: int | None, said: str) -> str:
    # Anthropic's 529 (overloaded) asks the client to come back later, as a 429 does.
    return "rate_limited" if status == 529 else kind_of(status, said, WORDS)


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(content: Any) -> str:
    texts = (b.get("text") for b in _blocks(content) if b.get("type") == "text")
    return "\n".join(t for t in texts if isinstance(t, str))


def _one_line(text: str) -> str:
    return " ".join(text.split())
