"""An A2A agent written against the older a2a-sdk 0.2 / 0.3 API, run with that SDK.

Why: many agents in use still run a2a-sdk 0.2 or 0.3. Their card is in the older format
(``url``, ``preferredTransport``, ``protocolVersion``), a2a-sdk 0.2 serves it only at
``/.well-known/agent.json``, and they speak the 0.2/0.3 JSON-RPC methods
(``message/send``, ``message/stream``). bat's tests install such an SDK into a separate
environment and run this file there, so bat meets a real older server, not an imitation.
It does not import with a2a-sdk 1.x (the API changed); nothing of bat imports it.

Keywords, as the echo agent: ``ASK`` ends input-required (the next turn completes with
``got it: <text>``), ``FAIL`` ends failed, ``RAISE <text>`` raises ``RuntimeError(text)``
in the executor, ``CHUNKS`` streams ``Hello, chunked world`` as four appended artifact
chunks; anything else completes with ``echo: <text>`` in an artifact.

``PORT`` (default 9900), ``NO_STREAMING=1``. Prints ``listening on http://127.0.0.1:PORT``.
"""

from __future__ import annotations

import os
import socket

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, TaskState, TextPart
from a2a.utils import new_agent_text_message, new_task

CHUNKS = ("Hel", "lo, ", "chunked ", "world")


class LegacyExecutor(AgentExecutor):
    def __init__(self) -> None:
        self.asked: set[str] = set()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        if text.startswith("RAISE"):
            raise RuntimeError(text.removeprefix("RAISE").strip() or "raised")
        task = context.current_task
        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        context_id = _context_id(task)
        updater = TaskUpdater(event_queue, task.id, context_id)
        await updater.update_status(TaskState.working)

        def say(words: str):
            return new_agent_text_message(words, context_id, task.id)

        if context_id in self.asked:
            self.asked.discard(context_id)
            await self._answer(updater, f"got it: {text}")
        elif "FAIL" in text:
            await updater.update_status(TaskState.failed, say("failure requested"), final=True)
        elif "ASK" in text:
            self.asked.add(context_id)
            await updater.update_status(
                TaskState.input_required, say("What exactly do you mean?"), final=True
            )
        elif "CHUNKS" in text:
            for index, chunk in enumerate(CHUNKS):
                await updater.add_artifact(
                    [Part(root=TextPart(text=chunk))],
                    artifact_id="answer",
                    append=index > 0,
                    last_chunk=index == len(CHUNKS) - 1,
                )
            await updater.complete()
        else:
            await self._answer(updater, f"echo: {text}")

    async def _answer(self, updater: TaskUpdater, text: str) -> None:
        await updater.add_artifact([Part(root=TextPart(text=text))], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise RuntimeError("cannot cancel")


def _context_id(task) -> str:
    """0.2's models spell it ``contextId``; 0.3's ``context_id``."""
    return getattr(task, "context_id", None) or task.contextId


def main() -> None:
    port = int(os.environ.get("PORT", "9900"))
    streaming = os.environ.get("NO_STREAMING", "") not in ("1", "true", "yes", "on")
    sock = socket.create_server(("127.0.0.1", port))
    port = sock.getsockname()[1]
    card = AgentCard(
        name="LegacyAgent",
        description="An echo agent on an older a2a-sdk.",
        url=f"http://127.0.0.1:{port}/",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=streaming),
        defaultInputModes=["text/plain"],
        defaultOutputModes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Echoes.", tags=["echo"]),
        ],
    )
    handler = DefaultRequestHandler(agent_executor=LegacyExecutor(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
