"""What one episode leaves behind: its trace, verdict and result (``episodes/*.json``).

An episode is one attempt at one task: the task's turns sent in order in one A2A
conversation. The file format is versioned (``schema``) so later bat versions can still
read old runs; fields are only ever added. ``bat.episode/2`` added bat-cli 2026.10's keys
(``model_name``, ``expected_outcome``, ``final_status``, ``qualitative_scores``, ``aux``,
``trace.wall_ms``, ``trace.trajectory``, and the event keys ``t_ms``, ``task_status``,
``content_preview``, ``user_input``) with bat-cli's meaning; a ``bat.episode/1`` file
reads the same.
Times are in seconds (``t``, ``wall_time_s``); the ``*_ms`` keys are derived for bat-cli's
readers. The judges' scores (:mod:`bat.evaluation.log.scores`) are written into the
episode by :func:`bat.evaluation.log.store.write_scores`, and nowhere else.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    computed_field,
    field_serializer,
)

from bat.atomic import json_text
from bat.evaluation.log.bounds import Money, Seconds
from bat.evaluation.log.scores import JudgeScores
from bat.secrets import Scrubber

EPISODE_SCHEMA = "bat.episode/2"
OLDER_EPISODE_SCHEMAS = frozenset({"bat.episode/1"})
# Why the harness could not observe the agent (the number is not to be trusted).
# ``template``: a turn's template could not be rendered (bat.evaluation.inputs.turn_templates).
# ``user_model``: a simulated user's model failed (down, refusing, malformed): the
# conversation could not go on, and the agent is not to blame (bat.evaluation.run.simulated_user).
InfraKind = Literal[
    "unreachable", "timeout", "crash", "protocol", "not_run", "template", "user_model"
]
# Why a reachable agent that answered failed: a closed set a CI script can branch on
# (belt's tokens, extended where A2A says more). ``bat.evaluation.log.outcome`` classifies.
AgentErrorKind = Literal[
    "authentication_failed",
    "rate_limited",
    "timeout",
    "refused",
    "model_error",
    "agent_exception",
    "canceled",
    "crashed",
    "unknown",
]
AGENT_ERROR_KINDS: tuple[str, ...] = get_args(AgentErrorKind)


def _named(name: str, older: str) -> Any:
    """A field written under bat-cli's ``name``, read under it or bat.episode/1's ``older``."""
    return {"validation_alias": AliasChoices(name, older), "serialization_alias": name}


def _none(value: Any) -> bool:
    return value is None


# Times are finite: an episode file holding NaN or 1e999 (a hand-edited or foreign one) is
# refused when read, so no NaN reaches a summary, a gate or a file bat writes.
_FINITE = ConfigDict(allow_inf_nan=False)


class StatusEvent(BaseModel):
    """One event of the agent's stream, as the user would have seen it."""

    model_config = ConfigDict(populate_by_name=True, allow_inf_nan=False)

    t: Seconds  # seconds since the episode started
    turn: int
    kind: Literal["task", "status", "artifact", "message"]
    status: str | None = Field(None, **_named("task_status", "status"))
    preview: str = Field("", **_named("content_preview", "preview"))
    # the user input that opened the turn (first event only)
    input: str | None = Field(None, **_named("user_input", "input"))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def t_ms(self) -> float:
        """bat-cli's event time, in milliseconds."""
        return round(self.t * 1000, 3)


class ToolCall(BaseModel):
    name: str
    args: Any = None
    result: Any = None
    error: bool = False
    source: Literal["stream", "spans"] = "stream"
    turn: int | None = Field(None, exclude_if=_none)  # its turn (0 first), where known


class AgentCall(BaseModel):
    name: str
    source: Literal["stream", "spans"] = "stream"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    model_calls: int = 0

    def add(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            model_calls=self.model_calls + other.model_calls,
        )


class EpisodeCost(BaseModel):
    """What an episode cost, in ``currency``, each payer apart (``bat.evaluation.cost``):
    the agent's model (its ``trace.usage``), the simulated user's model (only for a task
    with ``user``) and the judges (once judged). A part is None when it has no price:
    its model is ``unpriced`` (named there, never guessed), or the agent reported no
    tokens. ``total`` adds the parts that have one."""

    model_config = _FINITE

    currency: str = "USD"
    agent: Money | None = None
    user: Money | None = Field(None, exclude_if=_none)
    judge: Money | None = Field(None, exclude_if=_none)
    unpriced: list[str] = Field(default_factory=list)  # labels of the models with no price
    # The agent reported no tokens in this episode (``agent`` is None): it spent nothing
    # (an error before any model call) or does not report them; the figures tell which
    # (``stats.cost_figures``). Left out when false.
    untracked: bool = Field(False, exclude_if=lambda value: not value)

    @property
    def running(self) -> float:
        """What the episode cost as it ran: its agent's and simulated user's parts (the
        judges' comes after; a run's budget counts this)."""
        return (self.agent or 0.0) + (self.user or 0.0)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> float:
        """The parts that have a cost, added."""
        return round(sum(part for part in (self.agent, self.user, self.judge) if part), 10)


