"""The simulated user: a model playing a task's user, turn by turn, against the agent.

A task with ``user`` (:class:`~bat.evaluation.inputs.dataset.SimulatedUser`) is not a
script of fixed turns: after its fixed turns (if any) and its ``first_message`` (if
any), each next user message is written by the user model of eval.yaml's ``user:``
(:class:`~bat.evaluation.inputs.config.UserModelSpec`), from the task's
``instructions`` and the conversation so far. The A2A adapter sends each one on the same
context (and task, while the agent waits for input), exactly as it sends a fixed turn.

**What the user model sees.** The conversation from the user's side, roles flipped: its
own messages are ``assistant`` messages, the agent's replies ``user`` messages, after a
system prompt made of the instructions and the stop rule. Never the agent's tools, its
events or anything else of the trace: a real user sees only the replies. With nothing
said yet (no fixed turn, no ``first_message``) it is asked to open the conversation by
one ``user`` message, :data:`OPENING`. A ``script:`` user model is bat's scripted model
server, so its rules are matched against the last "user" message: the agent's last
reply (or :data:`OPENING`).

**How a conversation ends.** The user model writes :data:`STOP` when its goal is met, or
:data:`UNMET` when it cannot be met; the conversation ends there, and the signal's
message is not sent (what it said with the signal is kept as ``last_words``). It also
ends when the task's ``max_turns`` user turns have been answered (``max_turns``), or
when the agent's turn fails, so the conversation cannot go on (``agent_ended``).

**Whose failure.** A user model that cannot be had (down, refusing, an answer that is
not a chat answer, an empty message) is an infrastructure failure of kind
``user_model``: never the agent's outcome, out of pass@k, and run again by
``--retry-infra``. Its tokens are counted apart from the agent's
(``trace.simulated_user.usage``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bat.errors import InputError
from bat.evaluation.inputs.config import ResolvedConfig, UserModelSpec, api_key
from bat.evaluation.inputs.dataset import SimulatedUser
from bat.evaluation.log.episode import TurnRecord, Usage

STOP = "###STOP###"  # the user's goal is met
UNMET = "###UNMET###"  # the user's goal cannot be met
OPENING = "(The agent is waiting. Write your first message to it.)"
NO_REPLY = "(no reply)"  # what the user model is shown for an agent's empty reply
MESSAGE_LIMIT = 50_000  # characters of one simulated user message
REPLY_LIMIT = 20_000  # characters of one agent reply shown to the user model

SYSTEM = """You are playing a user who talks to an AI agent, to test that agent. \
Stay in your role: write only what this user would write to the agent, one message \
at a time, in the user's own words. The agent's messages come to you as the other \
side of the conversation.

Your role:
{instructions}

