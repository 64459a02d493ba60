"""The scripted model's Anthropic Messages API, over real HTTP to a served script.

Claude Code's own requests are the end-to-end proof (tests/agents/test_claude_code.py);
here, each shape the wire answers, streamed and not, and how a request's blocks reach the
rules: system text and reminders, tool results, ``{cwd}``.
"""

import json

import httpx
import pytest

from bat.evaluation.inputs.model_script import Conversation, Rules
from bat.evaluation.run.scripted_model import serving
from bat.evaluation.run.wire_anthropic import messages

RULES = [
    {"after_tool": "Write", "reply": "Wrote: {result}"},
    {
        "match": "create",
        "reply": "On it.",
        "tool_calls": [{"name": "Write", "args": {"file_path": "{cwd}/a.txt", "content": "hi"}}],
    },
    {"match": "count", "reply": "users {user_count} first {first}"},
]
SYSTEM = [{"type": "text", "text": "You are a coding agent."}]
WHERE = {"role": "system", "content": "# Environment\n - Primary working directory: /work/x\n"}
REMINDER = {"type": "text", "text": "<system-reminder>\nbe nice\n</system-reminder>\n"}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    rules = tmp_path_factory.mktemp("rules") / "rules.json"
    rules.write_text(json.dumps(RULES))
    with serving(rules) as address:
        yield address


def user(text: str) -> dict:
    return {"role": "user", "content": [REMINDER, {"type": "text", "text": text}]}


def post(base: str, path: str = "/v1/messages?beta=true", **body) -> httpx.Response:
    body = {"model": "claude-test", "max_tokens": 100, "system": SYSTEM, **body}
    return httpx.post(base + path, json=body, timeout=10)


def events(response: httpx.Response) -> list[tuple[str, dict]]:
    """The (event, data) pairs of an SSE body."""
    found, kind = [], None
    for line in response.text.splitlines():
        if line.startswith("event:"):
            kind = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            found.append((kind, json.loads(line.partition(":")[2])))
    return found


def test_a_text_reply_as_json(base):
    said = post(base, messages=[user("count"), WHERE])
    assert said.status_code == 200
    message = said.json()
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["model"] == "claude-test" and message["stop_reason"] == "end_turn"
    # the reminder is system text: {first} is what the user wrote
    assert message["content"] == [{"type": "text", "text": "users 1 first count"}]
    assert message["usage"]["output_tokens"] == 4 and message["usage"]["input_tokens"] > 0


def test_a_streamed_tool_use_with_cwd_filled(base):
    said = post(base, messages=[user("please create it"), WHERE], stream=True)
    assert said.status_code == 200 and said.headers["content-type"].startswith("text/event-stream")
    found = events(said)
    kinds = [kind for kind, _ in found]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert all(data["type"] == kind for kind, data in found)
    starts = [data["content_block"] for kind, data in found if kind == "content_block_start"]
    assert [block["type"] for block in starts] == ["text", "tool_use"]
    assert starts[1]["name"] == "Write" and starts[1]["input"] == {}
    deltas = [data["delta"] for kind, data in found if kind == "content_block_delta"]
    text = "".join(d["text"] for d in deltas if d["type"] == "text_delta")
    partial = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert text == "On it."
    assert json.loads(partial) == {"file_path": "/work/x/a.txt", "content": "hi"}
    assert kinds.count("content_block_stop") == 2
    (delta,) = [data for kind, data in found if kind == "message_delta"]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] == 3


def test_a_tool_result_answers_after_tool(base):
    call = {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created"}
    history = [
        user("please create it"),
        {"role": "assistant", "content": [{"type": "text", "text": "On it."}, call]},
        {"role": "user", "content": [result, REMINDER]},
        WHERE,
    ]
    said = post(base, messages=history, stream=True)
    texts = [d["delta"]["text"] for k, d in events(said) if k == "content_block_delta"]
    assert "".join(texts) == "Wrote: File created"


def test_count_tokens_and_a_bad_request(base):
    counted = post(base, "/v1/messages/count_tokens", messages=[user("one two three")])
    assert counted.status_code == 200 and counted.json()["input_tokens"] >= 3
    bad = post(base, messages="not a list")
    assert bad.status_code == 400
    assert bad.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "'messages' must be a list of objects",
        },
    }


def test_translation_keeps_odd_blocks_harmless():
    """Unknown blocks, non-dict entries and a result given as blocks read as text or not
    at all; the conversation still has its user message and its tool result."""
    body = {
        "system": "top",
        "messages": [
            {
                "role": "user",
                "content": ["junk", {"type": "image"}, {"type": "text", "text": "hi"}],
            },
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash"}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": "ok"}],
                    }
                ],
            },
        ],
    }
    conversation = Conversation.of(messages(body))
    assert conversation.last == "hi" and conversation.tool == ("Bash", "ok")
    assert conversation.prompt.startswith("top")


def test_cwd_without_a_working_directory_line_is_dot():
    rules = Rules.from_data([{"tool_calls": [{"name": "W", "args": {"p": ["{cwd}/x", 1]}}]}])
    conversation = Conversation.of([{"role": "user", "content": "go"}])
    (call,) = conversation.calls(rules.first(conversation))
    assert call.args == {"p": ["./x", 1]}


@pytest.mark.parametrize(
    ("prompt", "cwd"),
    [
        (
            "# Environment\n - Primary working directory: /tmp/a b\n - Is a git repository",
            "/tmp/a b",
        ),
        ("My operating system is: linux\nI'm currently working in the directory: /w/q\n", "/w/q"),
        ("<environment_context>\n  <cwd>/w/codex</cwd>\n</environment_context>", "/w/codex"),
        ("Working directory: /w\r\n", "/w"),
        ("no directory here: /x", "."),
    ],
)
def test_cwd_is_read_from_each_clis_wording(prompt, cwd):
    conversation = Conversation.of([{"role": "system", "content": prompt}])
    assert conversation.cwd == cwd
