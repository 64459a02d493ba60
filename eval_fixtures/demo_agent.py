"""The demo agent: the tool agent plus the habits that make an evaluation interesting.

Why: a demo whose agent passes everything never shows what bat is for. This agent is
the tool agent (``eval_fixtures.tool_agent``: the same triggers, metadata and spans) with
five more phrases, each standing for something real agents do, deterministically so the
demo's report is the same on every run:

* ``my name is <Name>`` / ``what is my name``: memory across the turns of one context
  (``nice to meet you, <Name>`` / ``your name is <Name>``, or ``I do not know your name``);
* ``book a table``: without a number, the turn ends ``input-required`` with ``For how
  many people?``; the next turn of the context (or a first turn with a number) calls
  ``book_table(people=N)`` -> ``booked a table for N``. With ``GUESS_PEOPLE=N``
  (``--guess-people N``) the agent is a *broken* one that does not ask but guesses: a
  booking without a number is made for N at once, the way an agent that fills a missing
  detail with a default does — what a simulated user who holds the detail exposes;
* ``forecast for <City>``: ``get_forecast(city=<City>)`` -> ``rain in <City>``, except
  that the forecast service is busy for every third call the process gets (the 2nd, 5th,
  8th...): the tool call fails and the answer apologises — a flaky tool, so a task with
  k = 3 attempts passes two of them;
* ``convert``: the executor raises ``RuntimeError`` (no exchange rate), as an agent whose
  code breaks does: an agent error, not an infrastructure failure;
* ``calculate`` with ``^`` or ``**``: the tool agent's calculator has no powers, so the
  answer is its error — a task this agent fails every time.

``python -m eval_fixtures.demo_agent``: the tool agent's options, ``--guess-people N``
(``GUESS_PEOPLE``; 0, the default, asks) and ``CONFIG_PATH``.
"""

from __future__ import annotations

import argparse
import itertools
import re
import time
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentCard, AgentSkill, TaskState

from eval_fixtures._a2a_server import Turn, build_card, env_int, pause
from eval_fixtures._spans import SpanFile
from eval_fixtures.tool_agent import (
    Call,
    ToolExecutor,
    TurnWork,
    answered,
    argument,
    bat_delta,
    serve_tools,
    work,
)

NAME = "DemoAgent"
PEOPLE_QUESTION = "For how many people?"
BUSY = "sorry, the forecast service is busy; try again later"
FLAKY_EVERY = 3  # the forecast fails on calls 2, 5, 8... of the process


class DemoExecutor(ToolExecutor):
    """The tool agent's executor, with memory, a question back, a flaky tool and a bug."""

    def __init__(self, options: Any, spans: SpanFile | None) -> None:
        super().__init__(options, spans)
        self.names: dict[str, str] = {}  # context id -> the user's name
        self.booking: set[str] = set()  # contexts asked "for how many people?"
        self.forecasts = itertools.count()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        start = time.time_ns()
        await pause(self.options.latency_ms)
        text = context.get_user_input()
        context_id = context.context_id or ""
        if "convert" in text:
            raise RuntimeError("no exchange rate for that pair of currencies")
        if context_id in self.booking or "book a table" in text:
            people = re.search(r"\d+", text)
            guess = self.options.guess_people  # the broken agent: no question, a default
            if people is None and not guess:
                self.booking.add(context_id)
                model_call = [(10 * len(text.split()), 5 * len(PEOPLE_QUESTION.split()))]
                metadata = bat_delta([], model_call)
                await Turn(context, event_queue).end(
                    TaskState.TASK_STATE_INPUT_REQUIRED, PEOPLE_QUESTION, metadata
                )
                return
            self.booking.discard(context_id)
            count = int(people[0]) if people else guess
            call = Call("book_table", {"people": count}, f"booked a table for {count}")
            turn = answered(text, call.result, [call])
        else:
            turn = self.remembered(text, context_id) or self.forecast(text) or work(text)
        await self.reply(context, event_queue, turn, start)

    def remembered(self, text: str, context_id: str) -> TurnWork | None:
        """``my name is`` and ``what is my name``: memory of this context alone."""
        told = re.search(r"\bmy name is ([A-Z][\w'-]*)", text)
        if told:
            self.names[context_id] = told[1]
            return answered(text, f"nice to meet you, {told[1]}")
        if re.search(r"\bwhat is my name\b", text, re.IGNORECASE):
            name = self.names.get(context_id)
            return answered(text, f"your name is {name}" if name else "I do not know your name")
        return None

    def forecast(self, text: str) -> TurnWork | None:
        """``forecast for <City>``: a tool that is busy for one call in three."""
        asked = re.search(r"\bforecast for (.+)", text)
        if not asked:
            return None
        city = argument(asked[1])
        if next(self.forecasts) % FLAKY_EVERY == 1:
            call = Call("get_forecast", {"city": city}, "error: service busy", error=True)
            return answered(text, BUSY, [call])
        call = Call("get_forecast", {"city": city}, f"rain in {city}")
        return answered(text, call.result, [call])


def make_card(
    port: int, streaming: bool, binding: str = "JSONRPC", address: str | None = None
) -> AgentCard:
    skill = AgentSkill(
        id="assistant",
        name="Assistant",
        description="Weather, forecasts, sums, search, table bookings; remembers your name.",
        tags=["tools", "demo"],
        examples=["weather in Paris", "forecast for Lisbon", "book a table", "my name is Ada"],
    )
    description = "The bundled demo agent of bat: deterministic, with one flaky tool and a bug."
    return build_card(NAME, description, skill, port, streaming, binding, address)


def guess_option(parser: argparse.ArgumentParser) -> None:
    """``--guess-people N`` (``GUESS_PEOPLE``): 0 asks how many people; N > 0 makes the
    broken agent that books for N without asking. A negative number is a usage error."""
    default = env_int(parser, "GUESS_PEOPLE", 0)
    if default < 0:
        parser.error(f"GUESS_PEOPLE={default}: expected 0 (ask) or a number of people")
    parser.add_argument(
        "--guess-people",
        type=people_count,
        default=default,
        help="env GUESS_PEOPLE: book for N people without asking (0, the default: ask)",
    )


def people_count(text: str) -> int:
    """A ``--guess-people`` value: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: expected 0 (ask) or a number of people")
    return value


def main(argv: list[str] | None = None) -> None:
    """Parse the command line (and environment), read config.yaml, serve until SIGTERM."""
    serve_tools(argv, "demo_agent", __doc__, make_card, DemoExecutor, guess_option)


if __name__ == "__main__":
    main()
