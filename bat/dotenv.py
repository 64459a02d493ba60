"""Reading and in-place updates of an agent's ``.env`` (``bat set.env``, ``bat init.agent``).

Only the value of each named key changes: comments, blank lines, order, ``export``
prefixes, inline comments, line endings and every other line stay as they were. A key
that is not set yet goes right after its commented placeholder (``# KEY=...``) if the
file has one, else at the end. The file is replaced atomically, written through a
symbolic link, keeps its permission bits (a ``.env`` often holds API keys) and is
refused when the user made it read-only (see :mod:`bat.atomic`).

bat reads a ``.env`` as one ``KEY=value`` per line, the way ``docs/set.md`` describes.
A file bat cannot read that way (not UTF-8, a NUL byte, a bare carriage return, a quote
left open, which other tools read as a value spanning lines) is refused with the file,
key and line, and is never rewritten: rewriting what bat misread could change a value
the user never asked to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from bat.atomic import PRIVATE, write_text_atomic
from bat.errors import InputError, UsageError

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(
    r"^(?P<lead>\s*(?:export\s+)?)(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<eq>\s*=\s*)(?P<rest>.*)$"
)
_PLACEHOLDER = re.compile(r"^\s*#\s*(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=")
_BARE_VALUE = re.compile(r"[A-Za-z0-9_./:@+,-]*")
_LINE = re.compile(r"[^\n]*\n|[^\n]+$")
# Control characters a value may not hold: readers disagree on them, and some end lines.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


def read_env_text(path: Path) -> str:
    """The text of the ``.env`` at ``path``, checked so that bat may rewrite it."""
    if not path.exists():
        raise UsageError(f"no {path} here: run bat set.env from an agent's root folder")
    if not path.is_file():
        raise UsageError(f"{path}: not a regular file (bat reads and writes .env as a file)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        start = data.rfind(b"\n", 0, exc.start) + 1
        prefix = data[start : exc.start].decode("utf-8", "replace")
        raise InputError(
            f"{_where(path, prefix, line)}: byte 0x{data[exc.start]:02x} is not UTF-8 text; "
            "bat leaves the file as it is (save it as UTF-8)"
        ) from None
    check_env_text(text, path)
    return text


def check_env_text(text: str, path: Path | str = ".env") -> None:
    """Raise :class:`InputError` naming the line if bat cannot safely rewrite ``text``."""
    for number, line in enumerate(_lines(text), 1):
        body = line.rstrip("\r\n")
        if "\x00" in line:
            raise InputError(f"{_where(path, body, number)}: contains a NUL byte")
        if "\r" in body:
            raise InputError(
                f"{_where(path, body, number)}: a carriage return inside the line "
                "(only CRLF or LF line endings are read)"
            )
        match = _ASSIGNMENT.match(body)
        stripped = body.strip()
        if not match and "=" in stripped and not stripped.startswith("#"):
            name = stripped.removeprefix("export ").partition("=")[0].strip()
            raise InputError(
                f"{_where(path, body, number)}: {name[:40]!r} is not a variable name "
                "(letters, digits, _)"
            )
        if match and _unquoted(match["rest"]) is None:
            raise InputError(
                f"{_where(path, body, number)}: the quote of the value is not closed on its "
                "line (bat reads one KEY=value per line)"
            )


def read_dotenv(path: Path) -> dict[str, str]:
    """``{KEY: value}`` of the ``.env`` at ``path``, read by the same rules as
    :func:`read_env_text` (``{}`` when there is none): an evaluation starts the agent
    with these values, so a file bat would refuse to rewrite is not guessed at either."""
    from bat.input_files import CONFIG_LIMIT, read_text

    try:
        text = read_text(path, limit=CONFIG_LIMIT, kind="a .env file")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    check_env_text(text, path)
    return parse_env(text)


def dotenv_line(path: Path, key: str) -> int | None:
    """The line of ``path`` (a .env file) that sets ``key`` last, for a message; None if
    there is no such file or line."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return key_lines(text).get(key)


def parse_env(text: str) -> dict[str, str]:
    """``{KEY: value}`` of checked dotenv ``text``, as bat reads it (the last one wins)."""
    found: dict[str, str] = {}
    for line in _lines(text):
        match = _ASSIGNMENT.match(line.rstrip("\r\n"))
        if match:
            value = _unquoted(match["rest"])
            if value is not None:
                found[match["key"]] = value
    return found


def key_lines(text: str) -> dict[str, int]:
    """``{KEY: line number}`` of the last assignment of each key (for messages)."""
    numbers: dict[str, int] = {}
    for number, line in enumerate(_lines(text), 1):
        match = _ASSIGNMENT.match(line.rstrip("\r\n"))
        if match:
            numbers[match["key"]] = number
    return numbers


