"""The inputs of a run, checked before anything starts: what would waste a run.

One set of checks, :func:`project_checks`, is made by ``eval.run``, ``eval.run
--dry-run``, ``eval.show`` and ``bat doctor`` alike: eval.yaml's and the dataset's
warnings, every judge's key, the output folder, the agent's files read with the
environment it will be started with (its telemetry against the dataset's tool checks,
its checkpoints against tasks of several turns). A refusal is an ``InputError`` wherever
it is found; ``warnings`` are worth saying but not fatal. It works on a
:class:`DatasetCheck`, so ``eval.show`` and doctor need not keep a large dataset's tasks.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from bat.agent_python import AgentPython, find_agent_python, runs_uv
from bat.errors import InputError
from bat.evaluation.inputs.agent_settings import AgentSettings
from bat.evaluation.inputs.compat import COMPAT_LINE
from bat.evaluation.inputs.config import ResolvedConfig, api_key
from bat.evaluation.inputs.dataset import Dataset, DatasetCheck, load_dataset
from bat.evaluation.inputs.model_keys import key_warnings
from bat.figures import counted


@dataclass
class Preflight:
    """The inputs of a run, checked; ``warnings`` are worth saying but not fatal."""

    dataset: Dataset
    settings: AgentSettings | None
    warnings: list[str] = field(default_factory=list)
    agent_python: AgentPython | None = None  # the Python uv is to run the agent with


@dataclass
class Checked:
    """What :func:`project_checks` found: the agent's settings (when bat starts it) and
    the warnings worth saying."""

    settings: AgentSettings | None
    warnings: list[str] = field(default_factory=list)


def preflight(resolved: ResolvedConfig) -> Preflight:
    """Load the dataset and make :func:`project_checks` on it (``eval.run`` and
    ``--dry-run``)."""
    dataset = load_dataset(resolved.dataset, unknown_keys=resolved.unknown_keys)
    checked = project_checks(resolved, DatasetCheck.of(dataset))
    return Preflight(
        dataset=dataset,
        settings=checked.settings,
        warnings=checked.warnings,
        agent_python=agent_python(resolved),
    )


def project_checks(resolved: ResolvedConfig, dataset: DatasetCheck) -> Checked:
    """The one set of checks before a run: raises ``InputError`` for what would waste a
    run (anything that would fail only after every episode ran: a judge without its key,
    telemetry that hides what the dataset checks), and returns the warnings.

    ``eval.run``, ``--dry-run``, ``eval.show`` and ``bat doctor`` all call it, so they
    warn and refuse alike."""
    agent = resolved.evaluation.agent
    settings = None
    warnings: list[str] = [
        *resolved.warnings,
        *ignored_keys_warnings(dataset, resolved.base),
        *dataset.warnings,
        *dataset_warnings(dataset.weak),
        *new_checks_warnings(resolved, dataset),
    ]
    if resolved.evaluation.qualitative:
        judge_keys(resolved)
    warnings += simulated_user_checks(resolved, dataset)
    check_output_dir(resolved.output_dir)
    if agent.adapter != "a2a":
        # A command-line agent: no project to start, but its program must be installed.
        from bat.agents.registry import ready

        ready(agent.adapter, agent.options)
        source = agent.workspace.source
        if "://" not in source and not source.startswith("git@"):
            folder = resolved.base / source
            if not folder.is_dir():
                raise InputError(
                    f"{resolved.file}: evaluation.agent.workspace.source: no folder at {folder}"
                )
        return Checked(settings=None, warnings=[*warnings, *key_warnings(resolved, None)])
    if agent.start:
        settings, agent_warnings = check_agent_files(resolved, dataset)
        warnings += agent_warnings
    warnings += extra_spans_warnings(resolved, settings)
    warnings += key_warnings(resolved, settings)
    return Checked(settings=settings, warnings=warnings)


def ignored_keys_warnings(dataset: DatasetCheck, base: Path) -> list[str]:
    """One warning per key of the tasks left out under ``compat: {unknown_keys: warn}``,
    naming it and the tasks that have it (the file as eval.yaml names it, under ``base``)."""
    path = dataset.path.relative_to(base) if dataset.path.is_relative_to(base) else dataset.path
    return [
        f"{path}: {key} in {counted(len(ids), 'task')} ({_some(ids)}): a key bat "
        f"does not read, ignored ({COMPAT_LINE})"
        for key, ids in dataset.ignored.items()
    ]


def new_checks_warnings(resolved: ResolvedConfig, dataset: DatasetCheck) -> list[str]:
    """Checks bat-cli 2026.10 ignored (``output_regex``, ``output_must_not_contain``)
    decide verdicts here: said, with the tasks counted, in a project moving over from
    bat-cli (the compat switch on, or bat-cli run folders in its output folder), so that
    a verdict that differs from bat-cli's is not a surprise. bat's own projects (the
    scaffold's sample dataset uses both checks) are not told about bat-cli."""
    facts = dataset.facts
    if not (facts.regex or facts.must_not):
        return []
    if resolved.unknown_keys != "warn" and not _has_batcli_runs(resolved.output_dir):
        return []
    uses = [
        f"{name} ({counted(len(ids), 'task')}: {ids.named()})"
        for name, ids in (
            ("output_regex", facts.regex),
            ("output_must_not_contain", facts.must_not),
        )
        if ids
    ]
    return [
        f"{' and '.join(uses)}: checks bat-cli 2026.10 ignored decide verdicts here (a task "
        "bat-cli passed may fail)"
    ]


def _has_batcli_runs(output_dir: Path) -> bool:
    """A run folder of bat-cli's (``<run>/<model>/summary.json`` in its format) among the
    first ones of ``output_dir``: the project was evaluated by bat-cli."""
    from itertools import islice

    from bat.evaluation.log.batcli import is_model_folder

    try:
        runs = [p for p in islice(output_dir.iterdir(), 50) if p.is_dir()]
        return any(is_model_folder(m) for run in runs for m in islice(run.iterdir(), 20))
    except OSError:
        return False


def agent_python(resolved: ResolvedConfig) -> AgentPython | None:
    """The Python uv is to start the agent with, found now (``bat.agent_python``):
    no Python the agent's project allows is refused before anything starts, not left
    to uv's download that fails offline. None when bat starts no agent with ``uv run``."""
    agent = resolved.evaluation.agent
    if agent.adapter != "a2a" or not agent.start or agent.image is not None:
        return None
    if not runs_uv(agent.command):
        return None
    from bat.uv_binary import find_uv

    return find_agent_python(resolved.root, resolved.agent_environment, uv=find_uv())


def check_agent_files(
    resolved: ResolvedConfig, dataset: DatasetCheck | Dataset
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
    if isinstance(dataset, Dataset):
        dataset = DatasetCheck.of(dataset)
    facts = dataset.facts
    problems = settings.problems_for(
        needs_tool_names=facts.tool_names, needs_tool_args=facts.tool_args
    )
    if problems:
        raise InputError(
            "the agent's telemetry settings hide what the dataset checks", details=problems
        )
    multi = facts.multi_turn
    # Only bat-adk reads ``checkpoints``: another agent keeps (or not) its conversations
    # its own way, and a config.yaml without the key says nothing about it.
    if multi and settings.uses_bat_adk and settings.config_path and not settings.checkpoints:
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


def dataset_warnings(tasks: list) -> list[str]:
    """Tasks whose pass would prove little: they check nothing but the final status, or
    nothing at all (``status: null`` and no other expectation)."""
    weak = [task for task in tasks if not task.checks_beyond_status]
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


def simulated_user_checks(resolved: ResolvedConfig, dataset: DatasetCheck) -> list[str]:
    """Tasks with a simulated user need eval.yaml's ``user:`` (the model that plays them,
    its key set) and an A2A agent; a ``user:`` no task uses is worth a warning."""
    simulated = dataset.facts.simulated
    user = resolved.config.user
    if not simulated:
        return [f"{resolved.file}: user: is set, but no task has a user"] if user else []
    tasks = f"{counted(len(simulated), 'task')} ({simulated.named()}) {_have(simulated)}"
    if user is None:
        raise InputError(
            f"{resolved.file}: {tasks} a simulated user, but there is no user: section to "
            "play it (user: {script: FILE} runs offline; docs/eval.md, Simulated users)"
        )
    adapter = resolved.evaluation.agent.adapter
    if adapter != "a2a":
        raise InputError(
            f"{resolved.file}: {tasks} a simulated user, which talks to A2A agents only; "
            f"evaluation.agent.adapter is {adapter}"
        )
    api_key(user, {**resolved.environment, **user.env})
    return []


def _have(items: list) -> str:
    return "has" if len(items) == 1 else "have"


def _check(items: list) -> str:
    return "checks" if len(items) == 1 else "check"


def _them(items: list) -> str:
    return "it" if len(items) == 1 else "them"
