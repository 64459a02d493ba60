"""Reading and writing a run's files: the one place that does.

* **Episodes** have one reader, :func:`episodes`. A file that cannot be read is an
  :class:`~bat.errors.InputError` naming it, unless the caller passes a list to collect
  such files in (the judge leaves them as they are, the report shows what it can): the
  policy is the caller's, said at the call, and the reading is the same for all.
* **Writes** are atomic (a reader never sees half a file), scrubbed of every secret bat
  knows of, and refuse to follow a symbolic link.
* **Stages never rewrite an upstream file behind the log's back.** The judge's scores and
  ``eval.verdict``'s new verdicts go into the episode file through :func:`write_scores`
  and :func:`write_verdict`: the episode stays one self-contained file (what the report
  links to, what bat-cli users open), and the update is versioned by the episode's own
  ``schema`` and the scores' ``rubric_version``. A separate scores file was weighed and
  left: it would make every reader join two files, and a run copied without it would
  silently lose its judgements.
* **Older versions** are read as today's: a ``bat.metrics/1`` folder is summarized again
  from its own per-episode rows (they hold every number the statistics need); a bat-cli
  2026.10 folder is converted by :mod:`bat.evaluation.log.batcli`. A file of a later bat
  (a version this one does not know) is an error saying so, not a guess.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bat.atomic import json_text, write_text_atomic
from bat.errors import InputError
from bat.evaluation.log import layout
from bat.evaluation.log.batch_writer import BatchWriter
from bat.evaluation.log.bounds import count_problem, score_problem
from bat.evaluation.log.episode import (
    EPISODE_SCHEMA,
    OLDER_EPISODE_SCHEMAS,
    EpisodeCost,
    EpisodeResult,
    Verdict,
)
from bat.evaluation.log.files import SURROGATE_ESCAPE, read_json_object, read_regular
from bat.evaluation.log.outcome import episode_outcome
from bat.evaluation.log.scores import JudgeScores
from bat.evaluation.log.summary import (
    METRICS_SCHEMA,
    OLDER_METRICS_SCHEMAS,
    SUMMARY_SCHEMA,
    EpisodeRow,
    Metrics,
    RowTime,
    RowTokens,
    RowVerdict,
    Summary,
    dump,
)
from bat.secrets import Scrubber

# --- JSON files ---------------------------------------------------------------------------


def write_json(path: Path, content: dict[str, Any], *, scrubber: Scrubber) -> Path:
    """``content`` written atomically to ``path`` without any secret of ``scrubber``."""
    content = scrubber.data(content)
    try:
        write_text_atomic(path, json_text(content, what=str(path), indent=1, ensure_ascii=False))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return path


# --- episodes -----------------------------------------------------------------------------


def read_episode(path: Path) -> EpisodeResult:
    """One episode file (any version bat wrote); an InputError names what is wrong."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        episode = EpisodeResult.model_validate_json(data)
    except ValueError as exc:
        if not SURROGATE_ESCAPE.search(data.decode("utf-8", "replace")):
            raise InputError(f"{path} is not an episode file: {_first_line(exc)}") from None
        # A lone UTF-16 half ("\ud800"), which pydantic's parser refuses: read as U+FFFD.
        try:
            episode = EpisodeResult.model_validate(read_json_object(path))
        except ValueError:
            raise InputError(f"{path} is not an episode file: {_first_line(exc)}") from None
    if episode.schema_ != EPISODE_SCHEMA and episode.schema_ not in OLDER_EPISODE_SCHEMAS:
        raise InputError(
            f"{path} is a {episode.schema_!r} episode, a format this bat does not know "
            "(written by a later bat? update bat to read it)"
        )
    why = _impossible_episode(episode)
    if why:
        raise InputError(f"{path} is not an episode file: {why}")
    return episode


def read_any_episode(path: Path) -> EpisodeResult:
    """An episode file of bat's (:func:`bat.evaluation.log.store.read_episode`) or of
    bat-cli's (no ``schema``, a ``final_status``), read as bat's; else bat's InputError."""
    from bat.evaluation.log import batcli

    try:
        return read_episode(path)
    except InputError as exc:
        try:
            data = read_json_object(path)
        except InputError:
            raise exc from None
        if "schema" in data or "final_status" not in data or "task_id" not in data:
            raise
        return batcli.as_episode(data, path)


