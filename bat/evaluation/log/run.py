"""``run.json`` and the run folder: make one, find one, check it before writing in it.

Run ids start with the UTC time, so the latest run is the last name in order. File
names are :mod:`bat.evaluation.log.layout`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from bat.atomic import json_text, write_private
from bat.errors import InputError
from bat.evaluation.log import layout
from bat.evaluation.log.files import read_regular, strict_loads
from bat.numbers import whole_number
from bat.secrets import Scrubber

RUN_SCHEMA = "bat.run/1"
RUN_FILE = layout.RUN_FILE
SHARDS_MOST = 10_000  # slices of one run: more would be one machine per episode of any run


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
    found = output_dir.glob(f"*/{RUN_FILE}") if output_dir.is_dir() else []
    runs = sorted(p for p in found if p.is_file())  # a FIFO named run.json is no run
    if not runs:
        raise InputError(f"no runs in {output_dir} yet (bat eval.run makes one)")
    return runs[-1].parent


# Lines of a failed model's log_tail printed under its reason (run.json keeps more).
TAIL_SHOWN = 5


class ModelEntry(BaseModel):
    """A model's entry in run.json: who it is, and how its part of the run went."""

    model_config = ConfigDict(extra="allow")

    label: str
    dir: str  # the model folder, relative to the run folder
    provider: str | None = None
    model: str | None = None
    # pending, completed, failed (could not be evaluated), stopped (the cost budget: some
    # episodes not run)
    status: str = "pending"
    reason: str | None = None
    log_tail: list[str] = Field(default_factory=list)
    episodes_run: int = 0
    restarts: int = 0
    requests_resent: int = 0  # again on a fresh connection: one broke before any reply
    binding: str | None = None  # the A2A binding and version spoken
    spans: str | None = None  # expected, not expected, silent, or none (no span file)
    span_waits: int = 0  # episodes that waited for their spans to appear
    image: str | None = None  # the id of the agent's image evaluated (evaluation.agent.image)
    replicas: int | None = None  # containers of that image sharing the episodes
    # the variable its provider's API key is read from (bat.provider_keys; None: none
    # needed, a scripted model, or a provider bat does not know): named when episodes
    # fail on credentials
    key_env: str | None = None


