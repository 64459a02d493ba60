"""Talking to the agent under test over A2A (a2a-sdk 1.x): one episode = one conversation.

One resolved agent card and one pool of connections serve a whole run (``agent_card``
says how the card is found and which binding is spoken: JSON-RPC, HTTP+JSON or gRPC, and
the 0.2/0.3 protocol versions through a2a-sdk's compatibility transports). Each episode
gets its own context id; its turns are sent in order in that conversation, and a turn
that ended in ``input-required`` or ``auth-required`` is continued by the next one (same
task id). Streaming agents are read event by event, others with one blocking call: the
client picks by the card's ``capabilities.streaming``. Either way the answer reads the
same (``turn_events`` folds each turn's events into its answer and the trace).

What went wrong is split in two (``failures``): an agent that answered with a failed,
rejected or canceled task or with an error produced an agent outcome (status ``error``,
``Observed.agent_error``); a request that never got an answer is an infrastructure
failure. A request that fails on a connection *reused from the pool*, before any byte
of reply, is sent once more on a fresh connection: that is the keep-alive race of idle
connections (the server closed it as the request went out), never the agent's doing.
It is the rule browsers follow (Chromium resends any request, POST included, only on a
reused socket that gave no byte of response). A request on a connection opened for it
is never sent twice: a server that reads a request and drops the connection has seen
it, and an agent with side effects must not run a turn twice. Which connection a
request went on is read from httpcore's ``trace`` extension. Idle connections are also
dropped after ``KEEPALIVE_S``, below the 5 s most servers (uvicorn) keep them, so the
race is rare to begin with.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bat.errors import OperationError
from bat.evaluation.log.episode import AgentError, EpisodeTrace, InfraError, TurnRecord
from bat.evaluation.log.outcome import classify, exception_chain, from_state
from bat.evaluation.run.turn_events import CONTINUED, Piece, Turn, absorb

if TYPE_CHECKING:
    from bat.evaluation.inputs.dataset import SimulatedUser
    from bat.evaluation.run.simulated_user import UserModel

KEEPALIVE_S = 2.0


@dataclass
class _Attempt:
    """What httpcore said of the requests of one send: did any open a connection of its
    own, did any get a byte of reply (``_traced`` fills it in)."""

    opened_connection: bool = False
    got_reply: bool = False

    async def trace(self, name: str, info: dict) -> None:
        if name == "connection.connect_tcp.started":
            self.opened_connection = True
        elif name in (
            "http11.receive_response_headers.complete",
            "http2.receive_response_headers.complete",
        ):
            self.got_reply = True

    @property
    def reused_and_unanswered(self) -> bool:
        return not self.opened_connection and not self.got_reply


_ATTEMPT: ContextVar[_Attempt | None] = ContextVar("bat_a2a_attempt", default=None)


async def _traced(request: Any) -> None:
    """httpx request hook: the requests of a send report to that send's ``_Attempt``
    (the hook runs in the task that sends, so the context variable is the send's)."""
    attempt = _ATTEMPT.get()
    if attempt is not None:
        request.extensions["trace"] = attempt.trace


def _https(limits: Any) -> Any:
    """httpx's own transport for ``https://``, its event streams cut into lines as
    ``sse_lines`` says (httpx's lines also end on U+2028 and the like)."""
    import httpx

    from bat.evaluation.run.sse_lines import EventStreamTransport

    return EventStreamTransport(httpx.AsyncHTTPTransport(limits=limits, trust_env=False))


@dataclass
class Observed:
    """What one episode produced, before any verdict."""

    status: str
    final_output: str
    trace: EpisodeTrace
    infra_error: InfraError | None = None
    agent_error: AgentError | None = None
    started_at: str = ""  # set by the runner, which knows when the episode began
    cold: bool = False  # set by the runner: the first wave after an agent start
    # A command-line agent's episode (bat.agents.cli_session): called with the verdict,
    # it keeps or removes the workspace and returns where it was kept.
    after_verdict: Callable[[bool], str | None] | None = None


@dataclass
class _Episode:
    """One conversation as it goes: its trace, the last turn, and how it stands."""

    context_id: str
    trace: EpisodeTrace = field(init=False)
    started: float = field(default_factory=time.perf_counter)
    previous: Turn | None = None
    status: str = "working"
    output: str = ""
    infra: InfraError | None = None
    agent_error: AgentError | None = None
    artifacts: dict[str, list[Piece]] = field(default_factory=dict)  # every artifact so far

    def __post_init__(self) -> None:
        self.trace = EpisodeTrace(context_id=self.context_id)

    @property
    def over(self) -> bool:
        """Whether the conversation cannot go on: bat could not observe a turn, or the
        agent's turn failed."""
        return self.infra is not None or self.status == "error"


class A2ASession:
    """An open connection to one agent: resolve the card once, then run episodes."""

    def __init__(self, url: str, *, concurrency: int, card_timeout_s: float = 10) -> None:
        self.url = url.rstrip("/")
        self.concurrency = concurrency
        self.card_timeout_s = card_timeout_s
        self.card: Any = None
        self.card_document: dict[str, Any] | None = None  # the card's JSON, as served
        self.binding: str | None = None  # e.g. "HTTP+JSON 1.0", for the run record
        # Requests sent again on a fresh connection after one broke before any reply.
        self.requests_resent = 0
        self._http: Any = None
        self._fresh_http: Any = None
        self._client: Any = None
        self._fresh: Any = None

    async def __aenter__(self) -> A2ASession:
        import httpx

        from bat.evaluation.run.agent_card import fetch_card_document, prepare
        from bat.evaluation.run.http_pool import PoolTransport

        size = self.concurrency + 4
        # No read timeout here: a turn is bounded by the runner's per-turn timeout.
        timeout = httpx.Timeout(connect=self.card_timeout_s, read=None, write=30, pool=None)
        limits = httpx.Limits(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=KEEPALIVE_S
        )
        # Plain http:// goes through bat's own pool (http_pool says why); https:// through
        # httpx's transport with the same limits.
        pooled = PoolTransport(max_keepalive=size, keepalive_expiry=KEEPALIVE_S)
        self._http = httpx.AsyncClient(
            limits=limits,
            timeout=timeout,
            trust_env=False,
            mounts={"http://": pooled, "https://": _https(limits)},
            event_hooks={"request": [_traced]},
        )
        # A request sent again after a stale connection goes on a new one, always.
        fresh = httpx.Limits(max_connections=size, max_keepalive_connections=0)
        self._fresh_http = httpx.AsyncClient(
            limits=fresh,
            timeout=timeout,
            trust_env=False,
            mounts={
                "http://": PoolTransport(max_keepalive=0, keepalive_expiry=0),
                "https://": _https(fresh),
            },
        )
        try:
            async with asyncio.timeout(self.card_timeout_s + 5):
                card, document = await fetch_card_document(self._http, self.url)
            bindings = prepare(card, self.url)
            self._client = _client(card, bindings, self._http)
            self._fresh = _client(card, bindings, self._fresh_http)
        except TimeoutError:
            await self._close_http()
            raise OperationError(f"the agent card at {self.url} did not come in time") from None
        except BaseException:
            await self._close_http()
            raise
        self.card = card
        self.card_document = document
        (chosen,) = card.supported_interfaces  # prepare() left the one bat speaks
        self.binding = f"{chosen.protocol_binding} {chosen.protocol_version or ''}".strip()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in (self._client, self._fresh):
            if client is not None:
                await client.close()
        await self._close_http()

    async def _close_http(self) -> None:
        for http in (self._http, self._fresh_http):
            if http is not None and not http.is_closed:
                await http.aclose()

    async def run_episode(
        self,
        turns: list[str],
        *,
        turn_timeout_s: float,
        templates: Sequence[Any] | None = None,
        work: Any = None,  # the runner's (task, attempt): what a CLI session needs
        user: SimulatedUser | None = None,  # the task's simulated user, if it has one
        user_model: UserModel | None = None,  # the run's model that plays it
    ) -> Observed:
        """Send ``turns`` in one conversation and record everything that came back; then,
        for a task with a simulated ``user``, go on with the messages ``user_model``
        writes (:mod:`bat.evaluation.run.simulated_user`) until it ends the conversation.

        ``templates`` (``TaskSpec.turn_templates``) holds the compiled template of each
        templated turn: such a turn is rendered from the turns done so far just before it
        is sent, and its record holds the rendered text. A template that fails to render
        ends the episode before that turn with an infrastructure failure of kind
        ``template``: the harness could not make the turn, the agent is not to blame."""
        episode = _Episode(context_id=_new_id())
        trace = episode.trace
        author = "dataset" if user is not None else None
        for index, text in enumerate(turns):
            if templates is not None and templates[index] is not None:
                from bat.evaluation.inputs.turn_templates import RenderError

                try:
                    text = await _render(templates[index], trace.turns, turn_timeout_s)
                except RenderError as exc:
                    episode.infra = InfraError(
                        kind="template",
                        message=f"turn {index + 1} could not be made from its template: {exc}",
                    )
                    break
            await self._turn(episode, text, turn_timeout_s, author)
            if episode.over:
                break
        if user is not None and user_model is not None:
            await self._converse(episode, user, user_model, turn_timeout_s)
        trace.wall_time_s = round(time.perf_counter() - episode.started, 6)
        if trace.turns:
            trace.time_to_first_event_s = trace.turns[0].time_to_first_event_s
        return Observed(
            status=episode.status,
            final_output=episode.output,
            trace=trace,
            infra_error=episode.infra,
            agent_error=episode.agent_error,
        )

    async def _converse(
        self, episode: _Episode, user: SimulatedUser, model: UserModel, turn_timeout_s: float
    ) -> None:
        """The simulated user's part of the conversation, after the fixed turns: its
        messages sent one by one until it stops, ``max_turns`` is reached, or the agent's
        turn fails. The record says how it ended (None: an infrastructure failure)."""
        from bat.evaluation.log.episode import SimulatedUserRecord
        from bat.evaluation.run.simulated_user import UserModelFailed

        trace = episode.trace
        record = SimulatedUserRecord(
            model=model.shown,
            instructions_sha256=user.instructions_sha256,
            max_turns=user.max_turns,
        )
        trace.simulated_user = record
        if not episode.over and user.first_message is not None:
            await self._turn(episode, user.first_message, turn_timeout_s, "dataset")
        while not episode.over:
            if len(trace.turns) >= user.max_turns:
                record.ended = "max_turns"
                break
            try:
                said = await model.next_message(user, trace.turns)
            except UserModelFailed as exc:
                episode.infra = InfraError(kind="user_model", message=str(exc))
                break
            record.usage = record.usage.add(said.usage)
            if said.ended is not None:
                record.ended = said.ended
                record.last_words = said.text or None
                break
            await self._turn(episode, said.text, turn_timeout_s, "simulated_user")
        else:
            record.ended = "agent_ended" if episode.infra is None else None
        record.turns = len(trace.turns)
        record.simulated_turns = sum(turn.author == "simulated_user" for turn in trace.turns)

    async def _turn(
        self, episode: _Episode, text: str, turn_timeout_s: float, author: str | None
    ) -> None:
        """Send one user message on the episode's context (continuing the task the last
        turn left waiting for input) and record the turn; a failure is kept on
        ``episode`` (``episode.over`` then says the conversation cannot go on)."""
        trace = episode.trace
        index = len(trace.turns)
        previous = episode.previous
        continue_task = previous.task_id if previous and previous.status in CONTINUED else None
        turn = Turn(earlier=dict(episode.artifacts))
        record = TurnRecord(input=text, status="working", author=author)
        turn_started = time.perf_counter()
        try:
            async with asyncio.timeout(turn_timeout_s):
                await self._send(
                    text,
                    episode.context_id,
                    continue_task,
                    index,
                    turn,
                    record,
                    trace,
                    episode.started,
                )
        except TimeoutError:
            episode.infra = InfraError(
                kind="timeout",
                message=f"turn {index + 1} got no final answer within {turn_timeout_s:g} s",
            )
        except Exception as exc:
            failure = classify(exc)
            if isinstance(failure, AgentError):
                turn.status, episode.agent_error = "error", failure
            else:
                episode.infra = failure
        if turn.status == "error" and episode.agent_error is None:
            episode.agent_error = from_state(turn.error_state or "failed", turn.final_status_text)
        record.status = turn.status
        record.output = turn.output()
        record.task_id = turn.task_id
        record.wall_time_s = round(time.perf_counter() - turn_started, 6)
        trace.turns.append(record)
        episode.artifacts.update(turn.whole)
        episode.status, episode.output, episode.previous = turn.status, record.output, turn

    async def _send(
        self,
        text: str,
        context_id: str,
        task_id: str | None,
        index: int,
        turn: Turn,
        record: TurnRecord,
        trace: EpisodeTrace,
        started: float,
    ) -> None:
        from a2a.types import Message, Part, Role, SendMessageRequest

        message = Message(
            message_id=_new_id(),
            context_id=context_id,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
        )
        if task_id:
            message.task_id = task_id
        broken: BaseException | None = None  # the stale connection's failure, if any
        for client in (self._client, self._fresh):
            opened = time.perf_counter()
            first = True
            attempt = _Attempt()
            token = _ATTEMPT.set(attempt)
            try:
                async for event in client.send_message(SendMessageRequest(message=message)):
                    now = time.perf_counter()
                    if first:
                        record.time_to_first_event_s = round(now - opened, 6)
                    absorb(event, turn, trace, index, now - started, text if first else None)
                    first = False
            except Exception as exc:
                if broken is not None:
                    if _refused(exc):
                        # Nothing listens any more: the agent went away under the request,
                        # and the resend never reached anyone (not counted).
                        raise broken from broken.__cause__  # (keep what broke it)
                    self.requests_resent += 1
                    raise
                if not (first and attempt.reused_and_unanswered and _connection_broke(exc)):
                    raise
                broken = exc
                continue
            finally:
                _ATTEMPT.reset(token)
            self.requests_resent += broken is not None
            return


def preload() -> None:
    """Import what a session needs (a2a-sdk's client, protobuf's JSON, httpx): about
    0.15 s of imports that ``eval.run`` does on a thread while it waits for the agent to
    start, instead of after. An import that fails here fails again, and is reported,
    where the session needs it."""
    try:
        import a2a.client  # noqa: F401
        import google.protobuf.json_format  # noqa: F401
        import httpx  # noqa: F401

        import bat.evaluation.run.agent_card
        import bat.evaluation.run.http_pool  # noqa: F401
    except Exception:
        pass


_ids = random.Random()  # seeded from the system's randomness once


def _new_id() -> str:
    """A random 128-bit id in hex, as ``uuid4().hex`` spells one: conversation and message
    ids need to be unique, not secret, and a system call for each costs more than the
    rest of making the message."""
    return f"{_ids.getrandbits(128):032x}"


def _client(card: Any, bindings: list[str], http: Any) -> Any:
    """An a2a-sdk client for ``card`` over ``http`` (gRPC opens channels of its own)."""
    from a2a.client import ClientConfig, ClientFactory

    from bat.evaluation.run.agent_card import GRPC

    config = ClientConfig(
        streaming=bool(card.capabilities.streaming),
        httpx_client=http,
        supported_protocol_bindings=bindings,
        accepted_output_modes=accepted_output_modes(card),
    )
    if GRPC in bindings:
        import grpc

        config.grpc_channel_factory = grpc.aio.insecure_channel
    try:
        return ClientFactory(config).create(card)
    except ValueError as exc:  # "no compatible transports found": a version it cannot read
        (interface,) = card.supported_interfaces
        raise OperationError(
            f"a2a-sdk cannot speak the agent's {interface.protocol_binding} interface of "
            f"protocol version {interface.protocol_version!r:.40}: {exc}"
        ) from None


def accepted_output_modes(card: Any) -> list[str]:
    """The output modes every request says bat accepts: all the card says the agent
    produces (its default modes, then its skills' own), else ``text/plain``.

    a2a-sdk 0.2.4 to 0.2.12 require ``configuration.acceptedOutputModes`` in each
    ``message/send`` and ``message/stream`` (a list of at least one mode, or a2a-sdk's
    0.3 transport leaves the key out) and refuse the request without it. bat reads
    whatever comes back, so it narrows nothing: an agent that honours the list is not
    made to answer differently than it would to any client."""
    modes = list(card.default_output_modes)
    for skill in card.skills:
        modes += skill.output_modes
    return list(dict.fromkeys(mode for mode in modes if mode)) or ["text/plain"]


def _refused(exc: BaseException) -> bool:
    """Whether nothing listened: a new connection was refused."""
    import httpx

    return any(isinstance(e, httpx.ConnectError) for e in exception_chain(exc))


def _connection_broke(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection that closed under a request."""
    import httpx

    broken = httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError
    return any(isinstance(e, broken) for e in exception_chain(exc))


async def _render(template: Any, done: list[TurnRecord], turn_timeout_s: float) -> str:
    """A templated turn rendered in a worker thread, within the render time limit (or
    the turn timeout if shorter): the event loop, and with it Ctrl-C, stays live while a
    template loops. A cancelled episode stops the render at its next step."""
    from bat.evaluation.inputs.template_sandbox import MAX_RENDER_SECONDS, Budget
    from bat.evaluation.inputs.turn_templates import render_turn

    budget = Budget(min(turn_timeout_s, MAX_RENDER_SECONDS))
    try:
        return await asyncio.to_thread(render_turn, template, list(done), budget)
    finally:
        budget.stop.set()  # done, or cancelled: either way the thread has nothing to do
