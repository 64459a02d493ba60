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

What the shards hold is checked against that plan too, before anything is written: every
episode file is one the plan gives its shard's slice (a task outside the dataset, an
attempt beyond k, an episode of another slice is refused) and reads as an episode (one
that does not, garbage or truncated, is refused, naming it), and every planned episode is
there, once. A run with episodes missing is refused, naming a few and counting the rest,
unless ``--partial`` asks for it: run.json then says ``partial`` and lists them
(``missing_episodes``), so the gates call its numbers incomplete (exit 3). Files in a
shard that are not regular files (a FIFO, a device) are never opened: skipped with a
warning (and missing, if the plan wanted an episode there).

The merged folder is built beside its final name and renamed into place at the end, so
a merge that fails half-way (a full disk, Ctrl-C) leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bat.atomic import write_bytes_atomic
from bat.errors import InputError
from bat.evaluation.inputs.dataset import file_stem
from bat.evaluation.inputs.shards import Shard
from bat.evaluation.log import card as cards
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.files import not_regular, read_regular
from bat.evaluation.log.run import ModelEntry, RunRecord
from bat.figures import counted
from bat.secrets import Scrubber

ENDED = ("completed", "partial", "failed")
ADDED_UP = ("episodes_run", "restarts", "requests_resent", "span_waits")


@dataclass
class Part:
    """One shard: its folder, run.json and slice."""

    run_dir: Path
    record: RunRecord
    shard: Shard


@dataclass
class Plan:
    """What the merged run is made of: the episode files to copy (source, and the path
    in the merged run), and the planned episodes no shard holds."""

    copies: list[tuple[Path, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


SHOWN = 3  # missing episodes named in the error; the rest are counted


def merge(
    run_dirs: list[Path],
    output_dir: Path,
    scrubber: Scrubber,
    *,
    partial: bool = False,
    warn: Callable[[str], None] | None = None,
) -> Path:
    """Merge the shards ``run_dirs`` into a new run folder under ``output_dir``; its path.
    What is rewritten (run.json, card.json) goes through ``scrubber``; ``partial``: merge
    even with planned episodes missing (run.json says so); ``warn``: told of each file
    skipped because it is not a regular file."""
    parts = check(run_dirs)
    plan = planned(parts, warn or (lambda line: None))
    if plan.missing and not partial:
        raise InputError(missing_line(plan.missing))
    return _build(parts, plan, output_dir, scrubber)


def _build(parts: list[Part], plan: Plan, output_dir: Path, scrubber: Scrubber) -> Path:
    """The merged run, written into a temporary folder beside its final name and renamed
    into place whole; on any failure every folder this made is removed again."""
    made = _missing_folders(output_dir)
    target = rundir.new_run_dir(output_dir, parts[0].record.run_name)  # the name, reserved
    work: Path | None = None
    try:  # hidden, beside the target: no reader takes it for a run
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.merging-", dir=output_dir))
        record = _merged_record(target.name, parts, plan.missing)
        for source, relative in plan.copies:
            _copy(source, work / relative)
        for index, model in enumerate(record.models):
            for part in parts:
                source = rundir.model_dir(part.run_dir, part.record.models[index], index)
                _copy_retried(source, work / model.dir, part)
                log = layout.agent_log(part.run_dir, model.dir)
                if _regular(log):
                    _copy(log, layout.shard_agent_log(work, model.dir, part.shard.index))
        snapshot = layout.tasks_snapshot(parts[0].run_dir)
        if _regular(snapshot):
            _copy(snapshot, layout.tasks_snapshot(work))
        rundir.write_run(work, record, scrubber=scrubber)
        _merged_card(work, parts, record, scrubber)
        os.chmod(work, target.stat().st_mode & 0o777)
        os.replace(work, target)  # the reserved folder is empty: replaced in one step
    except BaseException:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)  # a merge half made is no run
        for folder in (target, *made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return target


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first: what a
    failed merge removes again."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    return missing


def _regular(path: Path) -> bool:
    """A regular file, not a link: what a merge copies of a shard's own files."""
    return not path.is_symlink() and path.is_file()


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


def _merged_record(run_id: str, parts: list[Part], missing: list[str]) -> RunRecord:
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
    record.missing_episodes = list(missing) or None
    if missing and record.status == "completed":
        record.status = "partial"  # merged with --partial: readers and gates know
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


def planned(parts: list[Part], warn: Callable[[str], None]) -> Plan:
    """The episode files of the shards, checked against the run's plan (see the module):
    each one the plan gives its shard's slice and readable as an episode, else an
    InputError naming it; and the planned episodes missing (none of a model that could
    not be evaluated in a shard: the run says so already)."""
    first = parts[0].record
    stems = [file_stem(task) for task in first.tasks]
    count, k = len(stems), first.k
    plan = Plan()
    for index, model in enumerate(first.models):
        names = {
            f"{stem}__try{attempt}.json": (attempt, task)
            for attempt in range(1, k + 1)
            for task, stem in enumerate(stems)
        }
        for part in parts:
            entry = part.record.models[index]
            found = set()
            model_dir = rundir.model_dir(part.run_dir, entry, index)
            for path in layout.episode_files(model_dir):
                relative = f"{model.dir}/{layout.EPISODES_DIR}/{path.name}"
                kind = not_regular(path)
                if kind is not None:
                    warn(f"{path} is {kind}, not an episode file: skipped (never opened)")
                    continue
                if path.name not in names:
                    raise InputError(
                        f"{part.run_dir.name}/{relative} is not in the run's plan (its "
                        f"{counted(count, 'task')} × k = {k}): not an episode of this run"
                    )
                attempt, task = names[path.name]
                if not part.shard.keeps(index, attempt, task, count, k):
                    raise InputError(
                        f"{part.run_dir.name}/{relative} is not of slice {part.shard}, the "
                        "slice that shard ran: the shards' files were mixed up"
                    )
                store.read_episode(path)  # read before anything is written: one unreadable
                found.add(path.name)  # stops the merge, with nothing left behind
                plan.copies.append((path, relative))
            if entry.status == "failed":
                continue
            for name, (attempt, task) in names.items():
                if name not in found and part.shard.keeps(index, attempt, task, count, k):
                    plan.missing.append(f"{model.dir}/{layout.EPISODES_DIR}/{name}")
    return plan


def missing_line(missing: list[str]) -> str:
    """The error of a merge with planned episodes missing: a few named, the rest counted."""
    shown = ", ".join(missing[:SHOWN])
    more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    return (
        f"{counted(len(missing), 'planned episode')} missing: {shown}{more} (finish the "
        "shard that lacks them with bat eval.run --resume RUN, or merge what there is "
        "with --partial)"
    )


def _copy_retried(source: Path, target: Path, part: Part) -> None:
    """The earlier records a shard's ``--retry-infra`` kept (``retried/``)."""
    found = layout.retried_dir(source)
    if found.is_symlink() or not found.is_dir():
        return
    for path in sorted(found.iterdir()):
        if not _regular(path):
            continue
        destination = layout.retried_dir(target) / path.name
        if destination.exists():
            raise InputError(
                f"{path.name} of {target.name} is in two shards (the second in "
                f"{part.run_dir.name}): the slices overlap"
            )
        _copy(path, destination)


def _copy(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    mode = source.stat().st_mode & 0o777
    write_bytes_atomic(destination, read_regular(source), mode=mode)


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
