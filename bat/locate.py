"""Where a problem is in a YAML or JSON file: key paths to line numbers, and error lists.

pydantic says *what* is wrong and at which key path; a user also wants the line. Once
a file has failed validation (never before: mapping a large file costs more than
reading it), its key paths are mapped to the lines they start on, so each error can be
reported as ``eval/eval.yaml: evaluation.k (line 7): Input should be greater than 0``.
YAML is composed by bat's bounded loader without following aliases (:func:`line_index`
for every key path, :func:`line_of` for one); JSON datasets by a one-pass tokenizer
(:func:`bat.input_files.json_lines`, kept beside the JSON reader, which needs it for a
key written twice). Neither recurses.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from bat.errors import InputError
from bat.input_files import CONFIG_LIMIT, BoundedLoader, Path_, dotted, read_text


def line_index(text: str) -> dict[Path_, int]:
    """``{key path: 1-based line}`` for every mapping key and sequence item of YAML ``text``.

    Called only when there is an error to place. An alias is recorded where it is
    written and never followed, so a document full of aliases costs no more than its
    text; the walk keeps its own stack, so nesting depth cannot exhaust Python's.
    """
    root = _nodes(text)
    lines: dict[Path_, int] = {}
    stack: list[tuple[Any, Path_]] = [(root, ())] if root is not None else []
    while stack:
        node, path = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = (*path, str(key.value))
                lines[child] = key.start_mark.line + 1
                stack.append((value, child))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, index)) for index, item in enumerate(node.value))
    return lines


def line_of(
    path_or_text: os.PathLike | str, dotted_key_path: str | Iterable[str | int]
) -> int | None:
    """The line of a key path in a YAML file (a :class:`~pathlib.Path`: a ``str`` is
    the YAML text itself), for an error message; None when not even its first key is
    there, or the file cannot be read or is not YAML.

    The key path is dotted (``"eval.file"``, as Invoke names a setting) or a sequence of
    keys and item numbers (``("models", 0)``). Where the file holds only the start of
    the path, the line of the deepest key it holds. The composed node tree is walked
    with aliases left where they are written, never expanded, so a hostile file costs
    no more than it took to read (a file is read as configuration files are: bounded).
    """
    text = path_or_text
    if isinstance(text, os.PathLike):
        try:
            text = read_text(text, limit=CONFIG_LIMIT, kind="a YAML file")
        except (OSError, InputError):
            return None
    steps = dotted_key_path
    path = tuple(steps.split(".")) if isinstance(steps, str) else tuple(steps)
    lines = line_index(text)
    return _nearest_line(lines, path) if path[:1] in lines else None


def scalar_texts(text: str, paths: Iterable[Path_]) -> dict[Path_, str]:
    """The plain scalars at ``paths`` of YAML ``text``, as written (``010``, ``on``,
    ``1:30``), not as YAML 1.1 reads them (8, True, 90).

    Why: an ``env:`` value becomes a process environment's text. The loader has already
    turned ``LATENCY_MS: 010`` into the octal 8 and ``FLAG: on`` into True; the agent
    should get what the user wrote. Composed without following aliases, only for the
    few values that were not text (a file whose env values are all text never gets here).
    """
    wanted = set(paths)
    if not wanted:
        return {}
    root = _nodes(text)
    found: dict[Path_, str] = {}
    prefixes = {path[:end] for path in wanted for end in range(len(path))}
    stack: list[tuple[Any, Path_]] = [(root, ())] if root is not None else []
    while stack:
        node, path = stack.pop()
        if path in wanted:
            if isinstance(node, yaml.ScalarNode) and node.style is None:
                found[path] = node.value
            continue
        if path not in prefixes:
            continue
        if isinstance(node, yaml.MappingNode):
            stack.extend(((value, (*path, str(key.value))) for key, value in node.value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, index)) for index, item in enumerate(node.value))
    return found


def _nodes(text: str) -> Any:
    """The YAML node tree of ``text``, aliases left where they are written; None when it
    is not YAML (the reader that failed first says why)."""
    try:
        loader = _IndexLoader(text)
        try:
            return loader.get_single_node()
        finally:
            loader.dispose()
    except (yaml.YAMLError, InputError):
        return None


class _IndexLoader(BoundedLoader):
    """:class:`BoundedLoader` that turns each alias into a placeholder where it is written,
    so that mapping lines never walks the (possibly huge) structure an alias stands for."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()
            node = yaml.ScalarNode("tag:yaml.org,2002:null", "", event.start_mark)
            node._bat_size = 1
            return node
        return super().compose_node(parent, index)


def validation_problems(
    file: Path,
    text: str,
    error: Any,
    *,
    prefix: Path_ = (),
    fix_path: Callable[[Path_], Path_] | None = None,
    skip: set[Path_] | None = None,
    lines: Mapping[Path_, int] | None = None,
) -> list[str]:
    """One ``file: key.path (line N): message`` line per error of a pydantic ValidationError.

    Messages speak the file's words: pydantic's mentions of model classes ("a valid
    dictionary or instance of JudgeSpec") become what the file should hold. ``fix_path``
    maps an error's key path back to the file's shape where a validator reshaped it;
    errors at a path of ``skip`` (already reported otherwise) are left out. ``lines``
    is the file's line map when the caller has one (a dataset's, from
    :func:`json_lines`); otherwise ``text`` is mapped here, as YAML.
    """
    if lines is None:
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


def _nearest_line(lines: Mapping[Path_, int], path: Path_) -> int | None:
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_lone_surrogates(path: Path, text: str) -> None:
    """An InputError naming the first string of the JSON ``text`` holding a lone
    surrogate (a well-formed pair is read as the one character it spells, and passes).
    Called once the tasks are valid, so a task id's own check (with its line) comes
    first; a file that spells no surrogate at all (nearly every one) is scanned once."""
    if not _SURROGATE_ESCAPE.search(text):
        return
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return  # not JSON: the validation says so, with the line
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack += [((*where, str(key)), item) for key, item in value.items()]
            stack += [(where, key) for key in value]
        elif isinstance(value, list):
            stack += [((*where, index), item) for index, item in enumerate(value)]
        elif isinstance(value, str) and _SURROGATE.search(value):
            line = line_index(text).get(where)
            raise InputError(
                f"{path}: {dotted(where)}{f' (line {line})' if line else ''}: holds half of "
                f"a UTF-16 surrogate pair (U+{ord(_SURROGATE.search(value)[0]):04X}), which "
                "is not text"
            )
