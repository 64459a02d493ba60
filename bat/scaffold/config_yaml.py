"""Change values in an agent's config.yaml in place (``set.config``, ``init.agent``'s
model and telemetry flags, ``set.env --port`` on a literal port).

config.yaml is the user's file, full of comments that explain it, so it is edited line by
line, never re-dumped: a value is replaced where it stands (its comment kept), a missing
key is added at the end of its section, a missing section at the end of the file. Only
the keys of :data:`KEYS` can be set, each checked as bat-adk would read it; the result is
parsed again and compared with the file before it, so a change bat cannot make exactly
(a flow-style ``model: {name: x}``, a key written twice) is refused with the file left as
it was. Files are read through :mod:`bat.input_files` (regular files only, bounded) and
written atomically.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.scaffold import values

PRIVACY_LEVELS = ("none", "content", "names", "full")
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_WORD = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_URL = re.compile(r"https?://[^\s#'\"]{1,2000}")


def _reference_or(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """``${VAR}`` (bat-adk replaces it from the environment at start-up), else ``check``."""

    def checked(text: str) -> Any:
        return text if _REFERENCE.fullmatch(text) else check(text)

    return checked


def _word(what: str, examples: str) -> Callable[[str], str]:
    def checked(text: str) -> str:
        if not _WORD.fullmatch(text):
            raise InputError(f"{text!r} is not a {what} (a lower-case word such as {examples})")
        return text

    return checked


def _choice(*choices: str) -> Callable[[str], str]:
    def checked(text: str) -> str:
        if text not in choices:
            raise InputError(f"{text!r}: use one of {', '.join(choices)}")
        return text

    return checked


def _url(text: str) -> str:
    if not _URL.fullmatch(text):
        raise InputError(f"{text!r} is not an http(s) URL")
    return text


def _boolean(text: str) -> bool:
    word = text.lower()
    if word not in ("true", "false"):
        raise InputError(f"{text!r}: use true or false")
    return word == "true"


#: The config.yaml keys bat sets, each with the check of its value (docs/set.md).
KEYS: dict[str, Callable[[str], Any]] = {
    "model.provider": _reference_or(lambda text: values.provider(text).name),
    "model.name": _reference_or(values.model),
    "model.base_url": _reference_or(_url),
    "model.reasoning_effort": _word("reasoning effort", "minimal, low, medium or high"),
    "model.service_tier": _word("service tier", "auto, default, flex or priority"),
    "telemetry.privacy": _choice(*PRIVACY_LEVELS),
    "endpoint.port": _reference_or(values.port),
    "endpoint.url": _reference_or(_url),
    "checkpoints": _boolean,
}


@dataclass(frozen=True)
class Setting:
    """One ``KEY=VALUE`` of ``bat set.config``: a key of :data:`KEYS` and its checked value."""

    key: str
    value: Any

    @classmethod
    def parse(cls, text: str) -> Setting:
        """``model.reasoning_effort=low`` -> Setting; one clear error for anything else."""
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"{text!r}: write KEY=VALUE (e.g. model.reasoning_effort=low)")
        if key not in KEYS:
            raise InputError(f"{key!r} is not a config.yaml key bat sets (keys: {', '.join(KEYS)})")
        raw = raw.strip()
        if not raw or "\n" in raw or len(raw) > 2000:
            raise InputError(f"{key}: give a value on one line (at most 2000 characters)")
        try:
            return cls(key, KEYS[key](raw))
        except InputError as exc:
            raise InputError(f"{key}: {exc.message}") from None


def parse_settings(texts: list[str]) -> list[Setting]:
    """Every ``KEY=VALUE``, checked before anything is written; a key given twice is refused."""
    settings = [Setting.parse(text) for text in texts]
    keys = [setting.key for setting in settings]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise InputError(f"{', '.join(twice)}: given more than once")
    return settings


def model_settings(
    privacy: str | None, reasoning_effort: str | None, service_tier: str | None
) -> list[Setting]:
    """``init.agent``'s flags as settings (checked now, written once the project exists)."""
    given = {
        "telemetry.privacy": (privacy, "--privacy"),
        "model.reasoning_effort": (reasoning_effort, "--reasoning-effort"),
        "model.service_tier": (service_tier, "--service-tier"),
    }
    settings = []
    for key, (value, flag) in given.items():
        if value is None:
            continue
        try:
            settings.append(Setting(key, KEYS[key](str(value).strip())))
        except InputError as exc:
            raise InputError(f"{flag}: {exc.message}") from None
    return settings


