"""Lines of a server-sent event stream as the specification cuts them: CR LF, CR or LF.

a2a-sdk reads an agent's stream with ``httpx.Response.aiter_lines``, whose decoder
follows ``str.splitlines``: it also breaks on U+2028, U+2029, U+0085, VT, FF and the
separators U+001C-U+001E. An answer holding one of those (valid text, and JSON need not
escape U+2028, U+2029 or U+0085) reached the parser cut in two, and the episode was
recorded as a ``protocol`` failure of the harness. bat's transports return
``EventStreamResponse``, whose ``aiter_lines`` cuts only where the WHATWG "event stream
interpretation" says a line ends.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx

_LINE_END = re.compile(r"\r\n|\r|\n")


class EventStreamLines:
    """An incremental splitter: text in as it arrives, whole lines out (without their end).

    A CR at the end of one piece ends a line at once; an LF opening the next piece is
    then the second half of that CR LF, not an empty line. A line spread over many
    pieces is kept as a list and joined once, so a long line costs linear time.
    """

    def __init__(self) -> None:
        self._pending: list[str] = []  # the start of a line whose end has not come yet
        self._after_cr = False

    def decode(self, text: str) -> list[str]:
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        if not text:
            return []
        self._after_cr = text.endswith("\r")
        if not _LINE_END.search(text):
            self._pending.append(text)
            return []
        lines = _LINE_END.split("".join(self._pending) + text)
        rest = lines.pop()  # what follows the last line end: the start of the next line
        self._pending = [rest] if rest else []
        return lines

    def flush(self) -> list[str]:
        """The last line, when the stream ended without a line end."""
        rest, self._pending = "".join(self._pending), []
        return [rest] if rest else []


class EventStreamResponse(httpx.Response):
    """An ``httpx.Response`` whose lines end only on CR LF, CR or LF."""

    async def aiter_lines(self) -> AsyncIterator[str]:
        lines = EventStreamLines()
        async for text in self.aiter_text():
            for line in lines.decode(text):
                yield line
        for line in lines.flush():
            yield line


class EventStreamTransport(httpx.AsyncBaseTransport):
    """Another transport (httpx's own, for ``https://``) whose replies read lines the same way."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        reply = await self.inner.handle_async_request(request)
        return EventStreamResponse(
            reply.status_code,
            headers=reply.headers,
            stream=reply.stream,
            extensions=reply.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
