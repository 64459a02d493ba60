"""A small HTTP/1.1 connection pool for httpx: the transport of bat's A2A client on ``http://``.

Why not httpcore, httpx's own transport: at a few hundred episodes a second its pool is
where bat's CPU goes. Each request walks every pooled connection and asks each whether it
expired, through anyio's typed attributes (about a third of bat's CPU per episode in a
cProfile of 2,000 episodes), and that walk grows with the concurrency, so 64 episodes at
once ran slower than 16. This pool keeps one stack of idle connections per origin, takes
the most recently used live one, and parses responses with a few lines of its own over
asyncio's streams.

What it keeps of httpcore's behaviour, because the adapter relies on it:

* the ``trace`` request extension reports ``connection.connect_tcp.started`` when a
  request opens a connection of its own and ``http11.receive_response_headers.complete``
  when the reply's head arrived: the adapter resends a request only when it broke on a
  *reused* connection before any byte of reply;
* failures are httpx's exceptions: ``ConnectError`` (nothing listens), ``ConnectTimeout``,
  ``RemoteProtocolError`` (the server closed the connection, before or inside a reply),
  ``ReadError`` / ``WriteError`` (the socket failed), ``ReadTimeout``;
* idle connections are dropped after ``keepalive_expiry`` seconds and never reused when
  the server has closed them; ``max_keepalive=0`` opens a new connection for every
  request.

What it leaves out: TLS (``https://`` stays on httpx's transport), proxies, HTTP/2 and a
cap on the number of connections (the runner's concurrency is the cap).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

HEAD_LIMIT = 1 << 20  # the largest status line + headers read, in bytes
READ_SIZE = 1 << 16


class _Connection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self, now: float, expiry: float) -> bool:
        """Whether an idle connection may take a request: not expired, not closed by the
        server (asyncio has seen its EOF or error)."""
        return (
            now - self.idle_since < expiry
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


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
        trace = request.extensions.get("trace")
        body = b"".join([part async for part in request.stream])
        head = _request_head(request, body)
        connection = self._take(origin)
        if connection is None:
            if trace is not None:
                await trace("connection.connect_tcp.started", {})
            connection = await self._connect(origin, timeouts.get("connect"), request)
        try:
            connection.writer.write(head + body)
            await _timed(connection.writer.drain(), timeouts.get("write"), request, "write")
            status, reason, headers = await _timed(
                _read_head(connection.reader, request), timeouts.get("read"), request, "read"
            )
        except BaseException:
            self._discard(connection)
            raise
        if trace is not None:
            await trace("http11.receive_response_headers.complete", {})
        keep = self.max_keepalive > 0 and _keep_alive(headers)
        if request.method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body_stream: _Body = _Body(self, connection, origin, _nothing(), keep)
        else:
            body_stream = _Body(
                self,
                connection,
                origin,
                _body(connection.reader, headers, request, timeouts.get("read")),
                keep and _framed(headers),
            )
        return httpx.Response(
            status,
            headers=headers,
            stream=body_stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
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
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, limit=HEAD_LIMIT)
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {host}:{port} within {timeout:g} s", request=request
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        connection = _Connection(reader, writer)
        self._open.add(connection)
        return connection

    def _release(self, connection: _Connection, origin: tuple[str, int], keep: bool) -> None:
        """A reply read to its end: its connection goes back to the pool, or is closed."""
        stack = self._idle.setdefault(origin, [])
        if keep and not self._closed and len(stack) < self.max_keepalive:
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
        for connection in connections:
            with contextlib.suppress(OSError):
                await connection.writer.wait_closed()


class _Body(httpx.AsyncByteStream):
    """A reply's body as it arrives; its connection returns to the pool once it is read."""

    def __init__(
        self,
        pool: PoolTransport,
        connection: _Connection,
        origin: tuple[str, int],
        chunks: AsyncIterator[bytes],
        keep: bool,
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._origin = origin
        self._chunks = chunks
        self._keep = keep

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks:
                yield chunk
        except BaseException:
            self._drop()
            raise
        if self._connection is not None:
            connection, self._connection = self._connection, None
            self._pool._release(connection, self._origin, self._keep)

    async def aclose(self) -> None:
        self._drop()  # closed before its end: the connection holds unread bytes

    def _drop(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            self._pool._discard(connection)


def _request_head(request: httpx.Request, body: bytes) -> bytes:
    url = request.url
    target = url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    has_length = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            continue  # the whole body is in hand: it goes with a length
        has_length |= lowered == b"content-length"
        lines.append(name + b": " + value)
    if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
        lines.append(b"Content-Length: " + str(len(body)).encode("ascii"))
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _read_head(
    reader: asyncio.StreamReader, request: httpx.Request
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    while True:
        try:
            block = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise httpx.RemoteProtocolError(
                    "the server closed the connection inside the reply's head", request=request
                ) from None
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            ) from None
        except asyncio.LimitOverrunError:
            raise httpx.RemoteProtocolError(
                f"the reply's head is longer than {HEAD_LIMIT} bytes", request=request
            ) from None
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        status_line, *header_lines = block[:-4].split(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise httpx.RemoteProtocolError(
                f"not an HTTP reply: {status_line[:80]!r}", request=request
            )
        status = int(parts[1])
        if status == 100 or 102 <= status < 200:
            continue  # an interim reply: the real one follows
        headers = []
        for line in header_lines:
            name, sep, value = line.partition(b":")
            if not sep:
                raise httpx.RemoteProtocolError(
                    f"a malformed header line: {line[:80]!r}", request=request
                )
            headers.append((name.strip(), value.strip()))
        if parts[0] == b"HTTP/1.0" and not _has(headers, b"connection", b"keep-alive"):
            headers.append((b"Connection", b"close"))
        return status, parts[2] if len(parts) > 2 else b"", headers


def _has(headers: list[tuple[bytes, bytes]], name: bytes, token: bytes) -> bool:
    return any(
        key.lower() == name and token in value.lower().replace(b" ", b"").split(b",")
        for key, value in headers
    )


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _keep_alive(headers: list[tuple[bytes, bytes]]) -> bool:
    return not _has(headers, b"connection", b"close")


def _framed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the body's end is marked (a length or chunks), not the connection's close."""
    return _header(headers, b"content-length") is not None or _has(
        headers, b"transfer-encoding", b"chunked"
    )


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield  # an async generator that yields nothing


async def _body(
    reader: asyncio.StreamReader,
    headers: list[tuple[bytes, bytes]],
    request: httpx.Request,
    timeout: float | None,
) -> AsyncIterator[bytes]:
    """The body's bytes as they come: chunked, of a given length, or up to the close."""
    try:
        if _has(headers, b"transfer-encoding", b"chunked"):
            while True:
                size_line = await _timed(reader.readuntil(b"\r\n"), timeout, request, "read")
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(
                        f"a malformed chunk size: {size_line[:40]!r}", request=request
                    ) from None
                if size == 0:
                    while await _timed(reader.readuntil(b"\r\n"), timeout, request, "read") != (
                        b"\r\n"
                    ):
                        pass  # trailer fields, unused
                    return
                chunk = await _timed(reader.readexactly(size + 2), timeout, request, "read")
                yield chunk[:-2]
            return
        length = _header(headers, b"content-length")
        if length is not None:
            try:
                remaining = int(length)
            except ValueError:
                raise httpx.RemoteProtocolError(
                    f"a malformed Content-Length: {length[:40]!r}", request=request
                ) from None
            while remaining > 0:
                chunk = await _timed(
                    reader.read(min(remaining, READ_SIZE)), timeout, request, "read"
                )
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", remaining)
                remaining -= len(chunk)
                yield chunk
            return
        while chunk := await _timed(reader.read(READ_SIZE), timeout, request, "read"):
            yield chunk
    except asyncio.IncompleteReadError:
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body", request=request
        ) from None
    except asyncio.LimitOverrunError:
        raise httpx.RemoteProtocolError("a malformed chunked body", request=request) from None
    except OSError as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc


async def _timed(awaitable: Any, timeout: float | None, request: httpx.Request, what: str) -> Any:
    """``awaitable`` within ``timeout`` seconds (None: no limit), as httpx's timeouts."""
    if timeout is None:
        try:
            return await awaitable
        except OSError as exc:
            error = httpx.WriteError if what == "write" else httpx.ReadError
            raise error(str(exc) or type(exc).__name__, request=request) from exc
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except TimeoutError:
        error = httpx.WriteTimeout if what == "write" else httpx.ReadTimeout
        raise error(f"no {what} within {timeout:g} s", request=request) from None
    except OSError as exc:
        error = httpx.WriteError if what == "write" else httpx.ReadError
        raise error(str(exc) or type(exc).__name__, request=request) from exc
