"""The fixture A2A agents (eval_fixtures/echo_agent.py, tool_agent.py) as real processes.

The evaluation engine's tests trust these agents to behave exactly as documented, so each
documented behaviour is checked here over real A2A with a2a-sdk's client: answers, the
event sequence of each answer mode, multi-turn memory and questions, failures, hangs,
crashes, non-streaming, start-up options, stream metadata and the span file.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import Role, SendMessageRequest, StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from eval_fixtures._spans import trace_parent
from eval_fixtures.tool_agent import calculate

REPO = Path(__file__).resolve().parents[3]
READY = "listening on http://127.0.0.1:"
COMPLETED = TaskState.TASK_STATE_COMPLETED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
Events = list[StreamResponse]


@dataclass
class Agent:
    proc: subprocess.Popen[str]
    url: str


def launch(module: str, *args: str, env: dict | None = None, cwd: Path | None = None):
    """Start ``python -m eval_fixtures.<module>``; its stdout is read by ``wait_ready``."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    command = [sys.executable, "-m", f"eval_fixtures.{module}", *args]
    return subprocess.Popen(
        command, cwd=cwd or REPO, env=full_env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def wait_ready(proc: subprocess.Popen[str], timeout: float = 10) -> str:
    """The agent's URL, from its ``listening on`` line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        line = proc.stdout.readline() if ready else ""
        if line.startswith(READY):
            return line.split("listening on ", 1)[1].strip()
        if proc.poll() is not None:
            raise AssertionError(f"agent exited {proc.returncode}: {proc.stderr.read()}")
    raise AssertionError("agent not ready in time")


def stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM, then SIGKILL if it lingers; the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return proc.returncode


@pytest.fixture
def agent_factory() -> Iterator[Any]:
    """Start agents on free ports (``--port 0``); every one is stopped afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(module: str, *args: str, **kwargs: Any) -> Agent:
        proc = launch(module, "--port", "0", *args, **kwargs)
        started.append(proc)
        return Agent(proc, wait_ready(proc))

    yield start
    for proc in started:
        stop(proc)


@pytest.fixture(scope="module")
def echo() -> Iterator[Agent]:
    """One default echo agent (artifact answers, streaming) shared by the module."""
    proc = launch("echo_agent", "--port", "0", env={"MODEL": "m-1", "MODEL_PROVIDER": "p-1"})
    try:
        yield Agent(proc, wait_ready(proc))
    finally:
        stop(proc)


async def _converse(
    url: str, turns: list[str], streaming: bool, context_id: str, metadata: dict | None = None
) -> list[Events]:
    async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await create_client(url, config)
        task_id, results = None, []
        for text in turns:
            message = new_text_message(
                text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER
            )
            message.metadata.update(metadata or {})
            events = [e async for e in client.send_message(SendMessageRequest(message=message))]
            results.append(events)
            task_id = None  # continue the task only while it waits for input
            if state_of(events) == INPUT_REQUIRED:
                last = events[-1]
                task_id = last.task.id if last.HasField("task") else last.status_update.task_id
        return results


def converse(
    url: str, turns: list[str], streaming: bool = True, context_id: str = "c-1", **metadata: Any
) -> list[Events]:
    """Send ``turns`` in one context (each message with ``metadata``); each turn's events."""
    return asyncio.run(_converse(url, turns, streaming, context_id, metadata))


def kinds(events: Events) -> list[str]:
    """Each event as ``task``, ``message``, ``artifact`` or ``status:<STATE>``."""
    names = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            kind = "status:" + TaskState.Name(event.status_update.status.state)[11:]
        names.append(kind.replace("artifact_update", "artifact"))
    return names


def state_of(events: Events) -> int:
    last = events[-1]
    if last.HasField("task"):
        return last.task.status.state
    return last.status_update.status.state if last.HasField("status_update") else COMPLETED


def texts(parts: Any) -> str:
    return "".join(part.text for part in parts)


def answer_of(events: Events) -> str:
    """The answer of a turn: the reply message, the last artifact or the last status text."""
    found = ""
    for event in events:
        if event.HasField("message"):
            found = texts(event.message.parts)
        elif event.HasField("artifact_update"):
            found = texts(event.artifact_update.artifact.parts)
        elif event.HasField("status_update") and event.status_update.status.HasField("message"):
            found = texts(event.status_update.status.message.parts)
        elif event.HasField("task"):
            task = event.task
            found = texts(task.artifacts[-1].parts) if task.artifacts else found
            found = texts(task.status.message.parts) if task.status.HasField("message") else found
    return found


def test_card_describes_the_agent(echo: Agent) -> None:
    card = httpx.get(echo.url + "/.well-known/agent-card.json", trust_env=False).json()
    assert card["name"] == "EchoAgent" and card["version"] and card["description"]
    assert card["capabilities"]["streaming"] is True
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["text/plain"]
    assert card["skills"][0]["id"] == "echo"
    interface = card["supportedInterfaces"][0]
    assert interface["url"] == echo.url and interface["protocolBinding"] == "JSONRPC"


def test_echo_streams_task_working_artifact_completed(echo: Agent) -> None:
    [events] = converse(echo.url, ["hello there"])
    assert kinds(events) == ["task", "status:WORKING", "artifact", "status:COMPLETED"]
    assert answer_of(events[1:2]) == "working..."
    assert texts(events[2].artifact_update.artifact.parts) == "echo: hello there"
    assert not events[3].status_update.status.HasField("message")


def test_ask_waits_for_input_then_completes(echo: Agent) -> None:
    asked, answered = converse(echo.url, ["ASK me something", "Paris"], context_id="ask-1")
    assert kinds(asked)[-1] == "status:INPUT_REQUIRED"
    assert answer_of(asked) == "What exactly do you mean?"
    assert answer_of(answered) == "got it: Paris" and state_of(answered) == COMPLETED
    assert kinds(answered)[0] == "status:WORKING"  # the same task continues: no new Task
    [alone] = converse(echo.url, ["ASK"], context_id="ask-2")
    assert state_of(alone) == INPUT_REQUIRED


def test_history_remembers_the_context(echo: Agent) -> None:
    turns = converse(echo.url, ["one", "two", "HISTORY"], context_id="h-1")
    assert answer_of(turns[-1]) == "history: one | two"
    [other] = converse(echo.url, ["HISTORY"], context_id="h-2")
    assert answer_of(other) == "history: "


def test_fail_and_model_env(echo: Agent) -> None:
    [failed] = converse(echo.url, ["please FAIL"], context_id="f-1")
    assert kinds(failed)[-1] == "status:FAILED" and answer_of(failed) == "failure requested"
    [model] = converse(echo.url, ["MODEL?"], context_id="m-1")
    assert answer_of(model) == "model: m-1/p-1"


def test_non_streaming_send_returns_the_task(echo: Agent) -> None:
    plain, asked, answered = converse(
        echo.url, ["hi", "ASK", "yes"], streaming=False, context_id="ns-1"
    )
    assert kinds(plain) == ["task"] and plain[0].task.status.state == COMPLETED
    assert answer_of(plain) == "echo: hi"
    assert state_of(asked) == INPUT_REQUIRED and answer_of(asked) == "What exactly do you mean?"
    assert answer_of(answered) == "got it: yes" and answered[0].task.id == asked[0].task.id


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ({"args": ["--answer-in", "message"]}, ["message"]),
        ({"env": {"ANSWER_IN": "status"}}, ["task", "status:WORKING", "status:COMPLETED"]),
    ],
)
def test_answer_in_message_and_status(agent_factory: Any, how: dict, expected: list) -> None:
    agent = agent_factory("echo_agent", *how.get("args", []), env=how.get("env"))
    [events] = converse(agent.url, ["hi"])
    assert kinds(events) == expected and answer_of(events) == "echo: hi"
    [failed] = converse(agent.url, ["FAIL"])  # no Message can fail: a task, whatever the mode
    assert kinds(failed) == ["task", "status:WORKING", "status:FAILED"]


