"""End to end with the real framework: scaffold an agent, install BAT-ADK, talk A2A to it.

Everything between the test and the model is real: `bat init.agent` renders the project,
`uv sync` installs bat-adk from PyPI (or uv's cache), `uv run .` starts the agent as its
README says, and the a2a-sdk client talks to it over HTTP. Only the model is a stand-in:
eval_fixtures/model_server.py answers the OpenAI chat completions calls the agent makes
through BAT-ADK's ChatModelClient (langchain's ChatOpenAI, pointed there by BASE_URL), with
scripted, known replies.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_stream_response_text, new_text_message
from a2a.types import Role, SendMessageRequest, TaskState

from tests import adk_bytecode
from tests.pythons import find_python, uv_binary

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
AGENT = "e2e-agent"
FIRST_QUESTION = "What is the capital of Italy?"
SECOND_QUESTION = "What did I ask first?"
# The model server echoes by default; this rule shows whether the agent sent its history.
RULES = [
    {
        "match": SECOND_QUESTION,
        "reply": "You first asked: {first} ({user_count} questions so far)",
    }
]
INSTALL_TIMEOUT = 600  # a cold uv cache downloads bat-adk and its dependencies
READY_TIMEOUT = 120
TURN_TIMEOUT = 60
# Settings of the developer's shell that would win over the agent's .env, or send its
# requests elsewhere: the test sets what it needs explicitly.
LEAKY_ENV = (
    "VIRTUAL_ENV",
    "UV_PROJECT_ENVIRONMENT",
    "PYTHONPATH",
    "PORT",
    "MODEL",
    "MODEL_PROVIDER",
    "BASE_URL",
    "CONFIG_PATH",
    "AGENT_CARD_PATH",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tail(log: Path, lines: int = 60) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return f"--- last {lines} lines of {log} ---\n" + "\n".join(text.splitlines()[-lines:])


@contextmanager
def running(command: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> Iterator:
    """Run ``command`` in its own process group, logging to ``log``; always stop it.

    Stopping signals the whole group: `uv run` starts the agent as a child process, which
    must not outlive the test. SIGTERM first, SIGKILL if the group is still there later.
    """
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen, grace: float = 15) -> None:
    """SIGTERM the process group of ``proc``; SIGKILL whatever is left after ``grace`` s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader: a zombie would keep the group alive
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=5)


