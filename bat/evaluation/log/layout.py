"""Every name in a run folder: the one module that spells them.

::

    <output_dir>/<run-id>/
      run.json                              the run: config, dataset hash, models, status
      card.json                             the benchmark card: what exactly was measured
      tasks.json                            the dataset as the run read it (a snapshot)
      gates.json                            the gates and whether each held
      agent-<model>.log                     the agent's own output
      agent-<model>.process.json            the agent bat started (to stop a stale one)
      judge-cache/<hash>.json               judgements already paid for
      <model>/agent-config.yaml             the copy of config.yaml the agent ran with
      <model>/spans.jsonl                   the agent's spans
      <model>/episodes/<task>__try<k>.json  one per episode (judge scores inside)
      <model>/retried/<task>__try<k>.<n>.json   records --retry-infra replaced
      <model>/summary.json  <model>/metrics.json

bat-cli 2026.10 wrote the same ``summary.json``, ``metrics.json`` and ``episodes/`` in
its model folders (``<run-id>/<run name>_<provider>-<model>/``), without ``run.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bat.errors import InputError

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
METRICS_FILE = "metrics.json"
EPISODES_DIR = "episodes"
RETRIED_DIR = "retried"
SPANS_FILE = "spans.jsonl"
AGENT_CONFIG_COPY = "agent-config.yaml"
JUDGE_CACHE_DIR = "judge-cache"
CARD_FILE = "card.json"
TASKS_SNAPSHOT = "tasks.json"
GATES_FILE = "gates.json"
# Model folder names bat never gives a model: they are files or folders of the run itself.
RESERVED_DIRS = frozenset({"agent-default", JUDGE_CACHE_DIR})

EPISODE_NAME = re.compile(r"^(?P<stem>.+)__try(?P<attempt>\d+)\.json$")


def run_file(run_dir: Path) -> Path:
    return run_dir / RUN_FILE


def card_file(run_dir: Path) -> Path:
    return run_dir / CARD_FILE


def tasks_snapshot(run_dir: Path) -> Path:
    return run_dir / TASKS_SNAPSHOT


def gates_file(run_dir: Path) -> Path:
    return run_dir / GATES_FILE


def summary_file(model_dir: Path) -> Path:
    return model_dir / SUMMARY_FILE


def metrics_file(model_dir: Path) -> Path:
    return model_dir / METRICS_FILE


def episodes_dir(model_dir: Path) -> Path:
    return model_dir / EPISODES_DIR


def episode_path(model_dir: Path, stem: str, attempt: int) -> Path:
    return model_dir / EPISODES_DIR / f"{stem}__try{attempt}.json"


def episode_files(model_dir: Path) -> list[Path]:
    """The episode files of a model folder, in name order (none: an empty list)."""
    folder = model_dir / EPISODES_DIR
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def retried_dir(model_dir: Path) -> Path:
    return model_dir / RETRIED_DIR


def retried_path(model_dir: Path, episode: Path, n: int) -> Path:
    return model_dir / RETRIED_DIR / f"{episode.stem}.{n}.json"


def raw_output_dir(model_dir: Path, stem: str, attempt: int) -> Path:
    """A command-line agent's episode: each turn's stdout (``turn-N.out``) and stderr."""
    return model_dir / "raw" / f"{stem}.{attempt}"


def kept_workspace(model_dir: Path, stem: str, attempt: int) -> Path:
    """Where a command-line agent's workspace is kept (``workspace.keep``)."""
    return model_dir / "workspaces" / f"{stem}.{attempt}"


def spans_file(model_dir: Path) -> Path:
    return model_dir / SPANS_FILE


def agent_config_copy(model_dir: Path) -> Path:
    return model_dir / AGENT_CONFIG_COPY


def agent_log(run_dir: Path, model_dir_name: str) -> Path:
    return run_dir / f"agent-{model_dir_name}.log"


def shard_agent_log(run_dir: Path, model_dir_name: str, shard: int) -> Path:
    """The agent log of one shard of a merged run (eval.merge keeps each)."""
    return run_dir / f"agent-{model_dir_name}.shard-{shard}.log"


def replica_agent_log(run_dir: Path, model_dir_name: str, replica: int) -> Path:
    """The log of one of several replicas of the agent's image."""
    return run_dir / f"agent-{model_dir_name}.replica-{replica}.log"


def agent_process_record(log: Path) -> Path:
    return log.with_suffix(".process.json")


def judge_cache_dir(run_dir: Path) -> Path:
    return run_dir / JUDGE_CACHE_DIR


def is_run_folder(folder: Path) -> bool:
    return (folder / RUN_FILE).is_file()


def has_summary(folder: Path) -> bool:
    return (folder / SUMMARY_FILE).is_file()


def inside(folder: Path, relative: Any, *, file: Path, key: str) -> Path:
    """``folder / relative``, resolved (symbolic links followed), which must stay inside
    ``folder``: a path read from a file (``run.json``'s ``models[].dir``) must not lead a
    command to read or write elsewhere. Anything else is an InputError naming the file
    and the key."""
    if not isinstance(relative, str) or not relative or "\0" in relative:
        raise InputError(f"{file}: {key}: not a folder name: {relative!r}")
    base = Path(folder).resolve()
    target = (base / relative).resolve()
    if Path(relative).is_absolute() or target == base or not target.is_relative_to(base):
        raise InputError(
            f"{file}: {key}: {relative!r} leads outside {folder} (a path read from a file "
            "must stay inside its folder)"
        )
    return target
