"""A model's script: the rule file of the stand-in model bat serves (``script:``).

A ``models:`` entry of eval.yaml with ``script: FILE`` is answered by bat's scripted model
server (:mod:`bat.evaluation.run.scripted_model`) from this file, and eval.yaml's loader
checks the file before any agent starts. The format is described there; this module
holds the rules and how they pick an answer, with no server in it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ECHO = "echo: {last}"
PLACEHOLDER = re.compile(r"\{(last|first|user_count|message_count|result)\}")
Messages = list[dict[str, Any]]


RULE_KEYS = {"match", "regex", "scope", "reply", "status", "body", "retry_after", "delay_ms"}
RULE_KEYS |= {"times", "tool_calls", "after_tool"}
SCOPES = ("last", "prompt")


@dataclass(frozen=True)
class Rule:
    """One scripted answer: ``reply`` when ``pattern`` occurs in the text ``scope`` names.

    ``status``, ``body``, ``retry_after`` and ``delay_ms`` make the answer misbehave;
    ``times`` limits the rule to its first N matches.
    """

    reply: str | None = None
    pattern: re.Pattern[str] | None = None  # None: the default rule, matching anything
    scope: str = "last"
    status: int | None = None
    body: str | None = None
    retry_after: str | None = None
    delay_ms: int = 0
    times: int | None = None
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, arguments as JSON)
    after_tool: str | None = None

    def matches(self, last: str, prompt: str, tool: tuple[str, str] | None = None) -> bool:
        """Whether this rule answers; ``tool`` is (name, result) when the last message
        is a tool result."""
        if self.after_tool is not None:
            if tool is None or self.after_tool not in ("*", tool[0]):
                return False
            return self.pattern is None or self.pattern.search(tool[1]) is not None
        if self.tool_calls and tool is not None:
            return False
        text = prompt if self.scope == "prompt" else last
        return self.pattern is None or self.pattern.search(text) is not None

    @classmethod
    def from_item(cls, index: int, item: Any) -> Rule:
        """One validated rule of a rule file (``index`` is for the error message)."""
        if not isinstance(item, dict):
            raise ValueError(f"rule {index}: expected a mapping, got {item!r}")
        unknown = sorted(set(map(str, item)) - RULE_KEYS)
        if unknown:
            raise ValueError(f"rule {index}: unknown key(s) {unknown}; known: {sorted(RULE_KEYS)}")
        if not any(key in item for key in ("reply", "status", "body", "tool_calls")):
            raise ValueError(
                f"rule {index}: needs a 'reply' text (or a 'status', 'body' or 'tool_calls')"
            )
        tool_calls = _tool_calls(index, item.get("tool_calls", []))
        after_tool = item.get("after_tool")
        if after_tool is not None and (not isinstance(after_tool, str) or not after_tool):
            raise ValueError(f"rule {index}: 'after_tool' is a tool name or '*'")
        for key in ("reply", "body"):
            if key in item and not isinstance(item[key], str):
                raise ValueError(f"rule {index}: '{key}' must be a text, got {item[key]!r}")
        if "match" in item and "regex" in item:
            raise ValueError(f"rule {index}: give 'match' or 'regex', not both")
        scope = item.get("scope", "last")
        if scope not in SCOPES:
            raise ValueError(f"rule {index}: 'scope' is one of {SCOPES}, got {scope!r}")
        status = item.get("status")
        if status is not None and (
            isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599
        ):
            raise ValueError(f"rule {index}: 'status' must be an HTTP status, got {status!r}")
        numbers = {key: item.get(key) for key in ("delay_ms", "times")}
        for key, value in numbers.items():
            least = 1 if key == "times" else 0
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < least
            ):
                raise ValueError(f"rule {index}: '{key}' must be a whole number ≥ {least}")
        retry_after = item.get("retry_after")
        source = re.escape(str(item["match"])) if "match" in item else item.get("regex")
        return cls(
            reply=item.get("reply"),
            pattern=None if source is None else re.compile(str(source)),
            scope=scope,
            status=status,
            body=item.get("body"),
            retry_after=None if retry_after is None else str(retry_after),
            delay_ms=numbers["delay_ms"] or 0,
            times=numbers["times"],
            tool_calls=tool_calls,
            after_tool=after_tool,
        )


def _tool_calls(index: int, value: Any) -> tuple[tuple[str, str], ...]:
    """A rule's ``tool_calls``: ``[{name, args}]`` as (name, arguments as JSON) pairs."""
    if not isinstance(value, list):
        raise ValueError(f"rule {index}: 'tool_calls' is a list of {{name, args}}")
    calls = []
    for call in value:
        if not (isinstance(call, dict) and isinstance(call.get("name"), str) and call["name"]):
            raise ValueError(f"rule {index}: each tool call needs a 'name', got {call!r}")
        if set(call) - {"name", "args"} or not isinstance(call.get("args", {}), dict):
            raise ValueError(f"rule {index}: a tool call is {{name, args: {{...}}}}, got {call!r}")
        calls.append((call["name"], json.dumps(call.get("args", {}))))
    return tuple(calls)


