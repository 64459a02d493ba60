"""``bat eval.gate``: the gates of a run, answered from its files, and whether to trust them.

Every figure a gate reads is computed by :func:`bat.evaluation.stats.summarize` over
the episode rows of ``metrics.json`` — the same code that wrote ``summary.json`` — so a
gate on every task of one model reads exactly the number the summary shows, and a gate on
a subset (``tasks: [tag:smoke]``) or on every model pooled (``model: all``) is computed
the same way over those rows. Pooled, the same task of two models counts as two tasks.

A gate whose figure cannot be computed (``pass_at_5`` with 3 attempts, a judge
dimension nobody scored, a model that could not be evaluated, a cost of a run made
before bat priced episodes) fails: a CI gate that passes for lack of data would let
anything ship. So does a cost gate whose total leaves out unpriced parts: that figure is
only a lower bound, and a ``cost.total <= 5`` under it would pass a run that cost more.

Whether the numbers can be trusted at all is a separate question (:func:`trust_problems`):
a model that could not be evaluated, or more infrastructure failures than the budget
(``evaluation.max_infra_failures``, default 0). Those make a run exit 3 whatever the gates
say.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bat.errors import BatError, InputError
from bat.evaluation.inputs.gate_specs import LATENCY, Figure, GateSpec
from bat.evaluation.inputs.task_glob import task_matcher
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.gates import GATES_SCHEMA, GateResult, GatesFile
from bat.evaluation.log.outcome import CREDENTIAL_KINDS, episode_outcome, row_outcome
from bat.evaluation.log.run import ModelEntry, RunRecord
from bat.evaluation.log.summary import (
    ConversationFigures,
    CostFigures,
    EpisodeRow,
    Metrics,
    Summary,
)
from bat.evaluation.present.cost_view import gate_value, known
from bat.evaluation.stats import summarize
from bat.figures import counted, money, number
from bat.secrets import Scrubber

TaskTags = Callable[[], dict[str, frozenset[str]]]


@dataclass
class _Scope:
    """The rows one gate is measured on: one model's (or every model's) chosen tasks."""

    model: str
    rows: list[EpisodeRow]
    tasks: list[str]  # the task ids chosen, in the run's order


def evaluate(
    run_dir: Path, specs: list[GateSpec], task_tags: TaskTags, output_dir: Path
) -> GatesFile:
    """Answer every gate on the run in ``run_dir``; ``task_tags`` gives each task's tags
    (called only when a gate names a tag), ``output_dir`` is where a baseline run id is
    looked for."""
    record = rundir.read_run(run_dir)
    results = _model_results(run_dir, record)
    answers: list[GateResult] = []
    tags: dict[str, frozenset[str]] | None = None
    for spec in specs:
        selectors = spec.must_pass or spec.tasks
        if selectors and any(s.strip().startswith("tag:") for s in selectors) and tags is None:
            tags = task_tags()
        if spec.baseline is not None:
            answers += _baseline(spec, run_dir, results, output_dir)
            continue
        for scope in _scopes(spec, record, results, tags or {}):
            answers.append(_answer(spec, scope, record))
    return GatesFile(
        run_id=record.run_id,
        evaluated_at=rundir.now_iso(),
        passed=all(answer.passed for answer in answers),
        gates=answers,
    )


def write(run_dir: Path, gates: GatesFile, scrubber: Scrubber) -> Path:
    return store.write_json(
        layout.gates_file(run_dir),
        gates.model_dump(mode="json", by_alias=True),
        scrubber=scrubber,
    )


def read(run_dir: Path) -> GatesFile | None:
    """The run's gates.json, or None when it has none (or one this bat cannot read: the
    report shows a run without its gates rather than failing)."""
    path = layout.gates_file(run_dir)
    if not path.is_file():
        return None
    try:
        return rundir.read_versioned(path, GatesFile, GATES_SCHEMA, "a gates file")
    except InputError:
        return None


Results = dict[str, tuple[Summary, Metrics] | str]


def _model_results(run_dir: Path, record: RunRecord) -> Results:
    """Each model's summary and metrics, or why it has none: it could not be evaluated,
    or its files cannot be read (a NaN in metrics.json): its gates fail saying so."""
    results: Results = {}
    for model, folder in zip(record.models, rundir.model_dirs(run_dir), strict=True):
        if not layout.has_summary(folder):
            results[model.label] = "the model has no results (it could not be evaluated)"
            continue
        try:
            found = store.read_results(folder)
        except InputError as exc:
            results[model.label] = f"its results cannot be read: {exc.message}"
            continue
        results[model.label] = (found.summary, found.metrics)
    return results


def _scopes(
    spec: GateSpec,
    record: RunRecord,
    results: Results,
    tags: dict[str, frozenset[str]],
) -> list[_Scope | str]:
    """The scopes a gate is measured on, or for each one that cannot be, why (a str)."""
    chosen = _choose(spec.must_pass or spec.tasks, record.tasks, tags)
    if spec.model == "all":
        rows, problems = [], []
        for label, found in results.items():
            if isinstance(found, str):
                problems.append(f"{label}: {found}")
                continue
            rows += [_pooled(label, row) for row in found[1].per_episode if row.task_id in chosen]
        if problems:
            return [f"all: {'; '.join(problems)}"]
        order = [f"{label}/{task}" for label in results for task in record.tasks if task in chosen]
        return [_Scope("all", rows, order)]
    labels = list(results) if spec.model is None else [spec.model]
    scopes: list[_Scope | str] = []
    for label in labels:
        if label not in results:
            scopes.append(f"{label}: no model of that name (models: {', '.join(results)})")
        elif isinstance(found := results[label], str):
            scopes.append(f"{label}: {found}")
        else:
            rows = [row for row in found[1].per_episode if row.task_id in chosen]
            scopes.append(_Scope(label, rows, [t for t in record.tasks if t in chosen]))
    return scopes


def _pooled(label: str, row: EpisodeRow) -> EpisodeRow:
    return row.model_copy(update={"task_id": f"{label}/{row.task_id}"})


def _choose(
    selectors: list[str] | None, tasks: list[str], tags: dict[str, frozenset[str]]
) -> set[str]:
    """The task ids that any selector (an id, a glob, ``tag:NAME``) matches."""
    if not selectors:
        return set(tasks)
    return {
        task for task in tasks if any(_matches(s.strip(), task, tags, tasks) for s in selectors)
    }


def _matches(selector: str, task: str, tags: dict[str, frozenset[str]], known: list[str]) -> bool:
    if selector.startswith("tag:"):
        return selector[4:] in tags.get(task, frozenset())
    return task_matcher(selector, known)(task)  # the one rule: bat.evaluation.inputs.task_glob


def _answer(spec: GateSpec, scope: _Scope | str, record: RunRecord) -> GateResult:
    threshold = spec.threshold
    base = {
        "name": spec.title,
        "kind": "threshold" if threshold else "must_pass",
        "figure": threshold.figure.name if threshold else None,
        "op": threshold.op if threshold else "==",
        "threshold": threshold.threshold if threshold else 0.0,
        "tasks": spec.tasks or spec.must_pass,
    }
    if isinstance(scope, str):
        model, _, why = scope.partition(": ")
        return GateResult(**base, model=model, passed=False, detail=why)
    if not scope.rows:
        return GateResult(
            **base, model=scope.model, passed=False, detail="no episode of the tasks chosen"
        )
    if threshold is None:
        return _must_pass(base, scope)
    value, why, unit = figure_value(threshold.figure, scope, record.k)
    if value is not None and not math.isfinite(value):
        # Comparisons with NaN are all false, and gates.json must stay strict JSON.
        value, why = None, f"{threshold.figure.name} is {value}, not a number a gate can hold"
    passed = threshold.holds(value) and not why  # a value with a why is not to be trusted
    shown = money(value, unit) if unit else number(value)
    detail = why or (
        "" if passed else f"{shown} is not {wanted(threshold.op, threshold.threshold)}"
    )
    return GateResult(
        **base, model=scope.model, value=value, unit=unit, passed=passed, detail=detail
    )


def _must_pass(base: dict, scope: _Scope) -> GateResult:
    """Every attempt of every task chosen passed (an infrastructure failure is no pass)."""
    failing = []
    seen = set()
    for row in scope.rows:
        seen.add(row.task_id)
        if not row_outcome(row).passed and row.task_id not in failing:
            failing.append(row.task_id)
    missing = [task for task in scope.tasks if task not in seen]
    bad = failing + missing
    detail = ""
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        detail = f"{counted(len(bad), 'task')} did not pass every attempt: {shown}"
    return GateResult(
        **base, model=scope.model, value=float(len(bad)), passed=not bad, detail=detail
    )


def figure_value(figure: Figure, scope: _Scope, k: int) -> tuple[float | None, str, str | None]:
    """The figure over the scope's rows, why it is None (or not to be trusted) when it is,
    and its unit (a cost's currency; None for the others)."""
    summary, metrics = summarize(scope.rows, k=k, model=scope.model, task_order=scope.tasks)
    if figure.kind == "cost":
        value, why = cost_value(summary.cost, figure.arg or "")
        return value, why, summary.cost.currency if summary.cost else None
    value, why = _plain_value(figure, scope, summary, metrics)
    return value, why, None


def _plain_value(
    figure: Figure, scope: _Scope, summary: Summary, metrics: Metrics
) -> tuple[float | None, str]:
    totals, stats = summary.totals, metrics.summary
    kind, arg = figure.kind, figure.arg
    if kind == "pass_rate":
        return _ratio(totals.passed, totals.attempts), ""
    if kind in ("pass_at", "pass_hat"):
        if arg == "k":
            value = totals.pass_at_k if kind == "pass_at" else totals.pass_hat_k
            return value, "" if value is not None else "no task has a judged attempt"
        table = totals.pass_at if kind == "pass_at" else totals.pass_hat
        value = table.get(str(arg))
        if value is None:
            longest = max((int(j) for j in table), default=0)
            return None, (
                f"{figure.name} needs {arg} judged attempts of a task; the most here is {longest}"
            )
        return value, ""
    if kind == "judge":
        found = (totals.judge or {}).get(arg or "")
        if found is None or found.mean is None:
            known = ", ".join(sorted(totals.judge or {})) or "none (was the run judged?)"
            return None, f"no judge scores for {arg!r} (dimensions: {known})"
        return found.mean, ""
    if kind == "latency":
        return getattr(stats.wall_time_s, LATENCY[arg or "p50"]), ""
    if kind == "tokens":
        per_episode = [row.tokens.total_tokens for row in scope.rows]
        if arg == "total":
            return float(sum(per_episode)), ""
        if arg == "max":
            return float(max(per_episode)), ""
        return round(sum(per_episode) / len(per_episode), 4), ""
    if kind == "infra_rate":
        return _ratio(totals.infra_failures, totals.attempts), ""
    if kind == "infra_failures":
        return float(totals.infra_failures), ""
    if kind == "agent_errors":
        count = totals.agent_errors.get(arg, 0) if arg else totals.agent_errors_total
        return float(count), ""
    if kind == "conversation":
        return conversation_value(summary.conversation, arg or "")
    raise AssertionError(f"unknown figure kind {kind}")


def cost_value(found: CostFigures | None, arg: str) -> tuple[float | None, str]:
    """A cost figure (``arg``: ``total``, ``per_episode.p90``, ``judge.total``,
    ``per_pass``) of summary.json's ``cost``, and why it fails whatever its value: no
    cost at all (a run made before bat priced episodes), or a figure that leaves out
    unpriced parts (a lower bound only)."""
    if found is None:
        return None, (
            "no episode of the tasks chosen has a cost (a run made before bat priced "
            "episodes: run it again to gate on cost)"
        )
    if arg == "per_pass":
        value = found.per_pass
        why = "" if value is not None else "no attempt passed: there is no cost per pass"
    elif arg == "judge.total":
        value, why = found.judge, ""
    elif arg == "total":
        value, why = found.total, ""
    else:
        value, why = getattr(found.per_episode, arg.removeprefix("per_episode.")), ""
    if not known(found):
        return None, (
            f"no cost is known: {', '.join(found.unpriced)} had no price; set prices: in "
            "eval.yaml for them"
        )
    if found.unpriced_episodes and not why:
        why = (
            f"{money(value, found.currency)} is only a lower bound: "
            f"{counted(found.unpriced_episodes, 'episode')} of {found.episodes} have parts "
            f"with no price ({', '.join(found.unpriced)}); set prices: in eval.yaml for them"
        )
    return value, why


def conversation_value(found: ConversationFigures | None, arg: str) -> tuple[float | None, str]:
    """A figure of the conversations with a simulated user (``arg``: ``pass_hat_3``,
    ``turns.p90``, ``goal_met``...), and why it is None when it is."""
    if found is None:
        return None, "no conversation with a simulated user in the tasks chosen (no task has user:)"
    if not found.conversations and not arg.startswith("user_tokens."):
        return None, f"every conversation was an infrastructure failure ({found.infra_failures})"
    if arg == "pass_rate":
        return found.pass_rate, ""
    if arg in found.ended_rate:
        return found.ended_rate[arg], ""
    part, _, which = arg.partition(".")
    if part == "turns":
        return getattr(found.turns, which), ""
    if part == "user_tokens":
        total = found.user_tokens.total_tokens
        episodes = found.conversations + found.infra_failures
        return float(total) if which == "total" else round(total / episodes, 4), ""
    kind, _, k = arg.rpartition("_")  # pass_at_3, pass_hat_k
    if k == "k":
        return (found.pass_at_k if kind == "pass_at" else found.pass_hat_k), ""
    value = (found.pass_at if kind == "pass_at" else found.pass_hat).get(k)
    if value is None:
        longest = max((int(j) for j in found.pass_at), default=0)
        return None, (
            f"conversation.{arg} needs {k} judged conversations of a task; the most here is "
            f"{longest}"
        )
    return value, ""


def _baseline(
    spec: GateSpec,
    run_dir: Path,
    results: Results,
    output_dir: Path,
) -> list[GateResult]:
    """Each model against the same model of the baseline run (a lone model against a lone
    model whatever their labels): McNemar's exact test on the tasks that flipped, and the
    drop of the pass rate."""
    from bat.evaluation.present.compare import compare, regression

    base_dir = rundir.find_run(output_dir, spec.baseline)
    theirs = {folder.name: folder for folder in store.summarized_models(base_dir)}
    ours = {folder.name: folder for folder in store.summarized_models(run_dir)}
    labels = {folder.name: label for folder, label in _labels(run_dir)}
    answers = []
    common = {
        "name": spec.title,
        "kind": "baseline",
        "figure": "pass_rate drop",
        "op": "<=",
        "threshold": spec.max_drop,
    }
    if len(theirs) == 1 and len(ours) == 1:
        pairs = [(next(iter(ours)), next(iter(theirs)))]
    else:
        pairs = [(name, name) for name in ours]
    for mine, other in pairs:
        label = labels.get(mine, mine)
        if other not in theirs:
            why = f"the baseline {base_dir.name} has no model {other!r}"
            answers.append(GateResult(**common, model=label, passed=False, detail=why))
            continue
        try:
            result = compare(theirs[other], ours[mine])
        except InputError as exc:  # a summary that cannot be read fails, never passes
            why = f"against {base_dir.name}: cannot be compared: {exc.message}"
            answers.append(GateResult(**common, model=label, passed=False, detail=why))
            continue
        drop, regressed, why = regression(result, alpha=spec.alpha, max_drop=spec.max_drop)
        answers.append(
            GateResult(
                **common,
                model=label,
                value=drop if math.isfinite(drop) else None,
                passed=not regressed,
                detail=f"against {base_dir.name}: {why}",
            )
        )
    if not ours:
        answers.append(
            GateResult(**common, model="all", passed=False, detail="no model has results")
        )
    return answers


def _labels(run_dir: Path) -> list[tuple[Path, str]]:
    record = rundir.read_run(run_dir)
    return list(zip(rundir.model_dirs(run_dir), (m.label for m in record.models), strict=True))


def trust_problems(
    run_dir: Path, max_infra_failures: int, infra: store.InfraCache | None = None
) -> list[str]:
    """Why a run's numbers are not to be trusted (empty: they are): a model that could
    not be evaluated (or that the run's cost budget stopped), planned episodes missing
    (``eval.merge --partial``), or more infrastructure failures than
    ``max_infra_failures`` (``infra``: what the stages before counted, while the
    episodes are unchanged)."""
    record = rundir.read_run(run_dir)
    problems = []
    for model in record.models:
        if model.status == "failed":  # its reason, then the end of the log it names
            problems.append(f"{model.label} could not be evaluated: {model.reason}")
            problems += [f"  | {line}" for line in model.log_tail[-rundir.TAIL_SHOWN :]]
        elif model.status == "stopped":  # the run's budget: its missing episodes run later
            problems.append(
                f"{model.label}: {model.reason} (finish the run with a higher budget: "
                f"bat eval.run --resume {run_dir.name} --max-cost Y)"
            )
    if record.missing_episodes:  # eval.merge --partial
        problems.append(
            f"{counted(len(record.missing_episodes), 'planned episode')} missing "
            f"(merged with --partial): {', '.join(record.missing_episodes[:3])}"
            + (" …" if len(record.missing_episodes) > 3 else "")
        )
    counts = {
        model.label: len(store.infra_failures(folder, infra))
        for model, folder in zip(record.models, rundir.model_dirs(run_dir), strict=True)
    }
    total = sum(counts.values())
    if total > max_infra_failures:
        budget = (
            f"over the budget of {max_infra_failures}" if max_infra_failures else "none allowed"
        )
        for model, folder in zip(record.models, rundir.model_dirs(run_dir), strict=True):
            count = counts[model.label]
            if count:
                problems.append(
                    f"{model.label}: {counted(count, 'infrastructure failure')}, {budget} "
                    f"(run them again: bat eval.run --resume {run_dir.name} --retry-infra)"
                    + credential_note(model, folder, store.infra_failures(folder, infra))
                )
    return problems


def credential_note(model: ModelEntry, folder: Path, keys: set[tuple[str, int]]) -> str:
    """What of a model's infrastructure failures the model's credentials caused, and the
    variable to set: "; 24 authentication_failed: is OPENAI_API_KEY set and valid?"."""
    kinds: dict[str, int] = {}
    for stem, attempt in sorted(keys):
        try:
            episode = store.read_episode(layout.episode_path(folder, stem, attempt))
        except (OSError, BatError):
            continue
        kind = episode_outcome(episode).infra
        if kind in CREDENTIAL_KINDS:
            kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return ""
    said = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    variable = model.key_env or "the model's API key"
    if "authentication_failed" in kinds:
        return f"; {said}: is {variable} set and valid where the agent runs?"
    return f"; {said}: the quota or rate limit of {variable} was reached"


def table(gates: GatesFile) -> str:
    """The gates as the terminal shows them: one line each, ✓ or ✗, value and threshold
    (why one failed is the error's to say: ``GateFailed`` lists each)."""
    rows = [("", "gate", "model", "value", "threshold")]
    for gate in gates.gates:
        value, threshold = gate_value(gate), wanted(gate.op, gate.threshold)
        rows.append(("✓" if gate.passed else "✗", gate.name, gate.model, value, threshold))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    verdict = (
        "every gate passed"
        if gates.passed
        else f"{len(gates.failed)} of {counted(len(gates.gates), 'gate')} failed"
    )
    return "\n".join([*lines, verdict])


def wanted(op: str, threshold: float | None) -> str:
    """What a gate's value had to be, as its tables and messages show it: ``>= 0.8``;
    a baseline gate without a drop allowed, "no regression"."""
    return "no regression" if threshold is None else f"{op} {number(threshold)}"


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None