def _impossible_episode(episode: EpisodeResult) -> str | None:
    """A number no run records (a negative or astronomic count, a score over 1): see
    :mod:`bat.evaluation.log.bounds`."""
    user = episode.trace.simulated_user
    for where, usage in (
        ("trace.usage", episode.trace.usage),
        ("trace.simulated_user.usage", user.usage if user else None),
    ):
        for key in ("prompt_tokens", "completion_tokens", "total_tokens", "model_calls"):
            why = count_problem(f"{where}.{key}", getattr(usage, key)) if usage else None
            if why:
                return why
    for name, score in (episode.qualitative_scores or {}).items():
        why = score_problem(f"scores.{name}", score)
        if why:
            return why
    return None


def _impossible_row(rows: list[EpisodeRow], path: Path) -> None:
    """An InputError for the first row of ``metrics.json`` holding a number no run
    records (see :func:`_impossible_episode`)."""
    for n, row in enumerate(rows):
        tokens = row.tokens
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            why = count_problem(f"per_episode.{n}.tokens.{key}", getattr(tokens, key))
            if why:
                raise InputError(f"{path} is malformed: {why}")
        for name, score in (row.scores or {}).items():
            why = score_problem(f"per_episode.{n}.scores.{name}", score)
            if why:
                raise InputError(f"{path} is malformed: {why}")


def episodes(
    model_dir: Path, unreadable: list[str] | None = None
) -> Iterator[tuple[Path, EpisodeResult]]:
    """Every episode of a model folder, read one at a time, in file-name order.

    A file that cannot be read raises an InputError; with ``unreadable``, its problem is
    appended there and the file is skipped.
    """
    for path in layout.episode_files(model_dir):
        try:
            yield path, read_episode(path)
        except InputError as exc:
            if unreadable is None:
                raise
            unreadable.append(exc.message)


def run_episodes(run_dir: Path, unreadable: list[str]) -> Iterator[tuple[Path, EpisodeResult]]:
    """Every episode of every model folder under ``run_dir`` (unreadable ones collected)."""
    for model_dir in sorted(p for p in run_dir.iterdir() if p.is_dir()):
        yield from episodes(model_dir, unreadable)


def episodes_done(model_dir: Path) -> set[tuple[str, int]]:
    """``(task file stem, attempt)`` of every episode file already written."""
    done = set()
    for path in layout.episode_files(model_dir):
        match = layout.EPISODE_NAME.match(path.name)
        if match:
            done.add((match["stem"], int(match["attempt"])))
    return done


def fingerprint(model_dir: Path) -> str:
    """A digest of the names, inodes, sizes and change times of a model folder's episode
    files. Equal digests within one process mean the files did not change, so what was
    read from them may be reused: after 20,000 episodes, each pass over them costs
    seconds, and ``eval.run``'s stages would otherwise make five. Every write of an
    episode replaces its file (a new inode), so even a rewrite of the same size within
    the file system's clock tick shows."""
    digest = hashlib.sha256(str(model_dir.resolve()).encode())
    folder = layout.episodes_dir(model_dir)
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.endswith(".json"):
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                digest.update(
                    f"{entry.name}\0{info.st_ino}\0{info.st_size}\0{info.st_ctime_ns}\n".encode()
                )
    return digest.hexdigest()


# What a pass over a model folder's episodes found: model folder -> (its fingerprint, the
# infrastructure failures). Kept by the caller (a command line's run context), so a stage
# reuses what the one before it counted while the episode files are unchanged.
InfraCache = dict[Path, tuple[str, set[tuple[str, int]]]]


def infra_key(path: Path, episode: EpisodeResult) -> tuple[str, int] | None:
    """``(task file stem, attempt)`` of an episode recorded as an infrastructure failure."""
    match = layout.EPISODE_NAME.match(path.name)
    if match and episode_outcome(episode).word == "infra":
        return match["stem"], int(match["attempt"])
    return None


