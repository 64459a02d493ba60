"""The scripted model's OpenAI Responses API, over real HTTP to a served script.

Codex's own requests are the end-to-end proof (tests/agents/test_codex_e2e.py); here,
each shape the wire answers, streamed and not, and how a request's items reach the
rules: instructions, developer messages and a client's tagged context, function calls
and their outputs.
"""

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bat.evaluation.inputs.model_script import Conversation, Rules
from bat.evaluation.run.scripted_model import serving
from bat.evaluation.run.wire_responses import messages

RULES = [
    {"after_tool": "exec_command", "reply": "Ran: {result}"},
    {
        "match": "make",
        "reply": "On it.",
        "tool_calls": [{"name": "exec_command", "args": {"cmd": "touch a"}}],
    },
    {"match": "count", "reply": "users {user_count} first {first}"},
]
CONTEXT = "<environment_context>\n  <cwd>/work/x</cwd>\n</environment_context>"


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


DEVELOPER = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "be brief"}],
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    rules = tmp_path_factory.mktemp("rules") / "rules.json"
    rules.write_text(json.dumps(RULES))
    with serving(rules) as address:
        yield address


def post(base: str, **body) -> httpx.Response:
    return httpx.post(f"{base}/v1/responses", json={"model": "codex-test", **body}, timeout=10)


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
    said = post(base, instructions="You code.", input=[DEVELOPER, user(CONTEXT), user("count")])
    assert said.status_code == 200
    response = said.json()
    assert response["object"] == "response" and response["status"] == "completed"
    assert response["model"] == "codex-test"
    (item,) = response["output"]
    assert item["type"] == "message" and item["role"] == "assistant"
    # the tagged context is system text: {first} is what the user wrote
    assert item["content"] == [
        {"type": "output_text", "text": "users 1 first count", "annotations": []}
    ]
    usage = response["usage"]
    assert usage["output_tokens"] == 4 and usage["input_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_a_string_input_is_one_user_message(base):
    said = post(base, input="count me")
    assert said.json()["output"][0]["content"][0]["text"] == "users 1 first count me"


def test_a_streamed_function_call_and_text(base):
    said = post(base, input=[user("make it")], stream=True)
    assert said.status_code == 200 and said.headers["content-type"].startswith("text/event-stream")
    found = events(said)
    kinds = [kind for kind, _ in found]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert all(data["type"] == kind for kind, data in found)
    assert [data["sequence_number"] for _, data in found] == list(range(len(found)))
    added = [data["item"] for kind, data in found if kind == "response.output_item.added"]
    assert [item["type"] for item in added] == ["message", "function_call"]
    assert added[1]["name"] == "exec_command" and added[1]["arguments"] == ""
    text = "".join(d["delta"] for k, d in found if k == "response.output_text.delta")
    assert text == "On it."
    (done_text,) = [d["text"] for k, d in found if k == "response.output_text.done"]
    assert done_text == "On it."
    arguments = "".join(
        d["delta"] for k, d in found if k == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"cmd": "touch a"}
    done = [data["item"] for kind, data in found if kind == "response.output_item.done"]
    call = done[1]
    assert call["status"] == "completed" and call["call_id"].startswith("call_")
    final = found[-1][1]["response"]
    assert final["output"] == done and final["usage"]["output_tokens"] == 3


def test_a_function_call_output_answers_after_tool(base):
    call = {"type": "function_call", "call_id": "call_9", "name": "exec_command", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_9", "output": "exit 0"}
    reasoning = {"type": "reasoning", "summary": []}
    said = post(base, input=[user("make it"), reasoning, call, output], stream=False)
    assert said.json()["output"][0]["content"][0]["text"] == "Ran: exit 0"


def test_the_translation_read_by_the_rules():
    body = {
        "instructions": "sys",
        "input": [
            DEVELOPER,
            user(CONTEXT),
            user("hi"),
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "yo"}],
            },
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "out"}],
            },
        ],
    }
    conversation = Conversation.of(messages(body))
    assert conversation.users == ("hi",)
    assert conversation.tool == ("exec_command", "out")
    assert "be brief" in conversation.prompt and "<cwd>/work/x</cwd>" in conversation.prompt
    assert conversation.cwd == "/work/x"
    rules = Rules.from_data(RULES)
    assert rules.first(conversation).reply == "Ran: {result}"


@pytest.mark.parametrize("body", [{"input": 3}, {"input": [1]}, {}, []])
def test_a_bad_body_is_a_400_in_openai_words(base, body):
    said = httpx.post(f"{base}/v1/responses", json=body, timeout=10)
    assert said.status_code == 400
    error = said.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


def test_the_openai_sdk_reads_the_stream_and_the_json(base):
    """OpenAI's own client parses what the wire sends (where the SDK is installed)."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key="sk-test", base_url=f"{base}/v1", max_retries=0)
    streamed = list(client.responses.create(model="codex-test", input="make it", stream=True))
    kinds = [event.type for event in streamed]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    final = streamed[-1].response
    assert final.output_text == "On it."
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert call.name == "exec_command" and json.loads(call.arguments) == {"cmd": "touch a"}
    assert final.usage.output_tokens == 3
    said = client.responses.create(model="codex-test", input="count")
    assert said.output_text == "users 1 first count" and said.status == "completed"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)
ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning"])
        | JSON,
        "role": st.sampled_from(["user", "assistant", "developer", "system"]) | JSON,
        "content": JSON,
        "call_id": JSON,
        "name": JSON,
        "output": JSON,
    },
)


@settings(max_examples=100, deadline=None)
@given(body=st.dictionaries(st.sampled_from(["input", "instructions"]), JSON | st.lists(ITEM)))
def test_any_body_is_a_conversation_or_one_value_error(body):
    try:
        found = messages(body)
    except ValueError as exc:
        assert "input" in str(exc)
        return
    Conversation.of(found)  # what the rules read, from any request
