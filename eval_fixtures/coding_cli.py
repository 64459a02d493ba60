"""A tiny headless coding agent: the CLI that bat's ``command`` adapter and the second
demo drive, so both are tested against a real program and a real model server.

    python coding_cli.py [--resume SESSION] [--output ndjson|text] [--read-only] MESSAGE

It works in the current directory (the workspace) the way Claude Code or Qwen Code do in
headless mode: it sends the conversation to an OpenAI chat-completions model
(``$BAT_MODEL_BASE_URL``/chat/completions, model ``$BAT_MODEL``, ``$OPENAI_API_KEY`` as a
bearer key if set), runs the tools the model asks for, and loops until the model answers
in text (at most :data:`MAX_STEPS` model calls). Tools: ``read_file(path)``,
``write_file(path, content)``, ``replace_in_file(path, old, new)``, ``run(command)``.
Paths outside the working directory are refused, as a real CLI's sandbox refuses them;
``--read-only`` refuses every tool that could change a file, a tool error the model sees,
and the CLI still exits 0 (real CLIs do: a refused tool is not a failed run).

The conversation is kept in ``$HOME/.coding-cli/sessions/ID.json``; ``--resume ID``
continues it, so a second turn's model sees the first. Output: bat's NDJSON (``session``,
``text``, ``tool_call``, ``tool_result``, ``usage``, ``error``; one JSON object a line)
or, with ``--output text``, only the final answer. A model that cannot be used is one
``error`` event (401/403: ``authentication_failed``, 429: ``rate_limited``, a refused
connection or any other status: ``model_error``) and exit status 1; nothing is retried,
so a test sees exactly what the model did. Stdlib only, and proxies are never used:
the model is wherever the base URL says, and nowhere else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

MAX_STEPS = 20  # model calls of one turn
MAX_FILE = 1_000_000  # characters a tool reads or writes
MAX_OUTPUT = 20_000  # characters of a command's output the model gets
RUN_TIMEOUT_S = 120
MAX_SESSION = 50_000_000  # bytes of a session file resumed
MODEL_TIMEOUT_S = float(os.environ.get("CODING_CLI_MODEL_TIMEOUT_S") or 300)
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SYSTEM = (
    "You are coding-cli, a small coding agent. Use the tools to read and change files "
    "and to run commands, then answer briefly.\nWorking directory: {cwd}"
)
TOOLS = {
    "read_file": ("Read a text file of the working directory.", {"path": "string"}),
    "write_file": (
        "Write a text file (created or replaced).",
        {"path": "string", "content": "string"},
    ),
    "replace_in_file": (
        "Replace the one occurrence of `old` in a file by `new`.",
        {"path": "string", "old": "string", "new": "string"},
    ),
    "run": ("Run a shell command in the working directory.", {"command": "string"}),
}
WRITING = {"write_file", "replace_in_file", "run"}


class ToolError(Exception):
    """A tool call that cannot be done: its message is the tool's (error) result."""


class ModelError(Exception):
    """The model cannot be used: the ``error`` event's kind and message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Output:
    """Where the turn's events go: NDJSON lines as they happen, or the answer at the end."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.answer = ""

    def emit(self, **event: Any) -> None:
        if event["type"] == "text":
            self.answer = event["text"]
        if self.mode == "ndjson":
            print(json.dumps(event), flush=True)
        elif event["type"] == "error":
            print(f"coding-cli: {event['kind']}: {event['message']}", file=sys.stderr)

    def finish(self) -> None:
        if self.mode == "text" and self.answer:
            print(self.answer, flush=True)


def tool_schemas() -> list[dict[str, Any]]:
    """The tools in OpenAI's function-calling format."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {key: {"type": kind} for key, kind in params.items()},
                    "required": list(params),
                },
            },
        }
        for name, (description, params) in TOOLS.items()
    ]


def inside(root: Path, path: Any) -> Path:
    """``path`` within ``root``; anything leading out of it (``..``, absolute, a link) is
    refused, as a sandboxed CLI refuses it."""
    if not isinstance(path, str) or not path:
        raise ToolError("path: a non-empty string is needed")
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{path}: outside the working directory, refused")
    return target


def call_tool(root: Path, name: str, args: Any, read_only: bool) -> str:
    """Do one tool call in ``root``; a :class:`ToolError` is the model's to read."""
    if name not in TOOLS:
        raise ToolError(f"unknown tool {name!r}")
    if not isinstance(args, dict):
        raise ToolError("arguments: a JSON object is needed")
    missing = [key for key in TOOLS[name][1] if not isinstance(args.get(key), str)]
    if missing:
        raise ToolError(f"{name}: missing text argument(s) {', '.join(missing)}")
    if read_only and name in WRITING:
        raise ToolError(f"{name}: refused, this session is read-only")
    if name == "run":
        return run_command(root, args["command"])
    path = inside(root, args["path"])
    if name == "write_file":
        if len(args["content"]) > MAX_FILE:
            raise ToolError(f"{args['path']}: content longer than {MAX_FILE} characters")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args["content"], encoding="utf-8")
        return f"wrote {len(args['content'])} characters to {args['path']}"
    text = read_text(path, args["path"])
    if name == "read_file":
        return text
    found = text.count(args["old"]) if args["old"] else 0
    if found != 1:
        raise ToolError(f"{args['path']}: the old text occurs {found} times, not once")
    path.write_text(text.replace(args["old"], args["new"], 1), encoding="utf-8")
    return f"replaced 1 occurrence in {args['path']}"


def read_text(path: Path, shown: str) -> str:
    if not path.is_file():
        raise ToolError(f"{shown}: no such file")
    if path.stat().st_size > MAX_FILE:
        raise ToolError(f"{shown}: larger than {MAX_FILE} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{shown}: cannot be read ({exc.__class__.__name__})") from None


