"""What the fixture A2A agents share: options, agent card, answering, serving.

Why: the evaluation engine starts agents the way users do (a command, ``PORT`` and the
other variables in the environment) and talks A2A to them, so its tests need real agent
processes that behave exactly as told. The echo and tool agents differ only in what they
answer; this module makes them start, advertise, answer and stop identically:

* options come from flags or, so an eval.yaml's ``env:`` can set them, from variables:
  ``--port`` (``PORT``, default 9900; 0 picks a free port), ``--no-streaming``
  (``NO_STREAMING=1``), ``--answer-in artifact|message|status`` (``ANSWER_IN``),
  ``--latency-ms`` (``LATENCY_MS``), ``--startup-delay-ms`` (``STARTUP_DELAY_MS``: the
  port stays closed that long) and ``--exit-after-start`` (``EXIT_ON_START=1``: exit 4
  before serving);
* how it speaks, to stand in for agents bat did not write: ``--transport
  jsonrpc|rest|grpc`` (``TRANSPORT``: the one binding its card offers; gRPC listens on a
  port of its own, ``--grpc-port``/``GRPC_PORT``, default a free one) and
  ``--card-version 1.0|0.3|0.2|0.1`` (``CARD_VERSION``: below 1.0 the card is written in
  the older format with that ``protocolVersion`` and served only at the older path
  ``/.well-known/agent.json``, as a2a-sdk 0.2 agents do, and JSON-RPC also answers the
  0.3 methods);
* ``PID_FILE``: the agent writes its process id there once it listens (a test that
  kills the agent from outside needs it);
* the server binds only 127.0.0.1, serves the card at ``/.well-known/agent-card.json``,
  A2A at ``/`` (JSON-RPC: ``SendMessage`` and ``SendStreamingMessage``; REST:
  ``/message:send``, ``/message:stream``) and ``GET /ping``, prints
  ``listening on http://127.0.0.1:PORT`` once connecting works, and exits with code 0
  on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from a2a.helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    Message,
    TaskArtifactUpdateEvent,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

HOST = "127.0.0.1"
DEFAULT_PORT = 9900
ANSWER_MODES = ("artifact", "message", "status")
TRANSPORTS = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}
CARD_VERSIONS = ("1.0", "0.3", "0.2", "0.1")
OLD_CARD_PATH = "/.well-known/agent.json"
TEXT = "text/plain"
WORKING_TEXT = "working..."
EXIT_ON_START_CODE = 4
# JSON-RPC methods that answer with one response, not a stream (v1.0 and v0.3 names).
SINGLE_RESPONSE_METHODS = {"SendMessage", "message/send"}

Meta = dict[str, Any] | None


def env_flag(name: str) -> bool:
    """A yes/no variable: 1, true, yes or on (any case) mean yes."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def env_int(parser: argparse.ArgumentParser, name: str, default: int) -> int:
    """An integer variable; a typo is a usage error, not a silent default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        parser.error(f"{name}={raw!r} is not an integer")


def env_choice(
    parser: argparse.ArgumentParser, name: str, choices: tuple[str, ...], default: str
) -> str:
    """A variable that must be one of ``choices``; a typo is a usage error."""
    value = os.environ.get(name, "").strip() or default
    if value not in choices:
        parser.error(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def add_option(
    parser: argparse.ArgumentParser, flag: str, env: str, text: str, default: int | None = None
) -> None:
    """``flag``, defaulting to the variable ``env``: an integer, or a switch if no default."""
    if default is None:
        help_text = f"env {env}=1: {text}"
        parser.add_argument(flag, action="store_true", default=env_flag(env), help=help_text)
    else:
        value = env_int(parser, env, default)
        parser.add_argument(flag, type=int, default=value, help=f"env {env}: {text}")


def common_parser(module: str, description: str) -> argparse.ArgumentParser:
    """A parser holding the options every fixture agent has, defaults from the environment."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    answer_in = env_choice(parser, "ANSWER_IN", ANSWER_MODES, "artifact")
    transport = env_choice(parser, "TRANSPORT", tuple(TRANSPORTS), "jsonrpc")
    card_version = env_choice(parser, "CARD_VERSION", CARD_VERSIONS, "1.0")
    add_option(parser, "--port", "PORT", "default 9900, 0 picks a free port", DEFAULT_PORT)
    add_option(parser, "--no-streaming", "NO_STREAMING", "card says streaming: false")
    parser.add_argument(
        "--answer-in", choices=ANSWER_MODES, default=answer_in, help="env ANSWER_IN"
    )
    add_option(parser, "--latency-ms", "LATENCY_MS", "wait before answering a turn", 0)
    add_option(parser, "--startup-delay-ms", "STARTUP_DELAY_MS", "wait before listening", 0)
    add_option(parser, "--exit-after-start", "EXIT_ON_START", "exit 4 instead of serving")
    parser.add_argument("--transport", choices=tuple(TRANSPORTS), default=transport)
    add_option(parser, "--grpc-port", "GRPC_PORT", "gRPC port (0: a free one)", 0)
    parser.add_argument("--card-version", choices=CARD_VERSIONS, default=card_version)
    parser.add_argument("--log-level", default="warning", help="uvicorn's (default warning)")
    return parser


