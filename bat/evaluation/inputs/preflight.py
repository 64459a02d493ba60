"""The inputs of a run, checked before anything starts: what would waste a run.

``eval.run`` (and ``--dry-run``, ``eval.show`` and ``bat doctor``, which say what it
would refuse) load the dataset, read the agent's files with the environment it will be
started with, and check every judge's key here, so the refusals are the same wherever
they are found. ``warnings`` are worth saying but not fatal.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from bat.errors import InputError
from bat.evaluation.inputs.agent_settings import AgentSettings
from bat.evaluation.inputs.config import ResolvedConfig, api_key
from bat.evaluation.inputs.dataset import Dataset, load_dataset
from bat.evaluation.inputs.model_keys import key_warnings
from bat.figures import counted


@dataclass
class Preflight:
    """The inputs of a run, checked; ``warnings`` are worth saying but not fatal."""

    dataset: Dataset
    settings: AgentSettings | None
    warnings: list[str] = field(default_factory=list)


def preflight(resolved: ResolvedConfig) -> Preflight:
    """Load the dataset and read the agent's settings; refuse what would waste a run:
    anything that would fail only after every episode ran (a judge without its key)."""
    dataset = load_dataset(resolved.dataset)
    agent = resolved.evaluation.agent
    settings = None
    warnings: list[str] = [*resolved.warnings, *dataset_warnings(dataset)]
    if resolved.evaluation.qualitative:
        judge_keys(resolved)
    check_output_dir(resolved.output_dir)
    if agent.start:
        settings, agent_warnings = check_agent_files(resolved, dataset)
        warnings += agent_warnings
    warnings += extra_spans_warnings(resolved, settings)
    warnings += key_warnings(resolved, settings)
    return Preflight(dataset=dataset, settings=settings, warnings=warnings)


def check_agent_files(
    resolved: ResolvedConfig, dataset: Dataset
) -> tuple[AgentSettings, list[str]]:
    """The files of the agent bat will start, checked as ``eval.run`` needs them (its
    root, its command, its config file and telemetry against what the dataset checks);
    returns its settings and the warnings worth saying. ``bat doctor`` calls it too."""
    agent = resolved.evaluation.agent
    warnings: list[str] = []
    if not resolved.root.is_dir():
        raise InputError(f"agent root {resolved.root} is not a directory (evaluation.agent.root)")
    try:
        shlex.split(agent.command)
    except ValueError as exc:
        raise InputError(f"evaluation.agent.command cannot be parsed: {exc}") from None
    settings = read_agent_settings(resolved)
    if settings.missing_config is not None:
        raise InputError(
            f"CONFIG_PATH names {settings.missing_config}, which does not exist (the "
            "agent would start without its configuration)"
        )
    problems = settings.problems_for(
        needs_tool_names=any(t.expected.checks_tools for t in dataset.tasks),
        needs_tool_args=any(c.args_subset for t in dataset.tasks for c in t.expected.tool_calls),
    )
    if problems:
        raise InputError(
            "the agent's telemetry settings hide what the dataset checks", details=problems
        )
    multi = [t.id for t in dataset.tasks if len(t.turns) > 1]
    if multi and settings.config_path is not None and not settings.checkpoints:
        warnings.append(
            f"{counted(len(multi), 'task')} {_have(multi)} several turns but "
            f"{settings.config_path} has "
            "checkpoints off: the agent may forget earlier turns (set checkpoints: true)"
        )
    return settings, warnings


def read_agent_settings(resolved: ResolvedConfig) -> AgentSettings:
    """What the files of the agent bat starts say (its config file, its ``.env``), read
    with the environment it will be started with; a file bat cannot read is an error."""
    env = resolved.agent_environment
    return AgentSettings.read(resolved.root, env)


def check_output_dir(output_dir: Path) -> None:
    """The run folder can be made under ``output_dir``: no file stands in its way."""
    for folder in (output_dir, *output_dir.parents):
        if folder.exists():
            if not folder.is_dir():
                raise InputError(
                    f"evaluation.output_dir {output_dir}: {folder} is a file, not a folder"
                )
            return


def dataset_warnings(dataset: Dataset) -> list[str]:
    """Tasks whose pass would prove little: they check nothing but the final status, or
    nothing at all (``status: null`` and no other expectation)."""
    weak = [task for task in dataset.tasks if not task.expected.checks_beyond_status]
    nothing = [task.id for task in weak if task.expected.status is None]
    status_only = [task.id for task in weak if task.expected.status is not None]
    warnings = []
    if status_only:
        warnings.append(
            f"{counted(len(status_only), 'task')} {_check(status_only)} nothing but the final "
            f"status ({_some(status_only)}): an empty or wrong answer passes "
            f"{_them(status_only)} (add output_must_contain, output_regex or tool_calls)"
        )
    if nothing:
        warnings.append(
            f"{counted(len(nothing), 'task')} {_check(nothing)} nothing at all "
            f"({_some(nothing)}: status: null and no other expectation): every answer "
            f"passes {_them(nothing)}"
        )
    return warnings


def _some(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def extra_spans_warnings(resolved: ResolvedConfig, settings: AgentSettings | None) -> list[str]:
    """``evaluation.extra_spans`` join the agent's own span file: without one, they are
    not read, and the user should hear why rather than see no tool call."""
    evaluation = resolved.evaluation
    if not resolved.extra_spans:
        return []
    if evaluation.agent.start and (settings is None or settings.config_path is None):
        why = "the agent has no config file for bat to send its own spans to"
    elif not evaluation.agent.start and evaluation.agent.spans_file is None:
        why = "evaluation.agent.spans_file (the running agent's own span file) is not set"
    else:
        return []
    return [f"evaluation.extra_spans is not read: {why}; they join the agent's own spans"]


def judge_keys(resolved: ResolvedConfig) -> dict[str, str]:
    """The environment the judges read their keys from; every judge's key checked."""
    judges = resolved.config.judges
    if not judges:
        raise InputError(f"{resolved.file}: evaluation.qualitative is true but no judge: is set")
    env = resolved.environment
    for spec in judges:
        api_key(spec, {**env, **spec.env})
    return env


def _have(items: list) -> str:
    return "has" if len(items) == 1 else "have"


def _check(items: list) -> str:
    return "checks" if len(items) == 1 else "check"


def _them(items: list) -> str:
    return "it" if len(items) == 1 else "them"
