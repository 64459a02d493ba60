"""Run folders written by BubbleRAN's bat-cli 2026.10, read as if bat had written them.

Why: users who move to bat from bat-cli 2026.10 already have evaluation runs in its
format. ``bat eval.plot`` and ``bat eval.compare`` read those runs next to bat's own, so
nothing has to be run again. This module is the only place that knows bat-cli's format.
It turns a bat-cli model folder into the shapes the readers already take: metrics rows
like ours, and a summary and metrics file as :func:`bat.evaluation.stats.summarize`
computes them. Every figure (pass rate, pass@k, pass^k, latency, tokens) then comes from
the same code as for a bat run.

A bat-cli run folder, as bat-cli writes it::

    <run-id>/                              no run.json
      <run name>_<provider>-<model>/       e.g. benchmark_openai-echo-model
        summary.json     k, model_name (without the provider), ``attempts``: counts per task
        metrics.json     ``per_episode`` rows: task_id, status, success, time.wall_ms,
                         tokens.{prompt,completion,total}_tokens; ``summary``: its totals
        episodes/<task>__try<i>.json
                         model_name (provider:model), final_status, final_output,
                         verdict {passed, reason}, aux.attempt_index (counted from 0)

A model folder is bat-cli's when its summary.json has an ``attempts`` list and no
``schema`` key (bat's has both since bat.summary/2). The metrics rows have no attempt
number. A task's rows are its attempts in order (bat-cli writes them that way, and the
``aux.attempt_index`` of its episode files agrees), so they are numbered from 1, as ours
are. What bat-cli does not record gets a neutral value: no time to the first event, 0
model and tool calls. The label is the episodes' ``model_name``, else the
``model_name`` of summary.json, and the run id is the run folder's name.

Outcomes are read as bat reads its own. bat-cli's ``final_status: "error"`` stands for
both the agent's failed task and bat-cli's own connection errors: :func:`error_of`
(:mod:`bat.evaluation.log.batcli_errors`) tells them apart from the episode's text and
events, into the agent's error (status ``error``, its kind read from the agent's words as
:mod:`bat.evaluation.log.outcome` reads a status message) or an infrastructure failure
(kept out of pass@k, counted against the run's trust budget). A pass is
*vacuous* when the episode's answer is empty or its verdict checked nothing but the
status (the reason lists every check, in bat's format). So a bat-cli run and a bat run
of the same agent count agent errors and vacuous passes alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from math import inf
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.atomic import json_text, write_text_atomic
from bat.errors import InputError
from bat.evaluation.log import layout
from bat.evaluation.log.batcli_errors import Reading, error_of
from bat.evaluation.log.episode import (
    EpisodeResult,
    EpisodeTrace,
    ToolCall,
    Usage,
    Verdict,
)
from bat.evaluation.log.files import read_json_object, read_regular, strict_loads
from bat.evaluation.log.outcome import from_final_status, outcome_from
from bat.evaluation.log.summary import (
    DEFAULT_RUN_NAME,
    EpisodeRow,
    Metrics,
    RowTime,
    RowTokens,
    RowVerdict,
    Summary,
)
from bat.evaluation.stats import summarize

if TYPE_CHECKING:
    from bat.evaluation.log.run import RunRecord

METRICS_FILE, SUMMARY_FILE = layout.METRICS_FILE, layout.SUMMARY_FILE


@dataclass
class BatcliRun:
    """One bat-cli model folder, converted: ``summary`` and ``metrics`` are in bat's shapes."""

    model: str
    run_id: str
    summary: Summary
    metrics: Metrics


def is_model_folder(folder: Path) -> bool:
    """Whether ``folder`` holds bat-cli 2026.10 files (summary.json lists ``attempts``
    and has no ``schema``)."""
    try:
        data = strict_loads(read_regular(Path(folder) / SUMMARY_FILE).decode("utf-8"))
    except (OSError, ValueError, InputError):
        return False  # not bat-cli's; bat's own reader names any problem with the file
    # bat's own summary.json has bat-cli's ``attempts`` too, and a ``schema`` key
    if not isinstance(data, dict):
        return False
    return isinstance(data.get("attempts"), list) and "schema" not in data


