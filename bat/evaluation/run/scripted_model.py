"""The scripted model server: the stand-in model bat serves for a ``script:`` entry.

Why: an evaluation drives a *real* agent, whose framework talks HTTP to a model. A real
model is slow, costs money, needs a key and never answers the same way twice. This
server speaks the wire protocols of BAT-ADK's providers and answers from a rule file
(:mod:`bat.evaluation.inputs.model_script`), so a new agent's first evaluation, or a CI
check of its wiring, runs offline and gets the same answers every time:

* OpenAI chat completions: ``POST /v1/chat/completions`` (JSON, or SSE chunks ending with
  ``data: [DONE]`` when ``"stream": true``) and ``GET /v1/models``;
* Ollama: ``POST /api/chat`` (JSON, or NDJSON lines: Ollama streams unless told not to);
* Anthropic messages: ``POST /v1/messages`` (JSON, or SSE events when ``"stream": true``)
  and ``POST /v1/messages/count_tokens`` (:mod:`bat.evaluation.run.wire_anthropic`);
* OpenAI responses: ``POST /v1/responses`` (JSON, or SSE events when ``"stream": true``;
  :mod:`bat.evaluation.run.wire_responses`).

Each route is a small method of :class:`ScriptedModel`; each protocol is a :class:`Wire`,
which words a reply and an error its own way. Deterministic: a fixed clock and counted
ids, so identical request sequences get byte-identical replies and a failing evaluation
replays exactly. bat's own tests extend the class (``eval_fixtures/model_server.py``)
with scripted failures and routes that observe and re-script a running server.

``serving(FILE)`` runs it in a child process of bat for one model's run
(``model_run``), so a rule's search never holds bat's interpreter;
``python -m bat.evaluation.run.scripted_model --port 0 --rules FILE`` serves a script
on its own (to try one with curl while writing it), bound to 127.0.0.1 only, printing
``listening on http://127.0.0.1:PORT`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Container, Iterator
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bat.errors import OperationError
from bat.evaluation.inputs.model_script import Conversation, Rule, Rules, RuleTooSlow
from bat.evaluation.run import wire_anthropic, wire_responses
from bat.evaluation.run.scripted_chat import Answer, Chat, pieces

HOST = "127.0.0.1"
# A fixed clock and counted ids instead of time and random ids: identical request
# sequences get byte-identical replies, so a failing evaluation replays exactly.
CREATED = 1_700_000_000
CREATED_AT = "2023-11-14T22:13:20Z"
DEFAULT_MODEL = "scripted"
MS = 1_000_000  # Ollama reports durations in nanoseconds; we pretend 1 ms per token


class BadRequest(Exception):
    """A request this server cannot answer; each protocol words its 400 its own way."""


class Wire(NamedTuple):
    """A provider's wire protocol: how it answers a chat, and how it words an error."""

    answer: Callable[[Chat, Answer], Response]
    error: Callable[[str, int], Response]
    # the body's conversation in OpenAI's shape (what the rules read); None: its "messages"
    messages: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None


# --- OpenAI chat completions ----------------------------------------------------------


def openai_answer(chat: Chat, answer: Answer) -> Response:
    """A chat completion, or its SSE chunks when the request asked for a stream."""
    head = {"id": f"chatcmpl-{chat.number:06d}", "created": CREATED, "model": chat.model}
    calls = [
        {"id": f"call_{chat.number:06d}_{i}", "type": "function"}
        | {"function": {"name": call.name, "arguments": call.arguments}}
        for i, call in enumerate(answer.calls)
    ]
    finish = "tool_calls" if calls else "stop"
    if not chat.body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": answer.reply}
        if calls:
            message = {**message, "content": answer.reply or None, "tool_calls": calls}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        completion = {**head, "object": "chat.completion", "choices": [choice]}
        return JSONResponse({**completion, "usage": answer.usage})
    options = chat.body.get("stream_options")
    with_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return EventSourceResponse(_openai_chunks(head, answer, calls, finish, with_usage))


