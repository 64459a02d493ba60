"""Anthropic's Messages API, as bat's scripted model speaks it (Claude Code's wire).

``POST /v1/messages`` answers with a message (JSON), or with its server-sent events when
the request says ``"stream": true`` (what Claude Code always asks for): ``message_start``,
then per content block ``content_block_start`` / ``content_block_delta`` (``text_delta``
word by word, ``input_json_delta`` for a tool's input) / ``content_block_stop``, then
``message_delta`` (``stop_reason``, output tokens) and ``message_stop``.
``POST /v1/messages/count_tokens`` counts the prompt the same way an answer's usage does.

The rules (:mod:`bat.evaluation.inputs.model_script`) read OpenAI-shaped messages, so a
request is translated first (:func:`messages`): ``system`` (top-level, or Claude Code's
``system`` messages between the turns) goes first; a user message's ``tool_result``
blocks become ``tool`` messages answering the assistant's ``tool_use`` of the same id;
the ``<system-reminder>`` blocks Claude Code puts into a user's message go to the system
text, so ``{last}`` and ``match`` see what the user wrote and a tool result stays last.

Pure functions of the request and the script's answer: the server
(:mod:`bat.evaluation.run.scripted_model`) routes, counts and chooses the rule.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from sse_starlette import EventSourceResponse
from starlette.responses import JSONResponse, Response

from bat.evaluation.run.scripted_chat import pieces

if TYPE_CHECKING:
    from bat.evaluation.run.scripted_chat import Answer, Chat

Messages = list[dict[str, Any]]
REMINDER = "<system-reminder>"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def messages(body: dict[str, Any]) -> Messages:
    """The request's conversation in OpenAI's shape (what the rules read); ValueError if
    the body is no Messages request."""
    given = body.get("messages")
    if not isinstance(given, list) or not all(isinstance(m, dict) for m in given):
        raise ValueError("'messages' must be a list of objects")
    system = [_text(body.get("system"))]
    turns: Messages = []
    for message in given:
        role, content = message.get("role"), message.get("content")
        if role == "system":
            system.append(_text(content))
        elif role == "assistant":
            turns.append(_assistant(content))
        else:
            turns.extend(_user(content, system))
    text = "\n".join(part for part in system if part)
    return ([{"role": "system", "content": text}] if text else []) + turns


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(content: Any) -> str:
    texts = (b.get("text") for b in _blocks(content) if b.get("type") == "text")
    return "\n".join(t for t in texts if isinstance(t, str))


def _assistant(content: Any) -> dict[str, Any]:
    calls = [
        {"id": str(b.get("id")), "type": "function", "function": {"name": str(b.get("name"))}}
        for b in _blocks(content)
        if b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": _text(content)}
    return message | {"tool_calls": calls} if calls else message


def _user(content: Any, system: list[str]) -> Messages:
    """A user message: its tool results (``tool`` messages), then what the user wrote;
    system reminders go to ``system``."""
    out: Messages = []
    words: list[str] = []
    for block in _blocks(content):
        if block.get("type") == "tool_result":
            result = block.get("content")
            text = result if isinstance(result, str) else _text(result)
            out.append(
                {"role": "tool", "tool_call_id": str(block.get("tool_use_id")), "content": text}
            )
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            (system if text.lstrip().startswith(REMINDER) else words).append(text)
    if words or not out:
        out.append({"role": "user", "content": "\n".join(words)})
    return out


def answer(chat: Chat, said: Answer) -> Response:
    """A message, or its server-sent events when the request asked for a stream."""
    content: list[dict[str, Any]] = [{"type": "text", "text": said.reply}] if said.reply else []
    content += [
        {"type": "tool_use", "id": f"toolu_{chat.number:06d}_{i}", "name": call.name}
        | {"input": call.args}
        for i, call in enumerate(said.calls)
    ]
    usage = {
        "input_tokens": said.usage["prompt_tokens"],
        "output_tokens": said.usage["completion_tokens"],
    }
    message = {
        "id": f"msg_{chat.number:06d}",
        "type": "message",
        "role": "assistant",
        "model": chat.model,
        "content": content,
        "stop_reason": "tool_use" if said.calls else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    if chat.body.get("stream"):
        return EventSourceResponse(_events(message))
    return JSONResponse(message)


async def _events(message: dict[str, Any]) -> AsyncIterator[dict[str, str]]:
    def event(kind: str, **data: Any) -> dict[str, str]:
        return {"event": kind, "data": json.dumps({"type": kind, **data})}

    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None}
    yield event("message_start", message=start | {"usage": {**usage, "output_tokens": 0}})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield event(
                "content_block_start", index=index, content_block={"type": "text", "text": ""}
            )
            for piece in pieces(block["text"]):
                yield event(
                    "content_block_delta", index=index, delta={"type": "text_delta", "text": piece}
                )
        else:
            opened = {**block, "input": {}}
            yield event("content_block_start", index=index, content_block=opened)
            partial = json.dumps(block["input"])
            delta = {"type": "input_json_delta", "partial_json": partial}
            yield event("content_block_delta", index=index, delta=delta)
        yield event("content_block_stop", index=index)
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield event("message_delta", delta=stop, usage={"output_tokens": usage["output_tokens"]})
    yield event("message_stop")


def error(message: str, status: int) -> Response:
    """Anthropic's error body: ``{"type": "error", "error": {"type", "message"}}``."""
    kind = ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status)


def count_tokens(conversation_prompt: str) -> Response:
    """``/v1/messages/count_tokens``: one token per word of the prompt, as usage counts."""
    return JSONResponse({"input_tokens": len(conversation_prompt.split())})
