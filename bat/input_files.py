"""The one place bat reads a YAML or JSON input file: bounded, strict, and with lines.

Every file a user (or an attacker who can write one) hands to bat passes here: eval.yaml,
the tasks.json dataset, ``./bat.yaml``, ``~/.bat.yaml``, ``/etc/bat.yaml``, the ``-f``
file and a project's ``agent.json``. Reading one must end quickly, with the data or one
clear error naming the file:

- only a regular file is read (``/dev/zero`` or a FIFO would never end), and only up to
  a size limit (:data:`CONFIG_LIMIT`, :data:`DATASET_LIMIT`), checked before reading;
- the bytes must be UTF-8: a stray byte is an error at its line and byte offset, never a
  silent U+FFFD that changes a task id;
- YAML is read by :class:`BoundedLoader`, PyYAML's safe loader with three bounds: aliases
  may add at most :data:`ALIAS_BUDGET` nodes and characters to the document (a "billion
  laughs" is refused while it is parsed, before anything walks or copies it), nesting is
  at most :data:`MAX_DEPTH` levels, and a key written twice in one mapping is an error
  (PyYAML would silently keep the last);
- JSON is read by Python's decoder with one hook for every JSON input,
  :func:`no_repeated_keys`: a key written twice in one object is an error too, named by
  key path and line (:func:`repeated_key_error`, from :func:`json_lines`, the one-pass
  map of a JSON text's key paths to lines, which lives here for that reason).

Errors are :class:`~bat.errors.InputError` (exit 2), worded
``<file>: <key> (line N): what is wrong``; a key written twice, in YAML or JSON,
``<file>: <key path> (line N): duplicate key (the later one would win)``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

try:
    import yaml
except ImportError:  # bat run from a source tree with only Invoke installed, which
    from invoke.util import yaml  # carries a copy of PyYAML (the same code)

from bat.errors import InputError
from bat.figures import integer

MiB = 2**20
#: Configuration files (eval.yaml, bat.yaml, the -f file): far above any real one.
CONFIG_LIMIT = 1 * MiB
#: A dataset: room for over a million tasks in bat's own format (about 350 bytes each).
DATASET_LIMIT = 512 * MiB
#: What aliases (``*name``) may add to a YAML document, counted in nodes plus scalar
#: characters; a config file's worth, so sharing a block is fine and a bomb is not.
ALIAS_BUDGET = 1_000_000
#: How deep YAML collections may nest; PyYAML composes recursively, so a deeper file
#: would end in a RecursionError rather than a message.
MAX_DEPTH = 100
#: What a key written twice is called, in a YAML mapping or a JSON object.
DUPLICATE_KEY = "duplicate key (the later one would win)"

Path_ = tuple[str | int, ...]  # a key path: ("models", 0, "provider")


def read_text(path: Path | str, *, limit: int, kind: str = "file") -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes.

    ``kind`` ("a YAML file", "a JSON dataset") completes the messages. A missing file
    raises :class:`FileNotFoundError` unchanged: callers word that case themselves
    (Invoke skips a config file that does not exist).
    """
    return decode(path, read_bytes(path, limit=limit, kind=kind))