def is_streaming(context: RequestContext) -> bool:
    """Whether the client reads a stream of events (False: it gets one Task or Message)."""
    method = (context.call_context.state if context.call_context else {}).get("method")
    return method is not None and method not in SINGLE_RESPONSE_METHODS


async def pause(milliseconds: int) -> None:
    """The configured thinking time of a turn."""
    if milliseconds > 0:
        await asyncio.sleep(milliseconds / 1000)


async def hang_forever() -> None:
    """Never answer: the per-turn timeout of the caller has to end this turn."""
    await asyncio.Event().wait()


class Turn:
    """The reply to one request: a plain Message, or events of the task it belongs to."""

    def __init__(self, context: RequestContext, queue: EventQueue) -> None:
        self.context = context
        self.queue = queue
        self.updater: TaskUpdater | None = None

    def agent_message(self, text: str, metadata: Meta = None, in_task: bool = True) -> Message:
        """An agent message of this context; of this task too, unless it is the reply."""
        task_id = self.context.task_id if in_task else None
        message = new_text_message(text, context_id=self.context.context_id, task_id=task_id)
        if metadata:
            message.metadata.update(metadata)
        return message

    async def start(self, metadata: Meta = None) -> TaskUpdater:
        """Open the task (a new one, or the one continued) and say WORKING once."""
        if self.updater is None:
            task = self.context.current_task
            if task is None:  # like bat-adk: the first event of a new task is the Task
                task = new_task_from_user_message(self.context.message)
                await self.queue.enqueue_event(task)
            self.updater = TaskUpdater(self.queue, task.id, task.context_id)
            message = self.agent_message(WORKING_TEXT)
            await self.updater.update_status(
                TaskState.TASK_STATE_WORKING, message=message, metadata=metadata
            )
        return self.updater

    async def end(self, state: TaskState, text: str, metadata: Meta = None) -> None:
        """End the turn in ``state`` (input-required, failed...) with a status message."""
        updater = await self.start()
        await updater.update_status(state, message=self.agent_message(text), metadata=metadata)

    async def chunks(self, texts: tuple[str, ...]) -> None:
        """Complete with one artifact sent in chunks, each appended to the one before."""
        updater = await self.start()
        artifact_id = str(uuid.uuid4())
        for index, text in enumerate(texts):
            event = TaskArtifactUpdateEvent(
                task_id=updater.task_id,
                context_id=updater.context_id,
                artifact=Artifact(artifact_id=artifact_id, parts=[new_text_part(text)]),
                append=index > 0,
                last_chunk=index == len(texts) - 1,
            )
            await self.queue.enqueue_event(event)
        await updater.update_status(TaskState.TASK_STATE_COMPLETED)

    async def artifacts(
        self, artifacts: list[Artifact], state: TaskState, text: str | None = None
    ) -> None:
        """Send each artifact as an update of its own, then end the turn in ``state``
        (with ``text`` as the status message, when given)."""
        updater = await self.start()
        for artifact in artifacts:
            event = TaskArtifactUpdateEvent(
                task_id=updater.task_id, context_id=updater.context_id, artifact=artifact
            )
            await self.queue.enqueue_event(event)
        message = self.agent_message(text) if text else None
        await updater.update_status(state, message=message)

    async def answer(self, text: str, mode: str, working: Meta = None, final: Meta = None) -> None:
        """Complete the turn with ``text``, carried where ``mode`` says.

        Metadata deltas: ``working`` goes on the WORKING status update, ``final`` on the
        event carrying the answer. When the client gets one response (SendMessage) only
        the last status update survives in the Task, so both go there, combined; a
        Message reply carries both too. ``message`` falls back to ``artifact`` when the
        request continues a task: the SDK forbids a Message reply once a task exists.
        """
        if mode == "message" and self.context.current_task is None:
            reply = self.agent_message(text, combine(working, final), in_task=False)
            await self.queue.enqueue_event(reply)
            return
        streaming = is_streaming(self.context)
        if not streaming:
            working, final = None, combine(working, final)
        updater = await self.start(working)
        completed = TaskState.TASK_STATE_COMPLETED
        if mode == "status":
            message = self.agent_message(text)
            await updater.update_status(completed, message=message, metadata=final)
            return
        artifact = Artifact(artifact_id=str(uuid.uuid4()), parts=[new_text_part(text)])
        event = TaskArtifactUpdateEvent(
            task_id=updater.task_id, context_id=updater.context_id, artifact=artifact
        )
        if final and streaming:
            event.metadata.update(final)
        await self.queue.enqueue_event(event)
        await updater.update_status(completed, metadata=None if streaming else final)