def run_command(root: Path, command: str) -> str:
    """A shell command in ``root``: its exit status and (the end of) its output."""
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=root,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=RUN_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"timed out after {RUN_TIMEOUT_S} s") from None
    output = (done.stdout + done.stderr)[-MAX_OUTPUT:]
    if done.returncode:
        raise ToolError(f"exit status {done.returncode}\n{output}")
    return f"exit status 0\n{output}"


def ask_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One chat-completions call: the response's JSON, or a :class:`ModelError`."""
    base_url = os.environ.get("BAT_MODEL_BASE_URL", "").rstrip("/")
    if not base_url:
        raise ModelError("model_error", "BAT_MODEL_BASE_URL is not set")
    body = {"model": os.environ.get("BAT_MODEL") or "default", "messages": messages}
    body["tools"] = tool_schemas()
    headers = {"Content-Type": "application/json"}
    if os.environ.get("OPENAI_API_KEY"):
        headers["Authorization"] = f"Bearer {os.environ['OPENAI_API_KEY']}"
    request = urllib.request.Request(
        f"{base_url}/chat/completions", json.dumps(body).encode(), headers, method="POST"
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=MODEL_TIMEOUT_S) as response:
            return json.loads(response.read(50_000_000))
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace").strip()
        kind = {401: "authentication_failed", 403: "authentication_failed"}
        kind[429] = "rate_limited"
        raise ModelError(kind.get(exc.code, "model_error"), f"HTTP {exc.code}: {detail}") from None
    except TimeoutError:
        raise ModelError("timeout", f"no answer from the model in {MODEL_TIMEOUT_S} s") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise ModelError(
                "timeout", f"no answer from the model in {MODEL_TIMEOUT_S} s"
            ) from None
        raise ModelError("model_error", f"cannot reach {base_url}: {reason}") from None
    except ValueError:
        raise ModelError("model_error", "the model's answer is not JSON") from None


class Session:
    """A conversation kept in ``$HOME/.coding-cli/sessions/ID.json``."""

    def __init__(self, resume: str | None, cwd: Path) -> None:
        folder = Path(os.environ.get("HOME") or Path.home()) / ".coding-cli" / "sessions"
        self.id = resume or uuid.uuid4().hex[:16]
        if not SESSION_ID.fullmatch(self.id):
            raise ModelError("refused", f"--resume {resume!r}: not a session id")
        self.path = folder / f"{self.id}.json"
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM.format(cwd=cwd)}
        ]
        if resume:
            try:
                if self.path.stat().st_size > MAX_SESSION:
                    raise ModelError("refused", f"--resume {resume}: over {MAX_SESSION} bytes")
                self.messages = json.loads(self.path.read_text(encoding="utf-8"))["messages"]
                if not isinstance(self.messages, list):
                    raise TypeError
            except (OSError, ValueError, KeyError, TypeError):
                raise ModelError("refused", f"--resume {resume}: no such session") from None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"id": self.id, "messages": self.messages})
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(self.path)


def turn(session: Session, message: str, out: Output, root: Path, read_only: bool) -> None:
    """The model and the tools, in turn, until the model answers in text."""
    session.messages.append({"role": "user", "content": message})
    for _ in range(MAX_STEPS):
        answer = ask_model(session.messages)
        usage = answer.get("usage") or {}
        out.emit(
            type="usage",
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        )
        try:
            reply = answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError("model_error", "the model's answer has no message") from None
        calls = reply.get("tool_calls") or []
        text = reply.get("content") or ""
        said: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            said["tool_calls"] = calls
        session.messages.append(said)
        if text:
            out.emit(type="text", text=text)
        if not calls:
            return
        for call in calls:
            name = call.get("function", {}).get("name", "")
            try:
                args = json.loads(call.get("function", {}).get("arguments") or "{}")
            except ValueError:
                args = None
            out.emit(type="tool_call", id=call.get("id", ""), name=name, args=args)
            try:
                result, error = call_tool(root, name, args, read_only), False
            except ToolError as exc:
                result, error = str(exc), True
            out.emit(type="tool_result", id=call.get("id", ""), result=result, error=error)
            session.messages.append(
                {"role": "tool", "tool_call_id": call.get("id", ""), "content": result}
            )
        session.save()
    raise ModelError("unknown", f"no answer after {MAX_STEPS} model calls")


def _save_quietly(session: Session) -> None:
    """Keep what the turn got to (a real CLI's session survives a failed turn)."""
    with contextlib.suppress(OSError):
        session.save()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coding_cli.py", description=__doc__.split("\n")[0])
    parser.add_argument("--resume", metavar="SESSION", help="continue this session")
    parser.add_argument("--output", choices=("ndjson", "text"), default="ndjson")
    parser.add_argument("--read-only", action="store_true", help="refuse tools that write")
    parser.add_argument("message")
    args = parser.parse_args(argv)
    out = Output(args.output)
    root = Path.cwd().resolve()
    try:
        session = Session(args.resume, root)
    except ModelError as exc:
        out.emit(type="error", kind=exc.kind, message=str(exc))
        return 1
    out.emit(type="session", id=session.id)
    try:
        turn(session, args.message, out, root, args.read_only)
        session.save()
    except ModelError as exc:
        out.emit(type="error", kind=exc.kind, message=str(exc))
        _save_quietly(session)
        return 1
    except OSError as exc:  # the session cannot be kept, a folder vanished: one line
        out.emit(type="error", kind="unknown", message=f"{exc.__class__.__name__}: {exc}")
        return 1
    out.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
