"""Serving the viewer: the listening socket, the token rule and uvicorn, in this process.

The socket is bound here, before uvicorn starts, so a port in use is one clear error
(with the next free port to try) rather than a server log, and ``--port 0`` serves on
a port the system picks (the printed address says which).

Binding to anything but the loopback interface shows every run to the network, so it
needs a token: the one given, or one made here (:func:`secrets.token_urlsafe`) and
printed. A token given with a loopback address is required all the same.
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bat.errors import InputError, UsageError
from bat.ports import HIGHEST, port_problem

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Listening:
    sock: socket.socket
    host: str
    port: int
    token: str | None
    token_made: bool

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        elif ":" in host:
            host = f"[{host}]"
        query = f"?token={quote(self.token, safe='')}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"


def listen(host: str, port: int, token: str | None) -> Listening:
    """The socket the viewer will serve on, and the token it will require (if any)."""
    problem = port_problem(port, any_free=True)
    if problem:
        raise UsageError(f"--port: {problem}")
    token_made = False
    if token is not None and not token.strip():
        raise UsageError("--token is empty: give a token, or leave --token out")
    if token is None and not is_loopback(host):
        token, token_made = secrets.token_urlsafe(24), True
    try:
        sock = _bound(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            free = next_free_port(host, port)
            hint = f"; try --port {free}" if free else ""
            raise UsageError(f"port {port} on {host} is in use{hint}") from None
        if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"--host {host}: not an address of this machine") from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return Listening(sock, host, sock.getsockname()[1], token, token_made)


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def next_free_port(host: str, port: int) -> int | None:
    """The first port after ``port`` nothing listens on (None: none of the next 100)."""
    for candidate in range(port + 1, min(port + 101, HIGHEST + 1)):
        try:
            _bound(host, candidate).close()
        except OSError:
            continue
        return candidate
    return None


def serve(
    folder: Path,
    listening: Listening,
    *,
    open_browser: bool = False,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the viewer of ``folder`` until Ctrl-C (or SIGTERM); returns when stopped.

    uvicorn stops on Ctrl-C: it closes the event streams, finishes the requests under
    way and gives the interrupt back, which ends here (a viewer is stopped this way).
    """
    import uvicorn

    from bat.evaluation.present.view.app import make_app

    if not folder.is_dir():
        listening.sock.close()
        raise InputError(f"{folder} is not a folder (give the folder of your runs with -f)")
    app = make_app(folder, token=listening.token, warm=True, bound=listening.host)
    if listening.token_made:
        announce(f"The viewer is reachable beyond this machine: its token is {listening.token}")
    announce(f"Serving the runs of {folder} at {listening.url} (Ctrl-C stops)")
    if open_browser:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(listening.url,), daemon=True).start()
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[listening.sock])
    except KeyboardInterrupt:
        pass
    finally:
        listening.sock.close()


class Beside:
    """A viewer served from a thread of this process, beside a run (``eval.run --view``)."""

    def __init__(self, folder: Path, listening: Listening) -> None:
        import uvicorn

        from bat.evaluation.present.view.app import make_app

        self.listening = listening
        config = uvicorn.Config(
            make_app(folder, token=listening.token, bound=listening.host),
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="bat-view", daemon=True)

    def _run(self) -> None:
        try:
            # Not the main thread: uvicorn leaves the signals (Ctrl-C) to the run.
            self.server.run(sockets=[self.listening.sock])
        finally:
            self.listening.sock.close()

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the event streams and stop serving (waits at most ``timeout`` seconds)."""
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout)


def serve_beside(
    folder: Path, port: int | None, *, announce: Callable[[str], None] = print
) -> Beside:
    """Start a viewer of ``folder`` in a thread, on loopback: on ``port`` (a port in use
    is an error), or on 8765, or the next free port when 8765 is taken. The caller stops
    it (``eval.run --view``: when the run's chain ends); the process's end stops it too."""
    import atexit

    if port is None:
        try:
            listening = listen(DEFAULT_HOST, DEFAULT_PORT, None)
        except UsageError:
            listening = listen(DEFAULT_HOST, 0, None)
    else:
        listening = listen(DEFAULT_HOST, port, None)
    folder.mkdir(parents=True, exist_ok=True)
    beside = Beside(folder, listening)
    beside.start()
    atexit.register(beside.stop)
    announce(f"Watch this run at {listening.url} (the viewer stops when the run ends)")
    return beside
