"""What a command-line agent adapter is: the types between bat and one CLI.

A turn of an episode is one run of the CLI. bat makes a :class:`TurnInput` (the message,
the session to resume, the workspace, a private ``HOME``, the model the run points the
CLI at, the adapter's options); the adapter answers with an :class:`Invocation` (argv,
environment, config files to write into that ``HOME``); bat runs it in its own process
group, bounded by the turn timeout, and gives what it printed back to the adapter's
:meth:`CliAgent.read`, which returns a :class:`TurnOutput` in bat's terms. The adapter
never runs anything itself: timeouts, process groups, workspaces and files stay in one
place (:mod:`bat.agents.cli_session`), and an adapter is a small, pure mapping that a
test can drive with recorded output.

Why an exit status alone never decides: real CLIs exit 0 after a refused write and
retry for minutes when their model is gone. ``read`` looks at the events and the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bat.evaluation.log.episode import AgentError, ToolCall, Usage


@dataclass(frozen=True)
class Option:
    """One option of an adapter (``evaluation.agent.options`` in eval.yaml)."""

    name: str
    default: Any
    help: str


@dataclass(frozen=True)
class ModelTarget:
    """The model a run points the CLI at (a ``models:`` entry), or all None: the CLI's
    own default model and the user's own keys."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # the entry's env (keys among them)


@dataclass(frozen=True)
class TurnInput:
    """Everything an adapter may use to make one turn's command."""

    message: str
    index: int  # 0 for the first turn
    session: str | None  # the session to resume: None on the first turn
    workspace: Path  # the episode's working copy: the CLI runs here
    home: Path  # the episode's private HOME (each CLI keeps its state there)
    model: ModelTarget
    options: Mapping[str, Any]  # the adapter's options, defaults filled in
    new_session: str  # an id bat made for this episode, for CLIs that take one


@dataclass
class Invocation:
    """How to run one turn: bat adds ``env`` to a minimal environment (PATH, HOME, LANG,
    TMPDIR) and writes each of ``files`` (relative to HOME) before the run."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None  # None: /dev/null (some CLIs wait for EOF)


@dataclass
class TurnOutput:
    """What one turn did, in bat's terms."""

    reply: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)  # in the order they ran
    usage: Usage | None = None
    session: str | None = None  # the id to resume in the next turn
    error: AgentError | None = None  # from the closed set, read from events and text
    events: int = 0  # how many events were read (0: the CLI printed none)


class CliAgent:
    """A command-line agent adapter. Subclasses set the class attributes and implement
    :meth:`invocation` and :meth:`read`; one instance serves a whole run (made with its
    options) and holds no other state: concurrent episodes share it."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line, for ``bat agents``
    executable: ClassVar[str] = ""  # the program, looked up on PATH (option ``executable``)
    key_variables: ClassVar[tuple[str, ...]] = ()  # what doctor checks, in order of preference
    options: ClassVar[tuple[Option, ...]] = ()
    variables: ClassVar[tuple[tuple[str, str], ...]] = ()  # (variable, what it does) it reads
    output: ClassVar[str] = "ndjson"  # what it prints: "ndjson" events, or "text"
    install: ClassVar[str] = ""  # how to install it, for doctor's message

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        # The run's options, defaults filled in (also given to each turn as
        # ``TurnInput.options``); the instance is otherwise stateless.
        self.settings: dict[str, Any] = {**self.defaults(), **(options or {})}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {option.name: option.default for option in cls.options}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Raise an InputError for option values that cannot work (read when eval.yaml is:
        before any episode runs). The default checks nothing."""

    def invocation(self, turn: TurnInput) -> Invocation:
        raise NotImplementedError

    def read(self, stdout: str, stderr: str, exit_code: int | None) -> TurnOutput:
        raise NotImplementedError
