"""The dataset: ``eval/input/tasks.json``, a list of TaskSpec.

A task is an id, the user turns of one conversation, and what success looks like
(``expected``). Field names follow bat-cli's format (``status``, ``output_must_contain``,
``tool_calls[{name, args_subset, times}]``, ``expected_outcome``); the other checks are
ours. Every problem of a file is reported at once, with its location.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from bat.errors import InputError
from bat.evaluation.locate import line_index, validation_problems

Status = Literal["completed", "input-required", "auth-required", "working", "error"]
STATUS_SYNONYMS = {
    "failed": "error",
    "input_required": "input-required",
    "auth_required": "auth-required",
}


ID_MAX_LENGTH = 200  # characters (code points)
STEM_MAX_LENGTH = 80  # characters of an id kept in its episode file name
REGEX_TIME_LIMIT_S = 1.0  # one output_regex check, against one answer
REGEX_MAX_LENGTH = 2000  # characters of an output_regex
REGEX_MAX_REPEAT = 100_000  # items once counted repeats are unrolled: (?:a{100}){100} is 10,000
_ZWJ = "\u200d"  # joins emoji into one picture (👩‍💻): allowed although invisible
# Unicode categories a task id may not hold, and how a message calls them. Controls
# (ESC, NUL, ...), invisible format characters (bidi overrides), lone surrogates and
# non-characters (U+FFFE) crash or mislead the chart renderer and every table.
_HIDDEN = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
    "Cn": "a non-character or unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
_HASHED = re.compile(r".*-[0-9a-f]{8}")
# The engine's recursion and subroutine calls, (?R) (?1) (?-1) (?&name) (?P>name), not
# after an odd number of backslashes (``\\(?R)`` is text).
_RECURSION = re.compile(r"(?<!\\)(?:\\\\)*\(\?(?:R|[+-]?\d+|&\w+|P>\w+)\)")


def hidden_character(char: str) -> str | None:
    """What kind of unprintable character ``char`` is (``None`` when it is printable).

    One rule for task ids on load and for every label the charts draw, so what a new
    dataset may hold and what an old run folder is cleaned of are the same thing.
    """
    if char == _ZWJ:
        return None
    return _HIDDEN.get(unicodedata.category(char))


def codepoint(char: str) -> str:
    return f"U+{ord(char):04X}"


def normalize_status(value: Any) -> Any:
    """``failed`` is read as ``error``; other words pass through for validation."""
    if isinstance(value, str):
        word = value.strip().lower()
        return STATUS_SYNONYMS.get(word, word)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# JSON has real numbers and booleans, so a count written `true`, `2.0` or `"3"` is a
# mistake to report, not a value to convert (pydantic's lax mode would read it as 1, 2, 3).
Count = Annotated[int, Strict()]
# Keys of a turn written as an object, as chat datasets write messages.
TURN_TEXT_KEYS = ("content", "text", "message")


class ToolCallExpectation(_Strict):
    """A tool the agent must call: by name, with at least these arguments, at least ``times``."""

    name: str = Field(min_length=1)
    args_subset: dict[str, Any] = Field(default_factory=dict)
    times: Count = Field(default=1, ge=1)


class AgentCallExpectation(_Strict):
    """Another agent this agent must call, at least ``times`` (bat-cli writes ``agent``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, validation_alias=AliasChoices("name", "agent"))
    times: Count = Field(default=1, ge=1)


