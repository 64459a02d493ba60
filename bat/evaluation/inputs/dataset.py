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
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    StrictBool,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bat.errors import InputError
from bat.evaluation.inputs.compat import COMPAT_HINT, UnknownKeys
from bat.evaluation.inputs.output_regex import check_regex
from bat.evaluation.log.outcome import Status, normalize_status
from bat.figures import counted
from bat.input_files import RepeatedKey, json_lines, no_repeated_keys, repeated_key_error
from bat.locate import dotted, refuse_lone_surrogates, validation_problems

ID_MAX_LENGTH = 200  # characters (code points)
STEM_MAX_LENGTH = 80  # characters of an id kept in its episode file name
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

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, value: Any) -> Any:
        if isinstance(value, dict) and "name" in value and "agent" in value:
            raise ValueError("name and agent are one key (bat-cli writes agent): give one")
        return value


def _workspace_path(value: str) -> str:
    """A path a workspace check names: relative, inside the workspace, ``/``-separated.
    An absolute path or ``..`` could make a check read a file outside the episode's
    working copy (and copy it into the episode file)."""
    if not value or len(value) > 1000 or "\x00" in value:
        raise ValueError("a workspace path is 1 to 1,000 characters, with no NUL")
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{value[:80]!r}: a workspace path is relative to the workspace")
    if ".." in value.replace("\\", "/").split("/"):
        raise ValueError(f"{value[:80]!r}: a workspace path may not contain '..'")
    return value.replace("\\", "/").removeprefix("./")


WorkspacePath = Annotated[str, AfterValidator(_workspace_path)]


def _listed(value: Any) -> Any:
    """One string where a list is meant (``diff_contains: "x"``) is a list of one."""
    return [value] if isinstance(value, str | dict) else value


class CommandCheck(_Strict):
    """``command_succeeds``: a shell command run in the workspace after the episode (the
    project's tests, say), passing when it exits 0 within ``timeout_s``."""

    run: str = Field(min_length=1, max_length=10_000)
    timeout_s: float = Field(default=120, gt=0, le=3600, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain(cls, value: Any) -> Any:
        return {"run": value} if isinstance(value, str) else value


class WorkspaceExpect(_Strict):
    """belt's checks on what a command-line agent did (``expect`` of a belt scenario's
    turn, or a task's ``expected``). Each is optional; the verdict's semantics are bat's:
    every check given must pass."""

    tools_invoked: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list
    )  # each called at least once
    files_modified_any: list[WorkspacePath] = Field(default_factory=list)  # one of them changed
    files_created: list[WorkspacePath] = Field(default_factory=list)  # each created
    files_unchanged: list[WorkspacePath] = Field(default_factory=list)  # none of them touched
    file_contains: dict[WorkspacePath, list[str]] = Field(default_factory=dict)
    diff_contains: list[str] = Field(default_factory=list)  # each in the final git diff
    has_reply: StrictBool | None = None  # the turn (or episode) ended with some text
    command_succeeds: list[CommandCheck] = Field(default_factory=list)

    _lists = field_validator("diff_contains", "command_succeeds", mode="before")(_listed)

    @field_validator("file_contains", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {path: [text] if isinstance(text, str) else text for path, text in value.items()}
        return value

    @property
    def checks_workspace(self) -> bool:
        return bool(
            self.tools_invoked
            or self.files_modified_any
            or self.files_created
            or self.files_unchanged
            or self.file_contains
            or self.diff_contains
            or self.has_reply is not None
            or self.command_succeeds
        )

    @property
    def checks_action(self) -> bool:
        """Whether a check passes only if the agent did something (called a tool, changed
        a file): such a pass is not vacuous even when the agent said nothing."""
        return bool(
            self.tools_invoked
            or self.files_modified_any
            or self.files_created
            or self.diff_contains
        )


class TurnExpect(WorkspaceExpect):
    """belt's per-turn ``expect``: the workspace checks and ``no_errors``, each checked
    against that turn only (its reply, its tool calls, its changes and diff; the files
    and commands are read once, after the last turn)."""

    no_errors: StrictBool = False

    @property
    def checks_anything(self) -> bool:
        return self.checks_workspace or self.no_errors


Assertion = Annotated[str, Field(min_length=1, max_length=2_000)]
MAX_ASSERTIONS = 50


class TaskExpected(WorkspaceExpect):
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
    # Checked in every reply of the agent, not only the last (a conversation's middle
    # holds what a simulated user was asked: "which order?").
    conversation_must_contain: list[str] = Field(default_factory=list)
    conversation_must_not_contain: list[str] = Field(default_factory=list)
    # Natural-language assertions (tau2-bench's nl_assertions), each decided pass/fail by
    # the judges with a reason; part of the verdict only with ``assertions_in_verdict``.
    assertions: list[Assertion] = Field(default_factory=list, max_length=MAX_ASSERTIONS)
    assertions_in_verdict: StrictBool = False

    @model_validator(mode="after")
    def _assertions_to_count(self) -> TaskExpected:
        if self.assertions_in_verdict and not self.assertions:
            raise ValueError("assertions_in_verdict is true, but there are no assertions")
        return self

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
            or self.checks_workspace
            or self.conversation_must_contain
            or self.conversation_must_not_contain
            or self.assertions_in_verdict
        )


