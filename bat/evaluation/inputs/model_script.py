"""A model's script: the rule file of the stand-in model bat serves (``script:``).

A ``models:`` entry of eval.yaml with ``script: FILE`` is answered by bat's scripted model
server (:mod:`bat.evaluation.run.scripted_model`), and eval.yaml's loader checks FILE
before any agent starts. This module is that file's format, as pydantic models, and how a
rule picks an answer; there is no server in it.

A rule file (JSON, or YAML) is a list of rules; the first rule matching a conversation
answers, and with none the reply is ``echo: <last user message>``::

    - match: weather            # a substring of the last user message
      reply: It is sunny.
    - regex: '^(hi|hello)\\b'    # a regular expression searched in it
      reply: Hello!
    - after_tool: add           # the last message is the result of a call to `add`
      reply: 'The sum is {result}.'
    - match: plus               # the model asks for add(a=2, b=3)...
      tool_calls: [{name: add, args: {a: 2, b: 3}}]
    - match: slow
      delay_ms: 2000            # it answers after two seconds, as a loaded model does
      reply: 'echo: {last}'

* ``match`` / ``regex``: a substring / a regular expression searched in the text
  ``scope`` names; neither: the rule matches anything. A ``regex`` is held to the limits
  of a dataset's ``output_regex`` (:mod:`bat.evaluation.inputs.output_regex`: the
  ``regex`` engine, at most 2,000 characters, counted repeats bounded, no recursion),
  checked when the file is read, and each search has one second: a slower one (a
  backtracking ``^(a+)+$`` on a long message) is :class:`RuleTooSlow`, which the server
  answers with an error naming the rule instead of freezing.
* ``scope``: ``last`` (default; the last user message) or ``prompt`` (the text of every
  message, system prompt included, joined by newlines).
* ``reply``: the assistant's content, verbatim but for ``{last}`` and ``{first}`` (the
  last and first user messages), ``{user_count}``, ``{message_count}`` (system prompt
  included) and ``{result}`` (the tool result answered), so a test of an agent can check
  that it sent its history.
* ``tool_calls``: the tools the model asks for, ``[{name, args}]`` (``reply`` optional,
  sent beside them). Such a rule never answers a conversation whose last message is a
  tool result, so a tool loop ends. ``{cwd}`` in a string of ``args`` is the working
  directory the agent's prompt states (a line ``Primary working directory: PATH``,
  ``I'm currently working in the directory: PATH``, or ``<cwd>PATH</cwd>``), for tools
  that want an absolute path (Claude Code's
  ``Write``: ``{file_path: '{cwd}/notes.txt', content: hi}``); a run's workspace is a
  fresh folder each episode, so a script cannot spell it out.
* ``after_tool``: a tool name, or ``*`` for any: the rule answers only a conversation
  whose last message is that tool's result, its ``match``/``regex`` searched in the
  result.
* ``delay_ms``: wait this long before answering. A real model takes seconds; a stand-in
  that answers at once never shows whether the agent's own model timeout, bat's
  ``turn_timeout_s`` and the run's latency figures behave under a slow model, nor lets
  concurrent episodes overlap the way they will.

A rule needs a ``reply`` or ``tool_calls``; any other key is an error naming the rule and
the key. Making a model fail on purpose (an HTTP status, a raw body, "only the first N
times") is for bat's own tests: ``eval_fixtures/model_server.py`` extends these models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    RootModel,
    ValidationError,
    model_validator,
)

ECHO = "echo: {last}"
PLACEHOLDER = re.compile(r"\{(last|first|user_count|message_count|result)\}")
Messages = list[dict[str, Any]]
# The working directory an agent's system prompt states, for {cwd} in a tool call's
# arguments; the first one found counts. A line "...working directory: /x" (Claude Code:
# "Primary working directory:"), "...working in the directory: /x" (Qwen Code: "I'm
# currently working in the directory:"), or a <cwd>/x</cwd> tag (Codex's environment).
WORKING_DIRECTORY = re.compile(
    r"(?im)^[^\n:]{0,60}?\bworking (?:in the )?directory:[ \t]*(\S[^\r\n]*?)[ \t\r]*$"
    r"|<cwd>[ \t]*([^<\n]+?)[ \t]*</cwd>"
)
CWD = "{cwd}"
LONGEST_DELAY_MS = 600_000  # ten minutes: longer than any turn timeout worth testing


class ScriptError(ValueError):
    """A rule file that cannot be used, said in one line naming the rule and the key."""


class RuleTooSlow(Exception):
    """A rule's ``regex`` outran its time limit (or the engine's memory) on a message:
    the conversation has no answer, said in one line naming the rule."""


class _Strict(BaseModel):
    """A mapping of the rule file: exact types, no key unknown (a typo fails at load)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """One message for a non-mapping or unknown keys, listing the keys known."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a mapping, got {_shown(data)}")
        unknown = sorted({str(key) for key in data} - set(cls.model_fields))
        if unknown:
            raise ValueError(cls._unknown_keys(unknown))
        return data

    @classmethod
    def _unknown_keys(cls, unknown: list[str]) -> str:
        return f"unknown key(s) {unknown}; known: {', '.join(sorted(cls.model_fields))}"


class ToolCall(_Strict):
    """A tool the model asks for: its name and arguments."""

    name: str = Field(min_length=1)
    args: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def arguments(self) -> str:
        """The arguments as the JSON text OpenAI's wire format carries."""
        return json.dumps(self.args)


