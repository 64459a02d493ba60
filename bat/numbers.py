"""What a whole number is wherever a user or a peer writes one as text: one rule.

A flag (``--shard 2/4``), a CI variable (``CI_NODE_INDEX``), a query string of the
viewer (``?page=3``), a header (``Last-Event-ID``) all spell numbers the same way:
ASCII digits, with spaces around allowed, of a bounded length. Not a number here:
digits of other scripts or superscripts (``"²".isdigit()`` is true, and ``int("²")``
raises; ``int("٣")`` is 3, but no other program reads it so), a sign, an underscore
(``int("1_0")`` is 10), thousands of digits (``int()`` of 5,000 digits is refused by
Python, and its cost grows with the square of the length).

``whole_number`` returns the number or raises ``ValueError`` with a message the caller
prefixes with where the text was written (``--shard '²/3': expected ...``); a caller that
falls back to a default instead (a page number in a link) catches it.
"""

from __future__ import annotations

DIGITS = 18  # at most: every count bat reads fits, and int() of it stays cheap
_SHOWN = 40  # characters of a refused text quoted in a message


def whole_number(text: object, *, lowest: int = 0, highest: int = 10**DIGITS - 1) -> int:
    """The whole number ``text`` spells (see the module), when it lies in
    [``lowest``, ``highest``]; else ``ValueError`` saying what was expected."""
    wanted = f"a whole number from {lowest}" + (
        f" to {highest}" if highest < 10**DIGITS - 1 else ""
    )
    if isinstance(value := text, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected {wanted}, got {_shown(repr(value))}")
    if isinstance(value, int):
        number = value
    else:
        digits = value.strip()
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(f"expected {wanted}, got {_shown(repr(value))}")
        significant = digits.lstrip("0") or "0"
        if len(significant) > DIGITS:
            raise ValueError(f"expected {wanted}, got a number of {len(significant)} digits")
        number = int(significant)
    if not lowest <= number <= highest:
        raise ValueError(f"expected {wanted}, got {number}")
    return number


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