async def _openai_chunks(
    head: dict[str, Any],
    answer: Answer,
    calls: list[dict[str, Any]],
    finish: str,
    with_usage: bool,
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        choices = [] if delta is None else [choice]
        return json.dumps({**head, "object": "chat.completion.chunk", "choices": choices, **extra})

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces(answer.reply):
        yield chunk({"content": piece})
    for index, call in enumerate(calls):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, finish)
    if with_usage:  # as OpenAI does: usage last, in a chunk without choices
        yield chunk(None, usage=answer.usage)
    yield "[DONE]"


def openai_error(message: str, status: int) -> Response:
    kinds = {400: "invalid_request_error", 429: "rate_limit_error"}
    error = {"message": message, "type": kinds.get(status, "server_error")}
    return JSONResponse({"error": error}, status_code=status)


# --- Ollama ----------------------------------------------------------------------------


def ollama_answer(chat: Chat, answer: Answer) -> Response:
    """Ollama's final message, or its NDJSON lines unless the request said ``stream: false``."""
    head = {"model": chat.model, "created_at": CREATED_AT}
    calls = [{"function": {"name": call.name, "arguments": call.args}} for call in answer.calls]
    usage = answer.usage
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
    if chat.body.get("stream", True) is not False:
        lines = _ollama_lines(head, answer.reply, calls, final)
        return StreamingResponse(lines, media_type="application/x-ndjson")
    final["message"] = {"role": "assistant", "content": answer.reply}
    if calls:
        final["message"]["tool_calls"] = calls
    return JSONResponse(final)


async def _ollama_lines(
    head: dict[str, Any], reply: str, calls: list[dict[str, Any]], final: dict[str, Any]
) -> AsyncIterator[str]:
    for piece in pieces(reply):
        message = {"role": "assistant", "content": piece}
        yield json.dumps({**head, "message": message, "done": False}) + "\n"
    if calls:
        message = {"role": "assistant", "content": "", "tool_calls": calls}
        yield json.dumps({**head, "message": message, "done": False}) + "\n"
    yield json.dumps(final) + "\n"


def ollama_error(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status_code=status)


OPENAI = Wire(openai_answer, openai_error)
OLLAMA = Wire(ollama_answer, ollama_error)
ANTHROPIC = Wire(wire_anthropic.answer, wire_anthropic.error, wire_anthropic.messages)
RESPONSES = Wire(wire_responses.answer, wire_responses.error, wire_responses.messages)


# --- the server ------------------------------------------------------------------------


class ScriptedModel:
    """A model answering from ``rules``; :meth:`app` serves it.

    It keeps what it served: the requests per path (the counted ids) and the model names
    asked for (``GET /v1/models`` lists them).
    """

    RULES: ClassVar[type[Rules]] = Rules  # the rule file it reads (main, serving)

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.served: Counter[str] = Counter()
        self.models: set[str] = set()

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/models", self.list_models, methods=["GET"]),
            Route("/api/chat", self.ollama_chat, methods=["POST"]),
            Route("/v1/messages", self.anthropic_messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
        ]

    def app(self) -> Starlette:
        return Starlette(routes=self.routes())

    async def chat_completions(self, request: Request) -> Response:
        return await self.chat(request, OPENAI)

    async def ollama_chat(self, request: Request) -> Response:
        return await self.chat(request, OLLAMA)

    async def anthropic_messages(self, request: Request) -> Response:
        return await self.chat(request, ANTHROPIC)

    async def responses(self, request: Request) -> Response:
        return await self.chat(request, RESPONSES)

    async def count_tokens(self, request: Request) -> Response:
        try:
            chat = await read_chat(request, self.count(request), ANTHROPIC)
        except BadRequest as exc:
            return ANTHROPIC.error(str(exc), 400)
        return wire_anthropic.count_tokens(chat.conversation.prompt)

    async def list_models(self, request: Request) -> Response:
        self.count(request)
        names = sorted(self.models | {DEFAULT_MODEL})
        data = [{"id": n, "object": "model", "created": CREATED, "owned_by": "bat"} for n in names]
        return JSONResponse({"object": "list", "data": data})

    def count(self, request: Request) -> int:
        """Count a request of its path; its number there."""
        self.served[request.url.path] += 1
        return self.served[request.url.path]

    async def chat(self, request: Request, wire: Wire) -> Response:
        """Answer a chat request in ``wire``'s protocol: the first rule matching, after
        its delay."""
        number = self.count(request)
        try:
            chat = await read_chat(request, number, wire)
        except BadRequest as exc:
            return wire.error(str(exc), 400)
        self.models.add(chat.model)
        try:
            rule = self.choose(chat.conversation)
        except RuleTooSlow as exc:  # the script cannot answer: said, not frozen on
            return wire.error(f"the stand-in model's script: {exc}", 500)
        if rule is not None and rule.delay_ms:
            await asyncio.sleep(rule.delay_ms / 1000)
        instead = self.instead_of_answer(request, rule, wire)
        if instead is not None:
            return instead
        return wire.answer(chat, Answer.of(rule, chat.conversation))

    def choose(self, conversation: Conversation) -> Rule | None:
        """The rule answering ``conversation``; None: the echo."""
        return self.rules.first(conversation)

    def instead_of_answer(self, request: Request, rule: Rule | None, wire: Wire) -> Response | None:
        """A response to send in place of ``rule``'s answer. None: a stand-in model always
        answers (a subclass may fail on purpose here)."""
        return None


