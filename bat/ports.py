"""What a TCP port is, wherever bat reads one: one rule, one message.

A port is a whole number from 1 to 65535, written as a number or in ASCII digits (a
flag, a ``.env`` line, a YAML value, a URL). Not a port: a boolean (YAML's ``yes``), a
float, digits of other scripts (``"٣".isdigit()`` is true and ``int("٣")`` is 3, but
no other program reads it so), a sign. Port 0 asks the system for any free port: only
where that is wanted (``bat eval.view --port 0``) does the caller allow it, with
``any_free=True``; where bat must know the port to reach it (the agent's ``PORT``, a
URL), 0 is refused like any other number outside the range.

The message is the same everywhere, the caller adding where the value was written:
``.env: PORT (line 2): '70000' is not a port number (1-65535)``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from bat.numbers import whole_number

HIGHEST = 65535
_SHOWN = 40  # characters of a refused value quoted in the message


def port_problem(value: object, *, any_free: bool = False) -> str | None:
    """What is wrong with ``value`` as a port, or None when it is one.

    ``any_free``: 0 is accepted too (the system's choice of a free port)."""
    lowest = 0 if any_free else 1
    wanted = f"{lowest}-{HIGHEST}" + (", 0: any free port" if any_free else "")
    if isinstance(value, bool) or not isinstance(value, int | str):
        return f"{_shown(repr(value))} is not a port number ({wanted})"
    text = str(value).strip()
    try:
        whole_number(text, lowest=lowest, highest=HIGHEST)
    except ValueError:
        return f"{_shown(repr(text))} is not a port number ({wanted})"
    return None


def port_number(value: object, *, any_free: bool = False) -> int:
    """``value`` as a port; a ValueError saying what is wrong when it is not one."""
    problem = port_problem(value, any_free=any_free)
    if problem:
        raise ValueError(problem)
    return whole_number(str(value), lowest=0)


def url_port_problem(url: str) -> str | None:
    """What is wrong with the port written in ``url``, or None (no port written is fine:
    the scheme's own is meant). A URL that cannot be split is a ValueError, for the
    caller to word (``http://[::1``)."""
    netloc = urlsplit(url).netloc
    host = netloc.rpartition("@")[2]
    _, bracket, after = host.rpartition("]")  # an IPv6 address: [::1]:8080
    tail = after if bracket else host
    if ":" not in tail:
        return None
    written = tail.rpartition(":")[2]
    return port_problem(written) if written else None


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
