"""The type of every bat setting, and the strict reading of a value from any source.

Invoke converts a ``BAT_*`` variable by the type of the key's default, and that
conversion is loose: any non-empty string is a true boolean, so
``BAT_IMAGES_ACCEPT_NEW_HOST_KEY=false`` would turn trust-on-first-use *on*. Files are
not converted at all (``accept_new_host_key: 'false'`` is a true string), a typo in a key
is silently ignored, and a section of the wrong shape (``init: 5``) is a traceback in
Invoke's merge. So bat reads every value of every layer itself, through the
:class:`Schema` built here, and refuses what it cannot read with a message naming the
setting and where the value came from.

The schema comes from the command groups' ``ns.configure`` defaults: a key's default
gives its type (``False``: a boolean, ``9900``: a number, ``"."``: text). A key whose
default is ``None`` has no type to give, so :data:`EXPLICIT_KINDS` names it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")

_WHOLE = re.compile(r"[+-]?[0-9]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ufffe\uffff]")


class Invalid(ValueError):
    """A value that does not fit its setting; the text says what is wrong with it."""


def shown(value: Any) -> str:
    """A value quoted for an error line, control characters escaped, long ones cut."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def boolean(value: Any) -> bool:
    """``true/false``, ``yes/no``, ``on/off``, ``1/0`` in any case (and real booleans).

    Nothing else: a word bat does not know must not silently mean true.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise Invalid(f"expected true or false (also yes/no, on/off, 1/0), got {shown(value)}")


def whole_number(value: Any) -> int:
    """An integer, or a string of digits; not a boolean, not a fraction."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    raise Invalid(f"expected a whole number, got {shown(value)}")


def port(value: Any) -> int:
    """A TCP port: a whole number from 1 to 65535."""
    try:
        number = whole_number(value)
    except Invalid:
        raise Invalid(f"expected a port number (1-65535), got {shown(value)}") from None
    if not 1 <= number <= 65535:
        raise Invalid(f"expected a port number (1-65535), got {number}")
    return number


def number(value: Any) -> float:
    """A finite number (``.inf`` and ``.nan`` are not amounts of anything)."""
    if isinstance(value, bool):
        raise Invalid(f"expected a number, got {shown(value)}")
    try:
        result = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise Invalid(f"expected a number, got {shown(value)}") from None
    if not math.isfinite(result):
        raise Invalid(f"expected a finite number, got {shown(value)}")
    return result


def text(value: Any) -> str:
    """Non-empty text without control characters (a path, a name, a host).

    A YAML number or boolean is refused rather than turned into text: ``version: 1.10``
    reads as ``1.1`` and ``model: no`` as ``False``, so only quotes keep what was meant.
    """
    if isinstance(value, (bool, int, float)):
        raise Invalid(f"expected text, got {shown(value)} (write it in quotes)")
    if not isinstance(value, str):
        raise Invalid(f"expected text, got a {_kind_of(value)}")
    if not value.strip():
        raise Invalid("is empty (to use the default, leave the setting out or unset it)")
    if _CONTROL.search(value):
        raise Invalid(f"contains a control character: {shown(value)}")
    return value


