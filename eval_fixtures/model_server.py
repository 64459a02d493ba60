"""A scripted model server: a deterministic stand-in for an LLM provider.

Why it exists: bat's end-to-end tests and evaluations must drive a *real* agent, whose
framework talks HTTP to a model. A real model is slow, costs money, needs a key and never
answers twice the same way. This server speaks the wire protocols BAT-ADK's providers use
and answers from a small rule file, so a test knows exactly what the agent has to say:

* OpenAI chat completions: ``POST /v1/chat/completions`` (JSON, or SSE chunks ending with
  ``data: [DONE]`` when ``"stream": true``) and ``GET /v1/models``;
* Ollama's native API: ``POST /api/chat`` (JSON, or NDJSON lines; Ollama streams by default).

Rule file (JSON or YAML): a list of rules, the first that matches the last user message wins::

    - match: weather            # a substring of the last user message
      reply: It is sunny.
    - regex: '^(hi|hello)\\b'    # a regular expression searched in it
      reply: Hello!
    - reply: 'echo: {last}'     # neither: the default rule

Replies may use {last} (the last user message), {first} (the first one), {user_count}
(user messages received) and {message_count} (all messages, system prompt included), so a
test can check that an agent sent its conversation history. With no rule file, or when no
rule matches, the reply is ``echo: <last user message>``.

Run it as ``python -m eval_fixtures.model_server --port 8000 [--rules FILE]``. It binds only
127.0.0.1, prints ``listening on http://127.0.0.1:PORT`` once it accepts connections
(``--port 0`` picks a free port) and ``GET /stats`` reports the requests it served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

HOST = "127.0.0.1"
# A fixed clock and counters instead of time and random ids: identical requests get
# byte-identical replies, so a failing evaluation can be replayed exactly.
CREATED = 1_700_000_000
CREATED_AT = "2023-11-14T22:13:20Z"
DEFAULT_MODEL = "scripted"
ECHO = "echo: {last}"
PLACEHOLDER = re.compile(r"\{(last|first|user_count|message_count)\}")

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Rule:
    """One scripted answer: ``reply`` when ``pattern`` occurs in the last user message."""

    reply: str
    pattern: re.Pattern[str] | None = None  # None: the default rule, which matches anything

    def matches(self, text: str) -> bool:
        return self.pattern is None or self.pattern.search(text) is not None


@dataclass(frozen=True)
class Rules:
    """The script of the server: ordered rules, first match wins, echo when none does."""

    rules: tuple[Rule, ...] = ()

    @classmethod
    def load(cls, path: str | Path) -> Rules:
        """Read a rule file: JSON if it ends with .json, YAML otherwise."""
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith(".json"):
            return cls.from_data(json.loads(text))
        import yaml  # only needed for YAML rule files

        try:
            return cls.from_data(yaml.safe_load(text))
        except yaml.YAMLError as exc:
            raise ValueError(f"not valid YAML: {exc}") from exc

    @classmethod
    def from_data(cls, data: Any) -> Rules:
        """Validate parsed rules early, so a typo fails at start-up, not mid-test."""
        if not isinstance(data, list):
            raise ValueError("a rule file holds a list of {match|regex, reply} rules")
        rules = []
        for index, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("reply"), str):
                raise ValueError(f"rule {index}: needs a 'reply' text, got {item!r}")
            if "match" in item and "regex" in item:
                raise ValueError(f"rule {index}: give 'match' or 'regex', not both")
            pattern = None
            if "match" in item:
                pattern = re.compile(re.escape(str(item["match"])))
            elif "regex" in item:
                pattern = re.compile(str(item["regex"]))
            rules.append(Rule(reply=item["reply"], pattern=pattern))
        return cls(tuple(rules))

    def reply(self, messages: list[dict[str, Any]]) -> str:
        """The scripted reply to a conversation, placeholders filled in."""
        users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
        last = users[-1] if users else ""
        template = next((rule.reply for rule in self.rules if rule.matches(last)), ECHO)
        values = {
            "last": last,
            "first": users[0] if users else "",
            "user_count": str(len(users)),
            "message_count": str(len(messages)),
        }
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


@dataclass
class Stats:
    """What the server served, so a test can assert the agent really called the model."""

    by_path: Counter[str] = field(default_factory=Counter)
    models: set[str] = field(default_factory=set)

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": sum(self.by_path.values()),
            "by_path": dict(self.by_path),
            "models": sorted(self.models),
        }


def content_text(content: Any) -> str:
    """The text of a message: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def count_words(text: str) -> int:
    """Deterministic stand-in for a tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def pieces(text: str) -> list[str]:
    """Split a reply into stream chunks, one word each; joined, they give ``text`` back."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]


