"""A scripted model server: a deterministic stand-in for an LLM provider.

Why: bat's end-to-end tests and evaluations drive a *real* agent, whose framework talks
HTTP to a model. A real model is slow, costs money, needs a key and never answers the same
way twice. This server speaks the wire protocols of BAT-ADK's providers and answers from a
rule file, so a test knows exactly what the agent must say, and so a new agent's first
evaluation runs offline (a model's ``script:`` in eval.yaml, served by ``model_run``):

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

A rule can also make the server misbehave, so a test can check a client's retries,
timeouts and parsing (an LLM judge's, say)::

    - match: task-7             # the first 2 matching requests get a 429...
      scope: prompt             # ...matched against the whole prompt, not the last message
      status: 429
      retry_after: 2            # the Retry-After header, in seconds
      times: 2                  # then this rule is used up: later rules answer
    - status: 500               # an error in the protocol's own JSON format
    - body: '<html>oops'        # this raw text as the body (status 200 unless `status`)
    - delay_ms: 1500            # wait before answering (the reply, or echo)
      reply: '{"score": 1}'     # the assistant's content, verbatim (JSON, fences, chatter)

A rule can also ask for tools, as a model with tools bound does, and answer what they
returned (OpenAI ``tool_calls``, streamed or not, and Ollama's)::

    - after_tool: add           # the last message is the result of a call to `add`
      reply: 'The sum is {result}.'
    - match: plus               # the model asks for add(a=2, b=3)...
      tool_calls: [{name: add, args: {a: 2, b: 3}}]

A rule with ``tool_calls`` (``reply`` optional, sent beside them) never answers a
conversation whose last message is a tool result, so a tool loop ends; a rule with
``after_tool`` (a tool name, or ``*`` for any) answers only such a conversation, its
``match``/``regex`` searched in the result, ``{result}`` standing for it.

``scope``: ``last`` (default; the last user message) or ``prompt`` (the text of every
message, system prompt included, joined by newlines). ``times``: the rule answers its
first N matches, then is skipped. ``body`` may hold ``{authorization}``, replaced by the
request's Authorization header (a server reflecting credentials, for tests that check a
client never repeats its key). A rule needs ``reply``, ``status`` or ``body``; unknown
keys are errors.

``POST /control`` changes the script of a running server (not counted in the stats):
``{"rules": [...]}`` replaces the rules (validated as a rule file is; a bad one is a
400) and restarts every ``times`` count; ``{"reset_stats": true}`` zeroes ``/stats``.

``python -m bat.evaluation.run.scripted_model --port 8000 [--rules FILE]`` (also
``python -m eval_fixtures.model_server``) binds only 127.0.0.1,
prints ``listening on http://127.0.0.1:PORT`` once it accepts connections (``--port 0``
picks a free port); ``GET /stats`` counts the requests it served, misbehaving answers
included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bat.evaluation.inputs.model_script import Messages, Rule, Rules, content_text

HOST = "127.0.0.1"
# A fixed clock and counted ids instead of time and random ids: identical request
# sequences get byte-identical replies, so a failing evaluation replays exactly.
CREATED = 1_700_000_000
CREATED_AT = "2023-11-14T22:13:20Z"
DEFAULT_MODEL = "scripted"
MS = 1_000_000  # Ollama reports durations in nanoseconds; we pretend 1 ms per token

Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(Exception):
    """A request this server cannot answer; each protocol words its 400 its own way."""


def pieces(text: str) -> list[str]:
    """Split a reply into stream chunks, one word each; joined, they give ``text`` back."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]