class TurnRecord(BaseModel):
    """One user turn and how the agent ended it."""

    model_config = _FINITE

    input: str
    status: str
    output: str = ""
    task_id: str | None = None
    time_to_first_event_s: Seconds | None = None
    wall_time_s: Seconds = 0.0
    # A command-line agent's turn (bat.agents): how its process ended, the end of what it
    # wrote to stderr, and what the turn changed in the workspace.
    # (Left out of the file when None: an A2A episode's turns stay as they were.)
    exit_code: int | None = Field(None, exclude_if=_none)
    stderr_tail: str | None = Field(None, exclude_if=_none)
    changes: FileChanges | None = Field(None, exclude_if=_none)
    git_diff: str | None = Field(None, exclude_if=_none)
    tool_sequence: list[str] | None = Field(None, exclude_if=_none)  # tools called, in order
    # Who wrote ``input`` in a task driven by a simulated user: the dataset's fixed turns
    # or the user model. (Left out when None: a task of fixed turns only.)
    author: TurnAuthor | None = Field(None, exclude_if=_none)


TurnAuthor = Literal["dataset", "simulated_user"]
# How a conversation with a simulated user ended: the user said its goal was met
# (``###STOP###``), said it cannot be met (``###UNMET###``), it reached the task's
# ``max_turns``, or the agent ended it (its turn failed: the conversation cannot go on).
ConversationEnd = Literal["goal_met", "stopped_unmet", "max_turns", "agent_ended"]
CONVERSATION_ENDS: tuple[str, ...] = get_args(ConversationEnd)


class SimulatedUserRecord(BaseModel):
    """The simulated user of an episode (a task with ``user``): which model played it,
    how the conversation ended, and what the user model spent, apart from the agent's
    ``usage``. ``ended`` is None when the conversation was cut by an infrastructure
    failure (the episode's ``infra_error`` says which)."""

    model_config = _FINITE

    model: str  # the user model's label: ``provider:model``, or ``script:FILE``
    instructions_sha256: str  # of the task's ``user.instructions``
    ended: ConversationEnd | None = None
    turns: int = 0  # user turns of the conversation, the dataset's fixed ones included
    simulated_turns: int = 0  # of those, written by the user model
    max_turns: int
    usage: Usage = Field(default_factory=lambda: Usage())
    last_words: str | None = None  # what the user said with its stop signal, if anything


class FileChanges(BaseModel):
    """Paths (relative to the workspace, ``/``-separated) a turn or an episode changed."""

    created: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)


class CommandRun(BaseModel):
    """A ``command_succeeds`` check's command, run in the workspace after the episode."""

    model_config = _FINITE

    command: str
    exit_code: int | None = None  # None: it did not end within its time limit
    timed_out: bool = False
    seconds: Seconds = 0.0
    output_tail: str = ""


class ResourceLock(BaseModel):
    """A resource installed into the workspace, and the sha256 of what was installed."""

    source: str
    dest: str
    sha256: str
    version: str | None = None


class WorkspaceRecord(BaseModel):
    """The working copy a command-line agent's episode ran in (bat.agents.workspace), and
    what the workspace checks need of it, read before it was removed: the verdict is
    a pure function of the episode file, so it can be judged again later."""

    model_config = _FINITE

    source: str  # the folder or fixture repository it was made from
    ref: str | None = None  # the ref asked for
    commit: str | None = None  # the commit it was made at (None: a plain copy)
    kept: str | None = None  # where it was kept (``keep: failed|always``), or None
    changes: FileChanges = Field(default_factory=FileChanges)
    git_diff: str = ""  # the final diff against the start, bounded
    diff_truncated: bool = False
    # The text of each file a check reads (``file_contains``), bounded; None: no such file.
    files: dict[str, str | None] = Field(default_factory=dict)
    commands: list[CommandRun] = Field(default_factory=list)
    resources: list[ResourceLock] = Field(default_factory=list)


class EpisodeTrace(BaseModel):
    """Everything observed during an episode."""

    model_config = _FINITE

    context_id: str
    events: list[StatusEvent] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    time_to_first_event_s: Seconds | None = None
    wall_time_s: Seconds = 0.0
    usage: Usage = Field(default_factory=Usage)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    agent_calls: list[AgentCall] = Field(default_factory=list)
    usage_source: Literal["stream", "spans", "none"] = "none"
    tool_source: Literal["stream", "spans", "none"] = "none"
    workspace: WorkspaceRecord | None = Field(None, exclude_if=_none)  # a CLI agent's
    simulated_user: SimulatedUserRecord | None = Field(None, exclude_if=_none)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def wall_ms(self) -> float:
        """bat-cli's episode time, in milliseconds."""
        return round(self.wall_time_s * 1000, 3)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def trajectory(self) -> dict[str, Any]:
        """bat-cli's ``trajectory``: the user turns and the totals, from bat's fields.

        ``found`` says whether anything beyond the stream's text was observed (usage or
        tool calls, from the stream or the agent's spans). bat does not split tool calls
        by turn, so ``steps`` stay empty, as bat-cli wrote them for agents without spans.
        """
        return {
            "found": self.usage_source != "none" or self.tool_source != "none",
            "turns": [{"user": turn.input, "steps": []} for turn in self.turns],
            "totals": {
                "model_calls": self.usage.model_calls,
                "tokens_in": self.usage.prompt_tokens,
                "tokens_out": self.usage.completion_tokens,
                "tokens_cached": 0,
                "tool_calls": len(self.tool_calls),
                "agent_calls": len(self.agent_calls),
                "errors": sum(call.error for call in self.tool_calls),
            },
            "truncated": False,
        }