def usage_of(messages: list[dict[str, Any]], reply: str) -> dict[str, int]:
    prompt = sum(count_words(content_text(m.get("content"))) for m in messages)
    completion = count_words(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def build_app(rules: Rules) -> Starlette:
    """The Starlette app serving ``rules``; its ``state.stats`` counts what it served."""
    stats = Stats()

    def counted(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            stats.by_path[request.url.path] += 1
            return await handler(request)

        return endpoint

    async def read_chat(request: Request) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        try:
            body = await request.json()
        except ValueError as exc:
            raise BadRequest(f"body is not JSON: {exc}") from exc
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("'messages' must be a list of objects")
        stats.models.add(str(body.get("model") or DEFAULT_MODEL))
        return body, messages

    async def chat_completions(request: Request) -> Response:
        try:
            body, messages = await read_chat(request)
        except BadRequest as exc:
            error = {"message": str(exc), "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=400)
        model = str(body.get("model") or DEFAULT_MODEL)
        reply = rules.reply(messages)
        usage = usage_of(messages, reply)
        head = {"id": f"chatcmpl-{stats.by_path[request.url.path]:06d}", "created": CREATED}
        head["model"] = model
        if not body.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            return JSONResponse(
                {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def events() -> AsyncIterator[str]:
            def chunk(delta: dict[str, str], finish: str | None) -> str:
                choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                return json.dumps({**head, "object": "chat.completion.chunk", "choices": [choice]})

            yield chunk({"role": "assistant", "content": ""}, None)
            for piece in pieces(reply):
                yield chunk({"content": piece}, None)
            yield chunk({}, "stop")
            if want_usage:  # OpenAI sends usage last, in a chunk without choices
                obj = {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                yield json.dumps(obj)
            yield "[DONE]"

        return EventSourceResponse(events())

    async def list_models(request: Request) -> Response:
        names = sorted(stats.models | {DEFAULT_MODEL})
        data = [
            {"id": n, "object": "model", "created": CREATED, "owned_by": "scripted"} for n in names
        ]
        return JSONResponse({"object": "list", "data": data})

    async def ollama_chat(request: Request) -> Response:
        try:
            body, messages = await read_chat(request)
        except BadRequest as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        model = str(body.get("model") or DEFAULT_MODEL)
        reply = rules.reply(messages)
        usage = usage_of(messages, reply)
        final = {
            "model": model,
            "created_at": CREATED_AT,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": usage["total_tokens"] * 1_000_000,  # 1 ms a token, in ns
            "load_duration": 0,
            "prompt_eval_count": usage["prompt_tokens"],
            "prompt_eval_duration": usage["prompt_tokens"] * 1_000_000,
            "eval_count": usage["completion_tokens"],
            "eval_duration": usage["completion_tokens"] * 1_000_000,
        }
        if body.get("stream", True) is False:
            final["message"]["content"] = reply
            return JSONResponse(final)

        async def lines() -> AsyncIterator[str]:
            for piece in pieces(reply):
                message = {"role": "assistant", "content": piece}
                part = {"model": model, "created_at": CREATED_AT, "message": message, "done": False}
                yield json.dumps(part) + "\n"
            yield json.dumps(final) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def show_stats(request: Request) -> Response:
        return JSONResponse(stats.as_json())

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", counted(chat_completions), methods=["POST"]),
            Route("/v1/models", counted(list_models), methods=["GET"]),
            Route("/api/chat", counted(ollama_chat), methods=["POST"]),
            Route("/stats", show_stats, methods=["GET"]),  # not counted: it observes
        ]
    )
    app.state.stats = stats
    return app


class BadRequest(Exception):
    """A request this server cannot answer; each protocol words the 400 its own way."""


async def serve(app: Starlette, port: int, log_level: str = "warning") -> None:
    """Serve ``app`` on 127.0.0.1:``port``; announce the address once connections work."""
    import uvicorn  # imported here: build_app alone (e.g. with a TestClient) needs no server

    config = uvicorn.Config(app, host=HOST, port=port, log_level=log_level, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():  # could not bind: uvicorn has logged why
            await task
            raise SystemExit(1)
        await asyncio.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    print(f"listening on http://{HOST}:{bound}", flush=True)
    await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--rules", type=Path, help="JSON or YAML rule file (default: echo)")
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level")
    args = parser.parse_args(argv)
    try:
        rules = Rules.load(args.rules) if args.rules else Rules()
    except (OSError, ValueError, re.error) as exc:
        parser.error(f"--rules {args.rules}: {exc}")
    asyncio.run(serve(build_app(rules), args.port, args.log_level))


if __name__ == "__main__":
    main()