def _turn_text(index: int, turn: dict[str, Any]) -> Any:
    """The text of turn ``index`` written as an object, or a ValueError saying why not
    (its ``expect`` was taken out before: :meth:`TaskSpec._turn_expectations`)."""
    keys = [key for key in TURN_TEXT_KEYS if key in turn]
    unknown = sorted(set(turn) - {*TURN_TEXT_KEYS, "role"}, key=str)
    if unknown:
        names = ", ".join(repr(key)[:40] for key in unknown)
        raise ValueError(
            f"turn {index}: unknown key(s) {names} (a turn has content, role and expect)"
        )
    if len(keys) != 1:
        raise ValueError(f"turn {index}: give its text under exactly one of content, text, message")
    if turn.get("role", "user") != "user":
        raise ValueError(
            f"turn {index}: role {str(turn['role'])[:40]!r}: every turn is a user message "
            "(the agent's answers are not written in the dataset)"
        )
    return turn[keys[0]]


MAX_USER_TURNS = 100
USER_TEXT_LIMIT = 20_000  # characters of a simulated user's instructions or first message


class SimulatedUser(_Strict):
    """A task's simulated user (``user``): a persona played by the user model of eval.yaml's
    ``user:`` section, which writes the user's turns after the dataset's fixed ones
    (:mod:`bat.evaluation.run.simulated_user`). ``max_turns`` bounds the conversation's
    user turns, fixed ones included."""

    instructions: str = Field(min_length=1, max_length=USER_TEXT_LIMIT)
    first_message: str | None = Field(default=None, min_length=1, max_length=USER_TEXT_LIMIT)
    max_turns: Count = Field(default=10, ge=1, le=MAX_USER_TURNS)

    @property
    def instructions_sha256(self) -> str:
        return hashlib.sha256(self.instructions.encode()).hexdigest()


