"""The settings block of a generated Dockerfile, kept equal to ``.env`` by ``set.env``.

``.env`` never goes into an image (``.dockerignore``), so a container gets PORT, MODEL and
MODEL_PROVIDER from the Dockerfile's ``ENV`` instead, and ``EXPOSE`` names the port. Those
lines sit between bat's marker lines; ``bat set.env`` rewrites just that block with the
values it set, so the image listens and answers as ``uv run .`` does. A Dockerfile whose
block was removed is left as it is (the caller says so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

BEGIN = "# >>> bat: settings (maintained by `bat set.env`) >>>"
END = "# <<< bat: settings <<<"
# The .env keys the block carries, in the order they are written.
KEYS = ("PORT", "MODEL", "MODEL_PROVIDER")
_BLOCK = re.compile(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), re.S)
_PAIR = re.compile(r"\b([A-Z_][A-Z0-9_]*)=(\S+)")


def settings_block(settings: Mapping[str, str]) -> str:
    """The block's lines for ``settings`` (keys of :data:`KEYS`), markers included."""
    pairs = [f"{key}={settings[key]}" for key in KEYS if key in settings]
    env = " \\\n    ".join(pairs)
    return f"{BEGIN}\nENV {env}\nEXPOSE {settings['PORT']}\n{END}"


def planned_dockerfile(path: Path, updates: Mapping[str, str]) -> tuple[str, str] | None:
    """(old text, new text) of ``path`` with ``updates`` (.env keys) in its block; None
    if there is no such file or it has no block. Nothing is written here, so the caller
    can refuse before it changes ``.env``: an unreadable or read-only Dockerfile is an
    InputError naming it."""
    from bat.atomic import check_writable
    from bat.errors import InputError

    if not path.exists():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: byte {exc.start} is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror}") from None
    match = _BLOCK.search(text)
    if match is None:
        return None
    settings = dict(_PAIR.findall(match[1]))
    settings.update({key: value for key, value in updates.items() if key in KEYS})
    if "PORT" not in settings:
        return None
    fresh = text[: match.start()] + settings_block(settings) + text[match.end() :]
    if fresh != text:
        check_writable(path)
    return text, fresh