def wait_for_line(proc: subprocess.Popen, log: Path, pattern: str, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if match := re.search(pattern, log.read_text(encoding="utf-8", errors="replace")):
            return match
        if proc.poll() is not None:
            pytest.fail(f"exited with {proc.returncode} before printing {pattern!r}\n{tail(log)}")
        time.sleep(0.1)
    pytest.fail(f"nothing matched {pattern!r} within {timeout} s\n{tail(log)}")


def get_json(url: str, timeout: float = 5) -> tuple[int, dict]:
    """GET ``url`` directly (no proxy from the environment): (status, JSON body)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return response.status, json.loads(response.read())


def wait_for_card(proc: subprocess.Popen, log: Path, url: str, timeout: float) -> dict:
    """The agent card, once the agent serves it; fails early if the agent dies."""
    deadline = time.monotonic() + timeout
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the agent exited with {proc.returncode} while starting\n{tail(log)}")
        try:
            status, card = get_json(url, timeout=2)
            if status == 200:
                return card
            last_error = f"HTTP {status}"
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last_error = repr(exc)
        time.sleep(0.5)
    pytest.fail(f"no agent card at {url} within {timeout} s ({last_error})\n{tail(log)}")


@dataclass
class Turn:
    """What the agent streamed back for one message."""

    context_id: str = ""
    states: list[int] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def answer(self) -> str:
        return "".join(self.artifacts)

    @property
    def state_names(self) -> list[str]:
        return [TaskState.Name(state) for state in self.states]


async def converse(base_url: str, questions: list[str]) -> list[Turn]:
    """Ask ``questions`` in one A2A conversation (one context_id), streaming each answer."""
    timeout = httpx.Timeout(TURN_TIMEOUT)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as http:
        config = ClientConfig(streaming=True, httpx_client=http)
        client = await create_client(base_url, client_config=config)
        try:
            turns: list[Turn] = []
            context_id = None
            for question in questions:
                turn = Turn()
                message = new_text_message(question, context_id=context_id, role=Role.ROLE_USER)
                request = SendMessageRequest(message=message)
                async with asyncio.timeout(TURN_TIMEOUT):
                    async for event in client.send_message(request):
                        record(turn, event)
                turns.append(turn)
                context_id = turn.context_id
            return turns
        finally:
            await client.close()


def record(turn: Turn, event) -> None:
    """Add one StreamResponse to ``turn``."""
    if event.HasField("task"):
        turn.context_id = event.task.context_id or turn.context_id
        turn.states.append(event.task.status.state)
        turn.artifacts += [get_stream_response_text(event)] if event.task.artifacts else []
    elif event.HasField("status_update"):
        turn.context_id = event.status_update.context_id or turn.context_id
        turn.states.append(event.status_update.status.state)
        if text := get_stream_response_text(event):
            turn.messages.append(text)
    elif event.HasField("artifact_update"):
        turn.context_id = event.artifact_update.context_id or turn.context_id
        turn.artifacts.append(get_stream_response_text(event))
    elif event.HasField("message"):
        turn.context_id = event.message.context_id or turn.context_id
        turn.messages.append(get_stream_response_text(event))


def test_scaffolded_agent_answers_over_a2a_with_the_real_framework(bat, tmp_path, monkeypatch):
    python = find_python()
    uv = uv_binary()
    timings: dict[str, float] = {}
    started = time.monotonic()

    # bat's own settings come from the command line only: no BAT_* variable, no ~/.bat.yaml.
    # (HOME stays real for uv, whose cache lives there.)
    for key in [key for key in os.environ if key.startswith("BAT_")]:
        monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    agent_port = free_port()
    args = ["init.agent", AGENT, "--port", str(agent_port), "-c", "helper", "-o", str(tmp_path)]
    made = bat(*args, cwd=tmp_path, env={"HOME": str(home)})
    assert made.code == 0, made.out + made.err
    agent_dir = tmp_path / AGENT
    assert (agent_dir / "__main__.py").is_file(), sorted(p.name for p in tmp_path.iterdir())

    env = {key: value for key, value in os.environ.items() if key not in LEAKY_ENV}
    env.update(UV_PYTHON=python, UV_PYTHON_DOWNLOADS="never", PYTHONUNBUFFERED="1")
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1,localhost"]))
    env.update(NO_PROXY=no_proxy, no_proxy=no_proxy)

    mark = time.monotonic()
    sync = subprocess.run(
        [uv, "sync"],
        cwd=agent_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    timings["uv sync"] = time.monotonic() - mark
    assert sync.returncode == 0, f"uv sync failed:\n{sync.stdout}\n{sync.stderr}"
    adk_bytecode.seed(agent_dir / ".venv")  # what its start compiles, compiled once (see there)

    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(RULES), encoding="utf-8")
    server_log, agent_log = tmp_path / "model_server.log", tmp_path / "agent.log"
    server_cmd = [sys.executable, "-m", "eval_fixtures.model_server", "--port", "0"]
    server_cmd += ["--rules", str(rules)]
    server_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with running(server_cmd, cwd=REPO, env=server_env, log=server_log) as server:
        found = wait_for_line(server, server_log, r"listening on (http://127\.0\.0\.1:\d+)", 30)
        model_url = found.group(1)

        env.update(BASE_URL=f"{model_url}/v1", OPENAI_API_KEY="test-key")
        mark = time.monotonic()
        with running([uv, "run", "."], cwd=agent_dir, env=env, log=agent_log) as agent:
            base_url = f"http://127.0.0.1:{agent_port}"
            card = wait_for_card(agent, agent_log, f"{base_url}/.well-known/agent-card.json", 120)
            timings["agent start"] = time.monotonic() - mark

            expected = json.loads((agent_dir / "agent.json").read_text(encoding="utf-8"))
            assert card["name"] == expected["name"] == "E2e Agent"
            assert card["capabilities"].get("streaming") is True
            assert [s["id"] for s in card["skills"]] == ["e2e_agent_answer"]
            interfaces = card.get("supportedInterfaces", [])
            assert any(str(agent_port) in i.get("url", "") for i in interfaces), card

            mark = time.monotonic()
            try:
                turns = asyncio.run(converse(base_url, [FIRST_QUESTION, SECOND_QUESTION]))
            except Exception as exc:
                pytest.fail(f"A2A conversation failed: {exc!r}\n{tail(agent_log)}")
            timings["two A2A turns"] = time.monotonic() - mark
            _, stats = get_json(f"{model_url}/stats")

    first, second = turns
    context = f"\n{turns}\n{tail(agent_log)}"
    assert first.state_names[-1] == "TASK_STATE_COMPLETED", context
    assert first.answer == f"echo: {FIRST_QUESTION}", context
    assert first.context_id, context
    assert second.context_id == first.context_id, context
    assert second.state_names[-1] == "TASK_STATE_COMPLETED", context
    assert second.answer == f"You first asked: {FIRST_QUESTION} (2 questions so far)", context
    assert stats["by_path"].get("/v1/chat/completions") == 2, stats

    timings["total"] = time.monotonic() - started
    print("timings:", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in timings.items()))