def usage_of(
    messages: Messages, reply: str, calls: tuple[tuple[str, str], ...] = ()
) -> dict[str, int]:
    """Token counts without a tokenizer: one token per whitespace-separated word (and
    one per tool call asked for)."""
    prompt = sum(len(content_text(m.get("content")).split()) for m in messages)
    completion = len(reply.split()) + len(calls)
    return dict(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def build_app(rules: Rules) -> Starlette:
    """The Starlette app answering from ``rules``, counting what it serves (GET /stats)."""
    # What was served, so a test can assert that the agent really called the model.
    by_path: Counter[str] = Counter()
    models: set[str] = set()
    # The script in force (POST /control replaces it) and the answers of each rule so far.
    script = {"rules": rules}
    used: Counter[int] = Counter()

    def counted(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            by_path[request.url.path] += 1
            return await handler(request)

        return endpoint

    async def scripted(messages: Messages) -> tuple[Rule | None, str]:
        """The rule and reply for ``messages``, after the rule's delay."""
        rule, reply = script["rules"].pick(messages, used)
        if rule is not None and rule.delay_ms:
            await asyncio.sleep(rule.delay_ms / 1000)
        return rule, reply

    def misbehaviour(
        request: Request, rule: Rule | None, error: Callable[[str, int], Any]
    ) -> Response | None:
        """The scripted failure of ``rule`` (``error`` words the protocol's error body)."""
        if rule is None or (rule.body is None and rule.status in (None, 200)):
            return None
        headers = {} if rule.retry_after is None else {"Retry-After": rule.retry_after}
        status = rule.status or 200
        if rule.body is not None:
            # A server that reflects the request's credentials in its error page: what a
            # client must never copy into its own messages.
            text = rule.body.replace("{authorization}", request.headers.get("authorization", ""))
            return Response(text, status_code=status, headers=headers, media_type="text/plain")
        body = error(f"scripted error {status}", status)
        return JSONResponse(body, status_code=status, headers=headers)

    def openai_error(message: str, status: int) -> dict[str, Any]:
        kind = "rate_limit_error" if status == 429 else "server_error"
        return {"error": {"message": message, "type": kind}}

    def ollama_error(message: str, status: int) -> dict[str, Any]:
        return {"error": message}

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
        rule, reply = await scripted(messages)
        failure = misbehaviour(request, rule, openai_error)
        if failure is not None:
            return failure
        calls = rule.tool_calls if rule is not None else ()
        usage = usage_of(messages, reply, calls)
        number = by_path[request.url.path]
        head = {"id": f"chatcmpl-{number:06d}", "created": CREATED, "model": model}
        tool_calls = [
            {"id": f"call_{number:06d}_{i}", "type": "function"}
            | {"function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ]
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply or None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            else:
                message["content"] = reply
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            completion = {**head, "object": "chat.completion", "choices": [choice]}
            return JSONResponse({**completion, "usage": usage})
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            choices = [] if delta is None else [choice]
            return json.dumps(
                {**head, "object": "chat.completion.chunk", "choices": choices, **extra}
            )

        async def events() -> AsyncIterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            for piece in pieces(reply):
                yield chunk({"content": piece})
            for index, call in enumerate(tool_calls):
                yield chunk({"tool_calls": [{"index": index, **call}]})
            yield chunk({}, finish)
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
        rule, reply = await scripted(messages)
        failure = misbehaviour(request, rule, ollama_error)
        if failure is not None:
            return failure
        calls = rule.tool_calls if rule is not None else ()
        usage = usage_of(messages, reply, calls)
        head = {"model": model, "created_at": CREATED_AT}
        tool_calls = [
            {"function": {"name": name, "arguments": json.loads(arguments)}}
            for name, arguments in calls
        ]
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
            if tool_calls:
                final["message"]["tool_calls"] = tool_calls
            return JSONResponse(final)

        async def lines() -> AsyncIterator[str]:
            for piece in pieces(reply):
                message = {"role": "assistant", "content": piece}
                yield json.dumps({**head, "message": message, "done": False}) + "\n"
            if tool_calls:
                message = {"role": "assistant", "content": "", "tool_calls": tool_calls}
                yield json.dumps({**head, "message": message, "done": False}) + "\n"
            yield json.dumps(final) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def show_stats(request: Request) -> Response:
        total = sum(by_path.values())
        return JSONResponse({"requests": total, "by_path": by_path, "models": sorted(models)})

    async def control(request: Request) -> Response:
        """Replace the rules and/or zero the stats of the running server."""
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("expected a JSON object")
            unknown = sorted(set(body) - {"rules", "reset_stats"})
            if unknown:
                raise ValueError(f"unknown key(s) {unknown}; known: rules, reset_stats")
            new_rules = Rules.from_data(body["rules"]) if "rules" in body else None
        except (ValueError, re.error) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if new_rules is not None:
            script["rules"] = new_rules
            used.clear()
        if body.get("reset_stats"):
            by_path.clear()
            models.clear()
        return JSONResponse({"rules": len(script["rules"].rules)})

    routes = [
        Route("/v1/chat/completions", counted(chat_completions), methods=["POST"]),
        Route("/v1/models", counted(list_models), methods=["GET"]),
        Route("/api/chat", counted(ollama_chat), methods=["POST"]),
        Route("/stats", show_stats, methods=["GET"]),  # not counted: it only observes
        Route("/control", control, methods=["POST"]),  # not counted: it steers the test
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
        raise SystemExit(f"scripted_model: cannot listen on {HOST}:{args.port}: {exc}") from None
    import uvicorn  # imported here: build_app alone (e.g. under a TestClient) needs no server

    print(f"listening on http://{HOST}:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(build_app(rules), log_level=args.log_level, lifespan="off")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


@contextlib.contextmanager
def serving(rules_path: Path) -> Iterator[str]:
    """Serve the rules of ``rules_path`` on a free port of 127.0.0.1 in a thread of this
    process, for as long as the block runs; yields the server's address.

    For a model's ``script:`` in eval.yaml: bat answers the agent's model calls itself,
    so no second process has to be started, waited for and stopped. The socket is bound
    before the thread starts, so the address works at once.
    """
    import threading

    import uvicorn

    rules = Rules.load(rules_path)
    sock = socket.create_server((HOST, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    config = uvicorn.Config(build_app(rules), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="bat-scripted-model", daemon=True
    )
    thread.start()
    try:
        yield f"http://{HOST}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


if __name__ == "__main__":
    main()
