"""The stages of an evaluation, as plain functions the Invoke tasks call.

``run_evaluation`` checks the inputs, then evaluates each model on its own
(``model_run``): a model that cannot be evaluated is recorded with its reason and the
end of its agent's log, and the next model runs. Each model is summarized as soon as its
episodes are done. ``summarize_run`` and ``recheck_run`` work on a finished (or
interrupted) run directory alone.

What a run's end says (``RunReport.untrusted``): every model evaluated and no
infrastructure failure left — the numbers stand; otherwise the run is *incomplete*
(``eval.run`` exits 3): infrastructure failures remain (``--resume --retry-infra``
runs them again), or a model could not be evaluated (``run.json`` status ``partial``).
When no model could be evaluated at all, the run failed (status ``failed``, exit 1).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bat.errors import BatError, Interrupted, OperationError, UsageError
from bat.evaluation.budgeting import budget_limit, check_priced, start_budget
from bat.evaluation.card import finish_card, write_card
from bat.evaluation.context import RunContext
from bat.evaluation.inputs.config import ResolvedConfig
from bat.evaluation.inputs.dataset import Dataset, load_dataset
from bat.evaluation.inputs.preflight import judge_keys, preflight
from bat.evaluation.inputs.selection import Selection
from bat.evaluation.inputs.shards import Shard
from bat.evaluation.log import run as rundir
from bat.evaluation.log import store
from bat.evaluation.log.episode import EpisodeResult, Verdict
from bat.evaluation.log.gates import GatesFile
from bat.evaluation.log.run import TAIL_SHOWN, ModelEntry, RunRecord
from bat.evaluation.log.summary import CostFigures, Summary, Totals
from bat.evaluation.present.cost_view import amount, known
from bat.evaluation.run.model_run import ModelRecord, agent_log, failed, model_record, run_model
from bat.evaluation.stats import row_of, summarize
from bat.evaluation.verdict import judge_episode
from bat.figures import counted, percent
from bat.secrets import display_url
from bat.terminal import safe

Say = Callable[[str], None]


@dataclass
class RunReport:
    """Where a run is, and why its numbers are not to be trusted (empty: they are)."""

    run_dir: Path
    untrusted: list[str] = field(default_factory=list)


def run_evaluation(
    ctx: RunContext,
    *,
    resume: str | bool | None = None,
    retry_infra: bool = False,
    selection: Selection | None = None,
    shard: Shard | None = None,
    say: Say = print,
    max_cost: float | None = None,
) -> RunReport:
    """Run every missing episode of every model (of the tasks ``selection`` chooses, of
    the slice ``shard`` holds); returns the run and what it lacks. ``max_cost`` (over
    ``evaluation.max_cost``) is the run's budget (``bat.evaluation.budgeting``)."""
    resolved, scrubber, say = ctx.resolved, ctx.scrubber, ctx.say(say)
    checked = preflight(resolved)
    # Prices before any run folder: eval.yaml's and bat.yaml's in two currencies are
    # refused here (the book is made; each unpriced model is said below, once the run
    # goes ahead).
    prices = ctx.prices
    limit = budget_limit(resolved, max_cost)
    if limit is not None:  # an unpriced model: refused before the run folder is made
        check_priced(ctx, limit, checked.dataset.tasks)
    for warning in checked.warnings:
        ctx.warn(warning)
    if checked.agent_python is not None:
        say(checked.agent_python.line())
    evaluation = resolved.evaluation
    records = [model_record(resolved, model, checked.settings) for model in resolved.models]
    selection = selection or Selection()
    total = len(checked.dataset.tasks)
    if resume or retry_infra:
        wanted = None if resume in (None, True) else str(resume)
        run_dir = rundir.find_run(resolved.output_dir, wanted)
        rundir.model_dirs(run_dir)  # a crafted models[].dir is refused, run.json unchanged
        swept = remove_temporaries(run_dir)
        if swept:
            say(f"removed {counted(swept, 'temporary file')} a stopped bat left in {run_dir.name}")
        before = rundir.read_run(run_dir)
        if before.k != evaluation.k:  # its summaries' pass@k and pass^k are of that k
            raise UsageError(
                f"{run_dir.name} runs k={before.k} attempts of each task and eval.yaml now "
                f"says k: {evaluation.k}; --resume finishes the run as it began (set k: "
                f"{before.k} again), or start a new run"
            )
        recorded = Selection.from_record(before.selection)
        if not selection.empty and selection != recorded:
            raise UsageError(
                f"{run_dir.name} ran {recorded.flags()}; --resume runs that selection "
                f"again (leave out {selection.flags()})"
            )
        checked.dataset = recorded.apply(checked.dataset)
        was = Shard.from_record(before.shard)
        if shard is not None and shard != was:
            raise UsageError(
                f"{run_dir.name} holds {'slice ' + str(was) if was else 'every episode'}; "
                f"--resume runs it again (leave out --shard {shard})"
            )
        shard = was
        for model_dir in rundir.model_dirs(run_dir):  # an unreadable episode: run.json as it was
            store.check_episodes(model_dir, ctx.infra)
        earlier = rundir.update_run(
            run_dir, scrubber=scrubber, status="running", resumed_at=rundir.now_iso()
        )
        if earlier.dataset_sha256 != checked.dataset.sha256:
            ctx.warn(f"the dataset changed since {run_dir.name} started; new tasks are added to it")
        _carry_over(records, earlier)
    else:
        checked.dataset = selection.apply(checked.dataset)
        run_dir = rundir.new_run_dir(resolved.output_dir, evaluation.run_name)
        record = _run_record(resolved, checked.dataset, run_dir, records)
        record.selection = selection.record(len(checked.dataset.tasks), total)
        record.shard = shard.record() if shard else None
        rundir.write_run(run_dir, record, scrubber=scrubber)
        if not selection.empty:
            say(f"{len(checked.dataset.tasks)} of {total} tasks chosen by {selection.flags()}")
        if shard is not None:
            say(f"slice {shard} of the run's episodes (bat eval.merge puts the slices together)")
    # a resumed run keeps its card (and the prices it started with)
    prices.look_up_all(resolved)  # each unpriced model said once, before any episode
    write_card(run_dir, resolved, checked.dataset, scrubber, prices.record())
    ctx.run_dir = run_dir
    say(f"run {run_dir}")
    resumed = bool(resume or retry_infra)
    budget = start_budget(ctx, run_dir, limit, resumed, say) if limit is not None else None
    errors: list[BatError] = []
    try:
        for index, (model, record) in enumerate(zip(resolved.models, records, strict=True)):
            chosen = shard.slicer(index, checked.dataset.tasks, evaluation.k) if shard else None
            error = _evaluate_model(ctx, checked, model, record, retry_infra, say, chosen, budget)
            errors += [error] if error else []
            rundir.update_run(run_dir, scrubber=scrubber, models=_entries(records))
        return _conclude(ctx, records, errors)
    except KeyboardInterrupt:
        _mark(ctx, records, "interrupted")
        raise Interrupted(
            f"interrupted: finished episodes are saved in {run_dir}; "
            f"finish the run with: bat eval.run --resume {run_dir.name}"
        ) from None
    except OSError as exc:  # a full disk, most likely: nothing more can be written
        _mark(ctx, records, "failed")
        raise OperationError(
            f"cannot write {exc.filename or 'a file of the run'}: {exc.strerror or exc}; "
            f"{run_dir.name} is marked failed and keeps every episode written so far "
            f"(make room, then finish it with: bat eval.run --resume {run_dir.name})"
        ) from None