def write_settings(path: Path, settings: list[Setting]) -> str:
    """Write ``settings`` into the config file ``path``; its text before the change."""
    from bat.atomic import write_text_atomic
    from bat.input_files import CONFIG_LIMIT, read_text

    try:
        old = read_text(path, limit=CONFIG_LIMIT, kind="an agent's config.yaml")
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file (run bat set.config from the agent's root, or set CONFIG_PATH)"
        ) from None
    fresh = edited(old, settings, path)
    if fresh != old:
        write_text_atomic(path, fresh, follow_links=True)
    return old


def raw_value(text: str, key: str, path: Path | str = "config.yaml") -> Any:
    """The value of dotted ``key`` in a config text as written (``${PORT}`` unexpanded),
    or None when it is not there."""
    from bat.input_files import parse_yaml

    node: Any = parse_yaml(text, path)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def edited(text: str, settings: list[Setting], path: Path | str = "config.yaml") -> str:
    """``text`` with each setting written in place; refused unless parsing the result
    gives exactly the old document with those values changed."""
    from bat.input_files import parse_yaml

    before = parse_yaml(text, path) if text.strip() else {}
    if before is None:
        before = {}
    if not isinstance(before, dict):
        raise InputError(f"{path}: not a mapping of settings; bat leaves it as it is")
    fresh = text
    expected = _copy(before)
    for setting in settings:
        fresh = _set_line(fresh, setting.key, _scalar(setting.value), path)
        _put(expected, setting.key, setting.value)
    if parse_yaml(fresh, path) != expected:
        raise InputError(
            f"{path}: cannot set {', '.join(s.key for s in settings)} here without changing "
            "other values (flow-style or unusual YAML); edit the file by hand"
        )
    return fresh


# -- line editing -----------------------------------------------------------------


def _scalar(value: Any) -> str:
    """``value`` as one YAML scalar token (quoted only when YAML would misread it)."""
    import yaml

    if isinstance(value, bool | int):
        return str(value).lower()
    return yaml.safe_dump(str(value), width=10**6).split("\n")[0]


def _set_line(text: str, key: str, scalar: str, path: Path | str) -> str:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    parts = key.split(".")
    if len(parts) == 1:
        found = _find(lines, 0, len(lines), 0, parts[0])
        if found is None:
            return "".join(lines) + f"{parts[0]}: {scalar}\n"
        return "".join(_replaced(lines, found, scalar, path, key))
    section, name = parts
    header = _find(lines, 0, len(lines), 0, section)
    if header is None:
        return "".join(lines) + f"{section}:\n  {name}: {scalar}\n"
    if _value_and_comment(lines[header])[0]:
        raise InputError(f"{path}: {section} is not written as a block; edit it by hand")
    end = header + 1
    while end < len(lines) and (_indent(lines[end]) > 0 or not _content(lines[end])):
        end += 1
    children = [i for i in range(header + 1, end) if _content(lines[i])]
    indent = _indent(lines[children[0]]) if children else 2
    found = _find(lines, header + 1, end, indent, name)
    if found is not None:
        return "".join(_replaced(lines, found, scalar, path, key))
    last = children[-1] if children else header
    lines.insert(last + 1, f"{' ' * indent}{name}: {scalar}\n")
    return "".join(lines)


def _find(lines: list[str], start: int, end: int, indent: int, name: str) -> int | None:
    pattern = re.compile(rf"{' ' * indent}{re.escape(name)}\s*:(\s|$)")
    for i in range(start, end):
        if _indent(lines[i]) == indent and pattern.match(lines[i]):
            return i
    return None


def _replaced(lines: list[str], at: int, scalar: str, path: Path | str, key: str) -> list[str]:
    line = lines[at]
    head = line[: line.index(":") + 1]
    value, comment = _value_and_comment(line)
    if not value:
        raise InputError(f"{path}: {key} holds a block, not one value; edit it by hand")
    fresh = f"{head} {scalar}"
    if comment:  # the comment stays in its column when the new value leaves room
        column = len(line.rstrip("\r\n")) - len(comment.lstrip())
        fresh += " " * max(1, column - len(fresh)) + comment.lstrip()
    lines[at] = fresh + "\n"
    return lines


def _value_and_comment(line: str) -> tuple[str, str]:
    """The value after ``key:`` and its trailing comment (with the spaces before it)."""
    rest = line.rstrip("\n")[line.index(":") + 1 :]
    quote = None
    for i, char in enumerate(rest):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"" and not rest[:i].strip():
            quote = char
        elif char == "#" and (i == 0 or rest[i - 1] in " \t"):
            value = rest[:i]
            return value.strip(), rest[len(value.rstrip()) :]
    return rest.strip(), ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" ")) if _content(line) else 0


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _copy(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_copy(value) for value in node]
    return node


def _put(document: dict, key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node: Any = document
    for part in parents:
        if not isinstance(node.get(part), Mapping):
            node[part] = {}
        node = node[part]
    node[last] = value