class TaskExpected(_Strict):
    """What a successful episode looks like; every check is optional.

    ``status`` defaults to ``completed``; an explicit ``null`` (as bat-cli writes it)
    means the final status is not checked.
    """

    status: Status | None = "completed"
    output_must_contain: list[str] = Field(default_factory=list)
    output_must_not_contain: list[str] = Field(default_factory=list)
    output_regex: str | None = None
    tool_calls: list[ToolCallExpectation] = Field(default_factory=list)
    tool_call_order: list[str] = Field(default_factory=list)
    max_model_calls: Count | None = Field(default=None, ge=0)
    max_tokens: Count | None = Field(default=None, ge=0)
    no_errors: StrictBool = False
    agent_calls: list[AgentCallExpectation] = Field(default_factory=list)
    expected_outcome: str | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _synonyms(cls, value: Any) -> Any:
        return normalize_status(value)

    @field_validator("output_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        """Checked with the engine the verdict uses (``regex``), so a pattern valid in one
        engine and not the other cannot slip through; bounded in size because ``regex``
        unrolls counted repeats when it compiles (``(?:a{65535}){65535}`` eats all memory)."""
        if value is not None:
            check_regex(value)
        return value

    @property
    def checks_tools(self) -> bool:
        """Whether any check needs the names or arguments of tool calls."""
        return bool(self.tool_calls or self.tool_call_order)

    @property
    def checks_beyond_status(self) -> bool:
        """Whether anything but the final status is checked: a task that checks only the
        status (or nothing) passes on an empty or wrong answer, which says little."""
        return bool(
            self.output_must_contain
            or self.output_must_not_contain
            or self.output_regex is not None
            or self.tool_calls
            or self.tool_call_order
            or self.max_model_calls is not None
            or self.max_tokens is not None
            or self.no_errors
            or self.agent_calls
        )


def _turn_text(index: int, turn: dict[str, Any]) -> Any:
    """The text of turn ``index`` written as an object, or a ValueError saying why not."""
    keys = [key for key in TURN_TEXT_KEYS if key in turn]
    unknown = sorted(set(turn) - {*TURN_TEXT_KEYS, "role"}, key=str)
    if unknown:
        names = ", ".join(repr(key)[:40] for key in unknown)
        raise ValueError(f"turn {index}: unknown key(s) {names} (a turn has content and role)")
    if len(keys) != 1:
        raise ValueError(f"turn {index}: give its text under exactly one of content, text, message")
    if turn.get("role", "user") != "user":
        raise ValueError(
            f"turn {index}: role {str(turn['role'])[:40]!r}: every turn is a user message "
            "(the agent's answers are not written in the dataset)"
        )
    return turn[keys[0]]


class TaskSpec(_Strict):
    """One task: an id, the user's turns in order, and the expectations."""

    id: str = Field(min_length=1, max_length=200)
    turns: list[str] = Field(min_length=1)
    expected: TaskExpected = Field(default_factory=TaskExpected)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _printable(cls, value: str) -> str:
        """An id names files, table rows and chart labels: printable text only."""
        for index, char in enumerate(value):
            kind = hidden_character(char)
            if kind is not None:
                raise ValueError(
                    f"character {index + 1} of the id is {codepoint(char)}, {kind}; "
                    "a task id is printable text (letters, digits, punctuation, symbols, "
                    "spaces)"
                )
        if value.strip() != value:
            raise ValueError("a task id may not begin or end with a space")
        return value

    @field_validator("turns", mode="before")
    @classmethod
    def _turn_texts(cls, value: Any) -> Any:
        """A turn is a string, or a mapping with ``content`` (or ``text``/``message``) and
        perhaps ``role: user``. Anything else in it is refused rather than dropped: an
        ``assistant`` message, or a second text, would silently change the conversation."""
        if not isinstance(value, list):
            return value
        texts = []
        for index, turn in enumerate(value):
            if isinstance(turn, dict):
                turn = _turn_text(index, turn)
            texts.append(turn)
        return texts

    @property
    def file_stem(self) -> str:
        """A file name for this task's episodes that cannot leave the episodes folder.

        A plain id (``[A-Za-z0-9._-]``, no leading dot, at most 80 characters) is its own
        stem. Any other id is made safe and gets ``-`` and a short hash of the real id,
        which keeps two ids that sanitize alike apart; a plain id that already ends like
        that (``a_b-c14cddc0``) is hashed too, so it never takes the stem of another id
        (``a/b``). Two ids share a stem only if their hashes collide, which
        :class:`Dataset` refuses.
        """
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.id).lstrip(".") or "task"
        plain = safe == self.id and len(safe) <= STEM_MAX_LENGTH
        if plain and not _HASHED.fullmatch(safe):
            return safe
        digest = hashlib.sha256(self.id.encode()).hexdigest()[:8]
        return f"{safe[:STEM_MAX_LENGTH]}-{digest}"