# The temporaries of bat's atomic writes: ``bat.atomic`` (mkstemp: ``.NAME.XXXXXXXX.tmp``)
# and the episodes' batch writer (``.NAME.PID.N.tmp``).
_TEMPORARY = re.compile(r"\..+\.(?:[a-z0-9_]{8}|[0-9]+\.[0-9]+)\.tmp", re.ASCII | re.DOTALL)


def remove_temporaries(run_dir: Path) -> int:
    """Remove the temporary files of atomic writes a killed bat left in ``run_dir``; how many.

    A ``kill -9`` between a temporary's creation and its rename leaves it behind; the
    file it was to replace is whole (old or new), so nothing is lost. Only regular files
    named as bat names its temporaries go; links are not followed.
    """
    removed = 0
    for folder, _, files in os.walk(run_dir, followlinks=False):
        for name in files:
            if not _TEMPORARY.fullmatch(name):
                continue
            path = os.path.join(folder, name)
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.lstat(path).st_mode):
                    os.unlink(path)
                    removed += 1
    return removed


def _mark(ctx: RunContext, records: list[ModelRecord], status: str) -> None:
    """Say in run.json how the run ended early, even on a full disk.

    When the atomic rewrite finds no room, the status is changed in place, in an entry of
    the same length (``rundir.mark_ended``), so the file neither grows nor stops being
    JSON. Ctrl-C while this runs is left to the caller's caller (exit 130 all the same).
    """
    rundir.mark_ended(ctx.run_dir, status, _entries(records), scrubber=ctx.scrubber)
    with contextlib.suppress(OSError, BatError):
        finish_card(ctx.run_dir, ctx.scrubber)


