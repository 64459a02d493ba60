"""One model of a run against a command-line agent (``evaluation.agent.adapter``).

The A2A path (:mod:`bat.evaluation.run.model_run`) starts an agent server and connects
to it; here there is nothing to start: each turn of each episode runs the adapter's
program in the episode's workspace (:class:`bat.agents.cli_session.CliSession`). The
runner, progress, episode files and everything after are the same.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from bat.agents import registry
from bat.agents.cli_session import CliSession
from bat.agents.kinds import CliAgent, ModelTarget
from bat.agents.workspace import Resource, Source
from bat.errors import InputError
from bat.evaluation.inputs.config import ModelSpec, ResolvedConfig
from bat.evaluation.run.progress import Progress
from bat.evaluation.run.runner import CredentialWatch, EpisodeRunner, run_on_a_loop
from bat.secrets import Scrubber


def adapter_of(resolved: ResolvedConfig) -> CliAgent:
    """The run's CLI adapter, made with its options; an InputError if its program is not
    installed (said once, before any episode, rather than by every episode)."""
    spec = resolved.evaluation.agent
    adapter = registry.load(spec.adapter, spec.options)
    program = program_of(adapter)
    if program and shutil.which(program) is None:
        how = f"; install it: {adapter.install}" if adapter.install else ""
        raise InputError(
            f"agent adapter {adapter.name}: the program {program!r} is not installed "
            f"(not found on PATH){how}; or set evaluation.agent.options.executable"
        )
    return adapter


def program_of(adapter: CliAgent) -> str | None:
    """The program a turn runs (what doctor and the run check is installed)."""
    if adapter.name == "command":
        command = adapter.settings.get("command")
        if isinstance(command, list) and command:
            return command[0]
        if isinstance(command, str):
            import shlex

            parts = shlex.split(command)
            return parts[0] if parts else None
        return None
    return adapter.settings.get("executable") or adapter.executable or None


def source_of(resolved: ResolvedConfig) -> Source:
    workspace = resolved.evaluation.agent.workspace
    resources = tuple(
        Resource(source=Path(item.source), dest=item.dest, version=item.version)
        for item in workspace.resources
    )
    return Source(path=workspace.source, ref=workspace.ref, resources=resources)


def run_cli_work(
    resolved: ResolvedConfig,
    model_dir: Path,
    model: ModelSpec | None,
    record,
    work: list,
    say: Callable[[str], None],
    scrubber: Scrubber,
) -> None:
    """Run ``work`` (the model's missing episodes) against the CLI agent; fills ``record``."""
    evaluation = resolved.evaluation
    adapter = adapter_of(resolved)
    target = (
        ModelTarget(
            provider=model.provider, model=model.model, base_url=model.base_url, env=model.env
        )
        if model is not None
        else ModelTarget()
    )
    source = source_of(resolved)

    def session() -> CliSession:
        return CliSession(
            adapter,
            options=adapter.settings,
            source=source,
            base=resolved.base,
            model=target,
            model_dir=model_dir,
            keep=evaluation.agent.workspace.keep,
            env=evaluation.agent.env,
            scrub=scrubber.text,
        )

    say(
        f"[{record.label}] {adapter.name}: {len(work)} episode(s), each in a workspace "
        f"from {source.path}"
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
    )
    try:
        run_on_a_loop(lambda: runner.run(work))
    except BaseException:
        progress.abandon()
        raise
    finally:
        record.binding = f"{adapter.name} (command line)"
    progress.finish()
    record.episodes_run += len(work)
    record.status = "completed"