def test_options_from_env_no_streaming_latency_delay() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PORT": str(port), "NO_STREAMING": "1", "LATENCY_MS": "300"}
    launched = time.monotonic()
    proc = launch("echo_agent", env=env | {"STARTUP_DELAY_MS": "300"})
    try:
        url = wait_ready(proc)
        assert url == f"http://127.0.0.1:{port}" and time.monotonic() - launched >= 0.3
        card = httpx.get(url + "/.well-known/agent-card.json", trust_env=False).json()
        assert card["capabilities"]["streaming"] is False
        began = time.monotonic()
        [events] = converse(url, ["slow"])  # the client falls back to SendMessage
        assert time.monotonic() - began >= 0.3
        assert kinds(events) == ["task"] and answer_of(events) == "echo: slow"
    finally:
        assert stop(proc) == 0  # SIGTERM: a clean exit


def test_hang_times_out_and_crash_kills(agent_factory: Any) -> None:
    agent = agent_factory("echo_agent")

    async def hang() -> None:
        await asyncio.wait_for(_converse(agent.url, ["HANG"], True, "x-1"), timeout=0.5)

    with pytest.raises(TimeoutError):
        asyncio.run(hang())
    with pytest.raises(Exception):  # noqa: B017 - the connection breaks, however it is worded
        converse(agent.url, ["CRASH"])
    assert agent.proc.wait(timeout=5) == 3


