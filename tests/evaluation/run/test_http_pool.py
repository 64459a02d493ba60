"""bat's HTTP/1.1 pool (``http_pool``) against real servers on 127.0.0.1 that frame their
replies every way HTTP/1.1 allows, keep or close connections, and misbehave.

Each server here is a few lines of asyncio written for the case; the pool is reached
through a real ``httpx.AsyncClient``, as the adapter uses it."""

import asyncio

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bat.evaluation.run.http_pool import PoolTransport
from tests.evalkit import free_port


class Server:
    """A server whose every reply is ``respond(request_number, body) -> bytes | None``
    (None: close the connection without a reply); counts connections."""

    def __init__(self, respond) -> None:
        self.respond = respond
        self.connections = 0
        self.requests = 0

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, reader, writer) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                self.requests += 1
                data = self.respond(self.requests, body)
                if data is None:
                    break
                writer.write(data)
                await writer.drain()
                if b"connection: close" in data.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def client(keepalive: int = 4, expiry: float = 5.0, **kwargs) -> httpx.AsyncClient:
    transport = PoolTransport(max_keepalive=keepalive, keepalive_expiry=expiry)
    return httpx.AsyncClient(mounts={"http://": transport}, trust_env=False, **kwargs)


def sized(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def chunked(pieces: list[bytes]) -> bytes:
    out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    for piece in pieces:
        out += b"%x;ext=1\r\n%s\r\n" % (len(piece), piece)
    return out + b"0\r\nx-trailer: yes\r\n\r\n"


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_connection_is_kept_alive_and_reused_and_only_a_new_one_is_traced():
    async def main():
        events = []

        async def trace(name, info):
            events.append(name)

        server = Server(lambda n, body: sized(b"reply %d to %s" % (n, body)))
        async with server as url, client() as http:
            texts = []
            for i in range(3):
                response = await http.post(url, content=b"q%d" % i, extensions={"trace": trace})
                texts.append(response.text)
        return texts, server.connections, events

    texts, connections, events = run(main())
    assert texts == ["reply 1 to q0", "reply 2 to q1", "reply 3 to q2"]
    assert connections == 1
    assert events.count("connection.connect_tcp.started") == 1
    assert events.count("http11.receive_response_headers.complete") == 3


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.binary(min_size=1, max_size=3000), max_size=6),
    framing=st.sampled_from(["chunked", "length", "close"]),
)
def test_every_framing_of_a_body_reads_back_the_same_bytes(pieces, framing):
    whole = b"".join(pieces)

    def respond(n, body):
        if framing == "chunked":
            return chunked(pieces)
        if framing == "length":
            return sized(whole)
        return b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + whole  # ends at the close

    async def main():
        server = Server(respond)
        async with server as url, client() as http:
            first = (await http.get(url)).content
            second = (await http.get(url)).content
        return first, second, server.connections

    first, second, connections = run(main())
    assert first == second == whole
    # only a body that ends with the close costs a connection per request
    assert connections == (2 if framing == "close" else 1)


def test_a_streamed_reply_arrives_piece_by_piece_and_a_reply_left_unread_is_not_reused():
    async def main():
        server = Server(lambda n, body: chunked([b"data: one\n\n", b"data: two\n\n"]))
        async with server as url, client() as http:
            async with http.stream("GET", url) as response:
                lines = [line async for line in response.aiter_lines()]
            async with http.stream("GET", url) as response:
                await response.aiter_bytes().__anext__()  # one piece, then closed unread
            await http.get(url)
        return lines, server.connections

    lines, connections = run(main())
    assert lines == ["data: one", "", "data: two", ""]
    assert connections == 2  # the connection closed with bytes unread was dropped