def combine(first: Any, second: Any) -> Any:
    """Two metadata deltas as one, as the evaluation engine sums them: numbers add up,
    lists concatenate, mappings combine key by key, anything else: the later value."""
    if first is None or second is None:
        return second if first is None else first
    if isinstance(first, dict) and isinstance(second, dict):
        keys = list(first) + [key for key in second if key not in first]
        return {key: combine(first.get(key), second.get(key)) for key in keys}
    if isinstance(first, list) and isinstance(second, list):
        return first + second
    if is_number(first) and is_number(second):
        return first + second
    return second


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def build_card(
    name: str,
    description: str,
    skill: AgentSkill,
    port: int,
    streaming: bool,
    binding: str = "JSONRPC",
    address: str | None = None,
) -> AgentCard:
    """The agent card, as bat-adk builds it: one interface (JSON-RPC at http://HOST:PORT
    unless ``binding`` and ``address`` say otherwise)."""
    interface = AgentInterface(
        url=address or f"http://{HOST}:{port}", protocol_binding=binding, protocol_version="1.0"
    )
    return AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        supported_interfaces=[interface],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=[TEXT],
        default_output_modes=[TEXT],
        skills=[skill],
    )


def _precede(card: AgentCard, spec: str) -> None:
    """List interfaces before the card's own one, at its address: ``spec`` is a comma
    list of ``BINDING:VERSION`` (``JSONRPC:0.1,JSONRPC:0.3``), as cards that offer
    several protocol versions (or one a client cannot speak) list them first."""
    own = card.supported_interfaces[0]
    listed = []
    for item in filter(None, (word.strip() for word in spec.split(","))):
        binding, _, version = item.partition(":")
        url = own.url if binding == own.protocol_binding else f"http://{HOST}:9"
        listed.append(AgentInterface(url=url, protocol_binding=binding, protocol_version=version))
    if listed:
        interfaces = [*listed, own]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(interfaces)


def old_card(card: AgentCard, version: str) -> dict[str, Any]:
    """``card`` in the format of a2a-sdk 0.2/0.3 (``url``, ``preferredTransport``...)."""
    interface = card.supported_interfaces[0]
    return {
        "name": card.name,
        "description": card.description,
        "url": interface.url,
        "preferredTransport": interface.protocol_binding,
        "protocolVersion": f"{version}.0",
        "version": card.version,
        "capabilities": {"streaming": card.capabilities.streaming},
        "defaultInputModes": list(card.default_input_modes),
        "defaultOutputModes": list(card.default_output_modes),
        "skills": [
            {"id": s.id, "name": s.name, "description": s.description, "tags": list(s.tags)}
            for s in card.skills
        ],
    }


