"""The benchmark card of a run: written as the run starts, completed as it ends.

``write_card`` records what the run is about to measure (``card.json``, model in
:mod:`bat.evaluation.log.card`) and snapshots the dataset's bytes into the run folder
(``tasks.json``); ``finish_card`` adds the end time (and the selection run.json holds).
The prices the run's cost is figured at go in as the price book recorded them, after
every model was looked up.
A resumed run keeps its card: only the end is updated. The log layer
(:mod:`bat.evaluation.log.card`) adds the A2A card the first model's agent served
(``note_agent_card``) and what it ran with (``agent_runtime.note_runtime``: its Python
and bat-adk, read from its environment) and says what makes two runs' numbers not comparable
(``comparable``).

Nothing here fails a run for want of context: no git, a folder that is not a
repository, an agent without bat-adk, each is recorded as null.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from bat import secrets
from bat.atomic import write_bytes_atomic
from bat.errors import InputError
from bat.evaluation.log import layout
from bat.evaluation.log import run as rundir
from bat.evaluation.log.card import (
    Card,
    CardAgent,
    CardDataset,
    CardGit,
    CardHost,
    CardJudge,
    CardModel,
    CardPrices,
    CardRetries,
    CardTimeouts,
    CardUserModel,
    CardVersions,
    read_card,
    write_card_file,
)
from bat.secrets import Scrubber

GIT_TIMEOUT_S = 5
MAX_LOCK_BYTES = 50_000_000
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")
_BAT_ADK = re.compile(r"^\s*bat[-_.]adk(?![A-Za-z0-9_.-])", re.IGNORECASE)


def write_card(
    run_dir: Path,
    resolved: Any,
    dataset: Any,
    scrubber: Scrubber,
    prices: dict[str, Any] | None = None,
) -> Card:
    """Write ``card.json`` and the dataset snapshot for a run that starts; a run that
    already has its card (a resumed one) keeps it, and its snapshot. ``prices``: the
    run's price book's record (:meth:`bat.evaluation.cost.PriceBook.record`)."""
    existing = read_card(run_dir)
    if existing is not None:
        return existing
    card = make_card(run_dir, resolved, dataset)
    card.prices = CardPrices.model_validate(prices) if prices is not None else None
    if not snapshot_dataset(run_dir, dataset):
        card.dataset.snapshot = None
    write_card_file(run_dir, card, scrubber=scrubber)
    return card


def snapshot_dataset(run_dir: Path, dataset: Any) -> bool:
    """The dataset's bytes, as read, into ``tasks.json`` of the run (atomically); False
    (and nothing written) when the file is gone or no longer holds what was read."""
    data = getattr(dataset, "snapshot", None)  # a belt folder's tasks, as tasks.json
    try:
        data = Path(dataset.path).read_bytes() if data is None else data
    except OSError:
        return False
    if hashlib.sha256(data).hexdigest() != dataset.sha256:
        return False
    write_bytes_atomic(layout.tasks_snapshot(run_dir), data)
    return True


def make_card(run_dir: Path, resolved: Any, dataset: Any) -> Card:
    """The card of a run of ``resolved`` over ``dataset`` (nothing written)."""
    record = rundir.read_run(run_dir)
    evaluation = resolved.evaluation
    agent = evaluation.agent
    cli = agent.adapter != "a2a"  # a command-line agent (bat.agents): no URL, nothing started
    found = rundir.versions()
    instructions = {
        task.id: task.user.instructions_sha256 for task in dataset.tasks if task.user is not None
    }
    adk, adk_source = bat_adk_version(resolved.root)
    described = _agent_json(resolved.root)
    return Card(
        run_id=record.run_id,
        run_name=record.run_name,
        started_at=record.started_at,
        ended_at=None,
        dataset=CardDataset(
            path=str(dataset.path), sha256=dataset.sha256, tasks=len(dataset.tasks)
        ),
        agent=CardAgent(
            name=described.get("name"),
            version=described.get("version"),
            url=secrets.display_url(resolved.agent_url) if not cli else None,
            start=agent.start and not cli,
            command=agent.command if agent.start and not cli else None,
            root=str(resolved.root),
            git=git_state(resolved.root, exclude=resolved.output_dir),
            adapter=agent.adapter,
            workspace=agent.workspace.model_dump(mode="json") if cli else None,
        ),
        versions=CardVersions(
            bat=found.get("bat-cli"),
            a2a_sdk=found.get("a2a-sdk"),
            bat_adk_requirement=adk,
            bat_adk_source=adk_source,
            python=found.get("python"),
        ),
        models=[_model(resolved, model) for model in resolved.models],
        judges=[_judge(spec) for spec in resolved.config.judges],
        qualitative=evaluation.qualitative,
        k=evaluation.k,
        concurrency=evaluation.concurrency,
        warm_latency=evaluation.warm_latency,
        timeouts=CardTimeouts(
            turn_s=evaluation.turn_timeout_s,
            agent_startup_s=evaluation.agent_startup_timeout_s,
            agent_shutdown_s=evaluation.agent_shutdown_timeout_s,
        ),
        retries=CardRetries(agent_max_restarts=agent.max_restarts),
        user_model=user_model(resolved) if instructions else None,
        user_instructions=instructions or None,
        command=command_line(sys.argv),
        host=host(),
        selection=record.selection,
        shard=record.shard,
    )


def finish_card(run_dir: Path, scrubber: Scrubber) -> None:
    """The run's end (and its selection) copied from run.json into its card."""
    try:
        card = read_card(run_dir)
        record = rundir.read_run(run_dir)
    except InputError:
        return
    if card is None:
        return
    card.ended_at = record.ended_at or rundir.now_iso()
    card.selection = record.selection
    card.shard = record.shard
    write_card_file(run_dir, card, scrubber=scrubber)


