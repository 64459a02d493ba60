"""Reading what Docker says during a build or a push, and the one-line errors made from it.

Both paths speak the classic builder's language: the docker SDK's build API (local) and
``docker build`` run with ``DOCKER_BUILDKIT=0`` (remote) print ``Step 3/5 : RUN ...``
before each step, then the step's output, and an error message if a step fails. So one
tracker follows either, knows the current step, and words a failure as one line that
names the step and the log file. Push errors are sorted into the three a user can act
on: refused credentials, an unreachable registry, and anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bat.errors import OperationError
from bat.images.archive import LogFile
from bat.images.display import BuildDisplay, PushDisplay

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")
# Whole words only: a registry on port 50401 must not read as "401 Unauthorized".
_AUTH_WORDS = re.compile(
    r"\b(unauthorized|authentication required|401|denied|incorrect username or password"
    r"|no basic auth credentials)\b"
)
_REACH_WORDS = re.compile(
    r"\b(connection refused|no such host|i/o timeout|network is unreachable|no route to host"
    r"|connection reset|dial tcp|timeout|eof)\b"
)


def one_line(text: str, limit: int = 240) -> str:
    """``text`` folded onto one line and shortened to ``limit`` characters."""
    folded = " ".join(str(text).split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret replaced by ``***`` (belt and braces: none is expected)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


class BuildTracker:
    """Follows a build's output: shows steps, logs every line, words a failure."""

    def __init__(self, display: BuildDisplay, log: LogFile) -> None:
        self.display = display
        self.log = log
        self.step: tuple[str, str, str] | None = None  # (number, total, instruction)

    def feed(self, text: str) -> None:
        """One line of builder output."""
        line = _ANSI.sub("", text).rstrip("\r\n")
        if not line.strip():
            return
        self.log.write(line)
        match = _STEP.match(line.strip())
        if match:
            self.step = (match[1], match[2], match[3].strip())
            self.display.step(f"Step {match[1]}/{match[2]} : {one_line(match[3], 200)}")
        else:
            self.display.output(line)

    def failure(self, message: str) -> OperationError:
        """The one-line error of a failed build: the step, Docker's reason, the log."""
        self.display.failed()
        self.log.write(f"ERROR: {message}")
        if self.step:
            number, total, instruction = self.step
            where = f"step {number}/{total} ({one_line(instruction, 80)}) failed"
        else:
            where = "the build failed before its first step"
        return OperationError(f"{where}: {one_line(message, 300)} (full log: {self.log.shown()})")


class PushTracker:
    """Follows a push: layer progress, the log, the digest at the end."""

    def __init__(self, display: PushDisplay, log: LogFile) -> None:
        self.display = display
        self.log = log
        self.digest: str | None = None

    def event(self, layer: str | None, state: str, current: int = 0, total: int = 0) -> None:
        """One progress event (the docker SDK's ``id``/``status``/``progressDetail``)."""
        if layer and state not in ("Preparing", "Waiting"):
            self.display.layer(layer, state, current, total)
        if state and not (state == "Pushing" and current):
            self.log.write(f"{layer}: {state}" if layer else state)
        self.found(state)

    def text(self, line: str) -> None:
        """One line of ``docker push`` output (the remote path)."""
        line = line.rstrip("\r\n")
        self.log.write(line)
        layer, sep, state = line.partition(": ")
        if sep and re.fullmatch(r"[0-9a-f]{12}", layer):
            self.display.layer(layer, state.strip())
        self.found(line)

    def found(self, text: str) -> None:
        match = _DIGEST.search(text)
        if match:
            self.digest = match[1]


def registry_error(
    message: str, *, registry: str, ref: str, username: str | None, log: LogFile | None = None
) -> OperationError:
    """The one-line error for a failed login or push, with a hint for what to check."""
    short = one_line(message, 200)
    where = f" (log: {log.shown()})" if log is not None else ""
    low = message.lower()
    if _AUTH_WORDS.search(low):
        if username:
            who = f"the credentials of '{username}'"
            hint = "check --username and the password (stdin or BAT_DOCKER_PASSWORD)"
        else:
            who = "the push (no credentials, or your Docker credentials were refused)"
            hint = f"run docker login {registry}, or give --username and a password"
        return OperationError(f"registry {registry} refused {who}: {short}; {hint}{where}")
    if "http response to https client" in low:
        return OperationError(
            f"registry {registry} answers plain HTTP but the Docker engine expects HTTPS: "
            f"{short}; add it to the engine's insecure-registries or serve it over TLS{where}"
        )
    if "x509" in low or "certificate" in low:
        return OperationError(
            f"registry {registry}: its TLS certificate was refused: {short}; "
            f"check the address or the engine's trusted certificates{where}"
        )
    if _REACH_WORDS.search(low):
        return OperationError(
            f"cannot reach registry {registry}: {short}; check --docker-registry / "
            f"BAT_DOCKER_REGISTRY and that the registry is running{where}"
        )
    return OperationError(f"push of {ref} failed: {short}{where}")
