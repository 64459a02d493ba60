"""Reading the JSON files of a run folder: an object, or one clear error.

Every reader of the log (bat's own files and bat-cli 2026.10's) starts here, so a file
that is not JSON, not an object, or spells half a UTF-16 pair alone is refused or
repaired the same way whichever part of bat reads it.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from bat.errors import InputError


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object; any other content is an :class:`InputError`.

    Strict JSON only: ``NaN``, ``Infinity`` and numbers too large for a float (``1e999``)
    are refused, as they are by every other JSON reader. Python would read them, and a
    NaN compares false with everything: a baseline holding one would let any drop pass.
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = strict_loads(text)
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is malformed: expected a JSON object")
    if SURROGATE_ESCAPE.search(text):
        data = without_surrogates(data)
    return data


def strict_loads(text: str) -> Any:
    """``json.loads`` of strict JSON: a ValueError for ``NaN``, ``Infinity``, ``1e999``."""
    return json.loads(text, parse_constant=_not_a_number, parse_float=finite_float)


def _not_a_number(word: str) -> float:
    raise ValueError(f"{word} is not a number JSON allows")


def finite_float(text: str) -> float:
    """A JSON number as a float; a ValueError when it is too large for one (``1e999``)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


# JSON may spell half of a UTF-16 pair alone ("\ud800"); Python then holds a string that
# cannot be written as UTF-8 at all, so no label, table or file could be made of it.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, list):
        return [without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value
