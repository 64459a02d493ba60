"""``gates.json``: what the gates of a run said (``bat.gates/1``), written by the gate stage
of a run's chain or ``eval.gate --save`` (a plain ``eval.gate`` is a what-if that writes nothing).

One entry per gate and scope (a gate on each model is one entry per model). ``value`` is
the figure measured (``None`` when it could not be computed, which fails the gate; a cost
gate's ``unit`` is its currency) and
``detail`` says why a gate failed in words (the failing tasks, the McNemar p-value).
The report and the Markdown export read this file; CI reads ``passed``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

GATES_SCHEMA = "bat.gates/1"


class GateResult(BaseModel):
    """One gate over one scope."""

    model_config = ConfigDict(extra="ignore")

    name: str  # the gate as the user wrote it (or its name:)
    kind: str  # threshold, must_pass or baseline
    figure: str | None = None  # the figure read (pass_hat_3, judge.accuracy, ...)
    op: str | None = None
    threshold: float | None = None
    model: str  # a model's label, or "all" for every model pooled
    tasks: list[str] | None = None  # the selectors that chose the tasks (None: all)
    value: float | None = None
    unit: str | None = None  # the value's currency, of a cost gate ("USD"); else None
    passed: bool
    detail: str = ""


class GatesFile(BaseModel):
    """``gates.json``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    schema_: str = Field(default=GATES_SCHEMA, alias="schema")
    run_id: str
    evaluated_at: str
    passed: bool  # every gate held
    gates: list[GateResult]

    @property
    def failed(self) -> list[GateResult]:
        return [gate for gate in self.gates if not gate.passed]