def _entries(records: list[ModelRecord]) -> list[dict]:
    return [record.model_dump(mode="json") for record in records]


def _evaluate_model(
    ctx: RunContext, checked, model, record, retry_infra, say, chosen=None, budget=None
) -> BatError | None:
    """Run one model (only the episodes ``chosen`` keeps, when a shard runs); a failure is
    recorded for that model (and returned), and the run goes on."""
    run_dir = ctx.run_dir
    try:
        run_model(
            ctx.resolved,
            checked.dataset,
            checked.settings,
            run_dir,
            model,
            record,
            retry_infra=retry_infra,
            chosen=chosen,
            say=say,
            scrubber=ctx.scrubber,
            infra=ctx.infra,
            python=checked.agent_python,
            prices=ctx.prices,
            budget=budget,
        )
    except BatError as exc:
        several = record.replicas is not None and record.replicas > 1
        log = getattr(exc, "log", None) or agent_log(run_dir, record, 1 if several else None)
        failed(record, exc.message, log)
        say(f"[{record.label}] could not be evaluated: {exc.message}")
        for line in record.log_tail[-TAIL_SHOWN:]:  # the end of the log the reason names
            say(f"  | {safe(line)}")
        _summarize_model_of(ctx, record)
        return exc
    except BaseException:
        # Ctrl-C or a full disk: a summary of what is there, if it can be written; the
        # first failure is the one reported.
        with contextlib.suppress(OSError, BatError):
            _summarize_model_of(ctx, record)
        raise
    _summarize_model_of(ctx, record)
    return None


def _summarize_model_of(ctx: RunContext, record: ModelRecord) -> None:
    """summary.json and metrics.json of one model, as soon as its episodes are done."""
    summarize_model(ctx, ctx.run_dir, record, rundir.read_run(ctx.run_dir))


def _conclude(ctx: RunContext, records: list[ModelRecord], errors: list[BatError]) -> RunReport:
    """Write the run's end to run.json; say what makes its numbers incomplete (a model
    not evaluated, more infrastructure failures than ``evaluation.max_infra_failures``)."""
    run_dir, scrubber = ctx.run_dir, ctx.scrubber
    lost = [r for r in records if r.status == "failed"]
    stopped = [r for r in records if r.status == "stopped"]  # by the budget: episodes missing
    status = (
        "failed" if len(lost) == len(records) else "partial" if lost or stopped else "completed"
    )
    infra = {r.label: store.infra_failures(run_dir / r.dir, ctx.infra) for r in records}
    infra_total = sum(len(found) for found in infra.values())
    rundir.update_run(
        run_dir,
        scrubber=scrubber,
        status=status,
        ended_at=rundir.now_iso(),
        models=_entries(records),
        infra_failures=infra_total,
    )
    finish_card(run_dir, scrubber)
    if status == "failed":
        if len(errors) == 1:  # one model: its own error (with its log), its own exit status
            raise errors[0]
        details = []
        for record in lost:
            details.append(f"{record.label}: {record.reason}")
            details += [f"  | {line}" for line in record.log_tail[-TAIL_SHOWN:]]
        raise OperationError(f"no model could be evaluated (run {run_dir.name})", details=details)
    from bat.evaluation.present.gates import trust_problems

    untrusted = trust_problems(run_dir, ctx.resolved.evaluation.max_infra_failures, ctx.infra)
    return RunReport(run_dir=run_dir, untrusted=untrusted)


