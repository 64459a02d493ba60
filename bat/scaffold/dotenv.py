"""In-place updates of an agent's ``.env`` (``bat set.env``).

Only the value of each named key changes: comments, blank lines, order, ``export``
prefixes, inline comments, line endings and every other line stay as they were. A key
that is not set yet goes right after its commented placeholder (``# KEY=...``) if the
file has one, else at the end. The file is replaced atomically and keeps
its permission bits, since a ``.env`` often holds API keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from bat.atomic import write_text_atomic
from bat.errors import InputError, UsageError

_ASSIGNMENT = re.compile(
    r"^(?P<lead>\s*(?:export\s+)?)(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<eq>\s*=\s*)(?P<rest>.*)$"
)
_PLACEHOLDER = re.compile(r"^\s*#\s*(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=")
_BARE_VALUE = re.compile(r"[A-Za-z0-9_./:@+,-]*")


def update_env_file(path: Path, updates: Mapping[str, str]) -> None:
    """Set each ``KEY=value`` of ``updates`` in the dotenv file at ``path``."""
    if not updates:
        raise UsageError("nothing to set: give at least one value (see bat --help set.env)")
    if not path.is_file():
        raise UsageError(f"no {path} here: run bat set.env from an agent's root folder")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text") from None
    write_text_atomic(path, apply_updates(text, updates))


def apply_updates(text: str, updates: Mapping[str, str]) -> str:
    """The dotenv ``text`` with ``updates`` applied (a pure function, for testing)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    pending = dict(updates)
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        match = _ASSIGNMENT.match(body)
        if not match or match["key"] not in updates:
            continue
        value = _quote(updates[match["key"]])
        comment = _inline_comment(match["rest"])
        lines[index] = (
            f"{match['lead']}{match['key']}{match['eq']}{value}{comment}{line[len(body) :]}"
        )
        pending.pop(match["key"], None)
    if pending and lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    for key, value in pending.items():
        placeholders = [
            i
            for i, line in enumerate(lines)
            if _PLACEHOLDER.match(line) and _PLACEHOLDER.match(line)["key"] == key
        ]
        at = placeholders[-1] + 1 if placeholders else len(lines)
        lines.insert(at, f"{key}={_quote(value)}{newline}")
    return "".join(lines)


def _quote(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise InputError("a .env value cannot span lines")
    if _BARE_VALUE.fullmatch(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _inline_comment(rest: str) -> str:
    """The `` # comment`` after the old value (kept), or ``""``."""
    rest = rest.rstrip()
    if rest[:1] in ("'", '"'):
        quote = rest[0]
        index = 1
        while index < len(rest):
            if rest[index] == "\\" and quote == '"':
                index += 2
                continue
            if rest[index] == quote:
                tail = rest[index + 1 :]
                return tail if tail.lstrip().startswith("#") else ""
            index += 1
        return ""
    match = re.search(r"\s+#", rest)
    return rest[match.start() :] if match else ""
