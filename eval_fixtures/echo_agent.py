"""The echo agent: an A2A agent whose every answer is decided by keywords in the user text.

Why: the evaluation engine must be tested against a real agent process, over real A2A,
in every situation an agent can put it in: a plain answer, a question back
(input-required, auth-required), a failure of every kind, memory across turns, a turn
that never ends, a process that dies, answers carried in artifacts (whole or in
chunks), status messages or plain messages. A model-driven agent can do none of that on
demand; this one does, deterministically.

Keywords (case-sensitive, checked in this order; the first that applies wins):

* ``CRASH``: the process dies at once (exit code 3), before any event is sent;
* ``HANG``: the task opens and says WORKING, then the turn never ends;
* ``RAISE <text>``: the executor raises ``RuntimeError(<text>)`` before any event, as an
  agent whose model call failed does (a2a-sdk answers with an internal error carrying
  the text: JSON-RPC ``-32603``, HTTP 500 over REST);
* ``STEP <text>``: an artifact ``step: <text>`` (one of its own each turn), then
  ``input-required`` with ``anything else?``: a task that gathers artifacts over turns;
* ``BREAK <text>`` (at the start): the task opens and says WORKING, then the executor
  raises ``RuntimeError(<text>)``, as an agent whose model call fails mid-turn does (the
  error reaches a streaming client after the first events);
* the turn after an ``ASK``, ``AUTH`` or ``STEP`` turn of the same context: completes
  with ``got it: <text>``;
* ``FAIL``: the task ends ``failed`` with the status message ``failure requested``, or
  with ``<message>`` for ``FAIL: <message>``;
* ``REJECT``: the task ends ``rejected`` with ``I will not do that``;
* ``CANCEL``: the task ends ``canceled`` with ``canceled by the agent``;
* ``AUTH``: the task ends ``auth-required`` with ``sign in first``;
* ``ASK``: the task ends ``input-required`` with ``What exactly do you mean?``;
* ``CHUNKS``: completes with ``Hello, chunked world``, streamed as four chunks of one
  artifact (``append``); a non-streaming client gets the artifact with four parts;
* ``DATA``: completes with an artifact holding one data part ``{"answer": 42}`` and the
  status message ``Done!``;
* ``FILE``: completes with an artifact holding one file part (``report.pdf`` at
  ``http://127.0.0.1:9/report.pdf``);
* ``PIECES``: completes with ``Hello, pieced world`` sent as four artifacts of their own
  that share one name (as agents that stream each model chunk as a new artifact do);
* ``UNFINISHED``: sends an artifact ``partial answer`` and returns with the task still
  ``working`` (no final state: an agent whose executor stops early);
* ``HISTORY``: completes with ``history: <earlier user texts of the context, ' | '-joined>``;
* ``MODEL?``: completes with ``model: <MODEL>/<MODEL_PROVIDER>`` (the environment's);
* ``BASE_URL?``: completes with ``base_url: <BASE_URL> key: set|unset`` (whether
  ``OPENAI_API_KEY`` is set): where the agent's model calls would go;
* ``CHAT <text>`` (at the start): one model call with <text> as the user message, to
  ``BASE_URL`` in ``MODEL_PROVIDER``'s protocol (OpenAI's ``/chat/completions``, else
  Ollama's ``/api/chat``); completes with ``model: <reply>``, or ``model error: <status>
  <body>``: an agent that really asks its model, for a stand-in model's tests. With
  ``MODEL_PROVIDER=openai`` and no ``OPENAI_API_KEY`` it fails as a BAT-ADK agent on the
  OpenAI client does: the client's words ("The api_key client option must be set...")
  go to the agent's log only, and the task ends ``failed`` with ``Agent execution failed
  (OpenAIError)``;
* anything else: completes with ``echo: <text>``.

``python -m eval_fixtures.echo_agent [--port P] [--latency-ms N] [--answer-in MODE]
[--no-streaming] [--startup-delay-ms N] [--exit-after-start] [--cold-ms N]``; see
``_a2a_server`` for the options and their environment variables, and
eval_fixtures/README.md for the events. ``--cold-ms`` (``COLD_MS``) is a cold start: the
process's first request waits N ms before it is served (as an agent importing its model
client on first use does), and requests that arrive meanwhile wait for it too.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import defaultdict

from a2a.helpers import new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentCard, AgentSkill, Artifact, Part, TaskState
from a2a.utils.errors import UnsupportedOperationError

from eval_fixtures._a2a_server import (
    Turn,
    add_option,
    build_card,
    common_parser,
    hang_forever,
    pause,
    serve,
)

NAME = "EchoAgent"
CRASH_EXIT_CODE = 3
QUESTION = "What exactly do you mean?"
FAILURE = "failure requested"
REJECTION = "I will not do that"
CANCELED = "canceled by the agent"
SIGN_IN = "sign in first"
CHUNKS = ("Hel", "lo, ", "chunked ", "world")
PIECES = ("Hel", "lo, ", "pieced ", "world")
STEP_QUESTION = "anything else?"
FILE_URL = "http://127.0.0.1:9/report.pdf"


class EchoExecutor(AgentExecutor):
    """Answers by keyword; remembers the user texts and open questions of each context."""

    def __init__(self, latency_ms: int = 0, answer_in: str = "artifact", cold_ms: int = 0) -> None:
        self.latency_ms = latency_ms
        self.cold_ms = cold_ms  # paid once, by the first request(s): a cold start
        self._warming: asyncio.Lock | None = None
        self.answer_in = answer_in
        self.history: defaultdict[str, list[str]] = defaultdict(list)
        self.asked: set[str] = set()  # contexts whose last turn asked for input or auth

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        if "CRASH" in text:
            os._exit(CRASH_EXIT_CODE)  # a crash: no clean-up, no reply, no flushed output
        await self._warm_up()
        await pause(self.latency_ms)
        context_id = context.context_id or ""
        earlier = list(self.history[context_id])
        self.history[context_id].append(text)
        turn = Turn(context, event_queue)
        if "HANG" in text:
            await turn.start()
            await hang_forever()
        if text.startswith("RAISE"):
            raise RuntimeError(text.removeprefix("RAISE").strip() or "raised")
        if text.startswith("BREAK"):
            await turn.start()
            raise RuntimeError(text.removeprefix("BREAK").strip() or "broke")
        if text.startswith("CHAT ") and missing_openai_key():
            print(f"OpenAIError: {OPENAI_NO_KEY}", flush=True)  # the agent's log, as BAT-ADK
            await turn.end(TaskState.TASK_STATE_FAILED, "Agent execution failed (OpenAIError)")
            return
        if text.startswith("CHAT "):
            await turn.answer(await ask_model(text.removeprefix("CHAT ")), self.answer_in)
            return
        if text.startswith("STEP"):
            self.asked.add(context_id)
            step = Artifact(
                artifact_id=str(uuid.uuid4()), parts=[new_text_part(f"step: {text[4:].strip()}")]
            )
            await turn.artifacts([step], TaskState.TASK_STATE_INPUT_REQUIRED, STEP_QUESTION)
        elif context_id in self.asked:
            self.asked.discard(context_id)
            await turn.answer(f"got it: {text}", self.answer_in)
        elif "FAIL" in text:
            reason = text.split("FAIL:", 1)[1].strip() if "FAIL:" in text else FAILURE
            await turn.end(TaskState.TASK_STATE_FAILED, reason)
        elif "REJECT" in text:
            await turn.end(TaskState.TASK_STATE_REJECTED, REJECTION)
        elif "CANCEL" in text:
            await turn.end(TaskState.TASK_STATE_CANCELED, CANCELED)
        elif "AUTH" in text:
            self.asked.add(context_id)
            await turn.end(TaskState.TASK_STATE_AUTH_REQUIRED, SIGN_IN)
        elif "ASK" in text:
            self.asked.add(context_id)
            await turn.end(TaskState.TASK_STATE_INPUT_REQUIRED, QUESTION)
        elif "CHUNKS" in text:
            await turn.chunks(CHUNKS)
        elif "DATA" in text:
            data = Artifact(artifact_id=str(uuid.uuid4()), parts=[new_data_part({"answer": 42})])
            await turn.artifacts([data], TaskState.TASK_STATE_COMPLETED, "Done!")
        elif "FILE" in text:
            part = Part(url=FILE_URL, filename="report.pdf", media_type="application/pdf")
            file = Artifact(artifact_id=str(uuid.uuid4()), parts=[part])
            await turn.artifacts([file], TaskState.TASK_STATE_COMPLETED)
        elif "UNFINISHED" in text:
            partial = Artifact(
                artifact_id=str(uuid.uuid4()), parts=[new_text_part("partial answer")]
            )
            updater = await turn.start()
            await updater.add_artifact(list(partial.parts), artifact_id=partial.artifact_id)
        elif "PIECES" in text:
            pieces = [
                Artifact(
                    artifact_id=str(uuid.uuid4()),
                    name="current_result",
                    parts=[new_text_part(piece)],
                )
                for piece in PIECES
            ]
            await turn.artifacts(pieces, TaskState.TASK_STATE_COMPLETED)
        else:
            await turn.answer(reply_to(text, earlier), self.answer_in)

    async def _warm_up(self) -> None:
        """The cold start: the first request waits ``cold_ms``, those arriving meanwhile
        wait for it; later ones pass at once."""
        if self._warming is None and self.cold_ms <= 0:
            return  # warm: no cold start, or it is over
        self._warming = self._warming or asyncio.Lock()
        async with self._warming:
            cold, self.cold_ms = self.cold_ms, 0
            await pause(cold)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise UnsupportedOperationError(message="the echo agent cannot cancel tasks")


# What the OpenAI Python client raises (openai.OpenAIError) when it has no key.
OPENAI_NO_KEY = (
    "The api_key client option must be set either by passing api_key to the client or by "
    "setting the OPENAI_API_KEY environment variable"
)


def missing_openai_key() -> bool:
    """Whether an OpenAI client made now would refuse to start: no key to send."""
    return (
        os.environ.get("MODEL_PROVIDER") == "openai"
        and not os.environ.get("OPENAI_API_KEY", "").strip()
    )


async def ask_model(text: str) -> str:
    """One chat request to the model at BASE_URL, in MODEL_PROVIDER's protocol."""
    import httpx

    base = os.environ.get("BASE_URL", "").rstrip("/")
    body = {"model": os.environ.get("MODEL", ""), "stream": False}
    body["messages"] = [{"role": "user", "content": text}]
    openai = os.environ.get("MODEL_PROVIDER") == "openai"
    url = f"{base}/chat/completions" if openai else f"{base}/api/chat"
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(url, json=body)
    if response.status_code != 200:
        return f"model error: {response.status_code} {response.text[:300]}"
    answer = response.json()
    message = answer["choices"][0]["message"] if openai else answer["message"]
    return f"model: {message['content']}"