def _carry_over(records: list[ModelRecord], earlier: RunRecord) -> None:
    """Restarts and retries of a resumed run's models keep counting from before."""
    before = {model.dir: model for model in earlier.models}
    for record in records:
        old = before.get(record.dir)
        if old is not None:
            for key in ("restarts", "requests_resent", "episodes_run", "span_waits"):
                setattr(record, key, getattr(old, key))


def _run_record(
    resolved: ResolvedConfig, dataset: Dataset, run_dir: Path, records: list[ModelRecord]
) -> RunRecord:
    evaluation = resolved.evaluation
    return RunRecord(
        run_id=run_dir.name,
        run_name=evaluation.run_name,
        status="running",
        started_at=rundir.now_iso(),
        config_file=str(resolved.file),
        config=_config_without_secrets(resolved),
        agent_url=display_url(resolved.agent_url),
        dataset=str(dataset.path),
        dataset_sha256=dataset.sha256,
        tasks=[task.id for task in dataset.tasks],
        k=evaluation.k,
        models=list(records),
        versions=rundir.versions(),
    )


def _config_without_secrets(resolved: ResolvedConfig) -> dict:
    """The resolved config with every ``env`` map reduced to its names (values may be API
    keys: ``${OPENAI_API_KEY}`` is expanded before this point) and every URL without its
    credentials (``http://user:pass@host``, ``?api_key=``)."""
    config = resolved.config.model_dump(mode="json")
    user = [config["user"]] if config.get("user") else []  # the simulated users' model
    holders = [config["evaluation"]["agent"], *config["models"], *config["judge"], *user]
    for holder in holders:
        holder["env"] = sorted(holder.get("env") or {})
    for holder in [*config["models"], *config["judge"], *user]:
        holder["base_url"] = display_url(holder.get("base_url"))
    evaluation = config["evaluation"]
    evaluation["agent_url"] = display_url(evaluation.get("agent_url"))
    return config


def judge_stage(ctx: RunContext, run_dir: Path, *, say: Say = print) -> None:
    """Score a run's episodes with the configured judges (see bat.evaluation.judging).

    With ``evaluation.qualitative`` off, nothing is judged and the run is kept as it is:
    ``eval.run`` chains this stage always, and judging is asked for in eval.yaml, not by
    the command line. Except for the tasks with natural-language assertions
    (``expected.assertions``): when a judge is configured, their episodes are judged all
    the same, as their assertions (perhaps part of their verdict) need a judge.
    """
    from bat.evaluation.judging import judge_run

    resolved = ctx.resolved
    only = None
    dataset = None
    if not resolved.evaluation.qualitative:
        off = "qualitative judging is off (evaluation.qualitative: false)"
        if resolved.config.judges:
            dataset = load_dataset(resolved.dataset, unknown_keys=resolved.unknown_keys)
            only = {task.id for task in dataset.tasks if task.expected.assertions}
        if not only:
            say(f"{off}; {run_dir.name} kept as is")
            return
        # A task's assertions are decided whenever a judge is configured: only those
        # tasks' episodes are judged (their scores come in the same request).
        say(f"{off}; judging the episodes of {counted(len(only), 'task')} with assertions")
    say = ctx.say(say)
    rundir.model_dirs(run_dir)  # a crafted models[].dir is refused before any write
    env = judge_keys(resolved)
    if dataset is None:
        dataset = load_dataset(resolved.dataset, unknown_keys=resolved.unknown_keys)
    tasks = {task.id: task for task in dataset.tasks}
    result = judge_run(
        run_dir,
        resolved.config.judges,
        tasks,
        env=env,
        say=say,
        scrubber=ctx.scrubber,
        base=resolved.base,  # a judge's script: is relative to eval.yaml
        only=only,
        prices=ctx.prices,
    )
    if result.judged and result.errors == result.judged:
        say(f"warning: every judgement failed; the first error: {result.first_error}")


