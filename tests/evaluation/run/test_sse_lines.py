"""Server-sent events end their lines on CR LF, CR or LF alone (issue 27).

An answer holding U+2028, U+2029, U+0085 or another character Python's
``str.splitlines`` also breaks on is valid text: it must arrive whole and be judged
like any other, over every HTTP binding that streams (JSON-RPC and HTTP+JSON). The
agent is the real echo fixture (a2a-sdk's server), which echoes the turn's text back.
"""

from __future__ import annotations

import asyncio
import os
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.evalkit import episodes, make_project, run_dirs

ODD = {
    "u2028": "one\u2028two",
    "u2029": "one\u2029two",
    "nel": "one\u0085two",
    "vt-ff": "one\x0btwo\x0cthree",
    "seps": "a\x1cb\x1dc\x1ed",
    "mixed": "x\u2028\r\ny\u2029",
}


def tasks() -> list[dict]:
    return [
        {"id": key, "turns": [text], "expected": {"output_must_contain": [f"echo: {text}"]}}
        for key, text in ODD.items()
    ]


@pytest.mark.parametrize("transport", ["jsonrpc", "rest", "jsonrpc-0.3"])
@pytest.mark.parametrize("answer_in", ["artifact", "status"])
def test_unicode_line_breaks_in_a_streamed_answer_arrive_whole(
    tmp_path, bat, home, transport, answer_in
):
    """Over each HTTP binding that streams, a2a-sdk 1.x's and the 0.3 compatibility one."""
    transport, _, version = transport.partition("-")
    env = {"TRANSPORT": transport, "ANSWER_IN": answer_in, "CARD_VERSION": version or "1.0"}
    project = make_project(tmp_path, tasks(), agent_env=env)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    found = episodes(run_dirs(project)[0])
    for key, text in ODD.items():
        episode = found[f"{key}__try1.json"]
        assert episode["infra_error"] is None, episode["infra_error"]
        assert episode["final_output"] == f"echo: {text}"
        assert episode["verdict"]["passed"]


# -- the splitter itself: property tests, with a canary ---------------------------------

SCALE = float(os.environ.get("FUZZ_SCALE", "1"))
ENDS = ("\r\n", "\r", "\n")
# Anything but CR and LF: the characters str.splitlines also breaks on are favoured.
LINE = st.text(
    st.one_of(st.sampled_from("\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"), st.characters()).filter(
        lambda c: c not in "\r\n"
    ),
    max_size=20,
)


def fuzz(examples: int):
    """Deterministic, no database, no deadline (tests/test_fuzz_inputs.py's settings)."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


@st.composite
def streams(draw) -> tuple[list[str], list[str]]:
    """Lines, each with an end of its own, and the stream they make cut anywhere."""
    lines = draw(st.lists(LINE, max_size=8))
    text = ""
    for line in lines:
        # An empty line ended by LF after a CR would make that CR a CR LF: one end, not two.
        ends = ENDS[:2] if not line and text.endswith("\r") else ENDS
        text += line + draw(st.sampled_from(ends))
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=6)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return lines, [piece for piece in pieces if piece]


def cuts_as_the_spec_says(make_splitter) -> None:
    """The check: whatever the pieces, the lines come out as they went in."""

    @fuzz(400)
    @given(streams())
    def check(case):
        lines, pieces = case
        splitter = make_splitter()
        out = [line for piece in pieces for line in splitter.decode(piece)]
        assert out + splitter.flush() == lines

    check()


def test_the_splitter_cuts_only_on_cr_lf_crlf():
    from bat.evaluation.run.sse_lines import EventStreamLines

    cuts_as_the_spec_says(EventStreamLines)


def test_the_check_catches_a_splitter_that_cuts_on_unicode_breaks():
    """Canary: httpx's own line decoder (str.splitlines' rules) fails the same check."""
    from httpx._decoders import LineDecoder

    with pytest.raises(AssertionError):
        cuts_as_the_spec_says(LineDecoder)


@pytest.mark.parametrize(
    ("pieces", "lines"),
    [
        (["a\r", "\nb\n"], ["a", "b"]),  # CR LF split over two pieces is one end
        (["a\r", "\r\n"], ["a", ""]),  # CR, then CR LF: an empty line
        (["a\u2028b\n"], ["a\u2028b"]),
        (["x" * 1000] * 100 + ["\n"], ["x" * 100_000]),
        (["tail"], ["tail"]),  # a stream that ends without a line end
        (["\n", "\n"], ["", ""]),
    ],
)
def test_hand_picked_streams(pieces, lines):
    from bat.evaluation.run.sse_lines import EventStreamLines

    splitter = EventStreamLines()
    out = [line for piece in pieces for line in splitter.decode(piece)]
    assert out + splitter.flush() == lines


def test_a_long_line_in_tiny_pieces_is_linear():
    from bat.evaluation.run.sse_lines import EventStreamLines

    splitter = EventStreamLines()
    started = time.perf_counter()
    for _ in range(200_000):
        assert splitter.decode("ab") == []
    assert splitter.decode("\n") == ["ab" * 200_000]
    assert time.perf_counter() - started < 2


# -- https: httpx's own transport, wrapped --------------------------------------------------


def test_the_wrapped_transport_gives_a2a_whole_events():
    """bat's wrapper round httpx's transport (what ``https://`` goes through), read by
    a2a-sdk's own SSE parser, against a real socket server sending a U+2028 event."""
    from a2a.client.transports.http_helpers import parse_sse_stream

    from bat.evaluation.run.sse_lines import EventStreamTransport

    data = '{"text": "one\u2028two\u2029three\u0085four"}'
    body = f"event: message\r\ndata: {data}\r\n\r\n".encode()
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()

    async def scenario() -> list[tuple[str, str]]:
        async def answer(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            for n in range(0, len(head + body), 7):  # in small pieces, cut anywhere
                writer.write((head + body)[n : n + 7])
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = EventStreamTransport(httpx.AsyncHTTPTransport(trust_env=False))
        try:
            async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
                request = client.build_request("GET", f"http://127.0.0.1:{port}/")
                response = await client.send(request, stream=True)
                try:
                    return [event async for event in parse_sse_stream(response)]
                finally:
                    await response.aclose()
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == [("message", data)]
