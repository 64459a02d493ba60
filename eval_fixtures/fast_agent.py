"""The fast agent: A2A 1.0 over JSON-RPC, written on asyncio alone, for measuring bat itself.

Why: the harness's own limit cannot be seen against an agent that is slower than it. The
echo agent runs on a2a-sdk's server (Starlette, uvicorn, protobuf), which answers a few
hundred messages a second on this machine's cores, so a benchmark against it measures
the agent. This one answers ``SendMessage`` with a completed task whose artifact is
``echo: <text>``, parsing and writing HTTP/1.1 by hand with keep-alive: a few tens of
microseconds a message. It speaks the same wire format as a2a-sdk's server (the card at
``/.well-known/agent-card.json``, non-streaming, camelCase proto JSON), so bat's client
reads it as it reads any 1.0 agent.

``--port`` / ``PORT`` (default 9900), ``--latency-ms`` / ``LATENCY_MS`` (default 0: a
sleep before each answer).
Prints ``listening on http://127.0.0.1:PORT``. Benchmarks only (``benchmarks/``); nothing
of bat imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid

HOST = "127.0.0.1"


def card(port: int) -> bytes:
    return json.dumps(
        {
            "name": "FastAgent",
            "description": "Echoes the text of each message, as fast as it can.",
            "supportedInterfaces": [
                {
                    "url": f"http://{HOST}:{port}",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ],
            "version": "1.0.0",
            "capabilities": {"streaming": False},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["echo"]}],
        }
    ).encode()


def answer(request: dict) -> dict:
    """The JSON-RPC reply to one request: a completed task for ``SendMessage``."""
    if request.get("method") != "SendMessage":
        return {
            "jsonrpc": "2.0",
            "id": request.get("id"),
            "error": {"code": -32601, "message": "Method not found"},
        }
    message = request["params"]["message"]
    text = " ".join(part.get("text", "") for part in message.get("parts", []))
    task_id = message.get("taskId") or uuid.uuid4().hex
    return {
        "jsonrpc": "2.0",
        "id": request.get("id"),
        "result": {
            "task": {
                "id": task_id,
                "contextId": message.get("contextId", ""),
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "a1", "parts": [{"text": f"echo: {text}"}]}],
            }
        },
    }


def reply(status: bytes, body: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, card_body: bytes, latency: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head[:-4].split(b"\r\n")
            method, target, _ = request_line.split(b" ", 2)
            length = 0
            for line in lines:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            if method == b"GET" and target.startswith(b"/.well-known/agent-card.json"):
                writer.write(reply(b"200 OK", card_body))
            elif method == b"POST":
                if latency:
                    await asyncio.sleep(latency)
                writer.write(reply(b"200 OK", json.dumps(answer(json.loads(body))).encode()))
            else:
                writer.write(reply(b"404 Not Found", b'{"detail": "Not Found"}'))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(prog="eval_fixtures.fast_agent")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "9900")))
    parser.add_argument("--latency-ms", type=int, default=int(os.environ.get("LATENCY_MS", "0")))
    args = parser.parse_args()
    port, latency = args.port, args.latency_ms / 1000
    card_body = card(port)
    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, card_body, latency), HOST, port, backlog=1024
    )
    print(f"listening on http://{HOST}:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
