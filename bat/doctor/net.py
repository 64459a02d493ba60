"""A TCP connect with a short timeout: doctor's only way of asking whether something
listens. It connects to the configured address only and sends nothing."""

from __future__ import annotations

import socket


def probe(host: str, port: int, *, timeout_s: float = 1.0) -> str | None:
    """None when ``host:port`` accepts a TCP connection, else why not (a few words)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except socket.gaierror:
        return "unknown host name"
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
