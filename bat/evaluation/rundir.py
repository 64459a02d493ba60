"""The run directory: every stage of an evaluation reads and writes files here.

::

    <output_dir>/<run-id>/
      run.json                          resolved config, dataset hash, versions, times, status
      agent-<model>.log                 the agent's own output
      <model>/agent-config.yaml         the copy of config.yaml the agent was started with
      <model>/spans.jsonl               the agent's spans
      <model>/episodes/<task>__try<k>.json
      <model>/retried/<task>__try<k>.<n>.json   records --retry-infra replaced
      <model>/summary.json  <model>/metrics.json

Run ids start with the UTC time, so the latest run is the last name in order.
"""

from __future__ import annotations

import json
import os
import platform
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.evaluation import secrets

RUN_SCHEMA = "bat.run/1"
RUN_FILE = "run.json"
_EPISODE = re.compile(r"^(?P<stem>.+)__try(?P<attempt>\d+)\.json$")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_run_dir(output_dir: Path, run_name: str | None) -> Path:
    """A fresh, unique run directory under ``output_dir``.

    The run name is free text (bat-cli allowed spaces); its folder-safe form is added to
    the time stamp, and ``run.json`` keeps the name as written.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", run_name or "").strip("-.")[:64]
    base = f"{stamp}-{safe}" if safe else stamp
    output_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        candidate = output_dir / (base if n == 1 else f"{base}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise InputError(f"too many runs named {base} in {output_dir}")


def find_run(output_dir: Path, run: str | None) -> Path:
    """``run`` (a path or a run id under ``output_dir``), or the latest run."""
    if run:
        candidates = list(dict.fromkeys([Path(run), output_dir / run]))
        for candidate in candidates:
            if (candidate / RUN_FILE).is_file():
                return candidate
        looked = " and ".join(str(candidate / RUN_FILE) for candidate in candidates)
        raise InputError(f"no run {run!r} (looked for {looked})")
    runs = sorted(p for p in output_dir.glob(f"*/{RUN_FILE}")) if output_dir.is_dir() else []
    if not runs:
        raise InputError(f"no runs in {output_dir} yet (bat eval.run makes one)")
    return runs[-1].parent


def read_run(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir / RUN_FILE} cannot be read: {exc}") from None


def write_run(run_dir: Path, record: dict[str, Any]) -> None:
    """Write run.json: private to its owner (it records the configuration, and a model's
    failure reason may quote anything), with every known secret scrubbed out."""
    record = secrets.scrub_data(record)
    secrets.write_private(run_dir / RUN_FILE, json.dumps(record, indent=1, default=str) + "\n")


def update_run(run_dir: Path, **changes: Any) -> dict[str, Any]:
    record = read_run(run_dir)
    record.update(changes)
    write_run(run_dir, record)
    return record


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("bat-cli", "a2a-sdk"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def episode_path(model_dir: Path, stem: str, attempt: int) -> Path:
    return model_dir / "episodes" / f"{stem}__try{attempt}.json"


def episodes_done(model_dir: Path) -> set[tuple[str, int]]:
    """``(task file stem, attempt)`` of every episode file already written."""
    folder = model_dir / "episodes"
    done = set()
    if folder.is_dir():
        for path in folder.iterdir():
            match = _EPISODE.match(path.name)
            if match:
                done.add((match["stem"], int(match["attempt"])))
    return done


def infra_failures(model_dir: Path) -> set[tuple[str, int]]:
    """``(task file stem, attempt)`` of every episode recorded as an infrastructure failure."""
    found = set()
    folder = model_dir / "episodes"
    for path in folder.glob("*__try*.json") if folder.is_dir() else []:
        match = _EPISODE.match(path.name)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if match and isinstance(data, dict) and data.get("infra_error"):
            found.add((match["stem"], int(match["attempt"])))
    return found


def model_dirs(run_dir: Path) -> list[Path]:
    """The folder of each model run.json lists, each checked to be inside the run (and
    the run checked to hold no symbolic link: see :func:`refuse_links`)."""
    refuse_links(run_dir)
    record = read_run(run_dir)
    models = record.get("models", [])
    if not isinstance(models, list):
        raise InputError(f"{run_dir / RUN_FILE}: models: not a list")
    return [model_dir(run_dir, model, n) for n, model in enumerate(models)]


def refuse_links(run_dir: Path) -> None:
    """A run folder bat made holds no symbolic link; one found there (``episodes`` linked
    to another folder, ``summary.json`` to a file of yours) could lead a write outside the
    run, so every command that writes in a run refuses it before writing anything."""
    for folder, dirs, files in os.walk(run_dir):
        for name in (*dirs, *files):
            path = Path(folder) / name
            if path.is_symlink():
                raise InputError(
                    f"{path} is a symbolic link; a run folder made by bat holds none, and "
                    "bat does not write through one (remove it, or copy what it points at)"
                )


def model_dir(run_dir: Path, model: Any, index: int) -> Path:
    """``run_dir / model["dir"]`` for run.json's ``models[index]``; a ``dir`` that is
    absolute, climbs out with ``..`` or is a symbolic link out of the run is an
    InputError naming run.json and the key, so no command reads or writes elsewhere."""
    where = f"models[{index}].dir"
    value = model.get("dir") if isinstance(model, dict) else None
    secrets.inside(run_dir, value, file=run_dir / RUN_FILE, key=where)
    return run_dir / value