def check_episodes(model_dir: Path, cache: InfraCache | None = None) -> None:
    """Every episode file of a model folder read, before ``--resume`` starts the agent: the
    first one that is not an episode (garbage, a FIFO) is an InputError naming it. What
    the pass counted is put in ``cache``, as :func:`infra_failures` does."""
    now = fingerprint(model_dir)  # taken first: a file changed meanwhile shows
    found = set()
    for path, episode in episodes(model_dir):
        key = infra_key(path, episode)
        if key is not None:
            found.add(key)
    if cache is not None:
        cache[model_dir.resolve()] = (now, found)


def infra_failures(model_dir: Path, cache: InfraCache | None = None) -> set[tuple[str, int]]:
    """``(task file stem, attempt)`` of every episode recorded as an infrastructure failure
    (an unreadable file is not one: the summary names it); taken from ``cache`` while the
    folder's fingerprint is unchanged, and put there."""
    now = fingerprint(model_dir)
    known = None if cache is None else cache.get(model_dir.resolve())
    if known is not None and known[0] == now:
        return set(known[1])
    found = set()
    for path, episode in episodes(model_dir, unreadable=[]):
        key = infra_key(path, episode)
        if key is not None:
            found.add(key)
    if cache is not None:
        cache[model_dir.resolve()] = (now, set(found))
    return found


def write_episode(
    model_dir: Path, stem: str, episode: EpisodeResult, *, scrubber: Scrubber
) -> Path:
    """Write a new episode; an earlier record of the same (task, attempt) — one
    ``--retry-infra`` runs again — is moved to ``retried/`` and listed in ``earlier``."""
    path = layout.episode_path(model_dir, stem, episode.attempt)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            episode.earlier = [*_earlier(path), _set_aside(path, model_dir)]
        write_text_atomic(path, episode.to_json(scrubber))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return path


def queue_episode(
    writer: BatchWriter,
    model_dir: Path,
    stem: str,
    episode: EpisodeResult,
    *,
    earlier: bool,
    scrubber: Scrubber,
) -> None:
    """:func:`write_episode` through ``writer`` (``batch_writer``: durable in batches, off
    the event loop). An episode with an ``earlier`` record (``--retry-infra``; the caller
    knows, from :func:`episodes_done` at its start) is written at once, as that record is
    moved aside first."""
    if earlier:
        writer.flush()  # the order of the writes stays the order of the episodes
        write_episode(model_dir, stem, episode, scrubber=scrubber)
    else:
        path = layout.episode_path(model_dir, stem, episode.attempt)
        writer.put(path, episode.to_json(scrubber).encode())


def write_scores(
    path: Path,
    episode: EpisodeResult,
    scores: JudgeScores,
    *,
    scrubber: Scrubber,
    verdict: Verdict | None = None,
    cost: EpisodeCost | None = None,
) -> bool:
    """Put the judges' ``scores`` into the episode at ``path``; False if they were there.

    They are compared as the file would hold them, scrubbed (a judge's reasoning may
    quote what it was sent), and checked again after (a model built without validation
    must not put another shape in a file). ``verdict``, when given, replaces the
    episode's in the same write (a task whose assertions are part of its verdict: the
    verdict follows the scores, and no reader sees one without the other). ``cost``,
    when given, replaces the episode's too (its judges' part is priced from the scores'
    tokens)."""
    given = scrubber.data(scores.as_written())
    if verdict is not None:  # made from the scores as given: scrubbed the same way
        verdict = Verdict.model_validate(scrubber.data(verdict.model_dump(mode="json")))
    same_scores = episode.scores is not None and episode.scores.as_written() == given
    same_cost = cost is None or cost == episode.cost
    if same_scores and same_cost and (verdict is None or verdict == episode.verdict):
        return False  # an unchanged re-judge rewrites nothing
    episode.scores = JudgeScores.model_validate(given)  # the shape every reader relies on
    if verdict is not None:
        episode.verdict = verdict
    if cost is not None:
        episode.cost = cost
    _rewrite(path, episode, scrubber)
    return True


