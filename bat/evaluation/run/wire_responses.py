"""OpenAI's Responses API, as bat's scripted model speaks it (OpenAI Codex CLI's wire).

``POST /v1/responses`` answers with a response object (JSON), or with its server-sent
events when the request says ``"stream": true`` (what Codex always asks for):
``response.created`` and ``response.in_progress``; per output item
``response.output_item.added``, then for a message ``response.content_part.added``,
``response.output_text.delta`` word by word, ``response.output_text.done`` and
``response.content_part.done``, for a function call ``response.function_call_arguments
.delta``/``.done``; then ``response.output_item.done``; last ``response.completed``,
carrying the whole response and its usage. Every event has a ``sequence_number``.

The rules (:mod:`bat.evaluation.inputs.model_script`) read OpenAI chat messages, so a
request is translated first (:func:`messages`): ``instructions`` and ``developer`` or
``system`` messages go first as the system text, and so do the user messages the client
fills with its own context, wholly wrapped in one tag (Codex's ``<environment_context>``
with the working directory, sandbox and date), so ``{last}``, ``{first}`` and ``match``
see what the user wrote; its ``<cwd>`` is restated as a ``Working directory:`` line, so
``{cwd}`` in a rule's arguments is the agent's workspace; a ``function_call`` item is
an assistant's tool call and a ``function_call_output`` item its result (for
``after_tool``), matched by ``call_id``; reasoning items are skipped. A rule's
``tool_calls`` become ``function_call`` output items under the rule's names: Codex 0.171
offers ``exec_command`` (``{"cmd": "..."}``, run in the turn's working directory) to a
model it has no metadata for.

Pure functions of the request and the script's answer: the server
(:mod:`bat.evaluation.run.scripted_model`) routes, counts and chooses the rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from sse_starlette import EventSourceResponse
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:  # the server imports this module: no import back at run time
    from bat.evaluation.run.scripted_model import Answer, Chat

Messages = list[dict[str, Any]]
CREATED = 1_700_000_000  # the server's fixed clock: identical requests, identical replies
# A user message that is one tagged block of the client's own context, not the user's words.
CONTEXT = re.compile(r"^\s*<([A-Za-z_][\w-]*)>.*</\1>\s*$", re.S)
# The working directory in Codex's context, restated as the line ``{cwd}`` reads.
CWD = re.compile(r"<cwd>([^<\n]+)</cwd>")
ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_error"}


def messages(body: dict[str, Any]) -> Messages:
    """The request's conversation in OpenAI's chat shape (what the rules read);
    ValueError if the body is no Responses request."""
    given = body.get("input")
    if isinstance(given, str):
        given = [{"role": "user", "content": given}]
    if not isinstance(given, list) or not all(isinstance(item, dict) for item in given):
        raise ValueError("'input' must be a string or a list of objects")
    system = [_text(body.get("instructions"))]
    turns: Messages = []
    for item in given:
        kind = item.get("type", "message")
        if kind == "message":
            role, text = item.get("role"), _text(item.get("content"))
            if role in ("system", "developer") or (role == "user" and CONTEXT.match(text)):
                system.append(text)
                where = CWD.search(text)
                if where:
                    system.append(f"Working directory: {where.group(1).strip()}")
            elif role in ("user", "assistant"):
                turns.append({"role": role, "content": text})
        elif kind in ("function_call", "custom_tool_call"):
            call = {"id": str(item.get("call_id")), "type": "function"}
            call["function"] = {"name": str(item.get("name"))}
            turns.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            text = output if isinstance(output, str) else _text(output)
            turns.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id")), "content": text}
            )
    text = "\n".join(part for part in system if part)
    return ([{"role": "system", "content": text}] if text else []) + turns


def _text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    texts = (p.get("text") for p in parts if isinstance(p, dict))
    return "\n".join(t for t in texts if isinstance(t, str))


def answer(chat: Chat, said: Answer) -> Response:
    """A response object, or its server-sent events when the request asked for a stream."""
    number = chat.number
    output: list[dict[str, Any]] = []
    if said.reply or not said.calls:
        part = {"type": "output_text", "text": said.reply, "annotations": []}
        output.append(
            {"id": f"msg_{number:06d}", "type": "message", "status": "completed"}
            | {"role": "assistant", "content": [part]}
        )
    output += [
        {"id": f"fc_{number:06d}_{i}", "type": "function_call", "status": "completed"}
        | {"call_id": f"call_{number:06d}_{i}", "name": call.name, "arguments": call.arguments}
        for i, call in enumerate(said.calls)
    ]
    usage = {
        "input_tokens": said.usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": said.usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": said.usage["total_tokens"],
    }
    response = {
        "id": f"resp_{number:06d}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": chat.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
        "error": None,
        "incomplete_details": None,
    }
    if chat.body.get("stream"):
        return EventSourceResponse(_events(response))
    return JSONResponse(response)


async def _events(response: dict[str, Any]) -> AsyncIterator[dict[str, str]]:
    sequence = iter(range(1_000_000_000))

    def event(kind: str, **data: Any) -> dict[str, str]:
        body = {"type": kind, "sequence_number": next(sequence), **data}
        return {"event": kind, "data": json.dumps(body)}

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    for index, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", **where, content_index=0, part=part)
            for piece in _pieces(text):
                yield event("response.output_text.delta", **where, content_index=0, delta=piece)
            yield event("response.output_text.done", **where, content_index=0, text=text)
            done = item["content"][0]
            yield event("response.content_part.done", **where, content_index=0, part=done)
        else:
            opened = {**item, "status": "in_progress", "arguments": ""}
            yield event("response.output_item.added", output_index=index, item=opened)
            arguments = item["arguments"]
            yield event("response.function_call_arguments.delta", **where, delta=arguments)
            yield event("response.function_call_arguments.done", **where, arguments=arguments)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response)


def _pieces(text: str) -> list[str]:
    """Word-sized deltas; joined, they give ``text`` back."""
    return [p for p in re.split(r"(?<=\s)(?=\S)", text) if p]


def error(message: str, status: int) -> Response:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = ERROR_TYPES.get(status, "server_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status)
