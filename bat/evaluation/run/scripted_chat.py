"""A chat request to bat's scripted model and the script's answer to it, in no wire's
terms: every wire (OpenAI chat, Ollama, Anthropic Messages, OpenAI Responses) reads a
request into a :class:`Chat` and words an :class:`Answer` its own way. Kept apart from
the server (:mod:`bat.evaluation.run.scripted_model`) so that the wires, which the
server imports, need nothing of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bat.evaluation.inputs.model_script import Conversation, Rule, ToolCall


@dataclass(frozen=True)
class Chat:
    """One chat request, read: its body, what the rules look at, the model it names, and
    its number among the requests of its path (for counted ids)."""

    body: dict[str, Any]
    conversation: Conversation
    model: str
    number: int


@dataclass(frozen=True)
class Answer:
    """What the script says to a chat: the text, the tools asked for, the token counts."""

    reply: str
    calls: list[ToolCall]
    usage: dict[str, int]

    @classmethod
    def of(cls, rule: Rule | None, conversation: Conversation) -> Answer:
        reply = conversation.reply(rule)
        calls = conversation.calls(rule)
        return cls(reply, calls, usage_of(conversation, reply, len(calls)))


def usage_of(conversation: Conversation, reply: str, calls: int = 0) -> dict[str, int]:
    """Token counts without a tokenizer: one token per whitespace-separated word (and
    one per tool call asked for)."""
    prompt = len(conversation.prompt.split())
    completion = len(reply.split()) + calls
    return dict(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def pieces(text: str) -> list[str]:
    """Split a reply into stream chunks, one word each; joined, they give ``text`` back."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]