# --- what the card is made of ---------------------------------------------------------------


def _model(resolved: Any, model: Any) -> CardModel:
    return CardModel(
        label=resolved.model_label(model),
        provider=model.provider if model else None,
        model=model.model if model else None,
        base_url=secrets.display_url(model.base_url) if model else None,
    )


def _judge(spec: Any) -> CardJudge:
    from bat.evaluation.judging.rubrics import RUBRIC_VERSION, system_prompt

    prompt = system_prompt(spec.prompts).encode("utf-8")
    return CardJudge(
        label=spec.label,
        provider=spec.provider,
        model=spec.model,
        base_url=secrets.display_url(spec.base_url),
        rubric_version=RUBRIC_VERSION,
        prompt_sha256=hashlib.sha256(prompt).hexdigest(),
        timeout_s=spec.timeout_s,
        max_retries=spec.max_retries,
    )


def user_model(resolved: Any) -> CardUserModel | None:
    """eval.yaml's ``user:`` as the card records it (None: there is none)."""
    from bat.evaluation.run.simulated_user import script_sha256

    spec = resolved.config.user
    if spec is None:
        return None
    return CardUserModel(
        label=spec.shown,
        provider=spec.provider,
        model=spec.model,
        base_url=secrets.display_url(spec.base_url),
        temperature=spec.temperature,
        seed=spec.seed,
        concurrency=spec.concurrency,
        timeout_s=spec.timeout_s,
        max_retries=spec.max_retries,
        script_sha256=script_sha256(resolved),
    )


def _agent_json(root: Path) -> dict[str, Any]:
    """The name and version the project's agent.json gives (none: an empty dict)."""
    from bat.scaffold.agent_json import read_card_file

    try:
        described = read_card_file(Path(root) / "agent.json")
    except InputError:
        return {}
    return {k: v for k, v in described.items() if k in ("name", "version") and isinstance(v, str)}


def git_state(root: Path, *, exclude: Path | None = None) -> CardGit | None:
    """The commit checked out in ``root`` and whether anything is uncommitted (the run's
    own ``exclude`` folder aside: the run must not make its project dirty); None when
    there is no git or ``root`` is not in a repository."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    commit = _git(root, env, "rev-parse", "--verify", "HEAD")
    if not commit:
        return None
    spec = ["--", "."]
    if exclude is not None:
        with contextlib.suppress(ValueError):
            inside = Path(exclude).resolve().relative_to(Path(root).resolve())
            if inside.parts:
                spec.append(f":(exclude){inside.as_posix()}")
    status = _git(root, env, "status", "--porcelain", *spec)
    if status is None:
        return None
    return CardGit(commit=commit.strip(), dirty=bool(status.strip()))


def _git(root: Path, env: dict[str, str], *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def bat_adk_version(root: Path) -> tuple[str | None, str | None]:
    """The agent's bat-adk: the version its ``uv.lock`` pins, else the requirement its
    ``pyproject.toml`` states (``bat-adk>=0.3``); ``(None, None)`` when it has none."""
    import tomllib

    root = Path(root)
    lock = _toml(root / "uv.lock", tomllib)
    for package in lock.get("package") or []:
        if isinstance(package, dict) and package.get("name") == "bat-adk":
            version = package.get("version")
            if isinstance(version, str):
                return version, "uv.lock"
    project = _toml(root / "pyproject.toml", tomllib).get("project")
    dependencies = project.get("dependencies") if isinstance(project, dict) else None
    for requirement in dependencies if isinstance(dependencies, list) else []:
        if isinstance(requirement, str) and _BAT_ADK.match(requirement):
            return requirement.strip(), "pyproject.toml"
    return None, None


def _toml(path: Path, tomllib: Any) -> dict[str, Any]:
    try:
        if not path.is_file() or path.stat().st_size > MAX_LOCK_BYTES:
            return {}
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def command_line(argv: list[str]) -> list[str]:
    """The command line, as it may be written: the program's name only, and every URL
    shown without its credentials (the card's writer takes out every known secret)."""
    if not argv:
        return []
    shown = [Path(argv[0]).name, *argv[1:]]
    return [_URL.sub(lambda m: secrets.display_url(m.group(0)) or "", a) for a in shown]


def host() -> CardHost:
    return CardHost(
        os=platform.system(),
        platform=platform.platform(),
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        machine=platform.machine(),
        cpu_count=os.cpu_count(),
    )
