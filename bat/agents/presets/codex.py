"""OpenAI Codex CLI (npm ``@openai/codex``), headless: one ``codex exec`` per turn.

A turn runs::

    codex exec --json --skip-git-repo-check -s SANDBOX [-m MODEL] -- MESSAGE         (turn 1)
    codex exec resume --json --skip-git-repo-check -c sandbox_mode="SANDBOX"
               [-m MODEL] -- THREAD MESSAGE                                         (later)

then ``extra_args`` (before the ``--``). The message comes after ``--``, so one starting
with a dash is never read as a flag. ``resume`` takes no ``-s``: the same setting goes
as a config override. The sandbox (option ``sandbox``, default ``workspace-write``) lets
commands write in the workspace only; ``read-only`` refuses every write, and Codex
still exits 0: the workspace checks fail instead. ``--skip-git-repo-check`` because a
workspace copied from a folder is no git repository.

Offline and bounded: a ``.codex/config.toml`` in the private HOME (Codex reads
``$HOME/.codex``) names a model provider ``bat`` at the run's ``base_url`` with
``wire_api = "responses"`` (``/v1/responses``), its key read from ``OPENAI_API_KEY``,
and no retries of a failed request or stream; feature ``unbounded_connection_retries``
off, without which Codex waits for a model it cannot connect to forever ("Reconnecting...
waiting for network"): a dead model is an error of the turn at once. It turns off what
would reach beyond the model: plugins (Codex 0.171 looks up github.com and chatgpt.com
for them at start), apps, analytics, update checks; approvals are ``never`` (nobody is
there to answer one). With no ``base_url`` (a ``models:`` entry without one) Codex uses
its own provider and login.

What it prints (``--json``) is one JSON object per line: ``thread.started`` (the thread
id a later turn resumes), ``turn.started``, ``item.started``/``item.completed`` for each
item (``agent_message``, ``reasoning``, ``command_execution`` with its output and exit
code, ``file_change``, ``mcp_tool_call``, ``web_search``, and ``error`` items, which are
warnings such as "Model metadata ... not found"), then ``turn.completed`` with the
turn's usage, or ``error`` and ``turn.failed`` when the model could not be reached or
refused (Codex then exits 1). :meth:`Codex.read` decides from those events, never from
the exit status alone.
"""

from __future__ import annotations

import json
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
    shown,
)
from bat.agents.presets._reading import events as _events
from bat.errors import InputError
from bat.evaluation.log.episode import AgentError, ToolCall, Usage

SANDBOXES = ("workspace-write", "read-only", "danger-full-access")
CONFIG = ".codex/config.toml"
KEY = "OPENAI_API_KEY"
STATUS = re.compile(r"\b(?:status(?: code)?:?\s*|http\s*)([45]\d\d)\b", re.I)
# What an error said: the words of Codex's messages (it seldom shows the HTTP status).
WORDS = (
    (
        re.compile(r"unauthori[sz]ed|authenticat|api key|\b40[13]\b", re.I),
        "authentication_failed",
    ),
    (re.compile(r"rate.?limit|too many requests|quota|usage limit|\b429\b", re.I), "rate_limited"),
    (
        re.compile(
            r"connection|connect|stream disconnected|error sending request|timed? ?out"
            r"|high demand|internal server error|\b5\d\d\b",
            re.I,
        ),
        "model_error",
    ),
)


class Codex(CliAgent):
    name = "codex"
    summary = "OpenAI Codex CLI, headless (codex exec --json), any Responses API model"
    executable = "codex"
    key_variables = (KEY,)
    options = (
        Option("executable", "codex", "the codex program (a path, or a name on PATH)"),
        Option("sandbox", "workspace-write", f"--sandbox: {', '.join(SANDBOXES)}"),
        Option("extra_args", [], "more arguments, after bat's"),
    )
    variables = (("HOME", "Codex reads $HOME/.codex/config.toml: bat writes the episode's there"),)
    install = "npm install -g @openai/codex (bat's CI: .ci/coding_agents.sh)"

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        sandbox = options.get("sandbox")
        if sandbox not in SANDBOXES:
            raise InputError(
                f"options: sandbox {str(sandbox)[:40]!r} is none of {', '.join(SANDBOXES)}"
            )
        check_common(options)

    def invocation(self, turn: TurnInput) -> Invocation:
        options = {**self.defaults(), **turn.options}
        self.check_options(options)
        argv = [options["executable"], "exec"]
        if turn.session is not None:
            argv += ["resume", "--json", "--skip-git-repo-check"]
            argv += ["-c", f"sandbox_mode={_toml(options['sandbox'])}"]
        else:
            argv += ["--json", "--skip-git-repo-check", "-s", options["sandbox"]]
        if turn.model.model:
            argv += ["-m", turn.model.model]
        argv += options["extra_args"]
        argv += ["--", *([turn.session] if turn.session is not None else []), turn.message]
        env: dict[str, str] = {}
        key = turn.model.env.get(KEY)
        if key:
            env[KEY] = key
        return Invocation(argv=argv, env=env, files={CONFIG: config(turn.model.base_url)})

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        reading = _Reading()
        for event in _events(stdout):
            reading.take(event)
        return reading.output(stderr, exit_code)


def config(base_url: str | None) -> str:
    """The private HOME's config.toml: the run's model as provider ``bat`` (when it has an
    address), no retries, nothing sent but the model's requests."""
    lines = [
        "# Written by bat for one episode: the run's model, and nothing else reached.",
        'approval_policy = "never"',
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "remote_plugin = false",
        "apps = false",
        "unbounded_connection_retries = false",
        "",
    ]
    if base_url:
        lines[3:3] = ['model_provider = "bat"']
        lines += [
            "[model_providers.bat]",
            'name = "bat"',
            f"base_url = {_toml(base_url)}",
            f"env_key = {_toml(KEY)}",
            'wire_api = "responses"',
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "",
        ]
    return "\n".join(lines)


