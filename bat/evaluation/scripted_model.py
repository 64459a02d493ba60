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

``python -m bat.evaluation.scripted_model --port 8000 [--rules FILE]`` (also
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
PLACEHOLDER = re.compile(r"\{(last|first|user_count|message_count|result)\}")
MS = 1_000_000  # Ollama reports durations in nanoseconds; we pretend 1 ms per token

Handler = Callable[[Request], Awaitable[Response]]
Messages = list[dict[str, Any]]


class BadRequest(Exception):
    """A request this server cannot answer; each protocol words its 400 its own way."""


RULE_KEYS = {"match", "regex", "scope", "reply", "status", "body", "retry_after", "delay_ms"}
RULE_KEYS |= {"times", "tool_calls", "after_tool"}
SCOPES = ("last", "prompt")


@dataclass(frozen=True)
class Rule:
    """One scripted answer: ``reply`` when ``pattern`` occurs in the text ``scope`` names.

    ``status``, ``body``, ``retry_after`` and ``delay_ms`` make the answer misbehave;
    ``times`` limits the rule to its first N matches.
    """

    reply: str | None = None
    pattern: re.Pattern[str] | None = None  # None: the default rule, matching anything
    scope: str = "last"
    status: int | None = None
    body: str | None = None
    retry_after: str | None = None
    delay_ms: int = 0
    times: int | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, arguments as JSON)
    after_tool: str | None = None

    def matches(self, last: str, prompt: str, tool: tuple[str, str] | None = None) -> bool:
        """Whether this rule answers; ``tool`` is (name, result) when the last message
        is a tool result."""
        if self.after_tool is not None:
            if tool is None or self.after_tool not in ("*", tool[0]):
                return False
            return self.pattern is None or self.pattern.search(tool[1]) is not None
        if self.tool_calls and tool is not None:
            return False
        text = prompt if self.scope == "prompt" else last
        return self.pattern is None or self.pattern.search(text) is not None

    @classmethod
    def from_item(cls, index: int, item: Any) -> Rule:
        """One validated rule of a rule file (``index`` is for the error message)."""
        if not isinstance(item, dict):
            raise ValueError(f"rule {index}: expected a mapping, got {item!r}")
        unknown = sorted(set(map(str, item)) - RULE_KEYS)
        if unknown:
            raise ValueError(f"rule {index}: unknown key(s) {unknown}; known: {sorted(RULE_KEYS)}")
        if not any(key in item for key in ("reply", "status", "body", "tool_calls")):
            raise ValueError(
                f"rule {index}: needs a 'reply' text (or a 'status', 'body' or 'tool_calls')"
            )
        tool_calls = _tool_calls(index, item.get("tool_calls", []))
        after_tool = item.get("after_tool")
        if after_tool is not None and (not isinstance(after_tool, str) or not after_tool):
            raise ValueError(f"rule {index}: 'after_tool' is a tool name or '*'")
        for key in ("reply", "body"):
            if key in item and not isinstance(item[key], str):
                raise ValueError(f"rule {index}: '{key}' must be a text, got {item[key]!r}")
        if "match" in item and "regex" in item:
            raise ValueError(f"rule {index}: give 'match' or 'regex', not both")
        scope = item.get("scope", "last")
        if scope not in SCOPES:
            raise ValueError(f"rule {index}: 'scope' is one of {SCOPES}, got {scope!r}")
        status = item.get("status")
        if status is not None and (
            isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599
        ):
            raise ValueError(f"rule {index}: 'status' must be an HTTP status, got {status!r}")
        numbers = {key: item.get(key) for key in ("delay_ms", "times")}
        for key, value in numbers.items():
            least = 1 if key == "times" else 0
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < least
            ):
                raise ValueError(f"rule {index}: '{key}' must be a whole number ≥ {least}")
        retry_after = item.get("retry_after")
        source = re.escape(str(item["match"])) if "match" in item else item.get("regex")
        return cls(
            reply=item.get("reply"),
            pattern=None if source is None else re.compile(str(source)),
            scope=scope,
            status=status,
            body=item.get("body"),
            retry_after=None if retry_after is None else str(retry_after),
            delay_ms=numbers["delay_ms"] or 0,
            times=numbers["times"],
            tool_calls=tool_calls,
            after_tool=after_tool,
        )


def _tool_calls(index: int, value: Any) -> tuple[tuple[str, str], ...]:
    """A rule's ``tool_calls``: ``[{name, args}]`` as (name, arguments as JSON) pairs."""
    if not isinstance(value, list):
        raise ValueError(f"rule {index}: 'tool_calls' is a list of {{name, args}}")
    calls = []
    for call in value:
        if not (isinstance(call, dict) and isinstance(call.get("name"), str) and call["name"]):
            raise ValueError(f"rule {index}: each tool call needs a 'name', got {call!r}")
        if set(call) - {"name", "args"} or not isinstance(call.get("args", {}), dict):
            raise ValueError(f"rule {index}: a tool call is {{name, args: {{...}}}}, got {call!r}")
        calls.append((call["name"], json.dumps(call.get("args", {}))))
    return tuple(calls)


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
        return cls(tuple(Rule.from_item(index, item) for index, item in enumerate(data)))

    def pick(self, messages: Messages, used: Counter[int] | None = None) -> tuple[Rule | None, str]:
        """The rule answering a conversation (None: echo) and its reply, filled in.

        ``used`` counts the answers of each rule (by position), for rules with ``times``;
        without it, ``times`` is ignored.
        """
        users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
        last = users[-1] if users else ""
        prompt = "\n".join(content_text(m.get("content")) for m in messages)
        tool = tool_result(messages)
        rule = None
        for index, candidate in enumerate(self.rules):
            if not candidate.matches(last, prompt, tool):
                continue
            if used is not None and candidate.times is not None:
                if used[index] >= candidate.times:
                    continue
                used[index] += 1
            rule = candidate
            break
        template = rule.reply if rule is not None and rule.reply is not None else ECHO
        values = {"last": last, "first": users[0] if users else "", "user_count": str(len(users))}
        values["message_count"] = str(len(messages))
        values["result"] = tool[1] if tool else ""
        if rule is not None and rule.tool_calls and rule.reply is None:
            template = ""
        return rule, PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

    def reply(self, messages: Messages) -> str:
        """The scripted reply to a conversation, placeholders filled in."""
        return self.pick(messages)[1]


def tool_result(messages: Messages) -> tuple[str, str] | None:
    """(tool name, result) when the last message is a tool result, else None.

    OpenAI names the call only by id: the name is that of the assistant's call with the
    id; Ollama's tool messages may carry ``tool_name``."""
    if not messages or messages[-1].get("role") != "tool":
        return None
    last = messages[-1]
    name = last.get("tool_name") or last.get("name")
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == last.get("tool_call_id"):
                name = name or (call.get("function") or {}).get("name")
    return str(name or ""), content_text(last.get("content"))


def content_text(content: Any) -> str:
    """The text of a message: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


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