def update_env_file(path: Path, updates: Mapping[str, str]) -> None:
    """Set each ``KEY=value`` of ``updates`` in the dotenv file at ``path``."""
    if not updates:
        raise UsageError("nothing to set: give at least one value (see bat --help set.env)")
    text = read_env_text(path)
    updated = apply_updates(text, updates, path=path)
    if updated != text:
        write_text_atomic(path, updated, mode=PRIVATE, follow_links=True)


def apply_updates(text: str, updates: Mapping[str, str], *, path: Path | str = ".env") -> str:
    """The dotenv ``text`` with ``updates`` applied (a pure function, for testing).

    Raises :class:`InputError` for a key or value that cannot be written as one line, or
    for ``text`` that :func:`check_env_text` refuses.
    """
    check_env_text(text, path)
    quoted = {key: _quote(key, value, path) for key, value in updates.items()}
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = _lines(text)
    pending = dict(quoted)
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        match = _ASSIGNMENT.match(body)
        if not match or match["key"] not in quoted:
            continue
        comment = _inline_comment(match["rest"])
        value = quoted[match["key"]]
        if comment and not value:
            value = '""'  # `KEY= # note` would read as the value "# note"
        lines[index] = (
            f"{match['lead']}{match['key']}{match['eq']}{value}{comment}{line[len(body) :]}"
        )
        pending.pop(match["key"], None)
    if pending and lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    for key, value in pending.items():
        placeholders = [
            i
            for i, line in enumerate(lines)
            if _PLACEHOLDER.match(line) and _PLACEHOLDER.match(line)["key"] == key
        ]
        at = placeholders[-1] + 1 if placeholders else len(lines)
        lines.insert(at, f"{key}={value}{newline}")
    return "".join(lines)


def merge_missing(existing: str, fresh: str, *, path: Path | str = ".env") -> str:
    """``existing`` with every key of ``fresh`` that it lacks added; nothing else changes.

    ``init.agent --force`` uses it: the user's keys and values (an API key, a registry)
    are kept exactly as written, and keys a newer template brings are added.
    """
    have = parse_env(existing)
    missing = {key: value for key, value in parse_env(fresh).items() if key not in have}
    return apply_updates(existing, missing, path=path) if missing else existing


def _lines(text: str) -> list[str]:
    """Lines split at ``\\n`` only (``str.splitlines`` also splits at U+2028 and others)."""
    return _LINE.findall(text)


def _where(path: Path | str, body: str, number: int) -> str:
    """``path: KEY (line N)`` when the line assigns a key, else ``path (line N)``."""
    match = re.match(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=", body)
    return f"{path}: {match[1]} (line {number})" if match else f"{path} (line {number})"


def _quote(key: str, value: str, path: Path | str) -> str:
    """``value`` as bat writes it: bare when safe, else quoted so it reads back the same."""
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise InputError(
            f"{path}: invalid key {key!r}: use letters, digits and '_', not starting with a digit"
        )
    if not isinstance(value, str):
        raise InputError(f"{path}: {key}: the value must be text, not {type(value).__name__}")
    bad = _CONTROL.search(value)
    if bad:
        raise InputError(
            f"{path}: {key}: the value contains {_name(bad[0])}; a .env value is one line "
            "of printable text"
        )
    if _BARE_VALUE.fullmatch(value):
        return value
    if "$" in value:
        # Double quotes would expand ${VAR} in most readers; single quotes are literal.
        if "'" in value:
            raise InputError(
                f"{path}: {key}: a value with both $ and ' cannot be written literally in .env"
            )
        return f"'{value}'"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _name(char: str) -> str:
    names = {"\x00": "a NUL byte", "\n": "a newline", "\r": "a carriage return"}
    return names.get(char, f"the control character U+{ord(char):04X}")


def _unquoted(rest: str) -> str | None:
    """The value of an assignment's right-hand side; None if a quote is left open."""
    rest = rest.strip()
    if rest[:1] == "'":
        end = rest.find("'", 1)
        return None if end == -1 else rest[1:end]
    if rest[:1] == '"':
        chars, index = [], 1
        while index < len(rest):
            char = rest[index]
            if char == "\\" and index + 1 < len(rest):
                chars.append(rest[index + 1])
                index += 2
                continue
            if char == '"':
                return "".join(chars)
            chars.append(char)
            index += 1
        return None
    match = re.search(r"\s+#", rest)
    return (rest[: match.start()] if match else rest).strip()


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
                if not tail.lstrip().startswith("#"):
                    return ""
                # `KEY="a"# note` is a comment only after a quote; after a bare value it
                # needs a space before it.
                return tail if tail[:1].isspace() else " " + tail
            index += 1
        return ""
    match = re.search(r"\s+#", rest)
    return rest[match.start() :] if match else ""
