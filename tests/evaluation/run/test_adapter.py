"""The A2A adapter on its own, against a real agent: the keep-alive race of pooled connections.

A pooled connection that sat idle may already be closed by the server (uvicorn keeps one
5 s) when the next request goes out on it: the request fails before any byte of reply,
through no fault of the agent. Here a small TCP relay in front of a real fixture agent
plays that server: it closes a connection, unanswered, when a request arrives on it after
it sat idle. The adapter must send the request again on a fresh connection.
"""

import asyncio
import time

from bat.evaluation.run.adapter import A2ASession
from tests.evalkit import free_port, start_fixture

IDLE_S = 0.3


class IdleClosingRelay:
    """Relays 127.0.0.1:port to the agent; a connection idle for IDLE_S is closed when its
    next request arrives (the request is dropped unanswered)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.dropped = 0
        self.connections = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _client(self, reader, writer) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        last_reply = None  # when the agent last sent a byte on this connection

        async def downstream() -> None:
            nonlocal last_reply
            while data := await up_reader.read(65536):
                last_reply = time.monotonic()
                writer.write(data)
                await writer.drain()
            writer.close()

        pump = asyncio.create_task(downstream())
        try:
            while data := await reader.read(65536):
                if last_reply is not None and time.monotonic() - last_reply >= IDLE_S:
                    self.dropped += 1  # "the server already closed it": no answer
                    break
                up_writer.write(data)
                await up_writer.drain()
        finally:
            pump.cancel()
            writer.close()
            up_writer.close()


def test_a_request_on_a_stale_connection_is_sent_again_on_a_fresh_one():
    port = free_port()
    agent = start_fixture("echo_agent", port)

    async def scenario():
        relay = IdleClosingRelay(port)
        relay_port = await relay.start()
        async with A2ASession(f"http://127.0.0.1:{relay_port}", concurrency=1) as session:
            first = await session.run_episode(["hello"], turn_timeout_s=10)
            await asyncio.sleep(IDLE_S * 2)  # the pooled connection goes stale
            second = await session.run_episode(["again"], turn_timeout_s=10)
            resent = session.requests_resent
        relay.server.close()
        return first, second, resent, relay.dropped

    try:
        first, second, resent, dropped = asyncio.run(scenario())
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    assert first.infra_error is None and first.final_output == "echo: hello"
    assert dropped >= 1  # the relay really dropped a request on a stale connection
    assert second.infra_error is None and second.agent_error is None, second.infra_error
    assert second.final_output == "echo: again"
    assert resent == dropped


class ReadThenDropRelay:
    """Relays to the agent like a server with a short keep-alive (a connection idle for
    0.1 s is closed, cleanly); a request holding ``marker`` reaches the agent, but its
    reply never comes back: the connection is closed without a byte (a server that read
    the request, then dropped the connection)."""

    def __init__(self, target_port: int, marker: bytes) -> None:
        self.target_port = target_port
        self.marker = marker
        self.delivered = 0  # requests with the marker that reached the agent

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _client(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        drop = asyncio.Event()
        last = time.monotonic()

        async def downstream() -> None:
            nonlocal last
            while data := await up_reader.read(65536):
                if drop.is_set():
                    break
                last = time.monotonic()
                writer.write(data)
                await writer.drain()
            writer.close()

        async def keep_alive() -> None:
            while time.monotonic() - last < 0.1:
                await asyncio.sleep(0.02)
            if not drop.is_set():
                writer.close()

        pump = asyncio.create_task(downstream())
        closer = asyncio.create_task(keep_alive())
        try:
            while data := await reader.read(65536):
                last = time.monotonic()
                if self.marker in data:
                    self.delivered += 1
                    drop.set()
                up_writer.write(data)
                await up_writer.drain()
                if drop.is_set():
                    await asyncio.sleep(0.2)  # the agent has it
                    break
        finally:
            pump.cancel()
            closer.cancel()
            writer.close()
            up_writer.close()


def test_a_request_dropped_on_a_connection_opened_for_it_is_never_sent_twice():
    """Only a reused connection can be stale: on a fresh one, a connection closed without
    a reply means the server had the request, and a second send would run the turn twice."""
    port = free_port()
    agent = start_fixture("echo_agent", port)

    async def scenario():
        relay = ReadThenDropRelay(port, b"DROPPED-TURN")
        relay_port = await relay.start()
        async with A2ASession(f"http://127.0.0.1:{relay_port}", concurrency=1) as session:
            await asyncio.sleep(0.5)  # the card's connection is closed by the relay
            observed = await session.run_episode(["DROPPED-TURN please"], turn_timeout_s=10)
            resent = session.requests_resent
        relay.server.close()
        return observed, resent, relay.delivered

    try:
        observed, resent, delivered = asyncio.run(scenario())
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    assert delivered == 1 and resent == 0
    assert observed.infra_error is not None and observed.infra_error.kind == "crash"