def read_bytes(path: Path | str, *, limit: int, kind: str = "file") -> bytes:
    """The bytes of the regular file ``path``, refused before reading when it is not a
    regular file or is larger than ``limit``."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not {kind}") from None
    except PermissionError:
        raise InputError(f"{path}: cannot read (permission denied)") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path} is a directory, not {kind}")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(
                f"{path} is not a regular file (a device, pipe or socket); bat reads {kind} "
                "only from a regular file"
            )
        if info.st_size > limit:
            raise InputError(
                f"{path} is {_size(info.st_size)}; {kind} may be at most {_size(limit)}"
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            data = handle.read(limit + 1)  # the file may have grown since fstat
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise InputError(f"{path} is larger than {_size(limit)}, the limit for {kind}")
    return data


def decode(path: Path | str, data: bytes) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped); a byte that is not
    UTF-8 is an error naming its line and byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}: not UTF-8 text (line {line}, byte offset {exc.start}: "
            f"0x{data[exc.start]:02x}, {exc.reason})"
        ) from None
    return text.removeprefix("\ufeff")


def load_yaml(path: Path | str, *, limit: int = CONFIG_LIMIT, kind: str = "a YAML file") -> Any:
    """The data of the YAML file ``path`` (see :func:`parse_yaml`)."""
    return parse_yaml(read_text(path, limit=limit, kind=kind), path)


def parse_yaml(text: str, path: Path | str) -> Any:
    """``text`` (the content of ``path``) parsed by :class:`BoundedLoader`.

    Every failure is an :class:`InputError` naming ``path`` and a line: a syntax error,
    an alias bomb, too deep a nesting, a duplicate key.
    """
    try:
        loader = BoundedLoader(text, name=str(path))  # checks the characters already
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise InputError(
            f"{path}: invalid YAML (line {line}): character U+{exc.character:04X} is not "
            "allowed in YAML"
        ) from None
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        raise InputError(f"{path}: invalid YAML{_where(exc)}: {_reason(exc)}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    except ValueError as exc:  # a number past Python's limit on the digits of an integer
        raise InputError(f"{path}: invalid YAML: {str(exc).split(';')[0]}") from None
    finally:
        loader.dispose()


def load_json(path: Path | str, *, limit: int = CONFIG_LIMIT, kind: str = "a JSON file") -> Any:
    """The data of the JSON file ``path``; invalid JSON is an error at its line."""
    return parse_json(read_text(path, limit=limit, kind=kind), path)


def parse_json(text: str, path: Path | str, *, constants: bool = True) -> Any:
    """``text`` (the content of ``path``) as JSON; every failure is an InputError naming
    ``path``. A key written twice in an object is refused; so are ``NaN``, ``Infinity``
    and ``-Infinity`` (which Python reads, but which are not JSON) unless ``constants``."""
    try:
        if constants:
            return json.loads(text, object_pairs_hook=no_repeated_keys)
        return json.loads(text, object_pairs_hook=no_repeated_keys, parse_constant=_no_constant)
    except RepeatedKey as exc:
        raise repeated_key_error(path, text, exc) from None
    except _NotJSON as exc:
        line = next(
            (
                text.count("\n", 0, token.start()) + 1
                for token in _JSON_TOKEN.finditer(text)  # strings are tokens: skipped whole
                if token.group() == exc.name
            ),
            "?",
        )
        raise InputError(
            f"{path}: {exc.name} (line {line}): not JSON: write a number or a string"
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: invalid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # a number past Python's limit on the digits of an integer
        raise InputError(f"{path}: invalid JSON: {str(exc).split(';')[0]}") from None


class _NotJSON(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a JSON text (raised inside the decoder)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _no_constant(name: str) -> Any:
    raise _NotJSON(name)


class RepeatedKey(ValueError):
    """A key written twice in one JSON object, raised by :func:`no_repeated_keys` inside
    the decoder, where no position is known; ``within`` is the key path of the item that
    holds it when the caller knows (a dataset's task), so that only it is mapped."""

    def __init__(self, key: str, within: Path_ | None = None) -> None:
        super().__init__(key)
        self.key, self.within = key, within


def no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``object_pairs_hook`` of every JSON input bat reads: the object as a dict, or
    :class:`RepeatedKey` when a key is written twice (Python would keep the later one,
    silently: an expectation written twice would be half lost)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return data


def repeated_key_error(path: Path | str, text: str, exc: RepeatedKey) -> InputError:
    """The error for a key written twice in the JSON ``text`` of ``path``, by key path and
    line: ``tasks.json: [1].expected (line 3): duplicate key (the later one would win)``.

    The decoder's text is valid up to the end of the object that failed, and the first
    repeat in the text is within it: the walk stops there."""
    within = None if exc.within is None else [exc.within]
    found = _walk_json(text, within, stop_at_repeat=True)[1]
    if found is None:  # not reached: the decoder found one
        return InputError(f"{path}: {exc.key!r}: {DUPLICATE_KEY}")
    where, line = found
    return InputError(f"{path}: {dotted(where)} (line {line}): {DUPLICATE_KEY}")


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def json_lines(text: str, within: Iterable[Path_] | None = None) -> dict[Path_, int]:
    """``{key path: 1-based line}`` for the JSON ``text`` (which is known to be valid).

    A dataset can hold a million tasks and nest hundreds of levels, so this is one
    pass of a tokenizer with its own stack. With ``within``, only the paths under those
    prefixes (the tasks that have problems) are recorded, and every other collection
    is skipped whole by the C JSON decoder, only its line breaks counted.
    """
    return _walk_json(text, within)[0]


def _walk_json(
    text: str, within: Iterable[Path_] | None, *, stop_at_repeat: bool = False
) -> tuple[dict[Path_, int], tuple[Path_, int] | None]:
    """:func:`json_lines`, and with ``stop_at_repeat`` the key path and line of the first
    key written a second time in its object (the walk ends there)."""
    wanted = None if within is None else set(within)
    ancestors = {path[:end] for path in wanted or () for end in range(len(path))}
    decoder = json.JSONDecoder()
    lines: dict[Path_, int] = {}
    # One frame per open container: [path, is_object, next key or index, records?]
    stack: list[list[Any]] = []
    line, last, pos = 1, 0, 0
    path: Path_ = ()
    record = wanted is None or () in wanted
    expect_key = False
    while match := _JSON_TOKEN.search(text, pos):
        token, start, pos = match.group(), match.start(), match.end()
        line += text.count("\n", last, start)
        last = start
        if token in ":,":
            if token == "," and stack:
                frame = stack[-1]
                if frame[1]:
                    expect_key = True
                else:
                    frame[2] += 1
            continue
        if token in "]}":
            stack.pop()
            expect_key = False
            continue
        if expect_key:  # a key of the innermost object
            frame = stack[-1]
            frame[2] = _json_key(token)
            if frame[3]:
                key_path = (*frame[0], frame[2])
                if stop_at_repeat and key_path in lines:  # only its own key recorded it
                    return lines, (key_path, line)
                lines[key_path] = line
            expect_key = False
            continue
        # A value starts: at the top, as an item of an array, or after an object's key.
        if stack:
            frame = stack[-1]
            path = (*frame[0], frame[2])
            record = frame[3] or (wanted is not None and path in wanted)
        if record:
            lines.setdefault(path, line)
        elif token in "[{" and path not in ancestors:
            pos = decoder.raw_decode(text, start)[1]  # nothing wanted in there
            continue
        if token in "[{":
            stack.append([path, token == "{", 0, record])
            expect_key = token == "{"
    return lines, None


def _json_key(token: str) -> str:
    return token[1:-1] if "\\" not in token else json.loads(token)


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with bounded aliases and depth, and no duplicate keys.

    The bounds are enforced while the document is composed, so a bomb is refused after
    reading its few lines, not after expanding them. Each composed node carries its
    expanded size (``_bat_size``: itself, its scalar's characters and everything under
    it, aliases counted in full) and where it was first written (``_bat_parent``), from
    which the key path of a duplicate key is worked out; while composing, the path is
    kept in ``_steps``.
    """

    def __init__(self, stream: str, name: str = "<input>") -> None:
        super().__init__(stream)
        self.name = name  # PyYAML's marks (and so its messages) carry this name
        self._alias_total = 0
        self._steps: list[str | int] = []  # the key path of the node being composed

    # -- composing: aliases and depth ----------------------------------------------

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)  # the anchored node, shared
            size = getattr(node, "_bat_size", None)
            if size is None:
                self._fail(
                    parent,
                    index,
                    event.start_mark,
                    f"alias *{event.anchor} is used inside its own anchor (recursive)",
                )
            self._alias_total += size
            if self._alias_total > ALIAS_BUDGET:
                self._fail(
                    parent,
                    index,
                    event.start_mark,
                    f"aliases expand to more than {integer(ALIAS_BUDGET)} values and characters "
                    "(an alias bomb?); write the values out instead",
                )
            return node
        if len(self._steps) >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            self._fail(parent, index, mark, f"nested deeper than {MAX_DEPTH} levels")
        if parent is not None:
            self._steps.append(_step(parent, index))
        try:
            node = super().compose_node(parent, index)
        finally:
            if parent is not None:
                self._steps.pop()
        if not hasattr(node, "_bat_parent"):
            node._bat_parent = (parent, index)
        node._bat_size = _expanded_size(node)
        return node

    # -- constructing: duplicate keys ----------------------------------------------

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """Refuse a key written twice in the same mapping (merged ``<<`` keys may be
        overridden: that is what a merge is for)."""
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:
                    continue  # an unhashable key: PyYAML reports it below
                if duplicate:
                    path = (*_path_of(node), _key_text(key_node))
                    raise InputError(
                        f"{self.name}: {dotted(path)} (line {key_node.start_mark.line + 1}): "
                        + DUPLICATE_KEY
                    )
        return super().construct_mapping(node, deep=deep)

    def _fail(self, parent: Any, index: Any, mark: Any, message: str) -> None:
        """Refuse the node being composed at ``index`` of ``parent``, by key path and line."""
        path = (*self._steps, _step(parent, index)) if parent is not None else ()
        where = dotted(path[:12]) + ("..." if len(path) > 12 else "")
        raise InputError(f"{self.name}: {where} (line {mark.line + 1}): {message}")


def _expanded_size(node: yaml.Node) -> int:
    """Nodes and scalar characters of ``node`` with every alias under it written out."""
    if isinstance(node, yaml.ScalarNode):
        return 1 + len(node.value)
    if isinstance(node, yaml.SequenceNode):
        return 1 + sum(item._bat_size for item in node.value)
    return 1 + sum(key._bat_size + value._bat_size for key, value in node.value)


def _step(parent: Any, index: Any) -> str | int:
    """The path step from ``parent`` to a child composed at ``index``."""
    if isinstance(parent, yaml.SequenceNode):
        return index if isinstance(index, int) else len(parent.value)
    if isinstance(index, yaml.Node):  # a mapping value: index is its key
        return _key_text(index)
    return "(key)"  # a mapping key itself


def _path_of(node: Any) -> tuple:
    """The key path where ``node`` was first written, walked up without recursion."""
    steps: list[str | int] = []
    while node is not None:
        parent, index = getattr(node, "_bat_parent", (None, None))
        if parent is None:
            break
        steps.append(_step(parent, index))
        node = parent
    return tuple(reversed(steps))


def _key_text(node: Any) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else "(complex key)"


def dotted(path: Iterable[str | int]) -> str:
    """``("models", 0, "provider")`` -> ``models[0].provider``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _where(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""


def _reason(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem (and its context), without the marks it prints on other lines."""
    parts = [part for part in (exc.context, exc.problem) if part]
    return " ".join(" ".join(parts).split()) or "cannot be parsed"


def _size(count: int) -> str:
    return f"{count / MiB:.1f} MiB" if count >= MiB else f"{integer(count)} bytes"
