"""Qwen Code (npm ``@qwen-code/qwen-code``), headless: one ``qwen --prompt=...`` per turn.

A turn runs::

    qwen --prompt=MESSAGE --output-format stream-json --auth-type openai
         --approval-mode auto-edit [-m MODEL] --session-id ID        (turn 1)
                                              --resume ID            (later turns)

The message rides in ``--prompt=`` (one argument), so a message starting with a dash is
never read as a flag. ``auto-edit`` lets file edits in the workspace through and denies
the rest without a prompt (nobody is there to answer one); ``plan`` and ``default``
deny writes too: the denied call is an error of that *call*, and Qwen Code exits 0.
The first turn takes bat's episode id as its session (Qwen Code wants a UUID; bat's is
one), and later turns resume the session the events named, so the model sees the earlier
conversation.

Offline and bounded: the run's model goes to ``OPENAI_BASE_URL``/``OPENAI_API_KEY``/
``OPENAI_MODEL``. A settings file in the private HOME (``.qwen/settings.json``) turns off
usage statistics (which otherwise post to a telemetry host at start), telemetry, update
checks, and the background "memory extraction" model call after each turn (an extra
request a scripted model would have to answer), and sets the SDK's retries of a failed
model call (option ``max_retries``, default 0). Qwen Code still retries a 429 or 5xx
answer itself, about 75 s in all; the turn timeout bounds that.

What it prints (``stream-json``) is one JSON object per line: ``system``/``init`` (the
session id), ``assistant`` messages (``text`` and ``tool_use`` blocks, with the call's
usage), ``user`` messages carrying each call's ``tool_result`` (``is_error`` for a denied
or failed one), and a final ``result`` (the reply and the turn's usage). A failed model
call is *no* event of its own: Qwen Code ends the turn with the text ``[API Error: 401
...]`` (or ``Connection error.``) as the reply and exits 0; :meth:`QwenCode.read` reads
the error from those words.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from bat.agents.kinds import CliAgent, Invocation, Option, TurnInput, TurnOutput
from bat.agents.presets._reading import (
    MAX_EVENTS,
    MAX_TEXT,
    check_choice,
    check_common,
    count,
    events,
    kind_of,
    last_line,
    shown,
)
from bat.errors import InputError
from bat.evaluation.log.episode import AgentError, ToolCall, Usage

APPROVAL_MODES = ("auto-edit", "plan", "default", "yolo")
SETTINGS = ".qwen/settings.json"
API_ERROR = re.compile(r"^\s*\[API Error:\s*(?:(\d{3})\b)?", re.I)


class QwenCode(CliAgent):
    name = "qwen-code"
    summary = "Qwen Code, headless (qwen --prompt, stream-json), any OpenAI chat model"
    executable = "qwen"
    key_variables = ("OPENAI_API_KEY",)
    options = (
        Option("executable", "qwen", "the qwen program (a path, or a name on PATH)"),
        Option("approval_mode", "auto-edit", f"--approval-mode: {', '.join(APPROVAL_MODES)}"),
        Option("max_retries", 0, "model.generationConfig.maxRetries: SDK retries of a call"),
        Option("extra_args", [], "more arguments, after bat's"),
    )
    variables = (
        ("OPENAI_BASE_URL", "the model's address (the run's models: entry), ending in /v1"),
        ("OPENAI_API_KEY", "the key sent as a bearer token"),
        ("OPENAI_MODEL", "the model's name (also given as -m)"),
    )
    install = "npm install -g @qwen-code/qwen-code (bat's CI: .ci/coding_agents.sh)"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_common(options)
        check_choice(options, "approval_mode", APPROVAL_MODES)
        retries = options.get("max_retries")
        if type(retries) is not int or not 0 <= retries <= 10:
            raise InputError("options: max_retries must be a whole number from 0 to 10")

    def invocation(self, turn: TurnInput) -> Invocation:
        options = {**self.defaults(), **turn.options}
        self.check_options(options)
        argv = [options["executable"], f"--prompt={turn.message}"]
        argv += ["--output-format", "stream-json", "--auth-type", "openai"]
        argv += ["--approval-mode", options["approval_mode"]]
        if turn.model.model:
            argv += ["-m", turn.model.model]
        if turn.session is not None:
            argv += ["--resume", turn.session]
        elif turn.index == 0 and _is_uuid(turn.new_session):
            argv += ["--session-id", turn.new_session]
        elif turn.index > 0:  # the first turn named no session: its private HOME's latest
            argv += ["--continue"]
        argv += options["extra_args"]
        env: dict[str, str] = {}
        if turn.model.base_url:
            env["OPENAI_BASE_URL"] = turn.model.base_url
        if turn.model.model:
            env["OPENAI_MODEL"] = turn.model.model
        key = turn.model.env.get("OPENAI_API_KEY")
        if key:
            env["OPENAI_API_KEY"] = key
        return Invocation(argv=argv, env=env, files={SETTINGS: settings(options["max_retries"])})

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        reading = _Reading()
        for event in events(stdout):
            reading.take(event)
        return reading.output(stderr, exit_code)


def settings(max_retries: int) -> str:
    """The settings file of the private HOME: nothing sent but the model's requests."""
    document = {
        "$version": 3,
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "memory": {"enableManagedAutoMemory": False},
        "model": {"generationConfig": {"maxRetries": max_retries}},
    }
    return json.dumps(document, indent=2) + "\n"


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text.lower()
    except (ValueError, AttributeError, TypeError):
        return False