def test_exit_during_start_up() -> None:
    proc = launch("echo_agent", "--port", "0", env={"EXIT_ON_START": "1"})
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 4 and READY not in out and "error" in err


def test_calculator_is_safe_and_traceparent_is_read() -> None:
    assert calculate("2+3*(4-1)") == "11" and calculate("-8/2") == "-4"
    for bad in ("7/2", "1/0", "2**8", "__import__('os')", "2+"):
        with pytest.raises(ValueError):
            calculate(bad)
    trace, span = "a" * 32, "b" * 16
    assert trace_parent({"traceparent": f"00-{trace}-{span}-01"}) == (trace, span)
    assert trace_parent({})[1] is None


TOOL_TURN = "weather in Paris TWICE and calculate 2+3, search cats limit 2, ASK_AGENT helper"


def telemetry_config(folder: Path, file_path: str, privacy: str = "none") -> Path:
    config = folder / "config.yaml"
    output = f"  output:\n    - type: local\n      file_path: {file_path}\n"
    config.write_text(f"telemetry:\n  privacy: {privacy}\n{output}", encoding="utf-8")
    return config


def bat(events: Events) -> list[dict]:
    """The ``metadata.bat`` deltas of a turn's events, in order."""
    found = []
    for event in events:
        payload = getattr(event, event.WhichOneof("payload"))
        if payload.HasField("metadata") and "bat" in payload.metadata:
            found.append(MessageToDict(payload.metadata)["bat"])
    return found


def total(deltas: list[dict]) -> dict:
    usage = {key: sum(d["usage"][key] for d in deltas) for key in deltas[0]["usage"]}
    return {
        "tool_calls": [call for d in deltas for call in d["tool_calls"]],
        "agent_calls": [call for d in deltas for call in d["agent_calls"]],
        "model_calls": sum(d["model_calls"] for d in deltas),
        "usage": usage,
    }