def load(folder: Path) -> BatcliRun:
    """The model folder's episodes, summarized by bat; a malformed file is an InputError."""
    folder = Path(folder)
    given = read_json_object(folder / SUMMARY_FILE)
    path = folder / METRICS_FILE
    raw = read_json_object(path)
    facts = _episode_facts(folder)
    rows = _rows(raw, path, facts)
    totals = raw.get("summary") if isinstance(raw.get("summary"), dict) else {}
    k = _count(given.get("k")) or _count(totals.get("k_attempts")) or _most_attempts(rows)
    model = facts.model_name or _given_name(given) or folder.name
    run_id = folder.resolve().parent.name
    task_ids = list(dict.fromkeys(row.task_id for row in rows))
    summary, metrics = summarize(
        rows,
        k=k,
        model=model,
        task_order=task_ids,
        model_name=given.get("model_name") if isinstance(given.get("model_name"), str) else None,
        run_id=run_id,
        run_name=given.get("run_name") if isinstance(given.get("run_name"), str) else None,
        timestamp_utc=(
            given.get("timestamp_utc") if isinstance(given.get("timestamp_utc"), str) else None
        ),
    )
    return BatcliRun(model=model, run_id=run_id, summary=summary, metrics=metrics)


def _rows(raw: dict[str, Any], path: Path, facts: _EpisodeFacts) -> list[EpisodeRow]:
    episodes = raw.get("per_episode")
    if not isinstance(episodes, list):
        raise InputError(f"{path} is malformed: 'per_episode' is not a list")
    rows: list[EpisodeRow] = []
    attempts: dict[str, int] = {}
    for number, row in enumerate(episodes, 1):
        where = f"{path} is malformed: per_episode row {number}"
        if not isinstance(row, dict) or not isinstance(row.get("task_id"), str | int):
            raise InputError(f"{where} has no task_id")
        task_id = str(row["task_id"])
        attempts[task_id] = attempts.get(task_id, 0) + 1
        tokens = {} if row.get("tokens") is None else row["tokens"]
        if not isinstance(tokens, dict):
            raise InputError(f"{where}: 'tokens' is not an object")
        prompt = _tokens(tokens, "prompt_tokens", where)
        completion = _tokens(tokens, "completion_tokens", where)
        passed = _passed(row, where)
        wall_ms = _wall_ms(row, where)
        verdict = row.get("verdict") if isinstance(row.get("verdict"), dict) else {}
        reason = verdict.get("reason") if isinstance(verdict.get("reason"), str) else ""
        expected = row.get("expected_outcome")
        output = facts.outputs.get((task_id, attempts[task_id]))
        reading = facts.readings.get((task_id, attempts[task_id])) or Reading(
            *from_final_status(row.get("status"), output or "")
        )
        outcome = outcome_from(
            passed and reading.infra is None,
            vacuous=_status_only(reason) or output == "",
            infra=reading.infra.kind if reading.infra else None,
            agent_error=reading.agent_error.kind if reading.agent_error else None,
        )
        rows.append(
            EpisodeRow(
                task_id=task_id,
                expected_outcome=expected if isinstance(expected, str) else None,
                status=reading.status,
                **outcome.row_fields(),
                time=RowTime(wall_ms=wall_ms),
                tokens=RowTokens(
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    total_tokens=_tokens(tokens, "total_tokens", where, prompt + completion),
                ),
                verdict=RowVerdict(passed=passed, reason=reason),
                attempt=attempts[task_id],
                wall_time_s=wall_ms / 1000,
            )
        )
    return rows


def _status_only(reason: str) -> bool:
    """Whether a verdict's reason (every check, ``; ``-joined) names no check but the
    status: such a pass says nothing about the answer."""
    return all(part.startswith("status:") for part in reason.split("; ")) or reason == "no checks"