Rules:
- Give a piece of information only when the agent asks for it, unless your role \
says otherwise.
- When your goal is met, write {stop} (alone, or after a short last message).
- When your goal cannot be met in this conversation, write {unmet}.
- Never mention these rules or that you are simulated."""


class UserModelFailed(Exception):
    """The user model gave no next message: an infrastructure failure (``user_model``)."""


@dataclass(frozen=True)
class NextMessage:
    """What the user model wrote next: a message to send, or an end of the conversation
    (``ended``: ``goal_met`` or ``stopped_unmet``, with what was said beside the signal)."""

    text: str
    ended: str | None
    usage: Usage


def read_reply(text: str) -> tuple[str, str | None]:
    """The message of a user model's reply and the end it signals, if any.

    A signal anywhere in the reply ends the conversation (a model often adds it after a
    thank-you); :data:`UNMET` wins over :data:`STOP` when both are written."""
    if UNMET in text:
        ended = "stopped_unmet"
    elif STOP in text:
        ended = "goal_met"
    else:
        return text.strip(), None
    return text.replace(UNMET, " ").replace(STOP, " ").strip(), ended


def messages_for(user: SimulatedUser, turns: list[TurnRecord]) -> list[dict[str, str]]:
    """The conversation as the user model sees it: its instructions, then each turn's
    input as its own (``assistant``) message and the agent's reply as the other side's
    (``user``)."""
    system = SYSTEM.format(instructions=user.instructions.strip(), stop=STOP, unmet=UNMET)
    messages = [{"role": "system", "content": system}]
    if not turns:
        return [*messages, {"role": "user", "content": OPENING}]
    for turn in turns:
        messages.append({"role": "assistant", "content": turn.input})
        messages.append({"role": "user", "content": _shown_reply(turn.output)})
    return messages


def _shown_reply(output: str) -> str:
    """An agent's reply as the user model reads it: at most :data:`REPLY_LIMIT`
    characters (an agent that answers megabytes must not make every later request of
    the conversation that large), the cut said."""
    text = output.strip() or NO_REPLY
    if len(text) <= REPLY_LIMIT:
        return text
    return f"{text[:REPLY_LIMIT]}\n[... {len(text) - REPLY_LIMIT:,} more characters not shown]"


class UserModel:
    """The run's user model: one HTTP client (the one the judges use),
    its requests at most ``user.concurrency`` at a time, on threads of its own."""

    def __init__(self, spec: UserModelSpec, key: str | None, shown: str) -> None:
        from bat.evaluation.run.chat_client import ChatClient

        self.spec = spec
        self.shown = shown  # the name episodes record: provider:model, or script:FILE
        self._client = ChatClient(spec, key, who="user model")
        self._pool = ThreadPoolExecutor(
            max_workers=spec.concurrency, thread_name_prefix="bat-user-model"
        )

    @property
    def requests_made(self) -> int:
        return self._client.requests_made

    async def next_message(self, user: SimulatedUser, turns: list[TurnRecord]) -> NextMessage:
        """The user's next message after ``turns``; :class:`UserModelFailed` when the
        user model gives none (its error said in one line)."""
        from bat.evaluation.run.chat_client import ChatError

        messages = messages_for(user, turns)
        loop = asyncio.get_running_loop()
        try:
            reply = await loop.run_in_executor(self._pool, self._converse, messages)
        except ChatError as exc:
            raise UserModelFailed(f"the user model {self.shown} failed: {exc}") from None
        usage = Usage(
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            total_tokens=reply.prompt_tokens + reply.completion_tokens,
            model_calls=1,
        )
        text, ended = read_reply(reply.text)
        if not text and ended is None:
            raise UserModelFailed(f"the user model {self.shown} wrote an empty message")
        if len(text) > MESSAGE_LIMIT:
            raise UserModelFailed(
                f"the user model {self.shown} wrote a message of {len(text):,} characters "
                f"(at most {MESSAGE_LIMIT:,}: a user's message, not a document)"
            )
        return NextMessage(text=text, ended=ended, usage=usage)

    def _converse(self, messages: list[dict[str, str]]):
        return self._client.converse(
            messages, temperature=self.spec.temperature, seed=self.spec.seed
        )

    def close(self) -> None:
        """Stop waiting on retries, drop queued requests, close the connections."""
        self._client.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


@contextlib.contextmanager
def user_model(
    resolved: ResolvedConfig, needed: bool, say: Callable[[str], None]
) -> Iterator[UserModel | None]:
    """The run's user model for the block (None when no task needs one): a ``script:``
    one served by bat on 127.0.0.1, as a judge's is, for as long as the block lasts."""
    spec = resolved.config.user
    if not needed or spec is None:
        yield None
        return
    key = api_key(spec, {**resolved.environment, **spec.env})
    with contextlib.ExitStack() as stack:
        if spec.script is not None:
            from bat.evaluation.run.scripted_model import serving

            path = resolved.base / spec.script
            if not path.is_file():  # checked with eval.yaml; gone since
                raise InputError(f"{resolved.file}: user.script: {spec.script}: no such file")
            address = stack.enter_context(serving(path, avoid={resolved.agent_port}))
            base_url = f"{address}/v1" if spec.provider == "openai" else address
            say(f"user model: scripted by bat from {spec.script} at {base_url}")
            spec = spec.model_copy(update={"base_url": base_url})
        model = UserModel(spec, key, resolved.config.user.shown)
        stack.callback(model.close)
        yield model


def script_sha256(resolved: ResolvedConfig) -> str | None:
    """The sha256 of the user model's rule file (None: not scripted, or unreadable)."""
    spec = resolved.config.user
    if spec is None or spec.script is None:
        return None
    try:
        return hashlib.sha256(Path(resolved.base / spec.script).read_bytes()).hexdigest()
    except OSError:
        return None


__all__ = [
    "NO_REPLY",
    "OPENING",
    "STOP",
    "UNMET",
    "NextMessage",
    "UserModel",
    "UserModelFailed",
    "messages_for",
    "read_reply",
    "user_model",
]
