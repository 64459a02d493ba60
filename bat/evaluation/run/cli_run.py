"""One model of a run against a command-line agent (``evaluation.agent.adapter``).

The A2A path (:mod:`bat.evaluation.run.model_run`) starts an agent server and connects
to it; here there is nothing to start: each turn of each episode runs the adapter's
program in the episode's workspace (:class:`bat.agents.cli_session.CliSession`). The
runner, progress, episode files and everything after are the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bat.agents.cli_session import CliSession
from bat.agents.kinds import ModelTarget
from bat.agents.registry import ready
from bat.agents.workspace import Resource, Source
from bat.evaluation.inputs.config import ModelSpec, ResolvedConfig
from bat.evaluation.inputs.dataset import Dataset
from bat.evaluation.run.budget import CostBudget
from bat.evaluation.run.progress import Progress
from bat.evaluation.run.runner import CredentialWatch, EpisodeRunner, run_on_a_loop
from bat.secrets import Scrubber


def source_of(resolved: ResolvedConfig) -> Source:
    workspace = resolved.evaluation.agent.workspace
    resources = tuple(
        Resource(source=Path(item.source), dest=item.dest, version=item.version)
        for item in workspace.resources
    )
    return Source(path=workspace.source, ref=workspace.ref, resources=resources)


def group_sources(resolved: ResolvedConfig, dataset: Dataset) -> dict[str, Source]:
    """Each task's workspace from its belt group (``working_dir`` or ``fixture_repo``,
    ``resources``), by task id, unless eval.yaml sets ``evaluation.agent.workspace``,
    which then holds for every task."""
    if "workspace" in resolved.evaluation.agent.model_fields_set:
        return {}
    sources = {}
    for group in getattr(dataset, "groups", None) or []:
        space = group.workspace
        if not space.get("source"):
            continue
        resources = tuple(
            Resource(source=Path(item["source"]), dest=item["dest"], version=item.get("version"))
            for item in space.get("resources", [])
        )
        source = Source(path=space["source"], ref=space.get("ref"), resources=resources)
        sources.update({task_id: source for task_id in group.task_ids})
    return sources


def run_cli_work(
    resolved: ResolvedConfig,
    dataset: Dataset,
    model_dir: Path,
    model: ModelSpec | None,
    record,
    work: list,
    say: Callable[[str], None],
    scrubber: Scrubber,
    pricing: Callable | None = None,
    budget: CostBudget | None = None,
) -> None:
    """Run ``work`` (the model's missing episodes) against the CLI agent; fills ``record``;
    ``pricing`` gives each episode its cost."""
    evaluation = resolved.evaluation
    adapter = ready(evaluation.agent.adapter, evaluation.agent.options)
    target = (
        ModelTarget(
            provider=model.provider, model=model.model, base_url=model.base_url, env=model.env
        )
        if model is not None
        else ModelTarget()
    )
    source = source_of(resolved)
    sources = group_sources(resolved, dataset)

    def session() -> CliSession:
        return CliSession(
            adapter,
            options=adapter.settings,
            source=source,
            sources=sources,
            base=resolved.base,
            model=target,
            model_dir=model_dir,
            keep=evaluation.agent.workspace.keep,
            env=evaluation.agent.env,
            scrub=scrubber.text,
        )

    where = "its group's folder" if sources else source.path
    say(
        f"[{record.label}] {adapter.name}: {len(work)} episode(s), each in a workspace from {where}"
    )
    progress = Progress(record.label, len(work))
    runner = EpisodeRunner(
        "",
        model=record.label,
        model_dir=model_dir,
        concurrency=evaluation.concurrency,
        turn_timeout_s=evaluation.turn_timeout_s,
        credentials=CredentialWatch(),
        key_env=record.key_env,
        on_done=progress.update,
        notice=progress.notice(say),
        scrubber=scrubber,
        warm_latency=False,
        connect=session,
        pricing=pricing,
        cost_budget=budget,
    )
    before = budget.not_scheduled if budget is not None else 0
    try:
        run_on_a_loop(lambda: runner.run(work))
    except BaseException:
        progress.abandon()
        raise
    finally:
        record.binding = f"{adapter.name}{program_version(adapter)} (command line)"
    progress.finish()
    if budget is not None:
        budget.settle(record, before, len(work))
    else:
        record.episodes_run += len(work)
        record.status = "completed"


def program_version(adapter) -> str:
    """`` 2.0.14``: what the preset's program says of its version (for run.json and the
    card: two runs of different CLI versions are told apart), or "" when it says nothing
    in 10 s. The ``command`` adapter's program is the user's: not asked."""
    import re
    import subprocess
    import tempfile

    from bat.agents.registry import program_of

    program = program_of(adapter)
    if adapter.name == "command" or not program:
        return ""
    with tempfile.TemporaryDirectory(prefix="bat-version-") as home:
        try:
            done = subprocess.run(
                [program, "--version"],
                capture_output=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
                env={"PATH": os.environ.get("PATH", ""), "HOME": home, "NO_COLOR": "1"},
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
    found = re.search(rb"\d+\.\d+[\w.+-]*", done.stdout[:2000])
    return f" {found.group().decode()[:40]}" if found else ""
