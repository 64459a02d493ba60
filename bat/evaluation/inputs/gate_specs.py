"""What a gate asks: ``pass_hat_3 >= 0.8``, parsed once, from eval.yaml or ``--gate``.

A gate is one of three kinds:

* a **threshold** on a figure bat computes (``gate: "pass_rate >= 0.9"``), for each
  model (the default), one model (``model: LABEL``) or every model pooled
  (``model: all``), over every task or a subset (``tasks: [tag:smoke, checkout-*]``);
* **must_pass**: every attempt of each task chosen (ids, globs, ``tag:NAME``) passes;
* **baseline**: no significant regression against an earlier run (McNemar's exact test,
  as ``eval.compare`` computes it) and, with ``max_drop``, a pass rate no more than that
  below the baseline's.

This module only reads and checks what is asked (it is imported by the config reader);
:mod:`bat.evaluation.present.gates` computes the answers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bat.evaluation.log.episode import AGENT_ERROR_KINDS, CONVERSATION_ENDS
from bat.numbers import whole_number

OPERATORS = (">=", "<=", "==", ">", "<")
LATENCY = {"p50": "median", "median": "median", "p90": "p90", "p99": "p99"}
LATENCY.update({"p25": "p25", "p75": "p75", "mean": "mean", "max": "max", "min": "min"})
TOKENS = ("mean", "total", "max")
# Turns per conversation with a simulated user: the figures summary.json gives of them.
TURNS = ("mean", "p50", "p90", "max")
# What the episodes cost (summary.json's ``cost``): gate ``cost.NAME`` reads these.
COST = (
    "total",
    "per_episode.mean",
    "per_episode.p90",
    "per_episode.max",
    "judge.total",
    "per_pass",
)
# A gate is short; a longer text is refused before any pattern runs over it.
MAX_EXPRESSION = 200
# ASCII digits only: ``float("٣")`` is 3, and no reader of eval.yaml would see a 3 there.
_EXPRESSION = re.compile(
    r"\s*(?P<figure>[A-Za-z_][A-Za-z0-9_.@^-]*)\s*(?P<op>>=|<=|==|>|<)\s*"
    r"(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?P<percent>%?)\s*",
    re.ASCII,
)
MOST_ATTEMPTS = 1000  # eval.yaml's k is 1 to 1000: pass@K asks of at most as many
_PASS_K = re.compile(r"pass(?:_at_|@)(?P<k>[0-9]+|k)|pass(?:_hat_|\^)(?P<hat>[0-9]+|k)", re.ASCII)


@dataclass(frozen=True)
class Figure:
    """A figure a gate reads: ``kind`` says how to compute it, ``arg`` which one."""

    kind: str  # pass_rate, pass_at, pass_hat, judge, latency, tokens, infra_rate,
    #            infra_failures, agent_errors, conversation, cost
    arg: str | None = None  # k ("3" or "k"), a judge dimension, a percentile, an error
    #                         kind; of a conversation: pass_hat_3, turns.p90, goal_met...
    rate: bool = False  # a value in [0, 1] that may be written as a percentage
    highest: float | None = None  # the largest value the figure can take (None: no bound)

    @property
    def name(self) -> str:
        names = {"pass_at": "pass_at_{}", "pass_hat": "pass_hat_{}", "judge": "judge.{}"}
        names.update({"latency": "latency.{}", "tokens": "tokens.{}"})
        if self.kind == "agent_errors" and self.arg:
            return f"agent_errors.{self.arg}"
        if self.kind in ("conversation", "cost"):
            return f"{self.kind}.{self.arg}"
        return names.get(self.kind, self.kind).format(self.arg)


def parse_figure(text: str) -> Figure:
    """The figure a name means; a ValueError lists the names there are."""
    text = text.strip()
    if text == "pass_rate":
        return Figure("pass_rate", rate=True, highest=1)
    if text == "infra_failure_rate":
        return Figure("infra_rate", rate=True, highest=1)
    if text == "infra_failures":
        return Figure("infra_failures")
    match = _PASS_K.fullmatch(text)
    if match:
        kind, k = ("pass_at", match["k"]) if match["k"] is not None else ("pass_hat", match["hat"])
        if k != "k":
            try:  # attempts of a task: from 1, as eval.yaml's k
                k = str(whole_number(k, lowest=1, highest=MOST_ATTEMPTS))
            except ValueError as exc:
                raise ValueError(f"{text}: K (attempts of a task): {exc}") from None
        return Figure(kind, k, rate=True, highest=1)
    head, _, tail = text.partition(".")
    if head == "conversation":
        return _conversation_figure(tail)
    if head == "cost":
        if tail in COST:
            return Figure("cost", tail)
        raise ValueError(
            f"no cost figure {tail[:60]!r} (cost.total, cost.per_episode.mean|p90|max, "
            "cost.judge.total, cost.per_pass)"
        )
    if head == "judge" and tail:
        return Figure("judge", tail, highest=1)  # a judge scores from 0 to 1
    if head == "latency" and tail in LATENCY:
        return Figure("latency", tail)
    if head == "tokens" and tail in TOKENS:
        return Figure("tokens", tail)
    if head == "agent_errors" and (not tail or tail in AGENT_ERROR_KINDS):
        return Figure("agent_errors", tail or None)
    if head == "agent_errors":
        raise ValueError(f"no agent-error kind {tail!r} (kinds: {', '.join(AGENT_ERROR_KINDS)})")
    raise ValueError(
        f"no figure named {text[:60]!r} (figures: pass_rate, pass_at_K, pass_hat_K, "
        "judge.DIMENSION, latency.p50|p90|p99|mean|max, tokens.mean|total|max, "
        "infra_failure_rate, infra_failures, agent_errors[.KIND], conversation.FIGURE, "
        "cost.FIGURE)"
    )


def _conversation_figure(tail: str) -> Figure:
    """A figure of the conversations with a simulated user: ``conversation.`` followed by
    pass_rate, pass_at_K, pass_hat_K, turns.mean|p50|p90|max, an ending (a rate:
    ``goal_met``, ``stopped_unmet``, ``max_turns``, ``agent_ended``) or
    user_tokens.total|mean (the user model's)."""
    if tail == "pass_rate" or tail in CONVERSATION_ENDS:
        return Figure("conversation", tail, rate=True, highest=1)
    inner = _PASS_K.fullmatch(tail)
    if inner:
        figure = parse_figure(tail)
        return Figure("conversation", figure.name, rate=True, highest=1)
    part, _, which = tail.partition(".")
    if (part == "turns" and which in TURNS) or (
        part == "user_tokens" and which in ("total", "mean")
    ):
        return Figure("conversation", tail)
    raise ValueError(
        f"no conversation figure {tail[:60]!r} (conversation.pass_rate, "
        "conversation.pass_at_K, conversation.pass_hat_K, conversation.turns.mean|p50|p90|max, "
        f"conversation.{'|'.join(CONVERSATION_ENDS)} (rates), "
        "conversation.user_tokens.total|mean)"
    )


@dataclass(frozen=True)
class Threshold:
    """``figure op number``: a threshold gate's test."""

    figure: Figure
    op: str
    threshold: float

    def holds(self, value: float | None) -> bool:
        if value is None or not math.isfinite(value):
            return False  # a figure that cannot be computed (or is NaN) never passes a gate
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            "==": value == self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
        }[self.op]

    @property
    def text(self) -> str:
        return f"{self.figure.name} {self.op} {self.threshold:g}"