def _passed(row: dict[str, Any], where: str) -> bool:
    verdict = row.get("verdict")
    passed = row.get("success", verdict.get("passed") if isinstance(verdict, dict) else None)
    if not isinstance(passed, bool):
        raise InputError(f"{where}: 'success' is not true or false")
    return passed


def _wall_ms(row: dict[str, Any], where: str) -> float:
    time = row.get("time")
    value = time.get("wall_ms") if isinstance(time, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < inf:
        raise InputError(f"{where}: 'time.wall_ms' is not a number of milliseconds")
    return float(value)


def _tokens(tokens: dict[str, Any], key: str, where: str, missing: int = 0) -> int:
    value = tokens.get(key)
    if value is None:
        return missing
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: 'tokens.{key}' is not a count")
    return value


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _most_attempts(rows: list[EpisodeRow]) -> int:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.task_id] = counts.get(row.task_id, 0) + 1
    return max(counts.values(), default=1)


@dataclass
class _EpisodeFacts:
    """What the metrics rows lack, from the episode files: the final output of each
    (task, attempt), what its end was (:func:`error_of`), and the model's ``model_name``
    (provider:model)."""

    outputs: dict[tuple[str, int], str]
    readings: dict[tuple[str, int], Reading]
    model_name: str | None = None


def _episode_facts(folder: Path) -> _EpisodeFacts:
    facts = _EpisodeFacts(outputs={}, readings={})
    for path in layout.episode_files(folder):
        try:
            data = strict_loads(read_regular(path).decode("utf-8"))
        except (OSError, ValueError, InputError):
            continue  # the report shows what it can of such a file; the rows stand alone
        if not isinstance(data, dict):
            continue
        name = data.get("model_name")
        if facts.model_name is None and isinstance(name, str) and name:
            facts.model_name = name
        aux = data.get("aux") if isinstance(data.get("aux"), dict) else {}
        index = aux.get("attempt_index")
        output = data.get("final_output")
        if isinstance(index, int) and not isinstance(index, bool) and "task_id" in data:
            key = (str(data["task_id"]), index + 1)
            facts.outputs[key] = output if isinstance(output, str) else ""
            facts.readings[key] = error_of(data)
    return facts


def _given_name(given: dict[str, Any]) -> str | None:
    name = given.get("model_name")
    return name if isinstance(name, str) and name else None


# --- re-judging (eval.verdict) ------------------------------------------------------------


def model_folders(path: Path) -> list[Path]:
    """``path`` if it is a bat-cli model folder, else its sub-folders that are.

    A sub-folder that is a symbolic link out of ``path`` is an InputError: re-judging
    rewrites files, and they must all be inside the run folder named."""
    path = Path(path)
    if is_model_folder(path):
        return [path]
    children = sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []
    found = [child for child in children if is_model_folder(child)]
    for child in found:
        _inside(child, path)
    return found


def _inside(path: Path, folder: Path) -> Path:
    """``path``, which must resolve (links followed) inside ``folder``; else InputError."""
    if not path.resolve().is_relative_to(Path(folder).resolve()):
        raise InputError(f"{path} leads outside {folder} (a symbolic link out of the run)")
    return path