@dataclass(frozen=True)
class Rules:
    """The script of the server: ordered rules, first match wins, echo when none does."""

    rules: tuple[Rule, ...] = ()

    @classmethod
    def load(cls, path: str | Path) -> Rules:
        """Read a rule file: JSON if its name ends with .json, YAML otherwise."""
        text = Path(path).read_text(encoding="utf-8")
        if str(path).endswith(".json"):
            return cls.from_data(json.loads(text))
        import yaml  # only YAML rule files need it

        try:
            return cls.from_data(yaml.safe_load(text))
        except yaml.YAMLError as exc:
            raise ValueError(f"not valid YAML: {exc}") from exc

    @classmethod
    def from_data(cls, data: Any) -> Rules:
        """Validate parsed rules, so a typo fails at start-up rather than mid-test."""
        if not isinstance(data, list):
            raise ValueError("a rule file holds a list of {match|regex, reply} rules")
        return cls(tuple(Rule.from_item(index, item) for index, item in enumerate(data)))

    def pick(self, messages: Messages, used: Counter[int] | None = None) -> tuple[Rule | None, str]:
        """The rule answering a conversation (None: echo) and its reply, filled in.

        ``used`` counts the answers of each rule (by position), for rules with ``times``;
        without it, ``times`` is ignored.
        """
        users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
        last = users[-1] if users else ""
        prompt = "\n".join(content_text(m.get("content")) for m in messages)
        tool = tool_result(messages)
        rule = None
        for index, candidate in enumerate(self.rules):
            if not candidate.matches(last, prompt, tool):
                continue
            if used is not None and candidate.times is not None:
                if used[index] >= candidate.times:
                    continue
                used[index] += 1
            rule = candidate
            break
        template = rule.reply if rule is not None and rule.reply is not None else ECHO
        values = {"last": last, "first": users[0] if users else "", "user_count": str(len(users))}
        values["message_count"] = str(len(messages))
        values["result"] = tool[1] if tool else ""
        if rule is not None and rule.tool_calls and rule.reply is None:
            template = ""
        return rule, PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

    def reply(self, messages: Messages) -> str:
        """The scripted reply to a conversation, placeholders filled in."""
        return self.pick(messages)[1]


def tool_result(messages: Messages) -> tuple[str, str] | None:
    """(tool name, result) when the last message is a tool result, else None.

    OpenAI names the call only by id: the name is that of the assistant's call with the
    id; Ollama's tool messages may carry ``tool_name``."""
    if not messages or messages[-1].get("role") != "tool":
        return None
    last = messages[-1]
    name = last.get("tool_name") or last.get("name")
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == last.get("tool_call_id"):
                name = name or (call.get("function") or {}).get("name")
    return str(name or ""), content_text(last.get("content"))


def content_text(content: Any) -> str:
    """The text of a message: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
