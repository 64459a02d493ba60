"""``bat eval.merge``: the shards of a run (``eval.run --shard I/N``) put back together.

The merged run folder is the one an unsharded ``eval.run`` would have written: every
episode file of every model (and every earlier record ``--retry-infra`` kept), run.json
with the models' counts added up, the card and the dataset snapshot; ``eval.merge``'s
chain then summarizes it, checks its gates and draws its charts as after any run.

Shards belong together only if nothing that decides the numbers differs: the dataset
(its sha256 and task ids), the resolved configuration (eval.yaml as written, the models,
k; but for ``agent_url``: where the agent listened is no difference), bat's, a2a-sdk's
and Python's versions, and the shards' cards on what ``eval.compare`` calls comparable.
The slices must be those of one plan: the same number of slices, each exactly once. A
missing or doubled slice, or a shard that has not ended, is an error naming it, and
nothing is written.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from bat.atomic import write_bytes_atomic
from bat.errors import InputError
from bat.evaluation.inputs.shards import Shard
from bat.evaluation.log import card as cards
from bat.evaluation.log import layout
from bat.evaluation.log import run as rundir
from bat.evaluation.log.run import ModelEntry, RunRecord
from bat.secrets import Scrubber

ENDED = ("completed", "partial", "failed")
ADDED_UP = ("episodes_run", "restarts", "requests_resent", "span_waits")


@dataclass
class Part:
    """One shard: its folder, run.json and slice."""

    run_dir: Path
    record: RunRecord
    shard: Shard


def merge(run_dirs: list[Path], output_dir: Path, scrubber: Scrubber) -> Path:
    """Merge the shards ``run_dirs`` into a new run folder under ``output_dir``; its path.
    What is rewritten (run.json, card.json) goes through ``scrubber``."""
    parts = check(run_dirs)
    target = rundir.new_run_dir(output_dir, parts[0].record.run_name)
    try:
        record = _merged_record(target.name, parts)
        for index, model in enumerate(record.models):
            for part in parts:
                source = rundir.model_dir(part.run_dir, part.record.models[index], index)
                _copy_episodes(source, target / model.dir, part)
                log = layout.agent_log(part.run_dir, model.dir)
                if log.is_file() and not log.is_symlink():
                    _copy(log, layout.shard_agent_log(target, model.dir, part.shard.index))
        snapshot = layout.tasks_snapshot(parts[0].run_dir)
        if snapshot.is_file() and not snapshot.is_symlink():
            _copy(snapshot, layout.tasks_snapshot(target))
        rundir.write_run(target, record, scrubber=scrubber)
        _merged_card(target, parts, record, scrubber)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # a merge half made is no run
        raise
    return target


def check(run_dirs: list[Path]) -> list[Part]:
    """The shards, in slice order, once they are known to belong together; else an
    InputError naming what does not fit."""
    if len(run_dirs) < 1:
        raise InputError("name the shards' run folders to merge (at least one)")
    parts = []
    for run_dir in run_dirs:
        record = rundir.read_run(run_dir)
        rundir.model_dirs(run_dir)  # a crafted models[].dir is refused
        shard = Shard.from_record(record.shard)
        if shard is None:
            raise InputError(f"{run_dir.name} is not a shard (it ran without --shard)")
        if record.status not in ENDED:
            raise InputError(
                f"{run_dir.name} (slice {shard}) is {record.status}: finish it first "
                f"(bat eval.run --resume {run_dir.name})"
            )
        parts.append(Part(run_dir, record, shard))
    totals = {part.shard.total for part in parts}
    if len(totals) > 1:
        raise InputError(
            "the shards are slices of different cuts: "
            + ", ".join(f"{p.run_dir.name} is {p.shard}" for p in parts)
        )
    total = totals.pop()
    by_slice: dict[int, list[Part]] = {}
    for part in parts:
        by_slice.setdefault(part.shard.index, []).append(part)
    doubled = {n: found for n, found in by_slice.items() if len(found) > 1}
    if doubled:
        n, found = min(doubled.items())
        raise InputError(
            f"slice {n}/{total} is given twice: " + " and ".join(p.run_dir.name for p in found)
        )
    missing = [n for n in range(1, total + 1) if n not in by_slice]
    if missing:
        shown = ", ".join(f"{n}/{total}" for n in missing)
        word = "slice" if len(missing) == 1 else "slices"
        raise InputError(f"{word} {shown} missing: the run is not whole without them")
    parts.sort(key=lambda part: part.shard.index)
    _same(parts)
    return parts


def _same(parts: list[Part]) -> None:
    """Every shard ran the same thing (see the module); else an InputError saying what."""
    from bat.evaluation.log.card import comparable

    first = parts[0]

    def differs(what: str, value) -> None:
        for part in parts[1:]:
            if value(part.record) != value(first.record):
                raise InputError(
                    f"{part.run_dir.name} (slice {part.shard}) and {first.run_dir.name} "
                    f"(slice {first.shard}) differ in {what}: they are not one run's shards"
                )

    differs("their dataset (sha256)", lambda r: r.dataset_sha256)
    differs("their tasks", lambda r: r.tasks)
    differs("k", lambda r: r.k)
    differs("their models", lambda r: [(m.label, m.dir) for m in r.models])
    differs("their configuration (eval.yaml)", lambda r: _what_is_run(r.config))
    differs("their selection of tasks", lambda r: r.selection)
    differs("the versions of bat, a2a-sdk or Python", lambda r: r.versions)
    card = cards.read_card(first.run_dir)
    for part in parts[1:]:
        other = cards.read_card(part.run_dir)
        if card is None or other is None:
            continue
        found = comparable(card, other, note_dirty=False)
        if found:
            raise InputError(
                f"{part.run_dir.name} and {first.run_dir.name} are not one run's shards: "
                + "; ".join(found)
            )


def _what_is_run(config: dict) -> dict:
    """The resolved configuration but for where the agent listened (shards on one machine,
    or replicas, listen on ports of their own: what was measured is the same)."""
    evaluation = {k: v for k, v in config.get("evaluation", {}).items() if k != "agent_url"}
    return {**config, "evaluation": evaluation}


def _merged_record(run_id: str, parts: list[Part]) -> RunRecord:
    first = parts[0].record
    record = first.model_copy(deep=True)
    record.run_id = run_id
    record.shard = None
    record.merged_from = [{"run": p.record.run_id, "shard": str(p.shard)} for p in parts]
    record.started_at = min(p.record.started_at for p in parts)
    ended = [p.record.ended_at for p in parts if p.record.ended_at]
    record.ended_at = max(ended) if ended else None
    record.resumed_at = None
    record.infra_failures = sum(p.record.infra_failures or 0 for p in parts)
    record.models = [_merged_model(index, parts) for index in range(len(first.models))]
    lost = [m for m in record.models if m.status == "failed"]
    record.status = (
        "failed" if len(lost) == len(record.models) else "partial" if lost else "completed"
    )
    return record


def _merged_model(index: int, parts: list[Part]) -> ModelEntry:
    entries = [p.record.models[index] for p in parts]
    merged = entries[0].model_copy(deep=True)
    for key in ADDED_UP:
        setattr(merged, key, sum(getattr(entry, key) for entry in entries))
    merged.binding = next((e.binding for e in entries if e.binding), None)
    failed = [(p, e) for p, e in zip(parts, entries, strict=True) if e.status == "failed"]
    if failed:
        merged.status = "failed"
        merged.reason = "; ".join(f"slice {p.shard}: {e.reason}" for p, e in failed)
        merged.log_tail = failed[0][1].log_tail
    else:
        merged.status = "completed"
        merged.reason = None
        merged.log_tail = []
    return merged


def _copy_episodes(source: Path, target: Path, part: Part) -> None:
    """The episode files of one shard's model folder (and the earlier records it kept)."""
    for folder in (layout.episodes_dir, layout.retried_dir):
        found = folder(source)
        if found.is_symlink() or not found.is_dir():
            continue
        for path in sorted(found.iterdir()):
            if path.is_symlink() or not path.is_file():
                continue
            destination = folder(target) / path.name
            if destination.exists():
                raise InputError(
                    f"{path.name} of {target.name} is in two shards (the second in "
                    f"{part.run_dir.name}): the slices overlap"
                )
            _copy(path, destination)


def _copy(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(destination, source.read_bytes(), mode=source.stat().st_mode & 0o777)


def _merged_card(target: Path, parts: list[Part], record: RunRecord, scrubber: Scrubber) -> None:
    card = cards.read_card(parts[0].run_dir)
    if card is None:
        return
    card.run_id = record.run_id
    card.started_at = record.started_at
    card.ended_at = record.ended_at
    card.shard = None
    card.merged_from = record.merged_from
    cards.write_card_file(target, card, scrubber=scrubber)
