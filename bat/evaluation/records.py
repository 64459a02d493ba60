"""What one episode leaves behind: its trace, verdict and result (``episodes/*.json``).

An episode is one attempt at one task: the task's turns sent in order in one A2A
conversation. The file format is versioned (``schema``) so later bat versions can still
read old runs; fields are only ever added.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

EPISODE_SCHEMA = "bat.episode/1"
InfraKind = Literal["unreachable", "timeout", "crash", "protocol"]


class StatusEvent(BaseModel):
    """One event of the agent's stream, as the user would have seen it."""

    t: float  # seconds since the episode started
    turn: int
    kind: Literal["task", "status", "artifact", "message"]
    status: str | None = None
    preview: str = ""
    input: str | None = None  # the user input that opened the turn (first event only)


class ToolCall(BaseModel):
    name: str
    args: Any = None
    result: Any = None
    error: bool = False
    source: Literal["stream", "spans"] = "stream"


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


class TurnRecord(BaseModel):
    """One user turn and how the agent ended it."""

    input: str
    status: str
    output: str = ""
    task_id: str | None = None
    time_to_first_event_s: float | None = None
    wall_time_s: float = 0.0


class EpisodeTrace(BaseModel):
    """Everything observed during an episode."""

    context_id: str
    events: list[StatusEvent] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    time_to_first_event_s: float | None = None
    wall_time_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    agent_calls: list[AgentCall] = Field(default_factory=list)
    usage_source: Literal["stream", "spans", "none"] = "none"
    tool_source: Literal["stream", "spans", "none"] = "none"


class InfraError(BaseModel):
    """The episode could not be judged on its merits: the harness or the agent broke."""

    kind: InfraKind
    message: str


class Check(BaseModel):
    name: str
    passed: bool
    detail: str


class Verdict(BaseModel):
    """The deterministic verdict: passed only if every check passed."""

    passed: bool
    reason: str
    checks: list[Check] = Field(default_factory=list)


class EpisodeResult(BaseModel):
    """One file in ``episodes/``."""

    schema_: str = Field(default=EPISODE_SCHEMA, alias="schema")
    task_id: str
    attempt: int
    model: str
    status: str
    final_output: str = ""
    infra_error: InfraError | None = None
    trace: EpisodeTrace
    verdict: Verdict | None = None
    scores: dict[str, Any] | None = None
    started_at: str
    ended_at: str

    model_config = {"populate_by_name": True}

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=1) + "\n"
