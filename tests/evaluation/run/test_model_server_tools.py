"""The scripted model server's tool calls: a model with tools bound, on both wire protocols.

The end-to-end proof is tests/evaluation/test_eval_bat_adk.py (LangChain's ChatOpenAI
in a real bat-adk agent runs the tools these rules ask for); here, each protocol's
shape, streamed and not, and the rules' checks.
"""

import json

import pytest
from starlette.testclient import TestClient

from bat.evaluation.inputs.model_script import Rules
from bat.evaluation.run.scripted_model import ScriptedModel

RULES = [
    {"after_tool": "add", "reply": "The sum is {result}."},
    {"after_tool": "*", "regex": "^no", "reply": "Never mind."},
    {"match": "plus", "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]},
]
ASKED = [{"role": "user", "content": "What is 2 plus 3?"}]


def client() -> TestClient:
    return TestClient(ScriptedModel(Rules.from_data(RULES)).app())


def answered(call_id: str, name: str, result: str) -> list[dict]:
    """The conversation after the assistant's call and the tool's result (OpenAI's shape)."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    return [
        *ASKED,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def test_openai_asks_for_the_tool_then_answers_its_result():
    with client() as http:
        first = http.post("/v1/chat/completions", json={"messages": ASKED}).json()
        choice = first["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["type"] == "function" and call["function"]["name"] == "add"
        assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
        assert choice["message"]["content"] is None
        # the result of that call: the rule with tool_calls is skipped, after_tool answers
        body = {"messages": answered(call["id"], "add", "5")}
        second = http.post("/v1/chat/completions", json=body).json()["choices"][0]
        assert second["finish_reason"] == "stop"
        assert second["message"] == {"role": "assistant", "content": "The sum is 5."}
        # a result of another tool: only the `*` rule whose regex matches the result
        other = http.post("/v1/chat/completions", json={"messages": answered("c", "x", "no")})
        assert other.json()["choices"][0]["message"]["content"] == "Never mind."
        echo = http.post("/v1/chat/completions", json={"messages": answered("c", "x", "yes")})
        assert echo.json()["choices"][0]["message"]["content"] == "echo: What is 2 plus 3?"


def test_openai_streams_the_tool_call_as_a_delta():
    with client() as http:
        body = {"messages": ASKED, "stream": True}
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    deltas = [c["choices"][0] for c in chunks if c["choices"]]
    (calls,) = [d["delta"]["tool_calls"] for d in deltas if "tool_calls" in d["delta"]]
    assert calls[0]["index"] == 0 and calls[0]["function"]["name"] == "add"
    assert deltas[-1]["finish_reason"] == "tool_calls"


def test_ollama_names_the_tool_in_its_tool_message():
    with client() as http:
        body = {"messages": ASKED, "stream": False}
        first = http.post("/api/chat", json=body).json()
        (call,) = first["message"]["tool_calls"]
        assert call == {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
        result = {"role": "tool", "tool_name": "add", "content": "5"}
        then = {"messages": [*ASKED, first["message"], result], "stream": False}
        assert http.post("/api/chat", json=then).json()["message"]["content"] == "The sum is 5."


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ({"tool_calls": {"name": "add"}}, "tool_calls: Input should be a valid list"),
        ({"tool_calls": [{"args": {}}]}, "tool_calls[0].name: Field required"),
        ({"tool_calls": [{"name": "add", "args": [1]}]}, "tool_calls[0].args: Input should be"),
        ({"tool_calls": [{"name": "add", "id": "x"}]}, "tool_calls[0]: unknown key(s) ['id']"),
        ({"after_tool": "", "reply": "x"}, "after_tool: String should have at least 1"),
    ],
)
def test_a_malformed_tool_rule_is_refused_at_load(rule, words):
    with pytest.raises(ValueError, match="rule 0: ") as caught:
        Rules.from_data([rule])
    assert words in str(caught.value) and "\n" not in str(caught.value)