class Rule(_Strict):
    """One scripted answer: ``reply`` (or ``tool_calls``) when the rule matches."""

    # The keys of which a rule needs one, not empty: what makes it answer.
    ANSWERS: ClassVar[tuple[str, ...]] = ("reply", "tool_calls")
    # What bat's test server (eval_fixtures/model_server.py) adds, said as such when a
    # stand-in's script uses it: a user copying a test's rule learns why it is refused.
    TEST_ONLY: ClassVar[frozenset[str]] = frozenset({"status", "body", "retry_after", "times"})

    match: str | None = None
    regex: str | None = None
    scope: Literal["last", "prompt"] = "last"
    reply: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    after_tool: str | None = Field(default=None, min_length=1)
    delay_ms: int = Field(default=0, ge=0, le=LONGEST_DELAY_MS)

    _pattern: Any = PrivateAttr(default=None)  # a compiled ``regex`` pattern

    @classmethod
    def _unknown_keys(cls, unknown: list[str]) -> str:
        text = super()._unknown_keys(unknown)
        faults = sorted(cls.TEST_ONLY.intersection(unknown))
        if faults:
            text += (
                f" ({' and '.join(faults)}: failing on purpose is for bat's own tests, "
                "not a stand-in model)"
            )
        return text

    @model_validator(mode="after")
    def _answers_and_pattern(self) -> Rule:
        if all(getattr(self, key) in (None, []) for key in self.ANSWERS):
            raise ValueError(f"needs {' or '.join(repr(key) for key in self.ANSWERS)}")
        if self.match is not None and self.regex is not None:
            raise ValueError("give 'match' or 'regex', not both")
        if self.regex is not None:
            from bat.evaluation.inputs.output_regex import compile_regex

            try:
                self._pattern = compile_regex(self.regex)
            except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
                raise ValueError(f"regex: {exc}") from None
        return self

    def matches(self, conversation: Conversation) -> bool:
        """Whether this rule answers ``conversation``."""
        tool = conversation.tool
        if self.after_tool is not None:
            if tool is None or self.after_tool not in ("*", tool[0]):
                return False
            return self._found_in(tool[1])
        if self.tool_calls and tool is not None:
            return False
        return self._found_in(conversation.prompt if self.scope == "prompt" else conversation.last)

    def _found_in(self, text: str) -> bool:
        """Whether ``match`` or ``regex`` is in ``text``; a substring is found in linear
        time, a regex within :data:`~bat.evaluation.inputs.output_regex.REGEX_TIME_LIMIT_S`
        or :class:`RuleTooSlow`."""
        if self.match is not None:
            return self.match in text
        if self._pattern is None:
            return True
        from bat.evaluation.inputs.output_regex import REGEX_TIME_LIMIT_S

        try:
            return self._pattern.search(text, timeout=REGEX_TIME_LIMIT_S) is not None
        except TimeoutError:
            raise RuleTooSlow(
                f"regex took over {REGEX_TIME_LIMIT_S:g} s on this conversation: "
                f"{_shown(self.regex)}"
            ) from None
        except (MemoryError, RecursionError) as exc:
            raise RuleTooSlow(f"regex could not run ({type(exc).__name__})") from None


