"""The project's ``agent.json`` (its A2A agent card), read strictly.

``bat build`` takes the image's name and version from it, ``bat doctor`` checks it and
an evaluation records it in the run's card, so one reader serves them all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bat.errors import InputError

MAX_CARD_BYTES = 1_000_000  # a card is a few kB; a bigger file is a mistake, not a card
CARD_TEXT_KEYS = ("name", "version")  # what bat itself reads from agent.json


def read_card_file(path: Path) -> dict[str, Any]:
    """The project's ``agent.json`` as a dict; ``{}`` when there is none.

    Strict, because a lenient reader turns a broken card into a silently different
    image name: the file must be UTF-8 JSON holding an object, with no repeated key and
    no ``NaN``/``Infinity`` (not JSON, though Python reads them), and ``name`` and
    ``version`` must be text. Anything else is an :class:`InputError` naming the file.
    """
    from bat.input_files import read_bytes

    if Path(path).is_dir():
        return {}
    try:  # the bounded reader: a FIFO or a device named agent.json cannot hang a build
        data = read_bytes(path, limit=MAX_CARD_BYTES, kind="an agent card")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:
        raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{path} (line {line}): not UTF-8 text (byte {exc.start})") from None
    try:
        card = json.loads(text, object_pairs_hook=_no_repeats, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} (line {exc.lineno}): invalid JSON: {exc.msg}") from None
    except _CardError as exc:
        line = _line_of(text, exc.pattern, exc.nth)
        raise InputError(f"{path}: {exc.key} (line {line}): {exc.problem}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # a number past Python's limit on the digits of an integer
        raise InputError(f"{path}: invalid JSON: {str(exc).split(';')[0]}") from None
    if not isinstance(card, dict):
        raise InputError(f"{path}: an agent card is a JSON object, not {type(card).__name__}")
    for key in CARD_TEXT_KEYS:
        if key in card and not isinstance(card[key], str):
            raise InputError(
                f"{path}: {key} (line {_key_line(text, key)}): must be text, "
                f"not {type(card[key]).__name__}"
            )
    return card


class _CardError(ValueError):
    """JSON that Python reads but a card must not hold; raised inside json.loads, where
    no position is known, so it carries what finds the line afterwards (the ``nth``
    match of ``pattern``)."""

    def __init__(self, key: str, problem: str, pattern: str, nth: int) -> None:
        super().__init__(problem)
        self.key, self.problem, self.pattern, self.nth = key, problem, pattern, nth


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    card: dict[str, Any] = {}
    for key, value in pairs:
        if key in card:  # Python would keep the last silently; which one did the author mean?
            shown = json.dumps(key)
            pattern = re.escape(shown) + r"\s*:"
            raise _CardError(shown[:60], "the key is given twice in one object", pattern, 2)
        card[key] = value
    return card


def _no_constants(name: str) -> Any:
    pattern = r"[:,\[]\s*-?" + name
    raise _CardError(name, "not JSON: use a number or a string", pattern, 1)


def _line_of(text: str, pattern: str, nth: int) -> int | str:
    """The line of the ``nth`` match of ``pattern`` in ``text`` ("?" if there is none)."""
    for count, match in enumerate(re.finditer(pattern, text), 1):
        if count == nth:
            return text.count("\n", 0, match.start()) + 1
    return "?"


def _key_line(text: str, key: str) -> int:
    """The line of the first top-level ``"key":`` (keys of nested objects are skipped)."""
    depth, line, index, in_string = 0, 1, 0, False
    needle = json.dumps(key)
    while index < len(text):
        char = text[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            if depth == 1 and text.startswith(needle, index):
                return line
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        if char == "\n":
            line += 1
        index += 1
    return line
