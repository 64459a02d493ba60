"""What a run's gates are checked with: eval.yaml's, or without one the run's own record.

``bat eval.gate --run DIR`` works in a folder without eval.yaml (a CI job that only
downloaded the run, as ``eval.export --run DIR`` does): the gates, the infrastructure
budget (``evaluation.max_infra_failures``) and the dataset are then those ``run.json``
recorded of the eval.yaml the run ran with, and a ``baseline:`` run id is looked for
beside the run. An eval.yaml that exists but cannot be read is still an error: bat never
falls back from a file the user wrote to an older one silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from bat.errors import InputError
from bat.evaluation.inputs.config import ResolvedConfig
from bat.evaluation.inputs.gate_specs import GateSpec
from bat.evaluation.log import layout
from bat.evaluation.log import run as rundir


@dataclass(frozen=True)
class GateInputs:
    """The gates to check on a run and what they are checked with."""

    specs: list[GateSpec]  # eval.yaml's gates (the command line's are added by the caller)
    max_infra_failures: int
    output_dir: Path  # where a baseline given as a run id is looked for
    dataset: Path | None  # the tasks' tags, when the run has no snapshot of its dataset
    source: str  # "eval.yaml", or the run.json they were read from


class _Context(Protocol):
    """What is read of the run context (:class:`bat.evaluation.context.RunContext`, a
    layer above this one): eval.yaml, resolved on demand, and where it is looked for."""

    config_file: Path | None

    @property
    def resolved(self) -> ResolvedConfig: ...


def gate_inputs(ctx: _Context, run_dir: Path) -> GateInputs:
    """eval.yaml's when there is one (a broken one raises), else ``run_dir``'s run.json."""
    try:
        resolved = ctx.resolved
    except InputError:
        if ctx.config_file is not None and ctx.config_file.exists():
            raise
        return recorded_inputs(run_dir)
    return GateInputs(
        specs=list(resolved.config.gates),
        max_infra_failures=resolved.evaluation.max_infra_failures,
        output_dir=resolved.output_dir,
        dataset=resolved.dataset,
        source=str(resolved.file),
    )


def recorded_inputs(run_dir: Path) -> GateInputs:
    """The gates and budget of the eval.yaml the run ran with, from its run.json."""
    path = layout.run_file(run_dir)
    record = rundir.read_run(run_dir)
    config = record.config
    gates = config.get("gates") or []
    if not isinstance(gates, list):
        raise InputError(f"{path}: config.gates is not a list")
    specs = []
    for index, entry in enumerate(gates):
        try:
            specs.append(GateSpec.model_validate(_set_keys(entry)))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InputError(f"{path}: config.gates[{index}]: {first['msg']}") from None
    evaluation = config.get("evaluation") or {}
    budget = evaluation.get("max_infra_failures", 0) if isinstance(evaluation, dict) else 0
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise InputError(f"{path}: config.evaluation.max_infra_failures is not a count")
    dataset = record.dataset
    return GateInputs(
        specs=specs,
        max_infra_failures=budget,
        output_dir=run_dir.parent,
        dataset=Path(dataset) if dataset else None,
        source=str(path),
    )


def _set_keys(entry: object) -> object:
    """A recorded gate without the keys left at None (run.json holds every field)."""
    if isinstance(entry, dict):
        return {key: value for key, value in entry.items() if value is not None}
    return entry
