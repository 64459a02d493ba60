"""Where a problem is in a YAML or JSON file: key paths to line numbers, and error lists.

pydantic says *what* is wrong and at which key path; a user also wants the line. The
file is composed with PyYAML (JSON is YAML for this purpose) to map every key path to
the line it starts on, so each validation error can be reported as
``eval/eval.yaml: evaluation.k (line 7): Input should be greater than 0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Path_ = tuple[str | int, ...]


def line_index(text: str) -> dict[Path_, int]:
    """``{key path: 1-based line}`` for every mapping key and sequence item of ``text``."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[Path_, int] = {}

    def walk(node: Any, path: Path_) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = (*path, str(key.value))
                lines[child] = key.start_mark.line + 1
                walk(value, child)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))

    if root is not None:
        walk(root, ())
    return lines


def dotted(path: Iterable[str | int]) -> str:
    """``("models", 0, "provider")`` -> ``models[0].provider``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_problems(
    file: Path,
    text: str,
    error: Any,
    *,
    prefix: Path_ = (),
    fix_path: Callable[[Path_], Path_] | None = None,
    skip: set[Path_] | None = None,
) -> list[str]:
    """One ``file: key.path (line N): message`` line per error of a pydantic ValidationError.

    Messages speak the file's words: pydantic's mentions of model classes ("a valid
    dictionary or instance of JudgeSpec") become what the file should hold. ``fix_path``
    maps an error's key path back to the file's shape where a validator reshaped it;
    errors at a path of ``skip`` (already reported otherwise) are left out.
    """
    lines = line_index(text)
    problems = []
    for item in error.errors(include_url=False):
        path = (*prefix, *item["loc"])
        if fix_path is not None:
            path = fix_path(path)
        if skip and any(path[: len(bad)] == bad for bad in skip):
            continue
        line = _nearest_line(lines, path)
        where = f" (line {line})" if line else ""
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        elif item["type"] in ("model_type", "model_attributes_type", "dict_type"):
            message = f"expected a mapping of keys, got {_kind(item.get('input'))}"
        problems.append((line or 0, f"{file}: {dotted(path)}{where}: {message}"))
    return [text for _, text in sorted(problems, key=lambda pair: pair[0])]


def _kind(value: Any) -> str:
    """How a YAML/JSON value is called in a message: ``a list``, ``the text 'x'``..."""
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "nothing"}[value]
    if isinstance(value, int | float):
        return f"the number {value}"
    return "a list" if isinstance(value, list) else type(value).__name__


def _nearest_line(lines: dict[Path_, int], path: Path_) -> int | None:
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]