def summarize_run(ctx: RunContext, run_dir: Path, *, say: Say = print) -> list[Path]:
    """Write summary.json and metrics.json for every model of the run; say each result."""
    record = rundir.read_run(run_dir)
    rundir.model_dirs(run_dir)  # every models[].dir checked before anything is written
    written = []
    if record.selection:
        chosen = Selection.from_record(record.selection)
        say(f"{len(record.tasks)} of {record.selection.get('of', '?')} tasks ({chosen.flags()})")
    for model in record.models:
        summary = summarize_model(ctx, run_dir, model, record)
        if summary is not None:
            written += store.result_files(run_dir / model.dir)
            say(result_line(model.label, summary.totals, record.k, summary.cost))
    return written


def summarize_model(
    ctx: RunContext, run_dir: Path, model: ModelEntry, record: RunRecord
) -> Summary | None:
    """summary.json and metrics.json of one model folder; its Summary (None without
    episodes: nothing is written).

    ``eval.run`` summarizes each model as its episodes end, and its ``eval.summarize``
    stage again after the judge: when the judge changed no file (``store.fingerprint``),
    the second is the first, kept in ``ctx.summaries``. The pass over the episodes also
    counts their infrastructure failures, for the stages after it (``ctx.infra``)."""
    model_dir = run_dir / model.dir
    print_ = store.fingerprint(model_dir)  # taken first: a file changed meanwhile shows
    key = (print_, record.k, tuple(record.tasks), model.label, model.model, record.run_id)
    key += (record.run_name, record.timestamp_utc())
    done = ctx.summaries.get(model_dir.resolve())
    files = store.result_files(model_dir)
    if done is not None and done[0] == key and all(path.is_file() for path in files):
        return done[1]  # nothing changed since this process wrote them
    rows, infra = [], set()
    for path, episode in store.episodes(model_dir):
        rows.append(row_of(episode))
        infra.add(store.infra_key(path, episode))
    ctx.infra[model_dir.resolve()] = (print_, infra - {None})
    if not rows:
        return None
    summary, metrics = summarize(
        rows,
        k=record.k,
        model=model.label,
        task_order=record.tasks,
        model_name=model.model,
        run_id=record.run_id,
        run_name=record.run_name,
        timestamp_utc=record.timestamp_utc(),
    )
    store.write_results(model_dir, summary, metrics, scrubber=ctx.scrubber)
    ctx.summaries[model_dir.resolve()] = (key, summary)
    return summary


def result_line(label: str, totals: Totals, k: int, cost: CostFigures | None = None) -> str:
    """The one line that says how a model did, with what makes the number weaker, and
    what it cost (a lower bound, "at least", when some of it has no price)."""
    label = safe(label)  # read back from run.json, which may have been edited
    notes = []
    if totals.agent_errors_total:
        kinds = ", ".join(f"{n} {kind}" for kind, n in totals.agent_errors.items() if n)
        notes.append(f"{counted(totals.agent_errors_total, 'agent error')} ({kinds})")
    if totals.infra_failures:
        kinds = ", ".join(f"{n} {kind}" for kind, n in totals.infra_failures_by_kind.items())
        notes.append(f"{counted(totals.infra_failures, 'infrastructure failure')} ({kinds})")
    if totals.vacuous_passes:
        notes.append(counted(totals.vacuous_passes, "vacuous pass", "vacuous passes"))
    if cost is not None and not known(cost):  # "at least 0 USD" would say nothing
        notes.append(f"cost unknown (no price for {', '.join(cost.unpriced)})")
    elif cost is not None:
        per_pass = f", {amount(cost.per_pass, cost)} per pass" if cost.per_pass else ""
        notes.append(f"cost {amount(cost.total, cost)}{per_pass}")
    return (
        f"[{label}] {totals.passed}/{totals.attempts} episodes passed "
        f"({percent(totals.success_percentage / 100)}), "
        f"pass@{k} {percent(totals.pass_at_k)}, pass^{k} {percent(totals.pass_hat_k)}"
        + "".join(f"; {note}" for note in notes)
    )


