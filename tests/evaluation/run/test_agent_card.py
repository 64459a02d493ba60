"""The agent card over HTTP: the probe of a starting agent, and the card's fetch, bounded.

Real servers on 127.0.0.1 (free ports) answer as an agent's card routes would, or as
something that is not an agent would: a card too large, one that drips in, a redirect on
the same origin or to another one.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from bat.errors import OperationError
from bat.evaluation.run.agent_card import CARD_LIMIT, card_answers, fetch_card_document

CARD = {
    "name": "Demo",
    "description": "A demo agent.",
    "version": "0.1.0",
    "protocolVersion": "0.3.0",
    "url": "http://127.0.0.1:1/",
    "capabilities": {},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
}


class Answer(BaseHTTPRequestHandler):
    """Answers a GET as its server's ``routes`` say (404 for a path not there)."""

    protocol_version = "HTTP/1.1"
    server: Routes

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        status, headers, body = self.server.routes.get(self.path, (404, {}, b"not found"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if isinstance(body, tuple):  # dripping in, or endless
            self._send_in_chunks(*body)
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_in_chunks(self, chunk: bytes, count: int, pause_s: float) -> None:
        self.send_header("Content-Length", str(len(chunk) * count))
        self.end_headers()
        try:
            for _ in range(count):
                self.wfile.write(chunk)
                self.wfile.flush()
                time.sleep(pause_s)
        except OSError:
            self.server.sent.append(False)  # the client gave up
        else:
            self.server.sent.append(True)

    def log_message(self, *args) -> None:
        pass


class Routes(ThreadingHTTPServer):
    """A server on a free port answering each path as ``routes`` says: ``(status,
    headers, body)``, the body bytes or ``(chunk, count, pause_s)``, sent a chunk at a time."""

    daemon_threads = True

    def __init__(self) -> None:
        self.routes: dict[str, tuple] = {}
        self.hits: list[str] = []
        self.sent: list[bool] = []  # per answer sent in chunks: whether all of it went
        super().__init__(("127.0.0.1", 0), Answer)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url_of(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def routes() -> Iterator[Routes]:
    server = Routes()
    yield server
    server.stop()


def until(condition, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.02)


def card(document: object = CARD) -> tuple:
    return 200, {"Content-Type": "application/json"}, json.dumps(document).encode()


def test_a_card_at_either_path_answers(routes):
    assert not card_answers(routes.url_of())  # 404 at both
    routes.routes["/.well-known/agent.json"] = card()  # an a2a-sdk 0.2 agent's path
    assert card_answers(routes.url_of())
    routes.routes["/.well-known/agent-card.json"] = card([1, 2])  # JSON, not a card
    assert card_answers(routes.url_of())  # the other path is asked
    assert routes.hits[-2:] == ["/.well-known/agent-card.json", "/.well-known/agent.json"]


def test_garbage_or_nothing_listening_is_no_card(routes):
    routes.routes["/.well-known/agent-card.json"] = (200, {}, b"<html>hello</html>")
    assert not card_answers(routes.url_of())
    routes.routes["/.well-known/agent-card.json"] = (200, {}, b"[" * 100_000 + b"]" * 100_000)
    assert not card_answers(routes.url_of())
    assert not card_answers("http://127.0.0.1:9", timeout_s=1)  # discard: nothing listens


def test_the_probe_is_bounded_in_size_and_time(routes):
    routes.routes["/.well-known/agent-card.json"] = (200, {}, (b" " * 65536, 200, 0))
    started = time.monotonic()
    assert not card_answers(routes.url_of())  # 13 MB of blanks: not read to their end
    assert routes.hits == ["/.well-known/agent-card.json"]  # and the other path not asked
    until(lambda: routes.sent == [False])  # the answer was cut, not read to its end
    routes.routes["/.well-known/agent-card.json"] = (200, {}, (b" ", 100, 0.05))
    assert not card_answers(routes.url_of(), timeout_s=1)  # each byte in time, the whole not
    assert time.monotonic() - started < 4
    routes.routes["/.well-known/agent-card.json"] = card({**CARD, "x": "y" * (CARD_LIMIT // 2)})
    assert card_answers(routes.url_of())  # large, within the limit


def test_the_probe_follows_a_redirect_only_on_the_same_origin(routes):
    other = Routes()
    try:
        other.routes["/card"] = card()
        routes.routes["/.well-known/agent-card.json"] = (
            302,
            {"Location": other.url_of("/card")},
            b"",
        )
        assert not card_answers(routes.url_of())  # another port is another origin
        assert other.hits == []
        routes.routes["/card"] = card()
        routes.routes["/.well-known/agent-card.json"] = (307, {"Location": "/card"}, b"")
        assert card_answers(routes.url_of())
        loop = (302, {"Location": "/.well-known/agent-card.json"}, b"")
        routes.routes["/.well-known/agent-card.json"] = loop
        assert not card_answers(routes.url_of())  # a redirect loop ends
    finally:
        other.stop()


def fetch(url: str) -> tuple:
    async def run() -> tuple:
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
            return await fetch_card_document(http, url)

    return asyncio.run(run())


def test_the_fetch_reads_the_card_as_served_and_refuses_a_huge_one(routes):
    routes.routes["/.well-known/agent.json"] = card()
    card_, document = fetch(routes.url_of())
    assert card_.name == "Demo" and document == CARD
    routes.routes["/.well-known/agent-card.json"] = (200, {}, (b" " * 65536, 200, 0))
    with pytest.raises(OperationError, match=r"agent-card.json is larger than 4 MB"):
        fetch(routes.url_of())
    routes.routes["/.well-known/agent-card.json"] = (500, {}, b"boom")
    with pytest.raises(OperationError, match="answered HTTP 500"):
        fetch(routes.url_of())
