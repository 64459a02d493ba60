"""An A2A agent on the a2a-sdk 0.2.4 - 0.2.12 API, run with such a release (0.2.6).

Why: the a2a-samples of mid-2025 run these releases, whose ``MessageSendConfiguration``
*requires* ``acceptedOutputModes``: a request without it is refused as invalid params
before the agent runs. bat's tests install a2a-sdk 0.2.6 in an environment of its own
(``tests/a2a_sdks.py``) and run this file there. It imports nothing of bat or of the
other fixtures, and does not import with a2a-sdk 0.3 or later.

Each answer names the output modes the request accepted, so a test sees what bat sent:
``echo: <text> [accepts <modes>]`` in an artifact; ``ASK`` ends input-required and the
next turn of that task completes with ``got it: <text>``.

``PORT`` (set by bat when it starts the agent), ``NO_STREAMING=1``. Prints
``listening on http://127.0.0.1:PORT`` once it accepts connections.
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

OUTPUT_MODES = ["text/plain", "application/json"]


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        continued = task is not None
        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.contextId)
        if "ASK" in text and not continued:
            question = new_agent_text_message("What exactly?", task.contextId, task.id)
            await updater.update_status(TaskState.input_required, question, final=True)
            return
        modes = ",".join(context.configuration.acceptedOutputModes)
        answer = f"got it: {text}" if continued else f"echo: {text} [accepts {modes}]"
        await updater.add_artifact([Part(root=TextPart(text=answer))], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise RuntimeError("cannot cancel")


def main() -> None:
    sock = socket.create_server(("127.0.0.1", int(os.environ.get("PORT", "0"))))
    port = sock.getsockname()[1]
    card = AgentCard(
        name="V02Agent",
        description="An echo agent on a2a-sdk 0.2.",
        url=f"http://127.0.0.1:{port}/",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=os.environ.get("NO_STREAMING") != "1"),
        defaultInputModes=["text/plain"],
        defaultOutputModes=OUTPUT_MODES,
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    main()
