"""``summary.json`` and ``metrics.json`` of one model of a run, as typed models.

Both files carry bat-cli 2026.10's keys with bat-cli's meaning, so a script written for
bat-cli's files keeps working (``.attempts[] | select(.passed < .attempts)``,
``.summary.time.avg_wall_ms``, ``.per_episode[].success``); bat's richer fields sit
beside them. One unit per quantity: **seconds** for every time bat measures
(``wall_time_s``), **counts** for tokens. The ``*_ms`` fields exist only because
bat-cli's files had them, and are derived from the seconds when the file is written.

The numbers are computed in one place, :mod:`bat.evaluation.stats`; charts, the
report and ``eval.compare`` only read them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bat.evaluation.log.bounds import MAX_COUNT, Milliseconds, Money, Percentage, Rate, Seconds

SUMMARY_SCHEMA = "bat.summary/2"
METRICS_SCHEMA = "bat.metrics/2"
OLDER_SUMMARY_SCHEMAS = frozenset({"bat.summary/1"})
OLDER_METRICS_SCHEMAS = frozenset({"bat.metrics/1"})


class _Model(BaseModel):
    # Files of a later minor version may carry fields this one does not know: ignored.
    # Numbers are finite: a NaN (or "NaN") in a summary compares false with everything, and
    # a baseline holding one would let any drop pass.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


# A token or turn count in a file: refused when read if negative or astronomic (``bounds``).
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


def _none(value: Any) -> bool:
    return value is None


# --- conversations with a simulated user ----------------------------------------------------


class UserTokens(_Model):
    """What the simulated user's model spent: never in the agent's ``tokens``."""

    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    total_tokens: Count = 0
    model_calls: Count = 0


class RowConversation(_Model):
    """An episode's conversation with a simulated user, as its ``metrics.json`` row keeps
    it: what the conversation figures are computed from (gates recompute them from rows)."""

    ended: str | None = None  # episode.CONVERSATION_ENDS; None: cut by an infra failure
    turns: Count = 0  # user turns, the dataset's fixed ones included
    simulated_turns: Count = 0
    max_turns: Count = 0
    user_tokens: UserTokens = Field(default_factory=UserTokens)


class TurnFigures(_Model):
    """User turns per conversation (percentiles as everywhere: ``stats.percentile``)."""

    mean: float | None
    p50: float | None
    p90: float | None
    max: float | None


class ConversationFigures(_Model):
    """The figures of a model's (or a task's) conversations with a simulated user.

    Over the episodes of tasks with a ``user``, infrastructure failures left out (counted
    in ``infra_failures``) as in every other figure; ``pass_hat_k`` is the number
    tau2-bench reports. ``ended_rate`` divides by ``conversations``."""

    tasks: int  # tasks with a simulated user
    conversations: int  # their episodes that are not infrastructure failures
    infra_failures: int
    passed: int
    pass_rate: Rate | None
    pass_at_k: Rate | None
    pass_hat_k: Rate | None
    pass_at: dict[str, Rate | None]
    pass_hat: dict[str, Rate | None]
    turns: TurnFigures
    simulated_turns_total: Count
    ended: dict[str, int]  # every kind of episode.CONVERSATION_ENDS, 0 or more
    ended_rate: dict[str, Rate | None]
    user_tokens: UserTokens  # the user model's, summed; apart from the agent's


# --- summary.json -------------------------------------------------------------------------


# --- cost ------------------------------------------------------------------------------------


class RowCost(_Model):
    """An episode's cost as its ``metrics.json`` row keeps it (``episode.EpisodeCost``):
    what the cost figures are computed from (gates recompute them from rows)."""

    currency: str = "USD"
    total: Money = 0.0  # its priced parts
    agent: Money | None = None
    user: Money | None = None
    judge: Money | None = None
    # the models of its parts that have no price: ``total`` is less than it cost
    unpriced: list[str] = Field(default_factory=list)
    untracked: bool = False  # the agent reported no tokens (``EpisodeCost.untracked``)


class CostPerEpisode(_Model):
    """The cost of one episode (percentiles as everywhere: ``stats.percentile``)."""

    mean: Money | None = None
    p50: Money | None = None
    p90: Money | None = None
    max: Money | None = None


class CostFigures(_Model):
    """What a model's (or a task's) episodes cost, in ``currency``: each payer apart,
    and ``total`` their sum. Only priced parts are added: ``unpriced_episodes`` have a
    part with no price (its model is named in ``unpriced``), so a total with any is a
    lower bound. ``per_pass`` is what one passing attempt cost: ``total`` over the
    passed attempts (None when none passed)."""

    currency: str
    total: Money
    agent: Money
    judge: Money
    user: Money
    episodes: int  # episodes with a cost (an older bat's have none)
    unpriced_episodes: int
    unpriced: list[str] = Field(default_factory=list)
    per_episode: CostPerEpisode
    per_pass: Money | None = None


class JudgeStats(_Model):
    """One judge dimension over a model's episodes."""

    mean: float | None
    min: float | None
    max: float | None
    count: int
    errors: int