class RunRecord(BaseModel):
    """``run.json``: the resolved configuration, the dataset, the models and the status."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_: str = Field(default=RUN_SCHEMA, alias="schema")
    run_id: str
    run_name: str | None = None
    status: Literal["running", "completed", "partial", "failed", "interrupted"]
    started_at: str
    resumed_at: str | None = None
    ended_at: str | None = None
    config_file: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)  # env values and URL secrets removed
    agent_url: str | None = None
    dataset: str | None = None
    dataset_sha256: str | None = None
    tasks: list[str] = Field(default_factory=list)  # task ids, in the dataset's order
    # attempts per task, bounded as eval.yaml bounds it: eval.merge plans tasks × k
    k: StrictInt = Field(default=1, ge=1, le=1000)
    models: list[ModelEntry] = Field(default_factory=list)
    versions: dict[str, str | None] = Field(default_factory=dict)
    infra_failures: int | None = None  # left when the run ended
    # What of the dataset was chosen to run (--task/--tag/--exclude-tag/--limit); None: all.
    selection: dict[str, Any] | None = None
    # The slice of the plan this run holds (eval.run --shard I/N): {index, total, of}.
    shard: dict[str, Any] | None = None
    # The shards a merged run was made of (eval.merge): [{run, shard}], in slice order.
    merged_from: list[dict[str, Any]] | None = None
    # The planned episodes a merged run lacks (eval.merge --partial; its status is then
    # partial): their files, relative to the run folder. None: none is missing.
    missing_episodes: list[str] | None = None

    @field_validator("shard", mode="before")
    @classmethod
    def _one_slice(cls, value: Any) -> Any:
        """``shard`` is a slice or nothing: ``eval.merge`` and ``--resume`` count with it,
        so a hand-edited ``"index": true`` or ``"total": 10**12`` is refused here, once,
        for every reader, naming the key."""
        if value is None:
            return None
        if not isinstance(value, dict):
            given = json.dumps(value)[:40] if isinstance(value, str | list) else value
            raise PydanticCustomError(
                "shard", "expected an object {index, total}, got {given}", {"given": given}
            )
        index = _slice_number(value, "index", SHARDS_MOST)
        _slice_number(value, "total", SHARDS_MOST)
        _slice_number(value, "index", value["total"])
        return {**value, "index": index}

    def timestamp_utc(self) -> str | None:
        """When the run started, as bat-cli wrote it (``20261201_033109``)."""
        try:
            started = datetime.fromisoformat(self.started_at.replace("Z", "+00:00"))
        except ValueError:
            return None
        return started.astimezone(UTC).strftime("%Y%m%d_%H%M%S")


def _slice_number(shard: dict[str, Any], key: str, highest: int) -> int:
    """``shard[key]``: a JSON whole number (not a bool, a float or text) from 1 to
    ``highest`` (:func:`bat.numbers.whole_number`'s rule); else a located error."""
    given = shard.get(key)
    problem = None
    if key not in shard:
        problem = "missing"
    elif isinstance(given, bool) or not isinstance(given, int):
        problem = f"expected a whole number, got {json.dumps(given)[:40]}"
    else:
        try:
            return whole_number(given, lowest=1, highest=highest)
        except ValueError as error:
            problem = str(error)
    raise PydanticCustomError("shard", "{key}: {problem}", {"key": key, "problem": problem})


def read_run(run_dir: Path) -> RunRecord:
    """``run.json`` of ``run_dir``; an InputError names the file and the first problem."""
    return read_versioned(run_dir / RUN_FILE, RunRecord, RUN_SCHEMA, "a run")


def read_versioned(path: Path, model: type[Any], schema: str, noun: str) -> Any:
    """One of the run folder's JSON files of ``schema`` (or without a schema key), read
    as ``model``; an InputError names the file and its first problem."""
    try:
        data = strict_loads(read_regular(path).decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is malformed: expected a JSON object")
    if data.get("schema", schema) != schema:
        raise InputError(
            f"{path} has schema {data.get('schema')!r}: not {noun} this bat can read "
            f"(it reads {schema})"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise InputError(f"{path}: {_where(problem['loc'])}: {problem['msg']}") from None


def _where(loc: tuple) -> str:
    """A pydantic location as the file says it: ``models[0].dir``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "the file"


def write_run(run_dir: Path, record: RunRecord, *, scrubber: Scrubber) -> None:
    """Write run.json: private to its owner (it records the configuration, and a model's
    failure reason may quote anything), with every secret of ``scrubber`` taken out."""
    data = scrubber.data(record.model_dump(mode="json", by_alias=True))
    path = run_dir / RUN_FILE
    try:
        write_private(path, json_text(data, what=str(path), indent=1, default=str))
    except OSError as exc:  # named: the atomic writer fails on its temporary file
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def update_run(run_dir: Path, *, scrubber: Scrubber, **changes: Any) -> RunRecord:
    """run.json with ``changes`` made (each checked as a field of :class:`RunRecord`)."""
    record = read_run(run_dir)
    data = record.model_dump(mode="json", by_alias=True)
    data.update(changes)
    record = RunRecord.model_validate(data)
    write_run(run_dir, record, scrubber=scrubber)
    return record


def mark_ended(
    run_dir: Path, status: str, models: list[dict[str, Any]], *, scrubber: Scrubber
) -> None:
    """Say in run.json how the run ended early, even on a full disk.

    The record (status, end time, models) is rewritten atomically when there is room.
    When there is none, only the status is changed, in place and within the bytes the
    file already has: a write that needs no new block cannot find the disk full,
    whereas one that grew the file could be cut short there and leave run.json unreadable
    JSON, worse than a stale status. ``"interrupted"`` is 4 bytes longer than
    ``"running"``, so the word is not swapped alone: the whole member, with the
    whitespace :func:`write_run` lays around it, is replaced by one of exactly its length
    (:func:`status_member`), compact if need be and padded with spaces, which JSON allows
    between tokens. run.json then reads as the same record with the new status (no end
    time). A file not laid out as :func:`write_run` writes it is left as it is, saying
    ``running``: stale, but readable. (A copy-on-write file system may refuse even an
    overwrite on a full disk; the file is then unchanged too.)
    """
    try:
        update_run(run_dir, scrubber=scrubber, status=status, ended_at=now_iso(), models=models)
        return
    except (OSError, InputError):
        pass
    with contextlib.suppress(OSError):
        patch_status(run_dir / RUN_FILE, status)


def patch_status(path: Path, status: str) -> bool:
    """Change the ``running`` status of the run.json at ``path`` to ``status`` in place,
    in the bytes it has (see :func:`mark_ended`); whether it did."""
    with path.open("r+b", buffering=0) as handle:
        found = _RUNNING_MEMBER.search(handle.read())
        patch = status_member(status, len(found.group())) if found else None
        if found is None or patch is None:
            return False
        handle.seek(found.start())
        handle.write(patch)
        return True


# The run's own status member as write_run lays it out (indent=1: the top level is the
# only one indented by a single space; a newline inside a string is written escaped).
_RUNNING_MEMBER = re.compile(rb'\n "status": "running",\n ')


def status_member(status: str, size: int) -> bytes | None:
    """The JSON member ``"status": STATUS,`` with whitespace around it, in exactly
    ``size`` bytes: laid out as :func:`write_run` does when that fits, else compact;
    None when even compact it does not."""
    word = json.dumps(status).encode()
    for head, tail in ((b'\n "status": ', b"\n "), (b'"status":', b"")):
        member = head + word + b","
        room = size - len(member) - len(tail)
        if room >= 0:
            return member + b" " * room + tail
    return None


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("bat-cli", "a2a-sdk"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def model_dirs(run_dir: Path) -> list[Path]:
    """The folder of each model run.json lists, each checked to be inside the run (and
    the run checked to hold no symbolic link: see :func:`refuse_links`)."""
    refuse_links(run_dir)
    record = read_run(run_dir)
    return [model_dir(run_dir, model, n) for n, model in enumerate(record.models)]


def refuse_links(run_dir: Path) -> None:
    """A run folder bat made holds no symbolic link and is none; one found there
    (``episodes`` linked to another folder, ``summary.json`` to a file of yours), or a run
    folder that is itself a link (``output/RUN`` pointing elsewhere), could lead a write
    outside the output folder, so every command that writes in a run refuses it before
    writing anything. This is the one check: every stage finds the run's folders through
    :func:`model_dirs`, which starts here."""
    if Path(run_dir).is_symlink():
        raise InputError(
            f"{run_dir} is a symbolic link to {os.readlink(run_dir)}; a run folder made by "
            "bat is none, and bat does not write through one (give the folder it points at)"
        )
    folders = [run_dir]
    while folders:  # os.scandir: the entries' types come with the listing, no stat each
        try:
            entries = list(os.scandir(folders.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_symlink():
                raise InputError(
                    f"{entry.path} is a symbolic link; a run folder made by bat holds none, "
                    "and bat does not write through one (remove it, or copy what it points at)"
                )
            if entry.is_dir(follow_symlinks=False):
                folders.append(Path(entry.path))


def model_dir(run_dir: Path, model: ModelEntry, index: int) -> Path:
    """``run_dir / model.dir`` for run.json's ``models[index]``; a ``dir`` that is
    absolute, climbs out with ``..`` or is a symbolic link out of the run is an
    InputError naming run.json and the key, so no command reads or writes elsewhere."""
    layout.inside(run_dir, model.dir, file=run_dir / RUN_FILE, key=f"models[{index}].dir")
    return run_dir / model.dir


# What a plugin or script reading a run may import (docs/reuse.md; tests/test_reuse.py).
__all__ = [
    "RUN_FILE",
    "RUN_SCHEMA",
    "ModelEntry",
    "RunRecord",
    "find_run",
    "model_dirs",
    "read_run",
]
