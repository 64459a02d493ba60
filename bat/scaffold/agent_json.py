"""The project's ``agent.json`` (its A2A agent card), read strictly.

``bat build`` takes the image's name and version from it, ``bat doctor`` checks it and
an evaluation records it in the run's card, so one reader serves them all.
"""

from __future__ import annotations

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
    from bat.input_files import decode, json_lines, parse_json, read_bytes

    if Path(path).is_dir():
        return {}
    try:  # the bounded reader: a FIFO or a device named agent.json cannot hang a build
        data = read_bytes(path, limit=MAX_CARD_BYTES, kind="an agent card")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:
        raise InputError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    text = decode(path, data)
    card = parse_json(text, path, constants=False)
    if not isinstance(card, dict):
        raise InputError(f"{path}: an agent card is a JSON object, not {type(card).__name__}")
    for key in CARD_TEXT_KEYS:
        if key in card and not isinstance(card[key], str):
            raise InputError(
                f"{path}: {key} (line {json_lines(text).get((key,), '?')}): must be text, "
                f"not {type(card[key]).__name__}"
            )
    return card