async def read_chat(request: Request, number: int, wire: Wire = OPENAI) -> Chat:
    """The chat of a request in ``wire``'s protocol; BadRequest if its body is unusable."""
    try:
        body = await request.json()
    except ValueError as exc:
        raise BadRequest(f"body is not JSON: {exc}") from exc
    messages = body.get("messages") if isinstance(body, dict) else None
    if wire.messages is not None and isinstance(body, dict):
        try:
            messages = wire.messages(body)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("'messages' must be a list of objects")
    model = str(body.get("model") or DEFAULT_MODEL)
    return Chat(body, Conversation.of(messages), model, number)


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: a free one).

    Bound here, not by uvicorn: the address works as soon as this returns (early clients
    wait in the backlog) and a busy port is one clear error. TCP_NODELAY is inherited by
    the connections: asyncio sets it only on sockets it recognises as TCP, and uvicorn's
    copy of a passed-in socket does not look like one; without it, every response on a
    kept-alive connection waits ~40 ms for the client's delayed ACK (Nagle).
    """
    sock = socket.create_server((HOST, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _server(model: ScriptedModel, log_level: str = "warning") -> Any:
    import uvicorn  # imported here: an app alone (e.g. under a TestClient) needs no server

    return uvicorn.Server(uvicorn.Config(model.app(), log_level=log_level, lifespan="off"))


def main(argv: list[str] | None = None, kind: type[ScriptedModel] = ScriptedModel) -> None:
    """Parse the command line, listen, announce the address, serve until SIGINT/SIGTERM
    (or, with ``--until-stdin-closes``, until standard input ends)."""
    parser = argparse.ArgumentParser(description=(kind.__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--rules", type=Path, help="JSON or YAML rule file (default: echo)")
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level")
    # How bat serves a script: on the listening socket it bound (an inherited file
    # descriptor), for as long as bat holds the other end of standard input.
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--until-stdin-closes", action="store_true", help="exit when standard input ends"
    )
    args = parser.parse_args(argv)
    try:
        rules = kind.RULES.load(args.rules) if args.rules else kind.RULES.from_data([])
    except (OSError, ValueError) as exc:
        parser.error(f"--rules {args.rules}: {exc}")
    try:
        sock = socket.socket(fileno=args.fd) if args.fd is not None else listen(args.port)
    except OSError as exc:
        raise SystemExit(f"scripted_model: cannot listen on {HOST}:{args.port}: {exc}") from None
    server = _server(kind(rules), args.log_level)
    if args.until_stdin_closes:
        threading.Thread(target=_exit_at_end_of_stdin, name="lifeline", daemon=True).start()
    print(f"listening on http://{HOST}:{sock.getsockname()[1]}", flush=True)
    asyncio.run(server.serve(sockets=[sock]))


def _exit_at_end_of_stdin() -> None:
    """End this process when its standard input ends: bat closed it, or bat is gone
    (even by ``kill -9``), so a stand-in never outlives the bat that started it. At
    once: a stand-in keeps nothing worth a graceful shutdown."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(4096):
            pass
    os._exit(0)