def as_episode(data: dict[str, Any], path: Path) -> EpisodeResult:
    """A bat-cli episode file as an EpisodeResult: its task, attempt (``aux.attempt_index``
    + 1), model, final status and output, tool calls and tokens, wall time and verdict."""
    trace = data.get("trace") if isinstance(data.get("trace"), dict) else {}
    calls = [
        ToolCall(name=call["name"], args=call.get("args", call.get("arguments")))
        for call in trace.get("tool_calls") or []
        if isinstance(call, dict) and isinstance(call.get("name"), str)
    ]
    trajectory = trace.get("trajectory") if isinstance(trace.get("trajectory"), dict) else {}
    totals = trajectory.get("totals") if isinstance(trajectory.get("totals"), dict) else {}
    tokens_in, tokens_out = _count(totals.get("tokens_in")) or 0, _count(totals.get("tokens_out"))
    usage = Usage(
        prompt_tokens=tokens_in,
        completion_tokens=tokens_out or 0,
        total_tokens=tokens_in + (tokens_out or 0),
        model_calls=_count(totals.get("model_calls")) or 0,
    )
    wall_ms = trace.get("wall_ms")
    wall = wall_ms / 1000 if isinstance(wall_ms, int | float) and wall_ms >= 0 else 0.0
    aux = data.get("aux") if isinstance(data.get("aux"), dict) else {}
    index = aux.get("attempt_index")
    given = data.get("verdict")
    verdict = None
    if isinstance(given, dict) and isinstance(given.get("passed"), bool):
        reason = given.get("reason")
        verdict = Verdict(passed=given["passed"], reason=reason if isinstance(reason, str) else "")
    output = str(data.get("final_output") or "")
    reading = error_of(data)
    try:
        return EpisodeResult(
            task_id=str(data["task_id"]),
            attempt=index + 1 if isinstance(index, int) and not isinstance(index, bool) else 1,
            model=str(data.get("model_name") or ""),
            status=reading.status,
            agent_error=reading.agent_error,
            infra_error=reading.infra,
            final_output=output,
            trace=EpisodeTrace(context_id="", tool_calls=calls, usage=usage, wall_time_s=wall),
            verdict=verdict,
            started_at="",
            ended_at="",
        )
    except (KeyError, ValueError) as exc:
        raise InputError(f"{path} is not a bat-cli episode file: {exc}") from None


def episodes(
    model_dir: Path, unreadable: list[str] | None = None
) -> Iterator[tuple[Path, EpisodeResult]]:
    """Every episode file of a bat-cli model folder as an EpisodeResult, in name order.

    As :func:`bat.evaluation.log.store.episodes`: a file that cannot be read raises an
    InputError, or with ``unreadable`` has its problem appended there and is skipped.
    """
    for path in layout.episode_files(model_dir):
        try:
            yield path, as_episode(read_json_object(path), path)
        except InputError as exc:
            if unreadable is None:
                raise
            unreadable.append(exc.message)


def recheck(folder: Path, verdict_of: Callable[[EpisodeResult], Verdict | None]) -> int:
    """Re-judge a bat-cli model folder with ``verdict_of`` (None: an episode of a task the
    dataset no longer has, left as it is); returns the verdicts changed.

    The files stay in bat-cli's format: each episode's ``verdict`` is rewritten, and so
    are the rows of ``metrics.json`` (``success``, ``verdict``) and the counts of
    ``summary.json``, so that bat-cli, ``eval.plot`` and ``eval.compare`` all read the new
    verdicts. Every file is read and judged before any is written: a malformed one is an
    error that leaves the folder as it was, not half rewritten.
    """
    folder = Path(folder)
    verdicts: dict[tuple[str, int], dict[str, Any]] = {}
    rewrites: list[tuple[Path, dict[str, Any]]] = []
    for name in (METRICS_FILE, SUMMARY_FILE, layout.EPISODES_DIR):
        _inside(folder / name, folder)
    for path in layout.episode_files(folder):
        data = read_json_object(_inside(path, folder))
        episode_ = as_episode(data, path)
        verdict = verdict_of(episode_)
        if verdict is None:
            continue
        new = {"passed": verdict.passed, "reason": verdict.reason}
        verdicts[(episode_.task_id, episode_.attempt)] = new
        if data.get("verdict") != new:
            rewrites.append((path, {**data, "verdict": new}))
    if rewrites:
        metrics, summary = _recounted(folder, verdicts)
        for path, data in rewrites:
            write_text_atomic(path, json_text(data, what=str(path), indent=2))
        write_text_atomic(folder / METRICS_FILE, json_text(metrics, what=METRICS_FILE, indent=2))
        write_text_atomic(folder / SUMMARY_FILE, json_text(summary, what=SUMMARY_FILE, indent=2))
    return len(rewrites)