def parse_expression(text: str) -> Threshold:
    """``pass_hat_3>=0.8``, ``pass^3 >= 80%``, ``latency.p90 < 2.5``; ValueError if not.

    The threshold is a finite number the figure can reach (see :func:`threshold_of`): a
    gate that no run can fail, or none can pass, is a mistake to hear about now, not at
    the end of a run."""
    if len(text) > MAX_EXPRESSION:
        raise ValueError(
            f"a gate of {len(text)} characters: write FIGURE OP NUMBER (at most {MAX_EXPRESSION})"
        )
    match = _EXPRESSION.fullmatch(text)
    if not match:
        raise ValueError(
            f"{text[:80]!r} is not a gate: write FIGURE OP NUMBER, e.g. 'pass_rate >= 0.9' "
            f"(OP: {' '.join(OPERATORS)})"
        )
    figure = parse_figure(match["figure"])
    return Threshold(figure, match["op"], threshold_of(figure, match["number"], match["percent"]))


def threshold_of(figure: Figure, number: str, percent: str = "") -> float:
    """The threshold ``number`` (``percent``: "%" or "") means for ``figure``; a ValueError
    when it is not finite (``1e999``), is negative (no figure is), or lies outside the
    figure's range: a rate or a judge score is from 0 to 1 (0 % to 100 %), and
    ``pass_rate >= 90`` is asked whether 90% was meant."""
    value = float(number)
    written = f"{number[:40]}{percent}"
    if not math.isfinite(value):
        raise ValueError(f"the threshold {written} is not a finite number")
    if percent:
        if not figure.rate:
            raise ValueError(f"{figure.name} is not a rate: give its threshold without %")
        if not 0 <= value <= 100:
            raise ValueError(f"{figure.name} is a rate: {written} is outside 0% to 100%")
        return value / 100
    if value < 0:
        raise ValueError(f"{figure.name} is never negative: {written} is not a threshold")
    if figure.highest is not None and value > figure.highest:
        what = "a rate" if figure.rate else "a score"
        hint = f": did you mean {number}%?" if figure.rate and value <= 100 else ""
        raise ValueError(f"{figure.name} is {what} from 0 to 1, not {written}{hint}")
    return value


