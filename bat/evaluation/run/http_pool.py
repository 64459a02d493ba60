"""A small HTTP/1.1 connection pool for httpx: the transport of bat's A2A client on ``http://``.

Why not httpcore, httpx's own transport: at a few hundred episodes a second its pool is
where bat's CPU goes. Each request walks every pooled connection and asks each whether it
expired, through anyio's typed attributes (about a third of bat's CPU per episode in a
cProfile of 2,000 episodes), and that walk grows with the concurrency, so 64 episodes at
once ran slower than 16. This pool keeps one stack of idle connections per origin and
takes the most recently used live one.

The bytes on the wire are h11's (the HTTP/1.1 state machine httpcore itself is built
on): each connection is an asyncio protocol that feeds what arrives to its own
``h11.Connection``, and the pool only moves bytes and events between the two. The parser
of bat's own that this replaced read only the framing it had been written for: a bare-LF
reply hung until the turn's timeout, two different ``Content-Length`` headers or a
negative one were taken as they came (a wrong length left bytes that poisoned the
connection's next request), an unasked ``101`` was taken for a reply, and folded header
lines were refused. h11 reads them as RFC 9112 says; the one place it would wait forever
(chunk-size lines ended by a bare LF) is caught here and refused.

Why h11 under this pool rather than a maintained transport, by measurement
(docs/scaling.md has the figures and the commands): h11 costs about a tenth more of
bat's CPU per episode than that parser did (1.07-1.12x, medians of rounds alternating
both pools in one process; separate ``benchmarks/scale.py`` runs, noisier on a shared
machine, 0.96-1.45x), where httpx's own pool cost 3-5.6x (a design review's figure).
httpx-aiohttp (aiohttp's pool and C parser under httpx) measured no cheaper than this
pool within the noise (the review had 1.10-1.17x), but would bring aiohttp in as a
dependency, has none of the ``trace`` events below, and maps a server that disconnected
(or reset the connection) to ``ConnectTimeout``: the adapter would count a keep-alive
race as an agent that cannot be reached, and never resend it.

What it keeps of httpcore's behaviour, because the adapter relies on it:

* the ``trace`` request extension reports ``connection.connect_tcp.started`` when a
  request opens a connection of its own and ``http11.receive_response_headers.complete``
  when the reply's head arrived: the adapter resends a request only when it broke on a
  *reused* connection before any byte of reply;
* failures are httpx's exceptions: ``ConnectError`` (nothing listens), ``ConnectTimeout``,
  ``RemoteProtocolError`` (the server closed the connection before or inside a reply, or
  the reply is not valid HTTP/1.1: a ``101 Switching Protocols`` nobody asked for
  included), ``ReadError`` / ``WriteError`` (the socket failed), ``ReadTimeout``;
* idle connections are dropped after ``keepalive_expiry`` seconds and never reused when
  the server has closed them; ``max_keepalive=0`` opens a new connection for every
  request. A connection goes back to the pool only when h11 says both sides finished
  their message cleanly and nothing came after the reply; one that failed, was left
  unread, was told to close, or heard a byte while idle is closed, so a malformed reply
  never reaches the next request.

What it leaves out: TLS (``https://`` stays on httpx's transport), proxies, HTTP/2 and a
cap on the number of connections (the runner's concurrency is the cap).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import h11
import httpx

from bat.evaluation.run.sse_lines import EventStreamResponse

HEAD_LIMIT = 1 << 20  # the largest status line + headers read, in bytes
READ_LIMIT = 1 << 20  # bytes received ahead of the reader before the socket is paused
# h11 takes a bare LF for CRLF in the status and header lines (RFC 9112 2.2 allows it),
# not in a chunked body's framing: there it waits for a CRLF that a server which ends its
# lines in LF never sends, and the request would hang until its timeout. When h11 waits
# inside a body, the bytes it holds unread are a partial line; one that is a whole
# chunk-size line (hex digits, extensions) ended by a bare LF will never be read.
_BARE_LF_CHUNK_LINE = re.compile(rb"[0-9A-Fa-f]+[ \t]*(?:;[^\r\n]*)?\n")


class _Connection(asyncio.Protocol):
    """One TCP connection. What arrives goes straight into its h11 state machine, so the
    pool sees whether anything arrived while the connection was idle (a server that
    sends bytes nobody asked for must not have them read as the next request's reply)."""

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.heard = False  # bytes arrived since the connection was opened or put back
        self.ended = False  # the server's end of the stream, or the connection lost
        self.error: OSError | None = None  # what broke the connection, if anything
        self.gone = asyncio.get_running_loop().create_future()  # set once it is closed
        self._unread = 0  # bytes received since the reader last asked for more
        self._reading_paused = False
        self._writing_paused = False
        self._waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol's callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.heard = True
        self.h11.receive_data(data)
        self._unread += len(data)
        if self._unread > READ_LIMIT and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self.h11.receive_data(b"")
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if isinstance(exc, OSError):
            self.error = exc
        self._wake()
        if not self.gone.done():
            self.gone.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake()

    # what the pool asks of it

    def usable(self, now: float, expiry: float) -> bool:
        """Whether an idle connection may take a request: not expired, not closed by the
        server, and silent since it was put back."""
        return now - self.idle_since < expiry and not self.heard and not self.ended

    def start_next_exchange(self) -> bool:
        """Whether the exchange ended cleanly on both sides, neither asked to close and
        no byte came after the reply: then (and only then) h11 starts the next one."""
        if (
            self.h11.our_state is h11.DONE
            and self.h11.their_state is h11.DONE
            and not self.h11.trailing_data[0]
        ):
            self.h11.start_next_cycle()
            self.heard = False
            return True
        return False

    async def send(self, data: bytes, request: httpx.Request, timeout: float | None) -> None:
        self.transport.write(data)
        while self._writing_paused and not self.ended:
            await self._wait(timeout, request, "write")
        if self.error is not None:
            raise httpx.WriteError(str(self.error) or type(self.error).__name__, request=request)

    async def next_event(self, request: httpx.Request, timeout: float | None) -> Any:
        """The reply's next event (a head, a piece of body, its end), waiting as needed."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                message = (
                    str(exc) if self.heard else "Server disconnected without sending a response."
                )
                raise httpx.RemoteProtocolError(message, request=request) from exc
            if event is not h11.NEED_DATA:
                return event
            if self.h11.their_state is h11.SEND_BODY and _BARE_LF_CHUNK_LINE.match(
                self.h11.trailing_data[0]
            ):
                raise httpx.RemoteProtocolError(
                    "a chunk-size line ends in a bare LF, not CRLF", request=request
                )
            if self.ended:  # lost without an end of stream: reset, or closed by us
                error = self.error
                message = (str(error) or type(error).__name__) if error else "the connection closed"
                raise httpx.ReadError(message, request=request)
            self._unread = 0
            if self._reading_paused:
                self._reading_paused = False
                self.transport.resume_reading()
            await self._wait(timeout, request, "read")

    async def _wait(self, timeout: float | None, request: httpx.Request, what: str) -> None:
        """Until the next callback (bytes, the end, the socket writable again)."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            if timeout is None:
                await self._waiter
            else:
                async with asyncio.timeout(timeout):
                    await self._waiter
        except TimeoutError:
            error = httpx.WriteTimeout if what == "write" else httpx.ReadTimeout
            raise error(f"no {what} within {timeout:g} s", request=request) from None
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class PoolTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` for plain ``http://`` URLs, keeping connections alive."""

    def __init__(self, *, max_keepalive: int, keepalive_expiry: float) -> None:
        self.max_keepalive = max_keepalive
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise httpx.ConnectError("the connection pool is closed", request=request)
        url = request.url
        origin = (url.host, url.port or 80)
        timeouts = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        trace = request.extensions.get("trace")
        body = b"".join([part async for part in request.stream])
        connection = self._take(origin)
        if connection is None:
            if trace is not None:
                await trace("connection.connect_tcp.started", {})
            connection = await self._connect(origin, timeouts.get("connect"), request)
        try:
            data = _request_bytes(connection.h11, request, body)
            await connection.send(data, request, timeouts.get("write"))
            event = await connection.next_event(request, read_timeout)
            while type(event) is h11.InformationalResponse:  # 100 Continue: the reply follows
                event = await connection.next_event(request, read_timeout)
        except BaseException:
            self._discard(connection)
            raise
        if trace is not None:
            await trace("http11.receive_response_headers.complete", {})
        return EventStreamResponse(  # an agent's event stream is cut into lines by the spec
            event.status_code,
            headers=event.headers.raw_items(),
            stream=_Body(self, connection, origin, _body(connection, request, read_timeout)),
            extensions={
                "http_version": b"HTTP/" + event.http_version,
                "reason_phrase": event.reason,
            },
        )

    def _take(self, origin: tuple[str, int]) -> _Connection | None:
        stack = self._idle.get(origin)
        now = time.monotonic()
        while stack:
            connection = stack.pop()
            if connection.usable(now, self.keepalive_expiry):
                return connection
            self._discard(connection)
        return None

    async def _connect(
        self, origin: tuple[str, int], timeout: float | None, request: httpx.Request
    ) -> _Connection:
        host, port = origin
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(_Connection, host, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {host}:{port} within {timeout:g} s", request=request
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        self._open.add(connection)
        return connection

    def _release(self, connection: _Connection, origin: tuple[str, int]) -> None:
        """A reply read to its end: its connection goes back to the pool, or is closed."""
        stack = self._idle.setdefault(origin, [])
        if (
            not self._closed
            and len(stack) < self.max_keepalive
            and connection.start_next_exchange()
        ):
            connection.idle_since = time.monotonic()
            stack.append(connection)
        else:
            self._discard(connection)

    def _discard(self, connection: _Connection) -> None:
        self._open.discard(connection)
        connection.close()

    async def aclose(self) -> None:
        self._closed = True
        self._idle.clear()
        connections, self._open = self._open, set()
        for connection in connections:
            connection.close()
        if connections:
            await asyncio.wait([connection.gone for connection in connections])


class _Body(httpx.AsyncByteStream):
    """A reply's body as it arrives; its connection returns to the pool once it is read."""

    def __init__(
        self,
        pool: PoolTransport,
        connection: _Connection,
        origin: tuple[str, int],
        chunks: AsyncIterator[bytes],
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._origin = origin
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks:
                yield chunk
        except BaseException:
            self._drop()
            raise
        if self._connection is not None:
            connection, self._connection = self._connection, None
            self._pool._release(connection, self._origin)

    async def aclose(self) -> None:
        self._drop()  # closed before its end: the connection holds unread bytes

    def _drop(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            self._pool._discard(connection)


def _request_bytes(connection: h11.Connection, request: httpx.Request, body: bytes) -> bytes:
    """The request as h11 frames it. The whole body is in hand, so it goes with a length
    (never chunked): h11 then knows where the request ends."""
    headers = []
    has_length = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            continue
        has_length |= lowered == b"content-length"
        headers.append((name, value))
    if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
        headers.append((b"Content-Length", b"%d" % len(body)))
    try:
        head = connection.send(
            h11.Request(method=request.method, target=request.url.raw_path, headers=headers)
        )
        data = connection.send(h11.Data(data=body)) if body else b""
        end = connection.send(h11.EndOfMessage())
    except h11.LocalProtocolError as exc:
        raise httpx.LocalProtocolError(str(exc), request=request) from exc
    return b"".join((head or b"", data or b"", end or b""))


async def _body(
    connection: _Connection, request: httpx.Request, timeout: float | None
) -> AsyncIterator[bytes]:
    """The body's bytes as they come, however the reply frames them (h11 knows)."""
    while True:
        event = await connection.next_event(request, timeout)
        if type(event) is h11.Data:
            yield bytes(event.data)
        else:  # EndOfMessage: h11 yields nothing else once a reply's head is read
            return