class InfraError(BaseModel):
    """The episode could not be observed: the agent was unreachable, timed out, died under
    it or spoke broken A2A. Kept apart from the agent's results and out of pass@k."""

    kind: InfraKind
    message: str


class AgentError(BaseModel):
    """The agent answered, with a failure: its own outcome, counted in pass@k.

    ``kind`` is one of ``AGENT_ERROR_KINDS``; ``code`` the JSON-RPC or HTTP status code
    when the agent gave one; ``state`` the A2A task state it ended in (``failed``,
    ``rejected``, ``canceled``), if any.
    """

    kind: AgentErrorKind
    message: str
    code: int | None = None
    state: str | None = None


class Check(BaseModel):
    name: str
    passed: bool
    detail: str


class Verdict(BaseModel):
    """The deterministic verdict: passed only if every check passed.

    ``vacuous`` marks a pass that proves little: the answer was empty, or the task
    checks nothing but the final status.
    """

    passed: bool
    reason: str
    checks: list[Check] = Field(default_factory=list)
    vacuous: bool = False


class Aux(BaseModel):
    """bat-cli's ``aux``: where the agent was, and the attempt counted from 0."""

    agent_url: str | None = None
    attempt_index: int


class EpisodeResult(BaseModel):
    """One file in ``episodes/``."""

    schema_: str = Field(default=EPISODE_SCHEMA, alias="schema")
    task_id: str
    attempt: int  # from 1
    model: str
    status: str
    expected_outcome: str | None = None  # the task's, for the judges (bat-cli's key)
    aux: Aux | None = None
    final_output: str = ""
    infra_error: InfraError | None = None
    agent_error: AgentError | None = None
    trace: EpisodeTrace
    verdict: Verdict | None = None
    scores: JudgeScores | None = None  # the judges' (bat.evaluation.log.scores)
    started_at: str
    ended_at: str
    # Served in the first wave after a start of the agent (runner.py): its time holds the
    # agent's cold start, so it is left out of the latency figures (verdicts count it).
    cold: bool = False
    # What it cost (bat.evaluation.cost); left out of an episode written without prices
    # (an older bat's): its cost is unknown, not 0.
    cost: EpisodeCost | None = Field(None, exclude_if=_none)
    # Earlier records of this (task, attempt) that ``--retry-infra`` replaced, relative to
    # the model folder (``retried/...``): kept, never overwritten.
    earlier: list[str] = Field(default_factory=list)

    model_config = {"populate_by_name": True}

    # No return annotation: pydantic would take it for the JSON Schema of ``scores``.
    @field_serializer("scores")
    def _scores_as_written(self, scores: JudgeScores | None, info: FieldSerializationInfo):
        """``scores`` with the keys they were given (``JudgeScores.as_written``)."""
        return None if scores is None else scores.as_written(info.mode)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def model_name(self) -> str:
        """bat-cli's name for ``model``."""
        return self.model

    @computed_field  # type: ignore[prop-decorator]
    @property
    def final_status(self) -> str:
        """bat-cli's name for ``status``."""
        return self.status

    @computed_field  # type: ignore[prop-decorator]
    @property
    def qualitative_scores(self) -> dict[str, float | None] | None:
        """bat-cli's judge scores: the score per dimension (None: not judged)."""
        return None if self.scores is None else self.scores.per_dimension()

    def to_json(self, scrubber: Scrubber) -> str:
        """The file's text, without any secret of ``scrubber`` (an agent or a judge may
        repeat a key it was given: ``bat.secrets``)."""
        text = self.model_dump_json(by_alias=True, indent=1)
        if not scrubber or not scrubber.found_in_json(text):
            return text + "\n"
        data = scrubber.data(self.model_dump(mode="json", by_alias=True))
        return json_text(data, what="an episode file", indent=1, ensure_ascii=False)


# What a plugin or script reading a run may import (docs/reuse.md; tests/test_reuse.py).
__all__ = [
    "EPISODE_SCHEMA",
    "AgentCall",
    "AgentError",
    "Aux",
    "Check",
    "EpisodeCost",
    "EpisodeResult",
    "EpisodeTrace",
    "FileChanges",
    "InfraError",
    "SimulatedUserRecord",
    "StatusEvent",
    "ToolCall",
    "TurnRecord",
    "Usage",
    "Verdict",
    "WorkspaceRecord",
]
