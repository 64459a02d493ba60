"""A registry user and password for ``bat push --username``; the password is never shown.

The password comes from ``BAT_DOCKER_PASSWORD`` when set, else from standard input: the
first line of a pipe (``pass show registry | bat push --username me``), or typed at a
prompt that does not echo when standard input is a terminal. It is never a flag (flags
land in shell history and process lists), never written to bat's configuration, its
logs or its output, and the ``repr`` of :class:`Credentials` hides it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

from bat.errors import UsageError

ENV_PASSWORD = "BAT_DOCKER_PASSWORD"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Credentials(username={self.username!r}, password=<hidden>)"


def read_credentials(
    username: str, registry: str, *, stdin: TextIO | None = None, environ=None
) -> Credentials:
    """``username`` with its password from ``BAT_DOCKER_PASSWORD`` or standard input."""
    environ = os.environ if environ is None else environ
    name = username.strip()
    if not name or any(ch.isspace() for ch in name):
        raise UsageError(f"invalid --username {username!r}: give the registry user name")
    password = environ.get(ENV_PASSWORD) or ""
    if not password:
        stream = sys.stdin if stdin is None else stdin
        if stream is None or stream.closed:
            password = ""
        elif stream.isatty():
            import getpass

            try:
                password = getpass.getpass(f"Password for {name} at {registry}: ")
            except EOFError:
                password = ""
        else:
            password = (stream.readline() or "").rstrip("\r\n")
    if not password:
        raise UsageError(
            f"no password for --username {name}: pipe it on standard input or set "
            f"{ENV_PASSWORD} (it is never taken as a flag)"
        )
    return Credentials(name, password)