class TaskSummary(_Model):
    """One task of one model: bat-cli's counts first, then bat's."""

    task_id: str
    attempts: int  # every attempt, infrastructure failures included
    passed: int
    failed: int
    success_percentage: Percentage  # 100 * passed / attempts
    infra_failures: int = 0
    agent_errors: dict[str, int] = Field(default_factory=dict)  # only kinds that occurred
    vacuous_passes: int = 0
    pass_rate: Rate | None = None  # passed / attempts
    pass_rate_ci95: list[float] | None = None
    judged: int = 0  # attempts that are not infrastructure failures: the n of pass@k
    pass_at_k: Rate | None = None
    pass_hat_k: Rate | None = None
    pass_at: dict[str, Rate | None] = Field(default_factory=dict)
    pass_hat: dict[str, Rate | None] = Field(default_factory=dict)
    judge: dict[str, float | None] | None = None  # mean score per dimension
    # Only for a task with a simulated user (left out otherwise: a file as before)
    conversation: ConversationFigures | None = Field(None, exclude_if=_none)
    # Only when its episodes have a cost (left out for an older bat's episodes)
    cost: CostFigures | None = Field(None, exclude_if=_none)


class Totals(_Model):
    """A model's counts and estimators over every task."""

    tasks: int
    attempts: int
    passed: int
    failed: int
    infra_failures: int
    infra_failures_by_kind: dict[str, int]
    agent_errors_total: int
    agent_errors: dict[str, int]  # every kind of the closed set, 0 or more
    vacuous_passes: int
    success_percentage: Percentage
    success_ci95: list[float] | None
    pass_at_k: Rate | None
    pass_hat_k: Rate | None
    pass_at: dict[str, Rate | None]
    pass_hat: dict[str, Rate | None]
    tasks_without_judged_attempts: int
    judge: dict[str, JudgeStats] | None


# The run name bat-cli 2026.10 writes when eval.yaml sets none (its EvalConfig default).
DEFAULT_RUN_NAME = "benchmark"