class GateSpec(BaseModel):
    """One entry of ``gates:`` in eval.yaml (or one ``--gate``, ``--baseline``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str | None = Field(default=None, min_length=1, max_length=100)
    gate: str | None = None  # "FIGURE OP NUMBER"
    must_pass: list[str] | None = None
    baseline: str | None = Field(default=None, min_length=1)  # a run id or folder
    max_drop: float | None = Field(default=None, ge=0, le=1)  # with baseline
    alpha: float = Field(default=0.05, gt=0, lt=1)  # with baseline
    model: str | None = Field(default=None, min_length=1)  # None: each model; "all": pooled
    tasks: list[str] | None = None  # ids, globs, tag:NAME; None: every task

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return {"gate": value} if isinstance(value, str) else value

    @field_validator("gate")
    @classmethod
    def _expression(cls, value: str | None) -> str | None:
        if value is not None:
            parse_expression(value)
        return value

    @field_validator("must_pass", "tasks")
    @classmethod
    def _selectors(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("an empty list: name a task, a glob or tag:NAME")
            for item in value:
                if not item.strip() or item.strip() == "tag:":
                    raise ValueError("an empty task selector")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> GateSpec:
        kinds = [k for k in ("gate", "must_pass", "baseline") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                "a gate is one of gate: 'FIGURE OP NUMBER', must_pass: [...] or baseline: RUN"
                + (f" (this one has {' and '.join(kinds)})" if kinds else "")
            )
        if self.baseline is None and self.max_drop is not None:
            raise ValueError("max_drop goes with baseline: RUN")
        if self.must_pass is not None and self.tasks is not None:
            raise ValueError("must_pass names its tasks itself: leave tasks out")
        return self

    @property
    def threshold(self) -> Threshold | None:
        return parse_expression(self.gate) if self.gate is not None else None

    @property
    def title(self) -> str:
        """The gate as a user would name it in a table."""
        if self.name:
            return self.name
        if self.gate is not None:
            return self.threshold.text  # type: ignore[union-attr]
        if self.must_pass is not None:
            return "must_pass " + ", ".join(self.must_pass)
        drop = f", drop <= {self.max_drop:g}" if self.max_drop is not None else ""
        return f"baseline {self.baseline}{drop}"


def command_line_gates(
    gates: list[str], baseline: str | None = None, max_drop: float | None = None
) -> list[GateSpec]:
    """The gates of ``--gate``, ``--baseline`` and ``--max-drop``; a bad one is a
    UsageError naming the flag."""
    from pydantic import ValidationError

    from bat.errors import UsageError

    specs = []
    for text in gates:
        try:
            specs.append(GateSpec(gate=text))
        except ValidationError as exc:
            message = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise UsageError(f"--gate {text[:80]!r}: {message}") from None
    if max_drop is not None and not baseline:
        raise UsageError("--max-drop needs --baseline RUN")
    if baseline:
        specs.append(GateSpec(baseline=baseline, max_drop=checked_drop(max_drop)))
    return specs


def checked_drop(max_drop: float | None) -> float | None:
    """``--max-drop`` (of ``eval.run``, ``eval.gate`` and ``eval.compare``): a fraction
    from 0 to 1, or a UsageError. NaN is refused by name: every comparison with it is
    false, so a drop of any size would pass."""
    from bat.errors import UsageError

    if max_drop is None:
        return None
    if not math.isfinite(max_drop):
        raise UsageError(f"--max-drop {max_drop}: give a finite fraction from 0 to 1")
    if not 0 <= max_drop <= 1:
        hint = f": did you mean {max_drop:g}%, i.e. {max_drop / 100:g}?" if max_drop <= 100 else ""
        raise UsageError(
            f"--max-drop {max_drop:g}: give a fraction from 0 to 1 (0.05 = 5 points){hint}"
        )
    return max_drop