class Rules(RootModel[list[Rule]]):
    """The script: ordered rules, the first match wins, echo when none does."""

    model_config = ConfigDict(strict=True, frozen=True)

    root: list[Rule]

    @model_validator(mode="before")
    @classmethod
    def _a_list(cls, data: Any) -> Any:
        if not isinstance(data, list):
            raise ValueError(f"a rule file holds a list of rules, got {_shown(data)}")
        return data

    @classmethod
    def load(cls, path: str | Path) -> Rules:
        """Read a rule file: JSON if its name ends with .json, YAML otherwise, read as
        every input file of bat is (:mod:`bat.input_files`: bounded in size, aliases and
        depth; UTF-8; no key written twice). FileNotFoundError when it is missing;
        ScriptError when it cannot be read or is not a script."""
        from bat.errors import InputError
        from bat.input_files import CONFIG_LIMIT, parse_json, parse_yaml, read_text

        try:
            text = read_text(path, limit=CONFIG_LIMIT, kind="a model script")
            parse = parse_json if str(path).endswith(".json") else parse_yaml
            data = parse(text, path)
        except InputError as exc:  # worded "<path>: what is wrong" or "<path> is ...":
            # the caller names the file ("script: rules.yaml: not a regular file ...")
            words = exc.message.removeprefix(str(path)).lstrip(": ").removeprefix("is ")
            raise ScriptError(words) from None
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: Any) -> Rules:
        """Validate parsed rules, so a typo fails at start-up rather than mid-run."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ScriptError(_problem(exc)) from None

    def matching(self, conversation: Conversation) -> Iterator[tuple[int, Rule]]:
        """The rules matching ``conversation``, with their positions, in order;
        :class:`RuleTooSlow`, naming the rule, when one cannot decide in time."""
        for index, rule in enumerate(self.root):
            try:
                found = rule.matches(conversation)
            except RuleTooSlow as exc:
                raise RuleTooSlow(f"rule {index}: {exc}") from None
            if found:
                yield index, rule

    def first(self, conversation: Conversation) -> Rule | None:
        """The rule answering ``conversation``; None: the echo."""
        return next((rule for _, rule in self.matching(conversation)), None)


@dataclass(frozen=True)
class Conversation:
    """What the rules look at in a chat request: its user messages, its whole prompt, and
    the tool result it ends with, if any."""

    users: tuple[str, ...]
    prompt: str
    tool: tuple[str, str] | None  # (tool name, result) when the last message is a result
    message_count: int

    @classmethod
    def of(cls, messages: Messages) -> Conversation:
        texts = [content_text(m.get("content")) for m in messages]
        users = tuple(t for t, m in zip(texts, messages, strict=True) if m.get("role") == "user")
        return cls(users, "\n".join(texts), tool_result(messages), len(messages))

    @property
    def last(self) -> str:
        return self.users[-1] if self.users else ""

    def reply(self, rule: Rule | None) -> str:
        """What ``rule`` (None: the echo) says to this conversation, placeholders filled."""
        if rule is None or rule.reply is None:
            template = "" if rule is not None and rule.tool_calls else ECHO
        else:
            template = rule.reply
        values = {
            "last": self.last,
            "first": self.users[0] if self.users else "",
            "user_count": str(len(self.users)),
            "message_count": str(self.message_count),
            "result": self.tool[1] if self.tool else "",
        }
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

    @property
    def cwd(self) -> str:
        """The working directory the prompt states; "." when it states none."""
        found = WORKING_DIRECTORY.search(self.prompt)
        return (found.group(1) or found.group(2)) if found else "."

    def calls(self, rule: Rule | None) -> list[ToolCall]:
        """The tool calls ``rule`` asks for, ``{cwd}`` in their arguments filled in."""
        calls = rule.tool_calls if rule is not None else []
        if not any(CWD in call.arguments for call in calls):
            return calls
        cwd = self.cwd
        return [call.model_copy(update={"args": _filled(call.args, cwd)}) for call in calls]


def _filled(value: Any, cwd: str) -> Any:
    """``value`` with ``{cwd}`` replaced in every string it holds."""
    if isinstance(value, str):
        return value.replace(CWD, cwd)
    if isinstance(value, list):
        return [_filled(item, cwd) for item in value]
    if isinstance(value, dict):
        return {key: _filled(item, cwd) for key, item in value.items()}
    return value


def tool_result(messages: Messages) -> tuple[str, str] | None:
    """(tool name, result) when the last message is a tool result, else None.

    OpenAI names the call only by id: the name is that of the assistant's call with the
    id; Ollama's tool messages may carry ``tool_name``."""
    if not messages or messages[-1].get("role") != "tool":
        return None
    last = messages[-1]
    name = last.get("tool_name") or last.get("name")
    for message in reversed(messages):
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == last.get("tool_call_id"):
                name = name or (call.get("function") or {}).get("name")
    return str(name or ""), content_text(last.get("content"))


def content_text(content: Any) -> str:
    """The text of a message: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        texts = (p.get("text") for p in content if isinstance(p, dict))
        return "".join(text for text in texts if isinstance(text, str))
    return content if isinstance(content, str) else ""


def _problem(exc: ValidationError) -> str:
    """The first problem of a rule file, in one line: ``rule 2: tool_calls[0].name: ...``."""
    error = exc.errors()[0]
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if error["type"] == "value_error" and cause else error["msg"]
    rule, *key = error["loc"] or ("",)
    where = "".join(
        f"[{part}]" if isinstance(part, int) else " key" if part == "[key]" else f".{part}"
        for part in key
    )
    text = f"{where.lstrip('.')}: {message}" if where else message
    return _one_line(f"rule {rule}: {text}" if rule != "" else text)


def _shown(value: Any) -> str:
    """A value as an error message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _one_line(value: Any) -> str:
    return " ".join(str(value).split())
