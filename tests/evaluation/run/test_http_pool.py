"""bat's HTTP/1.1 pool (``http_pool``) against real servers on 127.0.0.1 that frame their
replies every way HTTP/1.1 allows, keep or close connections, and misbehave.

Each server here is a few lines of asyncio written for the case; the pool is reached
through a real ``httpx.AsyncClient``, as the adapter uses it."""

import asyncio
import contextlib

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
    eol=st.sampled_from([b"\r\n", b"\n"]),
    folded=st.booleans(),
)
def test_every_framing_of_a_body_reads_back_the_same_bytes(pieces, framing, eol, folded):
    """Each reply in any spelling RFC 9112 lets a client accept (CRLF or bare LF, a
    folded header line), the server keeping the connection open: a hang would show as
    the read timeout."""
    whole = b"".join(pieces)

    def respond(n, body):
        if framing == "chunked":
            reply = chunked(pieces)
        elif framing == "length":
            reply = sized(whole)
        else:  # ends at the close
            reply = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + whole
        head, _, rest = reply.partition(b"\r\n\r\n")
        if folded:
            head += b"\r\nx-folded: one\r\n  two"
        # a bare LF may end the status and header lines, not the chunks' (RFC 9112 2.2)
        return head.replace(b"\r\n", eol) + eol + eol + rest

    async def main():
        server = Server(respond)
        async with server as url, client(timeout=httpx.Timeout(5.0, read=2.0)) as http:
            first = await http.get(url)
            second = await http.get(url)
        return first, second, server.connections

    first, second, connections = run(main())
    assert first.content == second.content == whole
    if folded:
        assert first.headers["x-folded"] == "one two"
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
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi"
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


# --- real-world framing, right and wrong ---------------------------------------------------

QUICK = httpx.Timeout(5.0, read=2.0)  # a hang shows as a ReadTimeout, not a stuck test


def test_a_bare_lf_reply_is_read_and_its_connection_kept():
    async def main():
        server = Server(lambda n, body: b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
        async with server as url, client(timeout=QUICK) as http:
            texts = [(await http.get(url)).text for _ in range(2)]
        return texts, server.connections

    assert run(main()) == (["ok", "ok"], 1)


def test_folded_header_lines_are_joined():
    reply = b"HTTP/1.1 200 OK\r\nx-note: one\r\n two\r\n\tthree\r\ncontent-length: 2\r\n\r\nok"

    async def main():
        async with Server(lambda n, body: reply) as url, client(timeout=QUICK) as http:
            return await http.get(url)

    response = run(main())
    assert (response.text, response.headers["x-note"]) == ("ok", "one two three")


def test_a_chunked_reply_with_extensions_and_trailers_is_read_and_its_connection_kept():
    reply = (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n"
        b"5;name=value\r\nhello\r\n1\r\n \r\n5;a;b=c\r\nworld\r\n"
        b"0\r\nx-sum: 11\r\nx-more: yes\r\n\r\n"
    )

    async def main():
        server = Server(lambda n, body: reply)
        async with server as url, client(timeout=QUICK) as http:
            texts = [(await http.get(url)).text for _ in range(2)]
        return texts, server.connections

    assert run(main()) == (["hello world"] * 2, 1)


MALFORMED = {
    "two different Content-Length": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 5\r\n\r\nokabc"
    ),
    "a negative Content-Length": b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\nok",
    "101 Switching Protocols, unasked": (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n"
    ),
    "chunk lines ending in a bare LF": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\nok\n0\n\n"
    ),
    "a chunk longer than its size": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokay\r\n0\r\n\r\n"
    ),
    "not HTTP": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
}


