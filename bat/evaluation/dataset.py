"""The dataset: ``eval/input/tasks.json``, a list of TaskSpec.

A task is an id, the user turns of one conversation, and what success looks like
(``expected``). Field names follow bat-cli's format (``status``, ``output_must_contain``,
``tool_calls[{name, args_subset, times}]``, ``expected_outcome``); the other checks are
ours. Every problem of a file is reported at once, with its location.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from bat.errors import InputError
from bat.evaluation.locate import json_lines, validation_problems

Status = Literal["completed", "input-required", "auth-required", "working", "error"]
STATUS_SYNONYMS = {
    "failed": "error",
    "input_required": "input-required",
    "auth_required": "auth-required",
}


def normalize_status(value: Any) -> Any:
    """``failed`` is read as ``error``; other words pass through for validation."""
    if isinstance(value, str):
        word = value.strip().lower()
        return STATUS_SYNONYMS.get(word, word)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCallExpectation(_Strict):
    """A tool the agent must call: by name, with at least these arguments, at least ``times``."""

    name: str = Field(min_length=1)
    args_subset: dict[str, Any] = Field(default_factory=dict)
    times: int = Field(default=1, ge=1)


class AgentCallExpectation(_Strict):
    """Another agent this agent must call, at least ``times`` (bat-cli writes ``agent``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(min_length=1, validation_alias=AliasChoices("name", "agent"))
    times: int = Field(default=1, ge=1)


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
    max_model_calls: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    no_errors: bool = False
    agent_calls: list[AgentCallExpectation] = Field(default_factory=list)
    expected_outcome: str | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _synonyms(cls, value: Any) -> Any:
        return normalize_status(value)

    @field_validator("output_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
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


class TaskSpec(_Strict):
    """One task: an id, the user's turns in order, and the expectations."""

    id: str = Field(min_length=1, max_length=200)
    turns: list[str] = Field(min_length=1)
    expected: TaskExpected = Field(default_factory=TaskExpected)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("turns", mode="before")
    @classmethod
    def _turn_texts(cls, value: Any) -> Any:
        """A turn is a string, or a mapping with ``content`` (or ``text``/``message``)."""
        if not isinstance(value, list):
            return value
        texts = []
        for turn in value:
            if isinstance(turn, dict):
                turn = next((turn[k] for k in ("content", "text", "message") if k in turn), turn)
            texts.append(turn)
        return texts

    @property
    def file_stem(self) -> str:
        """A file name for this task's episodes that cannot leave the episodes folder.

        Ids are free text; anything outside ``[A-Za-z0-9._-]``, and any leading dot, is
        replaced, and a short hash of the real id keeps two ids that sanitize alike apart.
        """
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.id).lstrip(".") or "task"
        if safe == self.id and len(safe) <= 80:
            return safe
        digest = hashlib.sha256(self.id.encode()).hexdigest()[:8]
        return f"{safe[:80]}-{digest}"


class Dataset(BaseModel):
    """The tasks of one dataset file and a hash of its bytes (recorded in run.json)."""

    path: Path
    sha256: str
    tasks: list[TaskSpec]

    def task(self, task_id: str) -> TaskSpec:
        return next(task for task in self.tasks if task.id == task_id)


def load_dataset(path: Path) -> Dataset:
    """Read and validate a tasks file; every problem is listed in one ``InputError``.

    A dataset may hold a million tasks, so a sound file takes one pass: pydantic
    validates the list straight from its JSON text (see :func:`_validated`). Only a
    file with problems is read again task by task, so that each problem is listed with
    its line.
    """
    text, sha256 = _read(path)
    tasks = _validated(text, _task_list())
    if tasks is not None and len({task.id for task in tasks}) != len(tasks):
        tasks = None  # duplicate ids: listed below
    if tasks is None:
        tasks = _tasks_one_by_one(path, text)
    if not tasks:
        raise InputError(f"{path} holds no tasks")
    return Dataset(path=path, sha256=sha256, tasks=tasks)


def _read(path: Path) -> tuple[str, str]:
    """The text of a dataset file and the SHA-256 of its bytes (recorded in run.json)."""
    from bat.input_files import DATASET_LIMIT, decode, read_bytes

    try:
        raw = read_bytes(path, limit=DATASET_LIMIT, kind="a JSON dataset")
    except FileNotFoundError:
        raise InputError(f"dataset {path} not found (bat eval.init writes an example)") from None
    return decode(path, raw), hashlib.sha256(raw).hexdigest()


def _validated(
    text: str, adapter: TypeAdapter, context: Any = None, chunk: int = 20_000
) -> list | None:
    """The items of the JSON list ``text`` validated by ``adapter`` (a list adapter);
    None when anything is wrong, for the caller to list the problems.

    The list is cut into lists of ``chunk`` items, each validated from its text:
    pydantic's parse of a whole large file takes 2.5 times its size before a single
    task is made. Python's cyclic garbage collector is paused meanwhile: a million new
    objects would otherwise set off collections that scan all of them, again and
    again (most of the time, measured).
    """
    items: list = []
    try:
        with _gc_paused():
            for part in _json_list_chunks(text, chunk):
                items += adapter.validate_json(part, context=context)
    except (_NotAList, ValidationError):
        return None
    return items


@dataclass(frozen=True)
class DatasetCheck:
    """What checking a dataset tells without keeping its tasks: their number, the hash
    of the file, and the tasks that check nothing but the final status (usually few)."""

    path: Path
    sha256: str
    count: int
    weak: list[TaskSpec]


def check_dataset(path: Path, *, chunk: int = 20_000) -> DatasetCheck:
    """Validate a tasks file as :func:`load_dataset` does, keeping no task.

    ``bat eval.show`` only reports on a dataset, and a million validated tasks take
    over 2 GB as pydantic models. Here a valid task leaves only its id (and itself if
    it is weak) in ``notes`` and is let go: memory is the file's text and one chunk.
    Any problem is left to :func:`load_dataset`, which lists every one with its line.
    """
    text, sha256 = _read(path)
    notes: dict[str, list] = {"ids": [], "weak": []}
    ids = notes["ids"]
    valid = _validated(text, _task_notes(), notes, chunk) is not None
    if valid and ids and len(set(ids)) == len(ids):
        return DatasetCheck(path=path, sha256=sha256, count=len(ids), weak=notes["weak"])
    # The full reader lists every problem, or reads what this one leaves to it
    # (``{"tasks": [...]}``, an empty list).
    del text, notes, ids
    dataset = load_dataset(path)
    weak = [task for task in dataset.tasks if not task.expected.checks_beyond_status]
    return DatasetCheck(path=path, sha256=dataset.sha256, count=len(dataset.tasks), weak=weak)


def _json_list_chunks(text: str, size: int) -> Iterator[str]:
    """The JSON list ``text`` cut into JSON lists of ``size`` items (the last: fewer).

    The C decoder finds where each item ends (the item it builds is dropped at once).
    Raises ``_NotAList`` for anything but one well-formed list; the caller then leaves
    the file to the full reader, for the message.
    """
    decoder = json.JSONDecoder()
    space = re.compile(r"[ \t\n\r]*")
    pos = space.match(text).end()
    if not text.startswith("[", pos):
        raise _NotAList
    pos = space.match(text, pos + 1).end()
    if text.startswith("]", pos):
        end_of_list = pos + 1  # an empty list
    else:
        first, items = pos, 0
        while True:
            try:
                end = decoder.raw_decode(text, pos)[1]
            except (json.JSONDecodeError, RecursionError):
                raise _NotAList from None
            items += 1
            pos = space.match(text, end).end()
            if text.startswith("]", pos):
                yield f"[{text[first:end]}]"
                end_of_list = pos + 1
                break
            if not text.startswith(",", pos):
                raise _NotAList
            pos = space.match(text, pos + 1).end()
            if items == size:
                yield f"[{text[first:end]}]"
                first, items = pos, 0
    if space.match(text, end_of_list).end() != len(text):
        raise _NotAList


class _NotAList(ValueError):
    """The text is not one well-formed JSON list."""


def _noted(task: TaskSpec, info: ValidationInfo) -> None:
    """What :func:`check_dataset` keeps of a valid task; the task itself is dropped."""
    info.context["ids"].append(task.id)
    if not task.expected.checks_beyond_status:
        info.context["weak"].append(task)


@functools.cache
def _task_notes() -> TypeAdapter:
    return TypeAdapter(list[Annotated[TaskSpec, AfterValidator(_noted)]])


def _tasks_one_by_one(path: Path, text: str) -> list[TaskSpec]:
    """The tasks of ``text``, or one ``InputError`` listing every problem with its line."""
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
    errors: list[tuple[int, ValidationError]] = []
    duplicates: list[tuple[int, str]] = []
    seen: set[str] = set()
    with _gc_paused():
        for index, item in enumerate(data):
            try:
                task = TaskSpec.model_validate(item)
            except ValidationError as exc:
                errors.append((index, exc))
                continue
            if task.id in seen:
                duplicates.append((index, task.id))
            seen.add(task.id)
            tasks.append(task)
    if not errors and not duplicates:
        return tasks
    # Lines are mapped now, for the tasks with problems only.
    bad = [index for index, _ in errors] + [index for index, _ in duplicates]
    lines = json_lines(text, within=[(*prefix, index) for index in bad])
    problems: list[str] = []
    for index, exc in errors:
        problems += validation_problems(path, text, exc, prefix=(*prefix, index), lines=lines)
    for index, task_id in duplicates:
        line = lines.get((*prefix, index, "id"))
        where = f" (line {line})" if line else ""
        problems.append(f"{path}: tasks[{index}].id{where}: duplicate task id {task_id!r}")
    raise InputError(f"{path} has {len(problems)} problem(s)", details=problems)


@functools.cache
def _task_list() -> TypeAdapter[list[TaskSpec]]:
    return TypeAdapter(list[TaskSpec])


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while many objects are made (they are all kept)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