#: How long bat waits for its stand-in model to serve (its start-up takes ~0.3 s).
READY_TIMEOUT_S = 30.0


@contextlib.contextmanager
def serving(
    rules_path: Path, *, ready_timeout_s: float = READY_TIMEOUT_S, avoid: Container[int] = ()
) -> Iterator[str]:
    """Serve the rules of ``rules_path`` on a free port of 127.0.0.1 in a child process,
    for as long as the block runs; yields the server's address.

    For a model's ``script:`` in eval.yaml. A child, not a thread of bat: a rule's
    search runs where it cannot hold bat's interpreter, so Ctrl-C always reaches bat and
    a pathological pattern costs at most the stand-in's answer, never bat itself. bat
    binds the socket and hands it over, so the address is known before the child starts;
    the block begins once the child serves. The child reads the rules again (they were
    checked with eval.yaml) and ends when bat closes its standard input, or dies.

    ``avoid``: ports the server must not take, though free now. The agent's port is free
    until bat starts the agent, after its stand-in model and simulated user are served;
    a free port of the kernel's choosing may be that very one (it was, in CI: the agent
    then could not bind it).
    """
    sock = _listen_avoiding(avoid)
    address = f"http://{HOST}:{sock.getsockname()[1]}"
    lifeline, keep = os.pipe()
    command = [sys.executable, "-P", "-m", "bat.evaluation.run.scripted_model"]
    command += ["--fd", str(sock.fileno()), "--until-stdin-closes"]
    command += ["--rules", str(Path(rules_path).resolve())]
    # The child imports the bat this process runs, wherever it was imported from.
    here = str(Path(__file__).resolve().parents[3])
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            command,
            env={**os.environ, "PYTHONPATH": path},
            stdin=lifeline,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
            start_new_session=True,  # the terminal's Ctrl-C is bat's to handle
        )
    except BaseException:
        os.close(keep)
        raise
    finally:
        os.close(lifeline)
        sock.close()  # the child's now: if it dies, the agent is refused, not left waiting
    output = _Output(proc)
    try:
        output.wait_ready(proc, ready_timeout_s, rules_path)
        yield address
    finally:
        os.close(keep)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        output.close()


def _listen_avoiding(avoid: Container[int]) -> socket.socket:
    """A listening socket on a free port of 127.0.0.1 that is not in ``avoid``; the
    ports refused are held until then, so the kernel cannot offer them again."""
    held: list[socket.socket] = []
    try:
        sock = listen(0)
        while sock.getsockname()[1] in avoid and len(held) < 16:
            held.append(sock)
            sock = listen(0)
        return sock
    finally:
        for refused in held:
            refused.close()


class _Output:
    """What the stand-in prints, read by a thread (a full pipe would stall it): its
    ready line, and the last lines for a message if it ends too soon."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.ready = threading.Event()
        self.lines: deque[str] = deque(maxlen=15)
        self._stream = proc.stdout
        self._thread = threading.Thread(
            target=self._read, args=(proc.stdout,), name="bat-scripted-model-output", daemon=True
        )
        self._thread.start()

    def _read(self, stream: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip()
                if line.startswith("listening on "):
                    self.ready.set()
                else:
                    self.lines.append(line[:500])

    def close(self) -> None:
        """Once the child has ended: its last output read, the pipe closed."""
        self._thread.join(timeout=2)
        if not self._thread.is_alive():
            self._stream.close()

    def wait_ready(self, proc: subprocess.Popen, timeout_s: float, rules_path: Path) -> None:
        """Return once the child serves; OperationError when it ends or stalls first."""
        deadline = time.monotonic() + timeout_s
        while not self.ready.wait(0.05):
            if proc.poll() is not None:
                self._thread.join(timeout=1)  # its last words
                raise OperationError(
                    f"the stand-in model of {rules_path} exited with status "
                    f"{proc.returncode} before it served",
                    details=list(self.lines),
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise OperationError(
                    f"the stand-in model of {rules_path} did not serve within {timeout_s:g} s"
                )


if __name__ == "__main__":
    main()