def write_verdict(
    path: Path, episode: EpisodeResult, verdict: Verdict, *, scrubber: Scrubber
) -> bool:
    """Put a new deterministic verdict into the episode at ``path``; False if unchanged."""
    if episode.verdict == verdict:
        return False
    episode.verdict = verdict
    _rewrite(path, episode, scrubber)
    return True


def _rewrite(path: Path, episode: EpisodeResult, scrubber: Scrubber) -> None:
    """An episode updated in place, in today's format (an older one is upgraded)."""
    episode.schema_ = EPISODE_SCHEMA
    try:
        write_text_atomic(path, episode.to_json(scrubber))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def _earlier(path: Path) -> list[str]:
    """The ``earlier`` list of the record at ``path`` (records chain their predecessors)."""
    try:
        return read_episode(path).earlier
    except InputError:
        return []


def _set_aside(path: Path, model_dir: Path) -> str:
    """Move a replaced episode file to ``retried/`` under a name not taken yet."""
    layout.retried_dir(model_dir).mkdir(exist_ok=True)
    for n in range(1, 10_000):
        target = layout.retried_path(model_dir, path, n)
        if not target.exists():
            path.replace(target)
            return target.relative_to(model_dir).as_posix()
    raise OSError(f"too many earlier records of {path.name} in {layout.retried_dir(model_dir)}")


# --- summary.json and metrics.json --------------------------------------------------------


def write_results(
    model_dir: Path, summary: Summary, metrics: Metrics, *, scrubber: Scrubber
) -> list[Path]:
    """``summary.json`` and ``metrics.json`` of a model folder."""
    return [
        write_model(layout.summary_file(model_dir), summary, scrubber=scrubber),
        write_model(layout.metrics_file(model_dir), metrics, scrubber=scrubber),
    ]


def write_model(path: Path, model: BaseModel, *, scrubber: Scrubber) -> Path:
    """:func:`write_json` of a summary or metrics model, serialized by pydantic: the same
    text, 60 times faster than ``json.dumps`` of its data for 20,000 episode rows, and
    without building that data at all unless a secret may be in it."""
    text = model.model_dump_json(by_alias=True, indent=1)
    if scrubber and scrubber.found_in_json(text):
        return write_json(path, dump(model), scrubber=scrubber)
    try:
        write_text_atomic(path, text + "\n")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return path


def result_files(model_dir: Path) -> list[Path]:
    return [layout.summary_file(model_dir), layout.metrics_file(model_dir)]


@dataclass
class ModelResults:
    """One model folder's results, read in today's shapes whatever wrote them."""

    folder: Path
    summary: Summary
    metrics: Metrics
    run_id: str
    source: str  # "bat", "bat (older format)" or "bat-cli 2026.10"

    @property
    def model(self) -> str:
        return self.metrics.model


def read_results(folder: Path) -> ModelResults:
    """The ``summary.json`` and ``metrics.json`` of a model folder (bat's of any version,
    or bat-cli 2026.10's); an InputError names the file and what is wrong with it."""
    from bat.evaluation.log import batcli

    folder = Path(folder)
    if batcli.is_model_folder(folder):
        found = batcli.load(folder)
        return ModelResults(folder, found.summary, found.metrics, found.run_id, "bat-cli 2026.10")
    path = layout.metrics_file(folder)
    raw = read_json_object(path)
    schema = raw.get("schema")
    if schema in OLDER_METRICS_SCHEMAS:
        summary, metrics = _upgrade(folder, raw)
        source = "bat (older format)"
    elif schema == METRICS_SCHEMA:
        metrics = _validate(Metrics, raw, path)
        summary_path = layout.summary_file(folder)
        given = read_json_object(summary_path)
        _known(given, SUMMARY_SCHEMA, summary_path)
        summary = _validate(Summary, given, summary_path)
        source = "bat"
    else:
        _known(raw, METRICS_SCHEMA, path)
        raise AssertionError("unreachable")
    _impossible_row(metrics.per_episode, layout.metrics_file(folder))
    return ModelResults(folder, summary, metrics, _run_id(folder, metrics.run_id), source)