@pytest.mark.parametrize("reply", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_reply_is_a_remote_protocol_error_and_the_next_request_still_works(reply):
    """The server keeps the connection open after its malformed reply: the error must
    come from the bytes, not from a timeout, and the pool must not use that connection
    again (its next reply would be read from the middle of this one)."""

    async def main():
        server = Server(lambda n, body: reply if n == 1 else sized(b"fine"))
        async with server as url, client(timeout=QUICK) as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get(url)
            after = await http.get(url)
        return after.text, server.connections

    assert run(main()) == ("fine", 2)


def test_bytes_after_a_reply_are_never_read_as_the_next_reply():
    """Bytes the server sends that no request asked for, with a reply or while the
    connection is idle: the next request goes on a new connection and gets its own reply."""
    forged = b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged"

    async def main():
        texts = []
        for late in (False, True):
            served = []

            async def serve(reader, writer, late=late, served=served):
                served.append(1)
                await reader.readuntil(b"\r\n\r\n")
                writer.write(sized(b"reply %d" % len(served)) + (b"" if late else forged))
                await writer.drain()
                if late:
                    await asyncio.sleep(0.05)
                    writer.write(forged)  # into the idle connection
                with contextlib.suppress(ConnectionError):
                    await reader.read()  # held open until the client closes it

            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            async with client(timeout=QUICK) as http:
                first = await http.get(url)
                await asyncio.sleep(0.2)
                second = await http.get(url)
            server.close()
            texts.append((first.text, second.text, len(served)))
        return texts

    assert run(main()) == [("reply 1", "reply 2", 2)] * 2


STATUS_LINES = [
    b"HTTP/1.1 200 OK",
    b"HTTP/1.0 200 OK",
    b"HTTP/1.1 100 Continue",
    b"HTTP/1.1 101 Switching Protocols",
    b"HTTP/1.1 204 No Content",
    b"HTTP/1.1 304 Not Modified",
    b"HTTP/1.1 099 Low",
    b"HTTP/2 200",
    b"HTTP/1.1 200",
]
HEADER_LINES = [
    b"content-length: 2",
    b"content-length: 0",
    b"content-length: -1",
    b"content-length: 2, 2",
    b"content-length: 99999999999999999999",
    b"transfer-encoding: chunked",
    b"transfer-encoding: gzip, chunked",
    b"transfer-encoding: identity",
    b"connection: close",
    b"connection: keep-alive",
    b"content-encoding: gzip",
    b"x-h: v",
    b" folded",
    b"no colon",
]
BODY_PARTS = [b"2", b"2;ext=1", b"0", b"ok", b"", b"HTTP/1.1 200 OK", b"content-length: 6"]
# each line's end: mostly one that HTTP/1.1 allows, sometimes a broken one
LINE_ENDS = st.sampled_from([b"\r\n", b"\r\n", b"\n", b"\n", b"\r", b""])


def _lines(choices: list[bytes], max_size: int):
    line = st.sampled_from(choices) | st.binary(max_size=12)
    return st.lists(st.tuples(line, LINE_ENDS), max_size=max_size).map(
        lambda pairs: b"".join(text + end for text, end in pairs)
    )


# reply-shaped bytes (a status line, header lines, a blank line, a body), or any bytes
REPLIES = st.one_of(
    st.tuples(
        st.sampled_from(STATUS_LINES),
        LINE_ENDS,
        _lines(HEADER_LINES, 3),
        LINE_ENDS,
        _lines(BODY_PARTS, 4),
    ).map(b"".join),
    st.binary(max_size=200),
)


@hsettings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reply=REPLIES, hold=st.booleans())
def test_any_reply_bytes_give_a_response_or_an_httpx_error_and_never_poison_the_pool(reply, hold):
    """Whatever bytes answer the first request (the server then closing the connection,
    or holding it open): a response or an httpx error, in time; and the next request on
    the same pool gets the server's real reply."""

    async def main():
        first_served = asyncio.Event()

        async def serve(reader, writer):
            try:
                while True:
                    await reader.readuntil(b"\r\n\r\n")
                    if first_served.is_set():
                        writer.write(sized(b"fine"))
                    else:
                        first_served.set()
                        writer.write(reply)
                        if not hold:
                            break
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with client() as http, asyncio.timeout(10):
            try:  # an incomplete reply held open: a ReadTimeout, after 0.1 s
                response = await http.get(url, timeout=httpx.Timeout(5.0, read=0.1))
                outcome = response.status_code
            except httpx.HTTPError as exc:
                outcome = type(exc)
            if not hold:
                await asyncio.sleep(0.02)  # the close reaches the client (no keep-alive race)
            second = await http.get(url, timeout=QUICK)
        server.close()
        return outcome, second.text

    outcome, second = run(main())
    assert isinstance(outcome, int) or issubclass(outcome, httpx.HTTPError)
    assert second == "fine"
