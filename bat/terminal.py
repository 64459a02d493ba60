"""Text from files, made safe to print: control characters written out as ``\\xNN``.

Run folders, datasets and configuration files are input, and what bat prints quotes
them (a task id, a model label, a key). An ESC from such a file must not reach the
terminal raw, where it could recolour, move the cursor or rewrite what was printed
before; a NUL or a bell has no business there either. Newlines and tabs are kept: the
caller decides the layout.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """``text`` with every control character but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", str(text))
