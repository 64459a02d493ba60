"""The stages of an evaluation, as plain functions the Invoke tasks call.

``run_evaluation`` checks the inputs, then for each model starts the agent, runs the
missing episodes and stops the agent; ``summarize_run`` and ``recheck_run`` work on a
finished (or interrupted) run directory alone.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bat.atomic import write_text_atomic
from bat.errors import InputError, Interrupted
from bat.evaluation import rundir
from bat.evaluation.agent_process import (
    AgentProcess,
    AgentSettings,
    card_answers,
    read_dotenv,
    write_config_copy,
)
from bat.evaluation.config import ModelSpec, ResolvedConfig
from bat.evaluation.dataset import Dataset, load_dataset
from bat.evaluation.metrics import EpisodeRow, summarize
from bat.evaluation.progress import Progress
from bat.evaluation.records import EpisodeResult
from bat.evaluation.runner import EpisodeRunner, plan
from bat.evaluation.spans import SpanIndex
from bat.evaluation.verdict import judge_episode

Say = Callable[[str], None]


@dataclass
class Preflight:
    """The inputs of a run, checked; ``warnings`` are worth saying but not fatal."""

    dataset: Dataset
    settings: AgentSettings | None
    warnings: list[str] = field(default_factory=list)


def preflight(resolved: ResolvedConfig) -> Preflight:
    """Load the dataset and read the agent's settings; refuse what would waste a run."""
    dataset = load_dataset(resolved.dataset)
    agent = resolved.evaluation.agent
    settings = None
    warnings: list[str] = []
    if agent.start:
        if not resolved.root.is_dir():
            raise InputError(
                f"agent root {resolved.root} is not a directory (evaluation.agent.root)"
            )
        settings = AgentSettings.read(resolved.root, {**os.environ, **agent.env})
        problems = settings.problems_for(
            needs_tool_names=any(t.expected.checks_tools for t in dataset.tasks),
            needs_tool_args=any(
                c.args_subset for t in dataset.tasks for c in t.expected.tool_calls
            ),
        )
        if problems:
            raise InputError(
                "the agent's telemetry settings hide what the dataset checks", details=problems
            )
        multi = [t.id for t in dataset.tasks if len(t.turns) > 1]
        if multi and settings.config_path is not None and not settings.checkpoints:
            warnings.append(
                f"{len(multi)} task(s) have several turns but {settings.config_path} has "
                "checkpoints off: the agent may forget earlier turns (set checkpoints: true)"
            )
    return Preflight(dataset=dataset, settings=settings, warnings=warnings)


def run_evaluation(
    resolved: ResolvedConfig, *, resume: str | bool | None = None, say: Say = print
) -> Path:
    """Run every missing episode of every model; returns the run directory."""
    checked = preflight(resolved)
    for warning in checked.warnings:
        say(f"warning: {warning}")
    evaluation = resolved.evaluation
    models = resolved.models
    if resume:
        run_dir = rundir.find_run(resolved.output_dir, None if resume is True else str(resume))
        record = rundir.update_run(run_dir, status="running", resumed_at=rundir.now_iso())
        if record.get("dataset_sha256") != checked.dataset.sha256:
            say(
                f"warning: the dataset changed since {run_dir.name} started; "
                "new tasks are added to it"
            )
    else:
        run_dir = rundir.new_run_dir(resolved.output_dir, evaluation.run_name)
        rundir.write_run(run_dir, _run_record(resolved, checked.dataset, run_dir))
    say(f"run {run_dir}")
    try:
        for model in models:
            _run_model(resolved, checked, run_dir, model, say)
    except KeyboardInterrupt:
        rundir.update_run(run_dir, status="interrupted", ended_at=rundir.now_iso())
        raise Interrupted(
            f"interrupted: finished episodes are saved in {run_dir}; "
            f"finish the run with: bat eval.run --resume {run_dir.name}"
        ) from None
    except BaseException:
        rundir.update_run(run_dir, status="failed", ended_at=rundir.now_iso())
        raise
    rundir.update_run(run_dir, status="completed", ended_at=rundir.now_iso())
    return run_dir


def _run_record(resolved: ResolvedConfig, dataset: Dataset, run_dir: Path) -> dict:
    evaluation = resolved.evaluation
    return {
        "schema": rundir.RUN_SCHEMA,
        "run_id": run_dir.name,
        "status": "running",
        "started_at": rundir.now_iso(),
        "config_file": str(resolved.file),
        "config": resolved.config.model_dump(mode="json"),
        "agent_url": resolved.agent_url,
        "dataset": str(dataset.path),
        "dataset_sha256": dataset.sha256,
        "tasks": [task.id for task in dataset.tasks],
        "k": evaluation.k,
        "models": [_model_entry(model) for model in resolved.models],
        "versions": rundir.versions(),
    }


def _model_entry(model: ModelSpec | None) -> dict:
    if model is None:
        return {"label": "agent-default", "dir": "agent-default"}
    return {"label": model.label, "dir": model.dir_name}