def _toml(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes, which TOML shares, less the
    surrogate pairs TOML has not: non-ASCII stays as it is)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


@dataclass
class _Reading:
    """What the events of one turn said, as they come."""

    events: int = 0
    session: str | None = None
    replies: list[str] = field(default_factory=list)
    calls: dict[str, ToolCall] = field(default_factory=dict)  # by item id, as they started
    usage: Usage | None = None
    completed: bool = False
    failed: bool = False  # a turn.failed event
    failures: list[str] = field(default_factory=list)  # error / turn.failed messages

    def take(self, event: dict[str, Any]) -> None:
        self.events += 1
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.session = event["thread_id"][:200] or None
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                self._item(item, done=kind == "item.completed")
        elif kind == "turn.completed":
            self.completed = True
            self.usage = _usage(event.get("usage"), self.usage)
        elif kind == "turn.failed":
            self.failed = True
            error = event.get("error")
            said = error.get("message") if isinstance(error, dict) else None
            self.failures.append(_said(said) or "the turn failed")
        elif kind == "error":
            self.failures.append(_said(event.get("message")) or "Codex reported an error")

    def _item(self, item: dict[str, Any], done: bool) -> None:
        kind = item.get("type")
        if kind == "agent_message":
            if done and isinstance(item.get("text"), str):
                self.replies.append(item["text"][:MAX_TEXT])
            return
        call = _call(kind, item)
        if call is None:
            return
        key = str(item.get("id", len(self.calls)))
        if key in self.calls or len(self.calls) < MAX_EVENTS:
            self.calls[key] = call

    def output(self, stderr: str, exit_code: int | None) -> TurnOutput:
        error = self._error(stderr, exit_code)
        return TurnOutput(
            reply="" if error is not None else (self.replies[-1] if self.replies else ""),
            tool_calls=list(self.calls.values()),
            usage=self.usage,
            session=self.session,
            error=error,
            events=self.events,
        )

    def _error(self, stderr: str, exit_code: int | None) -> AgentError | None:
        """The turn's error from the closed set, or None: what ``error`` and
        ``turn.failed`` said; with neither and no ``turn.completed``, stderr's last words.
        An ``error`` event in a turn that completed was a retry that then went through
        ("Reconnecting... 1/5"), not the turn's error."""
        if self.completed and not self.failed:
            return None
        if self.failures:
            said = self.failures[-1]
            status = _status(" ".join(self.failures))
            return AgentError(kind=_kind(status, said), message=shown(said), code=status)
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
        what = "printed no events" if not self.events else "ended without completing its turn"
        code = f" (exit status {exit_code})" if exit_code is not None else ""
        message = f"Codex {what}{code}" + (f": {shown(tail[0])}" if tail else "")
        return AgentError(kind=_kind(None, tail[0]) if tail else "unknown", message=message)


def _call(kind: Any, item: dict[str, Any]) -> ToolCall | None:
    """A tool call of an item (its latest state), or None for items that are none."""
    status = item.get("status")
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        failed = status in ("failed", "declined") or (type(exit_code) is int and exit_code != 0)
        return ToolCall(
            name="command_execution",
            args={"command": _str(item.get("command"))},
            result=_str(item.get("aggregated_output"))[:MAX_TEXT],
            error=failed,
        )
    if kind == "file_change":
        changes = item.get("changes")
        listed = [
            {"path": _str(c.get("path")), "kind": _str(c.get("kind"))}
            for c in (changes if isinstance(changes, list) else [])[:1000]
            if isinstance(c, dict)
        ]
        return ToolCall(name="file_change", args={"changes": listed}, error=status == "failed")
    if kind == "mcp_tool_call":
        error = item.get("error")
        result = item.get("result")
        return ToolCall(
            name=f"{_str(item.get('server'))}/{_str(item.get('tool'))}"[:200],
            args=item.get("arguments"),
            result=_shown_json(result if error is None else error),
            error=status == "failed" or error is not None,
        )
    if kind == "web_search":
        return ToolCall(name="web_search", args={"query": _str(item.get("query"))})
    return None


def _usage(usage: Any, before: Usage | None) -> Usage | None:
    """The turn's usage added to ``before``. Codex does not say how many model requests
    a turn made, so ``model_calls`` stays 0."""
    if not isinstance(usage, dict):
        return before
    prompt = count(usage.get("input_tokens"))
    completion = count(usage.get("output_tokens"))
    found = Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )
    return found if before is None else before.add(found)


def _status(said: str) -> int | None:
    found = STATUS.search(said[:2000])
    return int(found.group(1)) if found else None


def _kind(status: int | None, said: str) -> str:
    return kind_of(status, said, WORDS)


def _said(value: Any) -> str:
    return value[: MAX_MESSAGE * 4] if isinstance(value, str) else ""


def _str(value: Any) -> str:
    return value[:MAX_TEXT] if isinstance(value, str) else ""


def _shown_json(value: Any) -> Any:
    """A result as kept: text cut to MAX_TEXT, anything else as its JSON, cut."""
    if value is None or isinstance(value, str):
        return value[:MAX_TEXT] if isinstance(value, str) else None
    try:
        return json.dumps(value)[:MAX_TEXT]
    except (TypeError, ValueError, RecursionError):
        return None