def read_spans(path: Path, count: int, timeout: float = 5) -> list[dict]:
    """The spans of the file once it holds ``count`` turns' root spans (they come late)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        spans = [json.loads(line) for line in lines]
        if sum("gen_ai.conversation.id" in s["attributes"] for s in spans) >= count:
            return spans
        assert time.monotonic() < deadline, f"{count} root spans not written in time"
        time.sleep(0.05)


def of_kind(spans: list[dict], kind: str) -> list[dict]:
    """The spans whose ``openinference.span.kind`` is ``kind`` (TOOL, LLM, AGENT)."""
    return [s for s in spans if s["attributes"].get("openinference.span.kind") == kind]


def test_tool_agent_metadata_and_spans(agent_factory: Any, tmp_path: Path) -> None:
    spans_file = tmp_path / "spans" / "out.jsonl"
    config = telemetry_config(tmp_path, str(spans_file))
    env = {"CONFIG_PATH": str(config), "SPANS_DELAY_MS": "100", "MODEL": "m-2"}
    agent = agent_factory("tool_agent", env=env)
    [events] = converse(agent.url, [TOOL_TURN], context_id="t-1")
    answer = "sunny in Paris; sunny in Paris; 5; results for cats; asked helper"
    assert answer_of(events) == answer
    deltas = bat(events)
    assert len(deltas) == 2 and deltas[0]["tool_calls"] and not deltas[1]["tool_calls"]
    turn = total(deltas)
    calls = [(c["name"], c["args"]) for c in turn["tool_calls"]]
    assert calls == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Paris"}),
        ("calculator", {"expression": "2+3"}),
        ("search", {"query": "cats", "options": {"limit": 2}}),
    ]
    assert turn["agent_calls"] == [{"name": "helper"}] and turn["model_calls"] == 2
    words = len(TOOL_TURN.split()), len(answer.split())
    expected_usage = {"prompt_tokens": 10 * words[0], "completion_tokens": 5 * words[1]}
    expected_usage["total_tokens"] = sum(expected_usage.values())
    assert turn["usage"] == expected_usage
    [single] = converse(agent.url, [TOOL_TURN], streaming=False, context_id="t-2")
    assert kinds(single) == ["task"] and bat(single) == [turn]  # the whole turn at once

    spans = read_spans(spans_file, 2)
    [root] = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == "t-1"]
    assert root["name"] == "invoke_agent ToolAgent" and root["parent_span_id"] is None
    assert root["attributes"]["session.id"] == "t-1"
    assert root["attributes"]["bat.a2a.task_id"] == events[0].task.id
    children = [s for s in spans if s["trace_id"] == root["trace_id"] and s is not root]
    assert all(child["parent_span_id"] == root["span_id"] for child in children)
    tools = [s["attributes"] for s in of_kind(children, "TOOL")]
    assert [(a["tool.name"], json.loads(a["input.value"])) for a in tools] == calls
    llms = [s["attributes"] for s in of_kind(children, "LLM")]
    assert len(llms) == 2 and {a["llm.model_name"] for a in llms} == {"m-2"}
    assert sum(a["llm.token_count.total"] for a in llms) == expected_usage["total_tokens"]
    agents = [s["attributes"]["gen_ai.agent.name"] for s in children if s["kind"] == "CLIENT"]
    assert agents == ["helper"]


def test_tool_agent_privacy_and_no_stream_metadata(agent_factory: Any, tmp_path: Path) -> None:
    telemetry_config(tmp_path, "traces/spans.jsonl", privacy="full")  # relative to the cwd
    env = {"NO_STREAM_METADATA": "1", "CONFIG_PATH": ""}  # empty: ./config.yaml
    agent = agent_factory("tool_agent", "--answer-in", "message", env=env, cwd=tmp_path)
    trace, caller = "ab" * 16, "cd" * 8  # a calling agent's span, as bat-adk propagates it
    traceparent = f"00-{trace}-{caller}-01"
    [events] = converse(agent.url, ["calculate 1/0"], context_id="p-1", traceparent=traceparent)
    assert kinds(events) == ["message"] and bat(events) == []
    assert answer_of(events) == "error: division by zero"
    spans = read_spans(tmp_path / "traces" / "spans.jsonl", 1)
    root = spans[-1]
    assert root["name"] == "AGENT" and root["attributes"]["gen_ai.conversation.id"] == "p-1"
    assert (root["trace_id"], root["parent_span_id"]) == (trace, caller)
    [tool] = of_kind(spans, "TOOL")
    assert tool["name"] == "TOOL" and tool["status"] == "ERROR"
    attributes = tool["attributes"]
    assert attributes["tool.name"] == attributes["input.value"] == "__BLOCKED__"
    llm = of_kind(spans, "LLM")[0]
    assert llm["attributes"]["llm.token_count.prompt"] == 20
