"""What the presets' readers share: bounded NDJSON lines, counts, and error words.

A CLI's output is untrusted text of any size: every reader takes at most
:data:`MAX_EVENTS` objects, skips lines over :data:`MAX_LINE` characters or that are not
JSON objects, and keeps at most :data:`MAX_TEXT` characters of any text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from bat.agents.kinds import Option
from bat.errors import InputError

MAX_EVENTS = 100_000  # events read of one turn
MAX_LINE = 1_000_000  # characters of one line; a longer one is skipped
MAX_TEXT = 100_000  # characters kept of a reply or a tool's result
MAX_MESSAGE = 500  # characters of an error's message
# What an error said, when it carries no HTTP status: the words CLIs and SDKs use.
WORDS = (
    (
        re.compile(r"authenticat|api.?key|unauthori[sz]ed|permission_denied|\b40[13]\b", re.I),
        "authentication_failed",
    ),
    (
        re.compile(r"rate.?limit|quota|resource.?exhausted|too many requests|\b429\b", re.I),
        "rate_limited",
    ),
    (
        re.compile(r"connect|fetch failed|timed? ?out|unavailable|\b5\d\d\b", re.I),
        "model_error",
    ),
)


def events(stdout: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``stdout``, one a line, bounded; other lines skipped."""
    count = 0
    for line in stdout.splitlines():
        if count >= MAX_EVENTS:
            return
        line = line.strip()
        if not line.startswith("{") or len(line) > MAX_LINE:
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            count += 1
            yield event


def kind_of(status: int | None, said: str, words: tuple = WORDS) -> str:
    """An agent error kind from an HTTP status, else from the words of the message (a
    preset passes its CLI's own ``words``)."""
    if status in (401, 403):
        return "authentication_failed"
    if status == 429:
        return "rate_limited"
    if status is not None and status >= 400:
        return "model_error"
    for pattern, kind in words:
        if pattern.search(said[:2000]):
            return kind
    return "unknown"


def count(value: Any) -> int:
    """A token count: a non-negative whole number, else 0."""
    return value if type(value) is int and value >= 0 else 0


def status_of(value: Any) -> int | None:
    """An HTTP status code, when ``value`` is one."""
    return value if type(value) is int and 100 <= value <= 599 else None


def shown(text: str) -> str:
    """An error's message: one line, bounded."""
    return " ".join(text[: MAX_MESSAGE * 4].split())[:MAX_MESSAGE]


def last_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return shown(lines[-1]) if lines else ""


def common_options(program: str) -> tuple[Option, ...]:
    return (
        Option("executable", program, f"the {program} program (a path, or a name on PATH)"),
        Option("extra_args", [], "more arguments, after bat's"),
    )


def check_common(options: dict[str, Any]) -> None:
    """The options every preset has: a program and a list of extra arguments."""
    extra = options.get("extra_args")
    if not isinstance(extra, list) or not all(isinstance(arg, str) for arg in extra):
        raise InputError("options: extra_args must be a list of strings")
    if not isinstance(options.get("executable"), str) or not options["executable"]:
        raise InputError("options: executable must be a program's name or path")


def check_choice(options: dict[str, Any], name: str, choices: tuple[str, ...]) -> None:
    value = options.get(name)
    if value not in choices:
        raise InputError(f"options: {name} {str(value)[:40]!r} is none of {', '.join(choices)}")