class TaskSpec(_Strict):
    """One task: an id, the user's turns in order (or a simulated user who writes them),
    and the expectations."""

    id: str = Field(min_length=1, max_length=200)
    turns: list[str] = Field(default_factory=list)
    user: SimulatedUser | None = None
    expected: TaskExpected = Field(default_factory=TaskExpected)
    meta: dict[str, Any] = Field(default_factory=dict)
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(default_factory=list)
    # Each turn's ``expect`` (None: the turn has none), or empty when no turn has one.
    _turn_expected: tuple[TurnExpect | None, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _turn_expectations(cls, data: Any, handler: Any) -> Any:
        """A turn written as an object may carry ``expect`` (belt's per-turn checks).
        It is taken out of the turn before the task is validated (so ``turns`` stays a
        list of texts for everything that sends them) and kept beside it; its problems
        are reported at ``turns[i].expect``, with the task's own."""
        turns = data.get("turns") if isinstance(data, dict) else None
        if isinstance(data, dict) and not turns and data.get("user") is None:
            return cls._nobody_speaks(data, handler)
        if not isinstance(turns, list) or not any(
            isinstance(turn, dict) and "expect" in turn for turn in turns
        ):
            return handler(data)
        problems: list[dict[str, Any]] = []
        expected: list[TurnExpect | None] = []
        bare = []
        for index, turn in enumerate(turns):
            want = None
            if isinstance(turn, dict) and "expect" in turn:
                turn = {key: value for key, value in turn.items() if key != "expect"}
                try:  # ``expect: null`` is no expectation, as an absent one
                    raw = turns[index]["expect"]
                    want = None if raw is None else TurnExpect.model_validate(raw)
                except ValidationError as exc:
                    problems += _moved(exc, ("turns", index, "expect"))
            expected.append(want)
            bare.append(turn)
        try:
            task = handler({**data, "turns": bare})
        except ValidationError as exc:
            problems = [*_moved(exc, ()), *problems]
            task = None
        if problems:
            raise ValidationError.from_exception_data(cls.__name__, problems)
        if any(want is not None for want in expected):
            task._turn_expected = tuple(expected)
        return task

    @classmethod
    def _nobody_speaks(cls, data: dict[str, Any], handler: Any) -> Any:
        """A task with neither turns nor a simulated user: a problem at ``turns``, listed
        with the task's other problems."""
        problems = []
        try:
            handler(data)
        except ValidationError as exc:
            problems = [item for item in _moved(exc, ()) if item["loc"][:1] != ("turns",)]
        problems.append(
            {
                "type": "value_error",
                "loc": ("turns",),
                "input": data.get("turns"),
                "ctx": {
                    "error": ValueError(
                        "a task needs turns, or a simulated user (user: {instructions: ...}) "
                        "to write them"
                    )
                },
            }
        )
        raise ValidationError.from_exception_data(cls.__name__, problems)

    @model_validator(mode="after")
    def _user_has_a_turn(self) -> TaskSpec:
        """The simulated user has a turn left after the fixed ones."""
        if self.user is not None and len(self.turns) >= self.user.max_turns:
            raise ValueError(
                f"user.max_turns is {self.user.max_turns}, but the task has "
                f"{len(self.turns)} fixed turns: the simulated user would never speak"
            )
        return self

    @property
    def turn_expected(self) -> tuple[TurnExpect | None, ...]:
        """Each turn's own expectations (None for a turn without), or ``()`` when no
        turn has any: checked by the verdict against that turn only."""
        return self._turn_expected

    @property
    def checks_beyond_status(self) -> bool:
        """Whether the task or any turn checks more than the final status."""
        return self.expected.checks_beyond_status or any(
            want is not None and want.checks_anything for want in self._turn_expected
        )

    @property
    def all_tags(self) -> list[str]:
        """The task's tags, and bat-cli's ``meta.category`` read as one more (in order,
        each once): what ``--tag`` and a gate's ``tag:NAME`` select by."""
        category = self.meta.get("category")
        extra = [category] if isinstance(category, str) and category.strip() else []
        return list(dict.fromkeys([*self.tags, *extra]))

    @field_validator("id")
    @classmethod
    def _printable(cls, value: str) -> str:
        """An id names files, table rows and chart labels: printable text only."""
        # Fast path (most ids, and a million of them in a large dataset): printable ASCII
        # is space, letters, digits, punctuation and symbols, none of them hidden.
        hidden = not (value.isascii() and value.isprintable())
        for index, char in enumerate(value if hidden else ""):
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
    def _turn_texts(cls, value: Any, info: ValidationInfo) -> Any:
        """A turn is a string, or a mapping with ``content`` (or ``text``/``message``) and
        perhaps ``role: user``. Anything else in it is refused rather than dropped: an
        ``assistant`` message, or a second text, would silently change the conversation.

        A turn that holds ``{`` may be a template over earlier turns
        (``bat.evaluation.inputs.turn_templates``): it is checked here, and only such a
        task pays for it."""
        if not isinstance(value, list):
            return value
        texts = []
        braces = False
        for index, turn in enumerate(value):
            if isinstance(turn, dict):
                turn = _turn_text(index, turn)
            braces = braces or (isinstance(turn, str) and "{" in turn)
            texts.append(turn)
        if braces:
            from bat.evaluation.inputs.turn_templates import TemplateProblem, check_turns

            try:
                check_turns(texts)
            except TemplateProblem as exc:
                task_id = info.data.get("id")
                named = f"task {str(task_id)[:80]!r}, " if isinstance(task_id, str) else ""
                raise ValueError(f"{named}{exc}") from None
        return texts

    @functools.cached_property
    def turn_templates(self) -> tuple[Any, ...] | None:
        """The compiled template of each turn (``None`` for a plain turn), or ``None`` when
        every turn is plain: compiled once per task, on first use, from turns the dataset
        check has passed."""
        from bat.evaluation.inputs.turn_templates import compile_turns

        return compile_turns(self.turns)

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
        return file_stem(self.id)


def _moved(exc: ValidationError, prefix: tuple) -> list[dict[str, Any]]:
    """The errors of ``exc`` as pydantic's raw error details, their key paths under
    ``prefix`` (to be raised again as one ValidationError)."""
    moved = []
    for item in exc.errors(include_url=False):
        detail = {"type": item["type"], "loc": (*prefix, *item["loc"]), "input": item["input"]}
        if "ctx" in item:
            detail["ctx"] = item["ctx"]
        moved.append(detail)
    return moved


def file_stem(task_id: str) -> str:
    """:attr:`TaskSpec.file_stem` of the id ``task_id`` (``eval.merge`` knows a run's
    tasks by the ids its run.json lists)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).lstrip(".") or "task"
    plain = safe == task_id and len(safe) <= STEM_MAX_LENGTH
    if plain and not _HASHED.fullmatch(safe):
        return safe
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return f"{safe[:STEM_MAX_LENGTH]}-{digest}"


class Dataset(BaseModel):
    """The tasks of one dataset file and a hash of its bytes (recorded in run.json)."""

    path: Path
    sha256: str
    tasks: list[TaskSpec]
    # Keys bat does not read, left out under ``compat: {unknown_keys: warn}``: each key
    # path within a task (``description``, ``expected.foo``) -> the ids of its tasks.
    ignored: dict[str, list[str]] = Field(default_factory=dict)
    # A folder of belt scenario groups (bat.evaluation.inputs.belt_groups): its groups
    # (BeltGroup: the agent and workspace each names), what of it bat does not use, and
    # the tasks as a tasks.json text (the run's snapshot; ``sha256`` is its hash).
    groups: list[Any] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    snapshot: bytes | None = Field(default=None, repr=False)

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
            raise InputError(
                f"{self.path} has {counted(len(problems), 'problem')}", details=problems
            )
        return self


def load_dataset(path: Path, *, unknown_keys: UnknownKeys = "refuse") -> Dataset:
    """Read and validate a tasks file; every problem is listed in one ``InputError``.

    A dataset may hold a million tasks, so a sound file takes one pass: pydantic
    validates the list straight from its JSON text (see :func:`_validated`). Only a
    file with problems is read again task by task, so that each problem is listed with
    its line. With ``unknown_keys="warn"``, keys bat does not read are left out there
    and recorded in ``Dataset.ignored`` instead of refused.

    A folder is read as belt scenario groups (:func:`load_belt_folder`).
    """
    from bat.evaluation.inputs.belt_groups import is_belt_folder

    if is_belt_folder(path):
        return load_belt_folder(path)
    text, sha256 = _read(path)
    try:
        tasks = _validated(text, _task_list())
    except RepeatedKey as exc:
        raise repeated_key_error(path, text, exc) from None
    if tasks is not None and len({task.id for task in tasks}) != len(tasks):
        tasks = None  # duplicate ids: listed below
    ignored: dict[str, list[str]] = {}
    if tasks is None:
        tasks = _tasks_one_by_one(path, text, unknown_keys, ignored)
    if not tasks:
        raise InputError(f"{path} holds no tasks")
    refuse_lone_surrogates(path, text)
    return Dataset(path=path, sha256=sha256, tasks=tasks, ignored=ignored)


def load_belt_folder(path: Path) -> Dataset:
    """The tasks of a folder of belt scenario groups (``_config.json`` + ``NAME.json``),
    every problem of every file listed in one ``InputError``."""
    from bat.evaluation.inputs import belt_groups

    found = belt_groups.read_groups(path)
    problems = list(found.problems)
    tasks: list[TaskSpec] = []
    for item in found.tasks:
        try:
            tasks.append(TaskSpec.model_validate(item))
        except ValidationError as exc:
            problems += belt_groups.task_problems(found, item["id"], exc)
    belt_groups.raise_problems(path, problems)
    return Dataset(
        path=path,
        sha256=found.sha256(),
        tasks=tasks,
        groups=found.groups,
        warnings=found.warnings,
        snapshot=found.snapshot(),
    )


def _read(path: Path) -> tuple[str, str]:
    """The text of a dataset file and the SHA-256 of its bytes (recorded in run.json)."""
    from bat.input_files import DATASET_LIMIT, decode, read_bytes

    try:
        raw = read_bytes(path, limit=DATASET_LIMIT, kind="a JSON dataset")
    except FileNotFoundError:
        raise InputError(f"dataset {path} not found (bat eval.init writes an example)") from None
    return decode(path, raw), hashlib.sha256(raw).hexdigest()


# JSON may spell half of a UTF-16 pair ("\ud800"): Python reads it into a string that no
# file, terminal or episode can be written with, so a run would fail at its first write.
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


@dataclass
class TaskIds:
    """Some tasks of a dataset: how many, and the first ids (what a message names), so
    that a million of them cost no memory."""

    count: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, task_id: str) -> None:
        self.count += 1
        if len(self.first) < 5:
            self.first.append(task_id)

    def __len__(self) -> int:
        return self.count

    def named(self) -> str:
        """``a, b, c, d, e and 7 more``."""
        more = self.count - len(self.first)
        return ", ".join(self.first) + (f" and {more} more" if more > 0 else "")


@dataclass
class DatasetFacts:
    """What the checks before a run (:mod:`bat.evaluation.inputs.checks`) need to know
    of a dataset, gathered one task at a time so that no task need be kept."""

    multi_turn: TaskIds = field(default_factory=TaskIds)  # tasks with several turns
    tool_names: bool = False  # some task checks the names of tool calls
    tool_args: bool = False  # some task checks their arguments (args_subset)
    regex: TaskIds = field(default_factory=TaskIds)  # tasks with output_regex
    must_not: TaskIds = field(default_factory=TaskIds)  # ... with output_must_not_contain
    simulated: TaskIds = field(default_factory=TaskIds)  # tasks with a simulated user

    def add(self, task: TaskSpec) -> None:
        expected = task.expected
        if task.user is not None:
            self.simulated.add(task.id)
        if len(task.turns) > 1:
            self.multi_turn.add(task.id)
        self.tool_names = self.tool_names or expected.checks_tools
        self.tool_args = self.tool_args or any(c.args_subset for c in expected.tool_calls)
        if expected.output_regex is not None:
            self.regex.add(task.id)
        if expected.output_must_not_contain:
            self.must_not.add(task.id)

    @classmethod
    def of(cls, tasks: list[TaskSpec]) -> DatasetFacts:
        facts = cls()
        for task in tasks:
            facts.add(task)
        return facts


@dataclass(frozen=True)
class DatasetCheck:
    """What checking a dataset tells without keeping its tasks: their number, the hash
    of the file, the tasks that check nothing but the final status (usually few), what
    the checks before a run need (``facts``) and the keys left out (``ignored``)."""

    path: Path
    sha256: str
    count: int
    weak: list[TaskSpec]
    facts: DatasetFacts = field(default_factory=DatasetFacts)
    ignored: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # a belt folder's (Dataset.warnings)

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetCheck:
        """The check of a dataset already loaded (``eval.run``, ``--dry-run``)."""
        weak = [task for task in dataset.tasks if not task.checks_beyond_status]
        return cls(
            path=dataset.path,
            sha256=dataset.sha256,
            count=len(dataset.tasks),
            weak=weak,
            facts=DatasetFacts.of(dataset.tasks),
            ignored=dataset.ignored,
            warnings=dataset.warnings,
        )


def check_dataset(
    path: Path, *, chunk: int = 20_000, unknown_keys: UnknownKeys = "refuse"
) -> DatasetCheck:
    """Validate a tasks file as :func:`load_dataset` does, keeping no task.

    ``bat eval.show`` only reports on a dataset, and a million validated tasks take
    over 2 GB as pydantic models. Here a valid task leaves only its episode file stem
    (and itself if it is weak) in ``notes`` and is let go: memory is the file's text
    and one chunk. Distinct stems mean distinct ids too, so the checks of
    :class:`Dataset` hold. Any problem is left to :func:`load_dataset`, which lists
    every one with its line.
    """
    from bat.evaluation.inputs.belt_groups import is_belt_folder

    if is_belt_folder(path):  # a belt folder: at most a few thousand scenarios
        return DatasetCheck.of(load_belt_folder(path))
    text, sha256 = _read(path)
    facts = DatasetFacts()
    notes: dict[str, Any] = {"stems": [], "weak": [], "facts": facts}
    stems = notes["stems"]
    try:
        valid = _validated(text, _task_notes(), notes, chunk) is not None
    except RepeatedKey as exc:
        raise repeated_key_error(path, text, exc) from None
    if valid and stems and len(set(stems)) == len(stems):
        refuse_lone_surrogates(path, text)
        return DatasetCheck(
            path=path, sha256=sha256, count=len(stems), weak=notes["weak"], facts=facts
        )
    # The full reader lists every problem, or reads what this one leaves to it
    # (``{"tasks": [...]}``, an empty list, keys left out under the compat switch).
    del text, notes, stems
    return DatasetCheck.of(load_dataset(path, unknown_keys=unknown_keys))


def _json_list_chunks(text: str, size: int) -> Iterator[str]:
    """The JSON list ``text`` cut into JSON lists of ``size`` items (the last: fewer).

    The C decoder finds where each item ends (the item it builds is dropped at once);
    its objects go through the one hook of every JSON input, so a key written twice in
    an object is found on the way, as :class:`~bat.input_files.RepeatedKey`, for the
    price of nothing more (the hook builds each dict in C: no slower, measured, than
    checking the keys alone).
    Raises ``_NotAList`` for anything but one well-formed list; the caller then leaves
    the file to the full reader, for the message.
    """
    decoder = json.JSONDecoder(object_pairs_hook=no_repeated_keys)
    space = re.compile(r"[ \t\n\r]*")
    pos = space.match(text).end()
    if not text.startswith("[", pos):
        raise _NotAList
    pos = space.match(text, pos + 1).end()
    if text.startswith("]", pos):
        end_of_list = pos + 1  # an empty list
    else:
        first, items, count = pos, 0, 0
        while True:
            try:
                end = decoder.raw_decode(text, pos)[1]
            except RepeatedKey as exc:  # only this task's lines need mapping
                raise RepeatedKey(exc.key, within=(count,)) from None
            except (ValueError, RecursionError):  # a 5,000-digit number is a ValueError
                raise _NotAList from None
            items += 1
            count += 1
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
    info.context["stems"].append(task.file_stem)
    info.context["facts"].add(task)
    if not task.checks_beyond_status:
        info.context["weak"].append(task)


@functools.cache
def _task_notes() -> TypeAdapter:
    return TypeAdapter(list[Annotated[TaskSpec, AfterValidator(_noted)]])


def _tasks_one_by_one(
    path: Path,
    text: str,
    unknown_keys: UnknownKeys = "refuse",
    ignored: dict[str, list[str]] | None = None,
) -> list[TaskSpec]:
    """The tasks of ``text``, or one ``InputError`` listing every problem with its line.

    With ``unknown_keys="warn"``, a task's keys bat does not read are left out (each
    key path noted in ``ignored`` with the task's id) and the rest validated again."""
    from bat.input_files import parse_json

    data = parse_json(text, path)  # a key written twice is refused, as on the fast path
    prefix: tuple = ()
    if isinstance(data, dict) and "tasks" in data:
        others = sorted(key for key in data if key != "tasks")
        if others:
            raise InputError(
                f'{path}: {{"tasks": [...]}} holds other keys too, which bat does not read: '
                + ", ".join(repr(key) for key in others[:5])
            )
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
                task = _without_unknown_keys(item, exc, ignored) if unknown_keys == "warn" else None
                if task is None:
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
    hint = (
        [COMPAT_HINT]
        if unknown_keys == "refuse" and any(_unknown_keys(e) for _, e in errors)
        else []
    )
    message = f"{path} has {counted(len(problems), 'problem')}"
    raise InputError(message, details=[*problems, *hint])


def _unknown_keys(exc: ValidationError) -> list[tuple]:
    """The key paths of ``exc``'s errors that are keys bat does not read."""
    return [tuple(item["loc"]) for item in exc.errors() if item["type"] == "extra_forbidden"]


def _without_unknown_keys(
    item: Any, exc: ValidationError, ignored: dict[str, list[str]] | None
) -> TaskSpec | None:
    """The task ``item`` validated without the keys bat does not read, those noted in
    ``ignored``; None when it has other problems too (they are then all listed)."""
    import copy

    unknown = _unknown_keys(exc)
    if not unknown or len(unknown) != len(exc.errors()):
        return None
    trimmed = copy.deepcopy(item)
    try:
        for loc in unknown:
            holder = trimmed
            for part in loc[:-1]:
                holder = holder[part]
            del holder[loc[-1]]
        task = TaskSpec.model_validate(trimmed)
    except (ValidationError, LookupError, TypeError):  # a path a validator reshaped
        return None
    if ignored is not None:
        for loc in unknown:
            ignored.setdefault(dotted(loc), []).append(task.id)
    return task


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