def reply_to(text: str, earlier: list[str]) -> str:
    """The answer of a completing turn: history, model, or the echo."""
    if "HISTORY" in text:
        return "history: " + " | ".join(earlier)
    if "BASE_URL?" in text:
        key = "set" if os.environ.get("OPENAI_API_KEY") else "unset"
        return f"base_url: {os.environ.get('BASE_URL', '')} key: {key}"
    if "MODEL?" in text:
        model = os.environ.get("MODEL", "")
        return f"model: {model}/{os.environ.get('MODEL_PROVIDER', '')}"
    return f"echo: {text}"


def make_card(
    port: int, streaming: bool, binding: str = "JSONRPC", address: str | None = None
) -> AgentCard:
    skill = AgentSkill(
        id="echo",
        name="Echo",
        description="Echoes the text; keywords (ASK, FAIL, CRASH...) change that.",
        tags=["echo", "test"],
        examples=["hello", "ASK me", "HISTORY please"],
    )
    description = "A deterministic test agent: echoes what it is told, or obeys keywords."
    return build_card(NAME, description, skill, port, streaming, binding, address)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line (and environment), then serve until SIGTERM or SIGINT."""
    parser = common_parser("eval_fixtures.echo_agent", __doc__.splitlines()[0])
    add_option(parser, "--cold-ms", "COLD_MS", "wait once, on the first request (cold start)", 0)
    args = parser.parse_args(argv)
    executor = EchoExecutor(
        latency_ms=args.latency_ms, answer_in=args.answer_in, cold_ms=args.cold_ms
    )
    serve(args, "echo_agent", make_card, executor)


if __name__ == "__main__":
    main()