@dataclass
class _Reading:
    """What the events of one turn said, as they come."""

    events: int = 0
    session: str | None = None
    texts: list[str] = field(default_factory=list)
    calls: dict[str, ToolCall] = field(default_factory=dict)  # by tool_use id, in order
    usage: Usage = field(default_factory=Usage)  # summed over the assistant messages
    result: dict[str, Any] | None = None

    def take(self, event: dict[str, Any]) -> None:
        self.events += 1
        if isinstance(event.get("session_id"), str) and event["session_id"]:
            self.session = event["session_id"][:200]
        kind = event.get("type")
        message = event.get("message")
        message = message if isinstance(message, dict) else {}
        if kind == "assistant":
            self._assistant(message)
        elif kind == "user":
            for block in _blocks(message.get("content")):
                if block.get("type") == "tool_result":
                    call = self.calls.get(str(block.get("tool_use_id")))
                    if call is not None:
                        call.result = _text(block.get("content"))[:MAX_TEXT]
                        call.error = block.get("is_error") is True
        elif kind == "result":
            self.result = event

    def _assistant(self, message: dict[str, Any]) -> None:
        blocks = _blocks(message.get("content"))
        for block in blocks:
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                self.texts.append(block["text"][:MAX_TEXT])
            elif block.get("type") == "tool_use" and len(self.calls) < MAX_EVENTS:
                name = block.get("name")
                call = ToolCall(name=str(name)[:200] if name else "?", args=block.get("input"))
                self.calls[str(block.get("id", len(self.calls)))] = call
        usage = message.get("usage")
        if isinstance(usage, dict) and not _api_error(_text(message.get("content"))):
            prompt = count(usage.get("input_tokens"))
            completion = count(usage.get("output_tokens"))
            self.usage = self.usage.add(
                Usage(
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    total_tokens=prompt + completion,
                    model_calls=1,
                )
            )

    def output(self, stderr: str, exit_code: int | None) -> TurnOutput:
        result = self.result or {}
        said = result.get("result") if isinstance(result.get("result"), str) else None
        reply = said if said is not None else (self.texts[-1] if self.texts else "")
        error = self._error(reply, result, stderr, exit_code)
        return TurnOutput(
            reply="" if error is not None else reply[:MAX_TEXT],
            tool_calls=list(self.calls.values()),
            usage=self.usage if self.usage.model_calls else None,
            session=self.session,
            error=error,
            events=self.events,
        )

    def _error(
        self, reply: str, result: dict[str, Any], stderr: str, exit_code: int | None
    ) -> AgentError | None:
        """The turn's error from the closed set, or None: the ``[API Error: ...]`` reply,
        an ``is_error`` result, or, with no result at all, stderr's last words."""
        found = _api_error(reply)
        if found is not None:
            status = int(found.group(1)) if found.group(1) else None
            return AgentError(kind=kind_of(status, reply), message=shown(reply), code=status)
        if self.result is not None:
            if result.get("is_error") is not True:
                return None
            words = " ".join(str(result.get(key) or "") for key in ("result", "error", "subtype"))
            return AgentError(
                kind=kind_of(None, words), message=shown(words) or "Qwen Code reported an error"
            )
        tail = last_line(stderr)
        what = "printed no events" if not self.events else "ended without a result"
        code = f" (exit status {exit_code})" if exit_code is not None else ""
        message = f"Qwen Code {what}{code}" + (f": {tail}" if tail else "")
        return AgentError(kind=kind_of(None, tail), message=message)


def _api_error(text: str) -> re.Match[str] | None:
    return API_ERROR.match(text[:200])


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(content: Any) -> str:
    texts = (b.get("text") for b in _blocks(content) if b.get("type") == "text")
    return "\n".join(t for t in texts if isinstance(t, str))