def build_app(
    card: AgentCard, executor: AgentExecutor, transport: str = "jsonrpc", card_version: str = "1.0"
) -> tuple[Starlette, DefaultRequestHandlerV2]:
    """The Starlette app (agent card, A2A at ``/``, ``GET /ping``) and its request handler
    (which a gRPC server can serve too)."""

    async def ping(_request: Request) -> JSONResponse:
        return JSONResponse("pong")

    handler = DefaultRequestHandlerV2(
        agent_executor=executor,
        task_store=InMemoryTaskStore(),
        agent_card=card,
        extended_agent_card=card,
    )
    routes = [Route("/ping", ping, methods=["GET"])]
    if card_version == "1.0":
        routes += create_agent_card_routes(agent_card=card)
    else:
        legacy = old_card(card, card_version)

        async def card_route(_request: Request) -> JSONResponse:
            return JSONResponse(legacy)

        routes.append(Route(OLD_CARD_PATH, card_route, methods=["GET"]))
    if transport == "rest":
        routes += create_rest_routes(request_handler=handler)
    elif transport == "jsonrpc":
        routes += create_jsonrpc_routes(
            request_handler=handler,
            rpc_url="/",
            enable_v0_3_compat=card_version != "1.0"
            or "0.3" in os.environ.get("PRECEDING_INTERFACES", ""),
        )
    return Starlette(routes=routes), handler


def _exit_quietly(signum: int, _frame: Any) -> None:
    raise SystemExit(0)


def serve(
    args: argparse.Namespace,
    prog: str,
    make_card: Callable[..., AgentCard],
    executor: AgentExecutor,
) -> None:
    """Start up as configured, print the ready line, serve until SIGTERM or SIGINT."""
    if args.exit_after_start:
        print(f"{prog}: error: exiting during start-up, as asked", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_ON_START_CODE)
    # uvicorn handles these signals while serving and raises them again once it has shut
    # down gracefully; these handlers turn that (and a signal during start-up) into exit 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_quietly)
    if args.startup_delay_ms > 0:
        time.sleep(args.startup_delay_ms / 1000)  # not listening yet: the port is closed
    sock = listen(prog, args.port)
    port = sock.getsockname()[1]
    grpc_sock = listen(prog, args.grpc_port) if args.transport == "grpc" else None
    binding = TRANSPORTS[args.transport]
    address = f"{HOST}:{grpc_sock.getsockname()[1]}" if grpc_sock else None
    card = make_card(port, not args.no_streaming, binding, address)
    _precede(card, os.environ.get("PRECEDING_INTERFACES", ""))
    app, handler = build_app(card, executor, args.transport, args.card_version)
    import uvicorn

    if args.log_level not in ("debug", "trace", "info"):
        # a2a-sdk warns about the tasks a shutdown abandons (an unanswered question...)
        logging.getLogger("a2a").setLevel(logging.ERROR)
    config = uvicorn.Config(
        app, log_level=args.log_level, lifespan="off", timeout_graceful_shutdown=1
    )
    try:
        asyncio.run(_serve(uvicorn.Server(config), sock, handler, grpc_sock))
    except SystemExit as stop:  # the signal, once uvicorn (and gRPC) shut down gracefully
        _leave_now(stop.code)


def _leave_now(code: Any) -> None:
    """Exit with ``code`` without the interpreter's teardown of every module: the server
    has shut down and what it printed is flushed, and that teardown (a tenth of a second
    of CPU for a2a-sdk and its dependencies) only delayed each test that stops an agent."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to say there
            stream.flush()
    os._exit(code if isinstance(code, int) else 0)


def listen(prog: str, port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: a free one)."""
    try:
        sock = socket.create_server((HOST, port))
        # Connections inherit this from the listener. asyncio only sets it on sockets it
        # recognises as TCP, and uvicorn's copy of a passed-in socket does not look like
        # one: without it, every response on a kept-alive connection waits ~40 ms for the
        # client's delayed ACK (Nagle).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        raise SystemExit(f"{prog}: cannot listen on {HOST}:{port}: {exc}") from None
    return sock


async def _serve(server: Any, sock: socket.socket, handler: Any, grpc_sock: Any) -> None:
    """Serve HTTP (and gRPC on its own port), then say so: the ready line and PID_FILE."""
    grpc_server = None
    if grpc_sock is not None:
        import grpc
        from a2a.server.request_handlers import GrpcHandler
        from a2a.types import a2a_pb2_grpc

        grpc_server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
        port = grpc_sock.getsockname()[1]
        grpc_sock.close()  # gRPC binds the port itself; nobody else can take it this fast
        grpc_server.add_insecure_port(f"{HOST}:{port}")
        await grpc_server.start()
    print(f"listening on http://{HOST}:{sock.getsockname()[1]}", flush=True)
    pid_file = os.environ.get("PID_FILE")
    if pid_file:
        with open(pid_file, "w", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    try:
        await server.serve(sockets=[sock])
    finally:
        if grpc_server is not None:
            await grpc_server.stop(1)