def names(value: Any) -> str:
    """Comma-separated names, or (in a file) a list of them: ``planner,critic``."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise Invalid("is an empty list (to use the default, leave the setting out)")
        return ",".join(text(item) for item in value)
    return text(value)


@dataclass(frozen=True)
class Kind:
    """How one setting is read: a converter, and whether ``null`` (no value) is allowed."""

    convert: Callable[[Any], Any]
    optional: bool = False

    def read(self, value: Any) -> Any:
        if value is None:
            if self.optional:
                return None
            raise Invalid("must have a value (leave the setting out to use its default)")
        return self.convert(value)


def image(value: Any) -> bool | str:
    """``true`` (the image ``bat build`` tags) or an image reference (text)."""
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return True  # from a file, or BAT_EVAL_IMAGE=true in the environment
    return text(value)


BOOLEAN = Kind(boolean)
WHOLE_NUMBER = Kind(whole_number)
PORT = Kind(port)
NUMBER = Kind(number)
TEXT = Kind(text)
NAMES = Kind(names)
OPTIONAL_TEXT = Kind(text, optional=True)

# The settings whose default is None (or whose default's type says too little).
EXPLICIT_KINDS: dict[str, Kind] = {
    "init.agent.port": PORT,
    "init.agent.clients": NAMES,
    "init.agent.model": OPTIONAL_TEXT,
    "eval.run_dir": OPTIONAL_TEXT,
    "eval.image": Kind(image, optional=True),
    "docker.registry": OPTIONAL_TEXT,
    "docker.repo": OPTIONAL_TEXT,
    "images.version": OPTIONAL_TEXT,
    "images.network": OPTIONAL_TEXT,
    "images.host": OPTIONAL_TEXT,
    "images.identity": OPTIONAL_TEXT,
    "images.username": OPTIONAL_TEXT,
}


def kind_of_default(default: Any) -> Kind | None:
    """The kind a default value implies; None when it implies nothing (a None default)."""
    if isinstance(default, bool):
        return BOOLEAN
    if isinstance(default, int):
        return WHOLE_NUMBER
    if isinstance(default, float):
        return NUMBER
    if isinstance(default, str):
        return TEXT
    return None


@dataclass
class Schema:
    """bat's settings by dotted key, and the sections of Invoke that files may also hold."""

    kinds: dict[str, Kind] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    invoke_defaults: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_defaults(
        cls, defaults: Mapping[str, Any], invoke_defaults: Mapping[str, Any]
    ) -> Schema:
        """The schema of the settings in ``defaults`` (the merged ``ns.configure`` blocks)."""
        schema = cls(defaults=dict(defaults), invoke_defaults=dict(invoke_defaults))
        for key, default in _leaves(defaults):
            kind = EXPLICIT_KINDS.get(key) or kind_of_default(default)
            # A None default with no explicit kind (a group of another project): text.
            schema.kinds[key] = kind or OPTIONAL_TEXT
        return schema

    def kind(self, key: str) -> Kind | None:
        return self.kinds.get(key)

    def check_layer(self, data: Mapping[str, Any], where: Callable[[str], str]) -> dict:
        """``data`` of one file, every value read by its kind; an error names the key.

        ``where(dotted_key)`` words the place for a message (``bat.yaml: eval.file (line
        3)``). A section that is ``null`` (all its keys commented out) counts as empty.
        Invoke's own sections (``run``, ``tasks``, ...) are kept as they are once their
        shape fits Invoke's, their booleans read as strictly as bat's.
        """
        checked: dict[str, Any] = {}
        for key, value in data.items():
            name = str(key)
            if name in self.defaults:
                section = self._section(value, self.defaults[name], name, where)
                if section is not None:
                    checked[name] = section
            elif name in self.invoke_defaults:
                checked[name] = _invoke_value(value, self.invoke_defaults[name], name, where)
            else:
                raise Invalid(
                    f"{where(name)}: unknown section{_did_you_mean(name, self.defaults)} "
                    f"(bat's sections: {', '.join(sorted(self.defaults))}; Invoke's: "
                    f"{', '.join(sorted(self.invoke_defaults))})"
                )
        return checked

    def _section(
        self, value: Any, default: Mapping[str, Any], dotted: str, where: Callable[[str], str]
    ) -> dict | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise Invalid(
                f"{where(dotted)}: must be a mapping of keys "
                f"({', '.join(default)}), not a {_kind_of(value)}"
            )
        checked: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            path = f"{dotted}.{name}"
            if name not in default:
                raise Invalid(
                    f"{where(path)}: unknown setting{_did_you_mean(name, default)} "
                    f"({dotted} has: {', '.join(default)})"
                )
            if isinstance(default[name], Mapping):
                section = self._section(item, default[name], path, where)
                if section is not None:
                    checked[name] = section
                continue
            try:
                checked[name] = self.kinds[path].read(item)
            except Invalid as exc:
                raise Invalid(f"{where(path)}: {exc}") from None
        return checked


def _invoke_value(value: Any, default: Any, dotted: str, where: Callable[[str], str]) -> Any:
    """A value of Invoke's own sections: a mapping where Invoke has one (else Invoke's
    merge fails with a traceback), a strict boolean where Invoke's default is one; the
    rest as it is (Invoke allows keys of its own there, like ``run.env``)."""
    if isinstance(default, bool):
        try:
            return boolean(value)
        except Invalid as exc:
            raise Invalid(f"{where(dotted)}: {exc}") from None
    if not isinstance(default, Mapping):
        return value
    if not isinstance(value, Mapping):
        raise Invalid(f"{where(dotted)}: must be a mapping of keys, not a {_kind_of(value)}")
    return {
        key: _invoke_value(item, default.get(str(key)), f"{dotted}.{key}", where)
        for key, item in value.items()
    }


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            found += _leaves(value, f"{dotted}.")
        else:
            found.append((dotted, value))
    return found


def _did_you_mean(name: str, choices: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, [str(choice) for choice in choices], n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _kind_of(value: Any) -> str:
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    return type(value).__name__