def recheck_run(ctx: RunContext, run_dir: Path, dataset: Dataset, *, say: Say = print) -> int:
    """Re-judge every episode of a run against the dataset's current expectations.

    ``run_dir`` is one of bat's runs, or a run folder of bat-cli 2026.10 (its files are
    rewritten in its own format, ``batcli.recheck``).
    """
    from bat.evaluation.log import batcli

    tasks = {task.id: task for task in dataset.tasks}

    def verdict_of(episode: EpisodeResult) -> Verdict | None:
        task = tasks.get(episode.task_id)  # None: a task the dataset no longer has
        return None if task is None else judge_episode(task.expected, episode, task.turn_expected)

    if not store.layout.is_run_folder(run_dir):
        changed = 0
        for folder in batcli.model_folders(run_dir):
            changed += batcli.recheck(folder, verdict_of)
        say(f"{counted(changed, 'verdict')} changed")
        return changed
    rewrites = []  # every episode is read and judged before any is written
    for model_dir in rundir.model_dirs(run_dir):
        for path, episode in store.episodes(model_dir):
            verdict = verdict_of(episode)
            if verdict is not None and verdict != episode.verdict:
                rewrites.append((path, episode, verdict))
    for path, episode, verdict in rewrites:
        store.write_verdict(path, episode, verdict, scrubber=ctx.scrubber)
    say(f"{counted(len(rewrites), 'verdict')} changed")
    return len(rewrites)


def gate_stage(
    ctx: RunContext, run_dir: Path, extra: list, *, say: Say = print, save: bool = True
) -> GatesFile | None:
    """Check the run against its gates (eval.yaml's, or without one run.json's: see
    :mod:`bat.evaluation.present.gate_inputs`) and ``extra`` (the command line's): print
    the table; with ``save``, write gates.json (and redraw the report beside it, see
    :mod:`bat.evaluation.present.gate_save`). None (nothing written) when there is no gate."""
    from bat.evaluation.present import gates
    from bat.evaluation.present.gate_inputs import gate_inputs

    inputs = gate_inputs(ctx, run_dir)
    specs = [*inputs.specs, *extra]
    if not specs:
        return None
    shard = rundir.read_run(run_dir).shard
    if shard:  # a slice's figures are not the run's: its gates wait for the merged run
        say(
            f"{counted(len(specs), 'gate')} not checked on slice "
            f"{shard['index']}/{shard['total']}: "
            "bat eval.merge checks them on the merged run"
        )
        return None
    rundir.model_dirs(run_dir)  # a crafted models[].dir is refused before any write

    def task_tags() -> dict[str, frozenset[str]]:
        snapshot = store.layout.tasks_snapshot(run_dir)  # the tasks as they were run
        if not snapshot.is_file() and inputs.dataset is None:
            return {}
        # Only the tags are wanted: keys bat does not read (a compat run's) are no reason
        # to refuse the tasks the run already ran.
        path = snapshot if snapshot.is_file() else inputs.dataset
        dataset = load_dataset(path, unknown_keys="warn")
        return {task.id: frozenset(task.all_tags) for task in dataset.tasks}

    result = gates.evaluate(run_dir, specs, task_tags, inputs.output_dir)
    say(ctx.scrub(safe(gates.table(result))))
    if save:
        from bat.evaluation.present.gate_save import save as save_gates

        save_gates(run_dir, result, ctx.scrubber)
    return result
