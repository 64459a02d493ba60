"""A scripted model server: a deterministic stand-in for an LLM provider.

Why: bat's end-to-end tests and evaluations drive a *real* agent, whose framework talks
HTTP to a model. A real model is slow, costs money, needs a key and never answers the same
way twice. This server speaks the wire protocols of BAT-ADK's providers and answers from a
rule file, so a test knows exactly what the agent must say:

* OpenAI chat completions: ``POST /v1/chat/completions`` (JSON, or SSE chunks ending with
  ``data: [DONE]`` when ``"stream": true``) and ``GET /v1/models``;
* Ollama: ``POST /api/chat`` (JSON, or NDJSON lines: Ollama streams unless told not to).

Rule file (JSON or YAML), a list; the first rule matching the last user message wins::

    - match: weather            # a substring of the last user message
      reply: It is sunny.
    - regex: '^(hi|hello)\\b'    # a regular expression searched in it
      reply: Hello!
    - reply: 'echo: {last}'     # neither: the default rule

Replies may use {last} and {first} (the last and first user messages), {user_count} and
{message_count} (system prompt included), so a test can check that an agent sent its
history. With no rule file, or no match, the reply is ``echo: <last user message>``.

``python -m eval_fixtures.model_server --port 8000 [--rules FILE]`` binds only 127.0.0.1,
prints ``listening on http://127.0.0.1:PORT`` once it accepts connections (``--port 0``
picks a free port); ``GET /stats`` counts the requests it served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

HOST = "127.0.0.1"
# A fixed clock and counted ids instead of time and random ids: identical request
# sequences get byte-identical replies, so a failing evaluation replays exactly.
CREATED = 1_700_000_000
CREATED_AT = "2023-11-14T22:13:20Z"
DEFAULT_MODEL = "scripted"
ECHO = "echo: {last}"
PLACEHOLDER = re.compile(r"\{(last|first|user_count|message_count)\}")
MS = 1_000_000  # Ollama reports durations in nanoseconds; we pretend 1 ms per token

Handler = Callable[[Request], Awaitable[Response]]
Messages = list[dict[str, Any]]


class BadRequest(Exception):
    """A request this server cannot answer; each protocol words its 400 its own way."""


@dataclass(frozen=True)
class Rule:
    """One scripted answer: ``reply`` when ``pattern`` occurs in the last user message."""

    reply: str
    pattern: re.Pattern[str] | None = None  # None: the default rule, matching anything

    def matches(self, text: str) -> bool:
        return self.pattern is None or self.pattern.search(text) is not None


@dataclass(frozen=True)
class Rules:
    """The script of the server: ordered rules, first match wins, echo when none does."""

    rules: tuple[Rule, ...] = ()

    @classmethod
    def load(cls, path: str | Path) -> Rules:
        """Read a rule file: JSON if its name ends with .json, YAML otherwise."""
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith(".json"):
            return cls.from_data(json.loads(text))
        import yaml  # only YAML rule files need it

        try:
            return cls.from_data(yaml.safe_load(text))
        except yaml.YAMLError as exc:
            raise ValueError(f"not valid YAML: {exc}") from exc

    @classmethod
    def from_data(cls, data: Any) -> Rules:
        """Validate parsed rules, so a typo fails at start-up rather than mid-test."""
        if not isinstance(data, list):
            raise ValueError("a rule file holds a list of {match|regex, reply} rules")
        rules = []
        for index, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("reply"), str):
                raise ValueError(f"rule {index}: needs a 'reply' text, got {item!r}")
            if "match" in item and "regex" in item:
                raise ValueError(f"rule {index}: give 'match' or 'regex', not both")
            source = re.escape(str(item["match"])) if "match" in item else item.get("regex")
            pattern = None if source is None else re.compile(str(source))
            rules.append(Rule(reply=item["reply"], pattern=pattern))
        return cls(tuple(rules))

    def reply(self, messages: Messages) -> str:
        """The scripted reply to a conversation, placeholders filled in."""
        users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
        last = users[-1] if users else ""
        template = next((rule.reply for rule in self.rules if rule.matches(last)), ECHO)
        values = {"last": last, "first": users[0] if users else "", "user_count": str(len(users))}
        values["message_count"] = str(len(messages))
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def content_text(content: Any) -> str:
    """The text of a message: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def pieces(text: str) -> list[str]:
    """Split a reply into stream chunks, one word each; joined, they give ``text`` back."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]


def usage_of(messages: Messages, reply: str) -> dict[str, int]:
    """Token counts without a tokenizer: one token per whitespace-separated word."""
    prompt = sum(len(content_text(m.get("content")).split()) for m in messages)
    completion = len(reply.split())
    return dict(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def build_app(rules: Rules) -> Starlette:
    """The Starlette app answering from ``rules``, counting what it serves (GET /stats)."""
    # What was served, so a test can assert that the agent really called the model.
    by_path: Counter[str] = Counter()
    models: set[str] = set()

    def counted(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            by_path[request.url.path] += 1
            return await handler(request)

        return endpoint

    async def read_chat(request: Request) -> tuple[dict[str, Any], Messages, str]:
        """The body, its messages and its model; BadRequest if they are unusable."""
        try:
            body = await request.json()
        except ValueError as exc:
            raise BadRequest(f"body is not JSON: {exc}") from exc
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("'messages' must be a list of objects")
        model = str(body.get("model") or DEFAULT_MODEL)
        models.add(model)
        return body, messages, model

    async def chat_completions(request: Request) -> Response:
        try:
            body, messages, model = await read_chat(request)
        except BadRequest as exc:
            error = {"message": str(exc), "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=400)
        reply = rules.reply(messages)
        usage = usage_of(messages, reply)
        number = by_path[request.url.path]
        head = {"id": f"chatcmpl-{number:06d}", "created": CREATED, "model": model}
        if not body.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            completion = {**head, "object": "chat.completion", "choices": [choice]}
            return JSONResponse({**completion, "usage": usage})
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, str] | None, finish: str | None = None, **extra: Any) -> str:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            choices = [] if delta is None else [choice]
            return json.dumps(
                {**head, "object": "chat.completion.chunk", "choices": choices, **extra}
            )

        async def events() -> AsyncIterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            for piece in pieces(reply):
                yield chunk({"content": piece})
            yield chunk({}, "stop")
            if want_usage:  # as OpenAI does: usage last, in a chunk without choices
                yield chunk(None, usage=usage)
            yield "[DONE]"

        return EventSourceResponse(events())

    async def list_models(request: Request) -> Response:
        names = sorted(models | {DEFAULT_MODEL})
        data = [{"id": n, "object": "model", "created": CREATED, "owned_by": "bat"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    async def ollama_chat(request: Request) -> Response:
        try:
            body, messages, model = await read_chat(request)
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        reply = rules.reply(messages)
        usage = usage_of(messages, reply)
        head = {"model": model, "created_at": CREATED_AT}
        final = {
            **head,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": usage["total_tokens"] * MS,
            "load_duration": 0,
            "prompt_eval_count": usage["prompt_tokens"],
            "prompt_eval_duration": usage["prompt_tokens"] * MS,
            "eval_count": usage["completion_tokens"],
            "eval_duration": usage["completion_tokens"] * MS,
        }
        if body.get("stream", True) is False:
            final["message"]["content"] = reply
            return JSONResponse(final)

        async def lines() -> AsyncIterator[str]:
            for piece in pieces(reply):
                message = {"role": "assistant", "content": piece}
                yield json.dumps({**head, "message": message, "done": False}) + "\n"
            yield json.dumps(final) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def show_stats(request: Request) -> Response:
        total = sum(by_path.values())
        return JSONResponse({"requests": total, "by_path": by_path, "models": sorted(models)})

    routes = [
        Route("/v1/chat/completions", counted(chat_completions), methods=["POST"]),
        Route("/v1/models", counted(list_models), methods=["GET"]),
        Route("/api/chat", counted(ollama_chat), methods=["POST"]),
        Route("/stats", show_stats, methods=["GET"]),  # not counted: it only observes
    ]
    app = Starlette(routes=routes)
    return app


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, listen, announce the address, serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--rules", type=Path, help="JSON or YAML rule file (default: echo)")
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level")
    args = parser.parse_args(argv)
    try:
        rules = Rules.load(args.rules) if args.rules else Rules()
    except (OSError, ValueError, re.error) as exc:
        parser.error(f"--rules {args.rules}: {exc}")
    try:
        # Bound here, not by uvicorn: the ready line can be printed as soon as connecting
        # works (early clients wait in the backlog) and a busy port is one clear error.
        sock = socket.create_server((HOST, args.port))
        # Connections inherit this from the listener. asyncio only sets it on sockets it
        # recognises as TCP, and uvicorn's copy of a passed-in socket does not look like
        # one: without it, every response on a kept-alive connection waits ~40 ms for the
        # client's delayed ACK (Nagle).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        raise SystemExit(f"model_server: cannot listen on {HOST}:{args.port}: {exc}") from None
    import uvicorn  # imported here: build_app alone (e.g. under a TestClient) needs no server

    print(f"listening on http://{HOST}:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(build_app(rules), log_level=args.log_level, lifespan="off")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