class Dataset(BaseModel):
    """The tasks of one dataset file and a hash of its bytes (recorded in run.json)."""

    path: Path
    sha256: str
    tasks: list[TaskSpec]

    def task(self, task_id: str) -> TaskSpec:
        return next(task for task in self.tasks if task.id == task_id)

    @model_validator(mode="after")
    def _one_file_per_task(self) -> Dataset:
        """No two tasks may write one episode file: one would overwrite the other and the
        summary would lose a task. ``file_stem`` makes this a hash collision only."""
        first: dict[str, int] = {}
        problems = []
        for index, task in enumerate(self.tasks):
            earlier = first.setdefault(task.file_stem, index)
            if earlier != index:
                problems.append(
                    f"{self.path}: tasks[{index}].id: {task.id!r} would share the episode "
                    f"file name {task.file_stem!r} with tasks[{earlier}].id "
                    f"{self.tasks[earlier].id!r}; change one of the two ids"
                )
        if problems:
            raise InputError(f"{self.path} has {len(problems)} problem(s)", details=problems)
        return self


def check_regex(pattern: str) -> None:
    """Raise ``ValueError`` for a pattern the verdict's engine cannot run safely."""
    import regex

    if len(pattern) > REGEX_MAX_LENGTH:
        raise ValueError(f"a regular expression of at most {REGEX_MAX_LENGTH} characters")
    if repeat_weight(pattern) > REGEX_MAX_REPEAT:
        raise ValueError(
            f"its counted repeats ({{n}}, {{m,n}}) unroll to more than {REGEX_MAX_REPEAT:,} "
            "items; use + or * for long runs"
        )
    call = _RECURSION.search(pattern)
    if call:
        raise ValueError(
            f"{call[0]!r} calls a group or the whole pattern again; recursive patterns are "
            "not allowed (one without progress fills the memory before it fails)"
        )
    try:
        regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None


def repeat_weight(pattern: str) -> int:
    """How many items the engine may unroll the pattern into, estimated from above.

    A rough scan, not a parser: every item counts 1, a group the sum of its items, and a
    ``{m}``, ``{m,n}`` or ``{m,}`` multiplies the item or group before it by its largest
    number. Escapes and ``[...]`` sets are single items. The estimate errs on the high
    side (a ``{12}`` inside a ``(?x)`` comment counts), never on the low.
    """
    sums = [0]  # the weight of each open group so far
    last = 0  # the weight of the item a quantifier would apply to
    i = 0
    while i < len(pattern):
        char = pattern[i]
        found = re.match(r"\{(\d*)(?:,(\d*))?\}", pattern[i:]) if char == "{" else None
        if found and (found[1] or found[2]):
            numbers = [int(n) for n in found.groups() if n]
            sums[-1] += last * (max(numbers) - 1)
            last *= max(numbers)
            i += found.end()
            continue
        if char == "(":
            sums.append(0)
            last = 0
            i += 1
            continue
        if char == ")" and len(sums) > 1:
            last = max(sums.pop(), 1)
            i += 1
        elif char == "\\":
            last, i = 1, i + 2
        elif char == "[":
            last, i = 1, _set_end(pattern, i)
        else:
            last, i = 1, i + 1
        sums[-1] += last
    return sum(sums)


def _set_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the set that opens at ``start`` (sets may nest)."""
    depth, i = 0, start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]" and i > start + 1 and pattern[i - 1] != "[":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def load_dataset(path: Path) -> Dataset:
    """Read and validate a tasks file; every problem is listed in one ``InputError``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"dataset {path} not found (bat eval.init writes an example)") from None
    except IsADirectoryError:
        raise InputError(f"dataset {path} is a directory, not a JSON file") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: invalid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: nested too deeply") from None
    prefix: tuple = ()
    if isinstance(data, dict) and "tasks" in data:
        data, prefix = data["tasks"], ("tasks",)
    if not isinstance(data, list):
        raise InputError(f'{path}: expected a JSON list of tasks (or {{"tasks": [...]}})')
    tasks: list[TaskSpec] = []
    problems: list[str] = []
    lines = line_index(text)
    seen: set[str] = set()
    for index, item in enumerate(data):
        try:
            task = TaskSpec.model_validate(item)
        except ValidationError as exc:
            problems += validation_problems(path, text, exc, prefix=(*prefix, index))
            continue
        if task.id in seen:
            line = lines.get((*prefix, index, "id"))
            where = f" (line {line})" if line else ""
            problems.append(f"{path}: tasks[{index}].id{where}: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    if problems:
        raise InputError(f"{path} has {len(problems)} problem(s)", details=problems)
    if not tasks:
        raise InputError(f"{path} holds no tasks")
    return Dataset(path=path, sha256=hashlib.sha256(raw).hexdigest(), tasks=tasks)