def _known(data: dict[str, Any], schema: str, path: Path) -> None:
    given = data.get("schema")
    if given != schema:
        what = "no schema key" if given is None else f"schema {given!r}"
        raise InputError(
            f"{path} has {what}: not a file this bat can read (it reads {schema} and older)"
        )


def _validate(model: type, data: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the file"
        raise InputError(f"{path} is malformed: {where}: {problem['msg']}") from None


def _run_id(folder: Path, written: str | None) -> str:
    """The run a model folder belongs to: its parent's name in a run folder."""
    if layout.is_run_folder(folder.parent):
        return folder.parent.name
    return written or folder.name


def _upgrade(folder: Path, raw: dict[str, Any]) -> tuple[Summary, Metrics]:
    """A ``bat.metrics/1`` file (and its summary) summarized again from its rows."""
    from bat.evaluation.stats import summarize

    path = layout.metrics_file(folder)
    given = raw.get("per_episode")
    if not isinstance(given, list):
        raise InputError(f"{path} is malformed: 'per_episode' is not a list")
    rows = [_row_v1(row, f"{path}: per_episode row {n}") for n, row in enumerate(given, 1)]
    stats = raw.get("summary") if isinstance(raw.get("summary"), dict) else {}
    k = stats.get("k") if isinstance(stats.get("k"), int) else 1
    model = raw.get("model") if isinstance(raw.get("model"), str) and raw["model"] else folder.name
    run_id = raw.get("run_id") if isinstance(raw.get("run_id"), str) else None
    order = list(dict.fromkeys(row.task_id for row in rows))
    return summarize(rows, k=k, model=model, task_order=order, run_id=run_id)


def _row_v1(row: Any, where: str) -> EpisodeRow:
    """A ``bat.metrics/1`` per-episode row in today's shape."""
    if not isinstance(row, dict) or not isinstance(row.get("task_id"), str | int):
        raise InputError(f"{where} has no task_id")
    try:
        wall = float(row.get("wall_time_s") or 0.0)
        passed = bool(row.get("passed"))
        return EpisodeRow(
            task_id=str(row["task_id"]),
            status=str(row.get("status") or ""),
            success=passed,
            time=RowTime(wall_ms=round(wall * 1000, 1)),
            tokens=RowTokens(
                prompt_tokens=row.get("prompt_tokens") or 0,
                completion_tokens=row.get("completion_tokens") or 0,
                total_tokens=row.get("total_tokens") or 0,
            ),
            verdict=RowVerdict(passed=passed),
            attempt=row.get("attempt") if isinstance(row.get("attempt"), int) else 1,
            wall_time_s=wall,
            time_to_first_event_s=row.get("time_to_first_event_s"),
            infra_error=row.get("infra_error"),
            agent_error=row.get("agent_error"),
            vacuous=row.get("vacuous") is True,
            model_calls=row.get("model_calls") or 0,
            tool_calls=row.get("tool_calls") or 0,
            scores=row.get("scores"),
            judge_error=row.get("judge_error"),
        )
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where}: {_first_line(exc)}") from None


def result_folders(folder: Path) -> list[Path]:
    """Every folder under ``folder`` (itself included) holding a ``metrics.json``."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if layout.METRICS_FILE in files:
            found.append(Path(root))
    return found


def summarized_models(run_dir: Path) -> list[Path]:
    """The model folders of a run (bat's, or bat-cli's without run.json) that hold a
    ``summary.json``."""
    from bat.evaluation.log import run as rundir

    if layout.is_run_folder(run_dir):
        return [d for d in rundir.model_dirs(run_dir) if layout.has_summary(d)]
    return sorted(d for d in run_dir.iterdir() if d.is_dir() and layout.has_summary(d))


def _first_line(exc: Exception) -> str:
    """The first problem of ``exc``: for pydantic's, where it is and what is wrong."""
    if isinstance(exc, ValidationError) and exc.errors():
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        return f"{where}: {problem['msg']}" if where else problem["msg"]
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