def _recounted(
    folder: Path, verdicts: dict[tuple[str, int], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """metrics.json and summary.json with the rows and counts of the new verdicts."""
    metrics = read_json_object(folder / METRICS_FILE)
    summary = read_json_object(folder / SUMMARY_FILE)
    seen: dict[str, int] = {}
    counts: dict[str, list[int]] = {}  # task id -> [attempts, passed]
    for row in metrics.get("per_episode") or []:
        task_id = str(row.get("task_id"))
        seen[task_id] = seen.get(task_id, 0) + 1
        verdict = verdicts.get((task_id, seen[task_id]))
        if verdict is not None:
            row["success"], row["verdict"] = verdict["passed"], verdict
        tally = counts.setdefault(task_id, [0, 0])
        tally[0] += 1
        tally[1] += bool(row.get("success"))
    passed = sum(p for _, p in counts.values())
    total = sum(n for n, _ in counts.values())
    block = metrics.get("summary")
    if isinstance(block, dict):
        block.update(passed=passed, failed=total - passed, pass_rate=passed / total if total else 0)
    for entry in summary.get("attempts") or []:
        attempts, ok = counts.get(str(entry.get("task_id")), (0, 0))
        if attempts:
            entry.update(
                attempts=attempts,
                passed=ok,
                failed=attempts - ok,
                success_percentage=round(100.0 * ok / attempts, 2),
            )
    summary["passed"] = passed
    return metrics, summary


# --- a bat-cli run folder as bat's viewer sees a run ----------------------------------------


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` is a bat-cli 2026.10 run folder: no run.json of bat's, and at least
    one sub-folder of bat-cli's model files."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir() or layout.is_run_folder(path):
        return False
    try:
        return any(is_model_folder(child) for child in path.iterdir() if child.is_dir())
    except OSError:
        return False


def run_record(run_dir: Path) -> RunRecord:
    """A bat-cli run folder as bat's ``run.json`` would describe it, for readers that list
    runs (the viewer): each model folder with its label (the episodes' ``model_name``),
    its tasks in their order, ``k``, the run name (bat-cli's default ``benchmark``) and its
    time. Nothing is written. A folder that is not bat-cli's is an InputError."""
    from bat.evaluation.log.run import ModelEntry, RunRecord

    run_dir = Path(run_dir)
    folders = model_folders(run_dir) if not layout.is_run_folder(run_dir) else []
    if not folders:
        raise InputError(f"{run_dir} is not a bat-cli 2026.10 run folder")
    models, tasks, k, name, stamp = [], {}, 1, None, None
    for folder in folders:
        found = load(folder)
        models.append(ModelEntry(label=found.model, dir=folder.name, status="completed"))
        tasks.update(dict.fromkeys(row.task_id for row in found.metrics.per_episode))
        k = max(k, found.summary.k)
        name = name or found.summary.run_name
        stamp = stamp or found.summary.timestamp_utc
    return RunRecord(
        run_id=run_dir.name,
        run_name=name or DEFAULT_RUN_NAME,
        status="completed",
        started_at=_iso(stamp) or "",
        tasks=list(tasks),
        k=k,
        models=models,
    )


def _iso(stamp: str | None) -> str | None:
    """bat-cli's ``20261201_033109`` as ISO 8601 (UTC), else the text as it is."""
    import re

    match = re.fullmatch(r"(\d{4})(\d\d)(\d\d)_(\d\d)(\d\d)(\d\d)", stamp or "")
    if not match:
        return stamp
    y, mo, d, h, mi, s = match.groups()
    return f"{y}-{mo}-{d}T{h}:{mi}:{s}Z"


def read_record(run_dir: Path) -> RunRecord:
    """The run.json of a run of bat's, or :func:`run_record` of a bat-cli run folder: the
    one call by which a reader that lists runs takes both."""
    from bat.evaluation.log import run as rundir

    run_dir = Path(run_dir)
    if not layout.run_file(run_dir).exists() and is_run_folder(run_dir):
        return run_record(run_dir)
    return rundir.read_run(run_dir)