def test_a_connection_the_server_closed_while_idle_is_not_used_again():
    async def main():
        events = []

        async def trace(name, info):
            events.append(name)

        async def once(reader, writer):  # answers one request, then closes, saying nothing
            await reader.readuntil(b"\r\n\r\n")
            writer.write(sized(b"ok"))
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.close()

        server = await asyncio.start_server(once, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with client() as http:
            await http.get(url, extensions={"trace": trace})
            await asyncio.sleep(0.2)  # the close has reached the idle connection
            second = await http.get(url, extensions={"trace": trace})
        server.close()
        return second.text, events.count("connection.connect_tcp.started")

    assert run(main()) == ("ok", 2)


def test_idle_connections_expire_and_keepalive_zero_opens_one_per_request():
    async def main():
        counts = []
        for keepalive, expiry, pause in ((4, 0.05, 0.15), (0, 5.0, 0.0), (4, 5.0, 0.15)):
            server = Server(lambda n, body: sized(b"ok"))
            async with server as url, client(keepalive, expiry) as http:
                await http.get(url)
                await asyncio.sleep(pause)
                await http.get(url)
            counts.append(server.connections)
        return counts

    assert run(main()) == [2, 2, 1]


def test_connection_close_and_http_1_0_replies_are_not_reused():
    replies = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
    ]

    async def main():
        counts = []
        for reply in replies:
            server = Server(lambda n, body, reply=reply: reply)
            async with server as url, client() as http:
                assert (await http.get(url)).text == "ok"
                assert (await http.get(url)).text == "ok"
            counts.append(server.connections)
        return counts

    assert run(main()) == [2, 2]


def test_interim_replies_are_skipped_and_bodiless_replies_end_at_once():
    async def main():
        server = Server(
            lambda n, body: (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"
                if n == 1
                else b"HTTP/1.1 204 No Content\r\n\r\n"
            )
        )
        async with server as url, client() as http:
            first = await http.post(url, content=b"x")
            second = await http.post(url, content=b"y")
            third = await http.head(url)
        return first, second, third, server.connections

    first, second, third, connections = run(main())
    assert (first.status_code, first.text) == (200, "hi")
    assert (second.status_code, second.content) == (204, b"")
    assert third.status_code == 204
    assert connections == 1


def test_failures_are_httpx_errors_the_adapter_classifies():
    async def main():
        results = {}
        async with client(timeout=httpx.Timeout(2.0)) as http:
            try:
                await http.get(f"http://127.0.0.1:{free_port()}")
            except httpx.ConnectError as exc:
                results["nothing listens"] = type(exc)
            cases = {
                "dropped before a reply": lambda n, body: None,
                "cut inside the body": lambda n, body: (
                    b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\nconnection: close\r\n\r\nabc"
                ),
                "not HTTP": lambda n, body: b"SSH-2.0-OpenSSH\r\n\r\n",
                "bad chunk size": lambda n, body: (
                    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"
                ),
            }
            for name, respond in cases.items():
                async with Server(respond) as url:
                    try:
                        await http.get(url)
                    except httpx.HTTPError as exc:
                        results[name] = type(exc)
        return results

    assert run(main()) == {
        "nothing listens": httpx.ConnectError,
        "dropped before a reply": httpx.RemoteProtocolError,
        "cut inside the body": httpx.RemoteProtocolError,
        "not HTTP": httpx.RemoteProtocolError,
        "bad chunk size": httpx.RemoteProtocolError,
    }


def test_a_read_timeout_is_httpx_read_timeout_and_the_connection_is_dropped():
    async def main():
        hold = asyncio.Event()

        async def slow(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            await hold.wait()
            writer.close()

        server = await asyncio.start_server(slow, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        transport = PoolTransport(max_keepalive=4, keepalive_expiry=5)
        timeout = httpx.Timeout(5.0, read=0.2)
        async with httpx.AsyncClient(mounts={"http://": transport}, timeout=timeout) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.get(url)
            open_after = len(transport._open)
        hold.set()
        server.close()
        return open_after

    assert run(main()) == 0


def test_a_closed_pool_refuses_requests_and_closes_its_connections():
    async def main():
        server = Server(lambda n, body: sized(b"ok"))
        async with server as url:
            transport = PoolTransport(max_keepalive=4, keepalive_expiry=5)
            http = httpx.AsyncClient(mounts={"http://": transport}, trust_env=False)
            await http.get(url)
            idle = sum(len(stack) for stack in transport._idle.values())
            await transport.aclose()
            with pytest.raises(httpx.ConnectError, match="closed"):
                await http.get(url)
            await http.aclose()
        return idle, len(transport._open)

    assert run(main()) == (1, 0)