class Summary(_Model):
    """``summary.json``."""

    schema_: str = Field(default=SUMMARY_SCHEMA, alias="schema")
    # bat-cli 2026.10's keys
    run_name: str = DEFAULT_RUN_NAME  # never null: bat-cli's reader requires a name
    timestamp_utc: str | None = None  # when the run started, bat-cli's "YYYYmmdd_HHMMSS"
    k: int
    model_name: str  # the model as the provider calls it (bat-cli: without the provider)
    attempts: list[TaskSummary]  # per task, in the dataset's order
    qualitative_scores: dict[str, float | None] = Field(default_factory=dict)
    passed: int
    # bat's
    model: str  # the label: the model folder's name in a bat run
    run_id: str | None = None
    totals: Totals
    # Only when the model has conversations with a simulated user (left out otherwise)
    conversation: ConversationFigures | None = Field(None, exclude_if=_none)
    # Only when its episodes have a cost (left out for an older bat's episodes)
    cost: CostFigures | None = Field(None, exclude_if=_none)

    @field_validator("run_name", mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        """An older file's ``null`` (or empty) run name reads as bat-cli's default."""
        return value or DEFAULT_RUN_NAME

    def task(self, task_id: str) -> TaskSummary | None:
        return next((t for t in self.attempts if t.task_id == task_id), None)


# --- metrics.json -------------------------------------------------------------------------


class RowVerdict(_Model):
    passed: bool
    reason: str = ""


class RowTime(_Model):
    wall_ms: Milliseconds  # derived: wall_time_s * 1000 (bat-cli's unit)


class RowTokens(_Model):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_prompt_pct: float = 0.0  # bat-cli's; the A2A stream does not report it


class EpisodeRow(_Model):
    """One episode in ``metrics.json``'s ``per_episode`` (a few numbers, kept small)."""

    # bat-cli 2026.10's keys
    task_id: str
    expected_outcome: str | None = None
    status: str
    success: bool  # the deterministic verdict passed
    time: RowTime
    tokens: RowTokens = Field(default_factory=RowTokens)
    verdict: RowVerdict
    # bat's
    attempt: int
    wall_time_s: Seconds
    time_to_first_event_s: Seconds | None = None
    infra_error: str | None = None  # its kind, when bat could not observe the agent
    agent_error: str | None = None  # its kind, when the agent answered with an error
    vacuous: bool = False  # passed with an empty answer, or only the status was checked
    model_calls: int = 0
    tool_calls: int = 0
    scores: dict[str, float | None] | None = None  # judge score per dimension
    judge_error: str | None = None
    cold: bool = False  # the first wave after an agent start: out of the latency figures
    # A task with a simulated user only (left out otherwise)
    conversation: RowConversation | None = Field(None, exclude_if=_none)
    cost: RowCost | None = Field(None, exclude_if=_none)  # None: an older bat's episode

    @property
    def passed(self) -> bool:
        return self.success


class Distribution(_Model):
    """A quantity over a model's episodes (see :func:`bat.evaluation.stats.percentile`)."""

    count: int
    total: float | None
    mean: float | None
    min: float | None
    p25: float | None
    median: float | None
    p75: float | None
    p90: float | None
    p99: float | None
    max: float | None


class TimeMs(_Model):
    """bat-cli's times, derived from ``wall_time_s``."""

    total_wall_ms: float
    avg_wall_ms: float
    min_wall_ms: float
    max_wall_ms: float


class TokenTotals(_Model):
    # bat-cli 2026.10's keys
    prompt_tokens_total: int
    completion_tokens_total: int
    total_tokens_total: int
    cached_prompt_pct: float = 0.0
    avg_total_tokens: float
    min_total_tokens: int
    max_total_tokens: int
    # bat's
    prompt_mean: float | None = None
    completion_mean: float | None = None


class MetricsSummary(_Model):
    """``metrics.json``'s ``summary``: bat-cli's keys first, then bat's."""

    episodes: int
    k_attempts: int
    total_runs: int  # bat-cli's name for the number of episodes
    passed: int
    failed: int
    pass_rate: Rate | None  # passed / episodes
    time: TimeMs
    tokens: TokenTotals
    pass_rate_ci95: list[float] | None = None
    infra_failures: int = 0
    infra_failures_by_kind: dict[str, int] = Field(default_factory=dict)
    agent_errors_total: int = 0
    agent_errors: dict[str, int] = Field(default_factory=dict)
    vacuous_passes: int = 0
    pass_at_k: Rate | None = None
    pass_hat_k: Rate | None = None
    pass_at: dict[str, Rate | None] = Field(default_factory=dict)
    pass_hat: dict[str, Rate | None] = Field(default_factory=dict)
    wall_time_s: Distribution
    time_to_first_event_s: Distribution
    judge: dict[str, JudgeStats] | None = None
    model_calls_total: int = 0
    tool_calls_total: int = 0
    # Episodes left out of the latency figures (wall_time_s, time_to_first_event_s)
    # as their agent's cold start; when every episode is cold, the figures hold them all.
    cold_episodes: int = 0
    # Only when the model has conversations with a simulated user (left out otherwise)
    conversation: ConversationFigures | None = Field(None, exclude_if=_none)
    # Only when its episodes have a cost (left out for an older bat's episodes)
    cost: CostFigures | None = Field(None, exclude_if=_none)


class Metrics(_Model):
    """``metrics.json``."""

    schema_: str = Field(default=METRICS_SCHEMA, alias="schema")
    model: str
    run_id: str | None = None
    per_episode: list[EpisodeRow]
    summary: MetricsSummary

    @model_validator(mode="before")
    @classmethod
    def _rows_are_a_list(cls, data: Any) -> Any:
        if isinstance(data, dict) and not isinstance(data.get("per_episode", []), list):
            raise ValueError("per_episode is not a list")
        return data


def dump(model: BaseModel) -> dict[str, Any]:
    """The JSON content of a summary or metrics model, with its ``schema`` key."""
    return model.model_dump(mode="json", by_alias=True)


# What a plugin or script reading a run may import (docs/reuse.md; tests/test_reuse.py).
__all__ = [
    "METRICS_SCHEMA",
    "SUMMARY_SCHEMA",
    "ConversationFigures",
    "CostFigures",
    "CostPerEpisode",
    "Distribution",
    "EpisodeRow",
    "JudgeStats",
    "Metrics",
    "MetricsSummary",
    "RowConversation",
    "RowCost",
    "RowTime",
    "RowTokens",
    "RowVerdict",
    "Summary",
    "TaskSummary",
    "TimeMs",
    "TokenTotals",
    "Totals",
    "TurnFigures",
    "UserTokens",
]