def _run_model(
    resolved: ResolvedConfig, checked: Preflight, run_dir: Path, model: ModelSpec | None, say: Say
) -> None:
    evaluation = resolved.evaluation
    entry = _model_entry(model)
    model_dir = run_dir / entry["dir"]
    work = plan(checked.dataset.tasks, evaluation.k, rundir.episodes_done(model_dir))
    if not work:
        say(f"[{entry['label']}] every episode is already there")
        return
    model_dir.mkdir(parents=True, exist_ok=True)
    agent = None
    spans_file: Path | None = evaluation.agent.spans_file
    if evaluation.agent.start:
        # Spans are read only when the agent has a config.yaml to send them to our file.
        spans_file = model_dir / "spans.jsonl" if checked.settings.config_path else None
        agent = _agent_process(
            resolved,
            checked.settings,
            model,
            model_dir,
            run_dir / f"agent-{entry['dir']}.log",
            spans_file,
        )
    elif not card_answers(resolved.agent_url):
        raise InputError(
            f"no agent answers at {resolved.agent_url} (evaluation.agent.start is false)"
        )
    try:
        if agent is not None:
            say(
                f"[{entry['label']}] starting the agent: {evaluation.agent.command} "
                f"(in {resolved.root})"
            )
            agent.start()
            seconds = agent.wait_ready()
            say(f"[{entry['label']}] agent ready at {resolved.agent_url} after {seconds:.1f} s")
        progress = Progress(entry["label"], len(work))
        asyncio.run(
            _episodes(resolved, entry["label"], model_dir, work, spans_file, agent, progress)
        )
        progress.finish()
    finally:
        if agent is not None:
            agent.stop()


async def _episodes(resolved, label, model_dir, work, spans_file, agent, progress) -> None:
    from bat.evaluation.adapter import A2ASession

    evaluation = resolved.evaluation
    async with A2ASession(resolved.agent_url, concurrency=evaluation.concurrency) as session:
        runner = EpisodeRunner(
            session,
            model=label,
            model_dir=model_dir,
            concurrency=evaluation.concurrency,
            turn_timeout_s=evaluation.turn_timeout_s,
            spans=SpanIndex(spans_file) if spans_file is not None else None,
            agent_alive=agent.alive if agent is not None else None,
            on_done=lambda outcome: progress.update(outcome.passed, outcome.infra),
        )
        await runner.run(work)


def _agent_process(resolved, settings, model, model_dir, log, spans_file) -> AgentProcess:
    agent = resolved.evaluation.agent
    env = {**read_dotenv(resolved.root / ".env"), **os.environ, **agent.env}
    if model is not None:
        env.update(MODEL=model.model, MODEL_PROVIDER=model.provider)
        if model.base_url:
            env["BASE_URL"] = model.base_url
        env.update(model.env)
    env["PORT"] = str(resolved.agent_port)
    if settings is not None and spans_file is not None:
        copy = write_config_copy(settings, model_dir / "agent-config.yaml", spans_file.resolve())
        if copy is not None:
            env["CONFIG_PATH"] = str(copy.resolve())
    return AgentProcess(
        agent.command,
        root=resolved.root,
        env=env,
        log=log,
        url=resolved.agent_url,
        startup_timeout_s=resolved.evaluation.agent_startup_timeout_s,
        shutdown_timeout_s=resolved.evaluation.agent_shutdown_timeout_s,
    )


def judge_stage(resolved: ResolvedConfig, run_dir: Path, *, say: Say = print) -> None:
    """Score a run's episodes with the configured judges (see bat.evaluation.judging)."""
    from bat.evaluation.judging import judge_run

    judges = resolved.config.judges
    if not judges:
        raise InputError(f"{resolved.file}: evaluation.qualitative is true but no judge: is set")
    dataset = load_dataset(resolved.dataset)
    env = {**read_dotenv(resolved.root / ".env"), **os.environ}  # the shell wins over .env
    result = judge_run(run_dir, judges, {task.id: task for task in dataset.tasks}, env=env, say=say)
    if result.judged and result.errors == result.judged:
        say(f"warning: every judgement failed; the first error: {result.first_error}")


def load_episodes(model_dir: Path):
    """Every episode of a model folder, read one at a time."""
    folder = model_dir / "episodes"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            yield path, EpisodeResult.model_validate_json(path.read_bytes())
        except ValueError as exc:
            raise InputError(f"{path} is not an episode file: {str(exc).splitlines()[0]}") from None


def summarize_run(run_dir: Path, *, say: Say = print) -> list[Path]:
    """Write summary.json and metrics.json for every model of the run."""
    record = rundir.read_run(run_dir)
    written = []
    for model in record.get("models", []):
        model_dir = run_dir / model["dir"]
        rows = [EpisodeRow.of(episode) for _, episode in load_episodes(model_dir)]
        if not rows:
            continue
        summary, metrics = summarize(
            rows, k=record.get("k", 1), model=model["label"], task_order=record.get("tasks", [])
        )
        summary["run_id"] = metrics["run_id"] = record.get("run_id", run_dir.name)
        for name, content in (("summary.json", summary), ("metrics.json", metrics)):
            write_text_atomic(model_dir / name, json.dumps(content, indent=1) + "\n")
            written.append(model_dir / name)
        totals = summary["totals"]
        k = record.get("k", 1)
        infra = (
            f", {totals['infra_failures']} infrastructure failures"
            if totals["infra_failures"]
            else ""
        )
        say(
            f"[{model['label']}] {totals['passed']}/{totals['attempts']} episodes passed "
            f"({totals['success_percentage']:g}%), "
            f"pass@{k} {_pct(totals['pass_at_k'])}, pass^{k} {_pct(totals['pass_hat_k'])}{infra}"
        )
    return written


def recheck_run(run_dir: Path, dataset: Dataset, *, say: Say = print) -> int:
    """Re-judge every episode of a run against the dataset's current expectations."""
    changed = 0
    for model_dir in rundir.model_dirs(run_dir):
        for path, episode in load_episodes(model_dir):
            try:
                task = dataset.task(episode.task_id)
            except StopIteration:
                continue
            verdict = judge_episode(task.expected, episode)
            if verdict != episode.verdict:
                episode.verdict = verdict
                write_text_atomic(path, episode.to_json())
                changed += 1
    say(f"{changed} verdict(s) changed")
    return changed


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
