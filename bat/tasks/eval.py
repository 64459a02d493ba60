"""``bat eval``: evaluate an agent over A2A (``eval.init``, ``eval.show``, ``eval.run``, ...).

``eval.schema`` prints the JSON Schema of eval.yaml, tasks.json or an episode file.

``eval.run`` is a chain of stages, each also a task of its own that works on an existing
run directory (default: the latest): the run itself (agent start-up and episodes, per
model) -> ``eval.judge`` -> ``eval.summarize`` -> ``eval.plot``, and last ``conclude``,
which turns an incomplete run into exit status 3.

The stages of one command line share one run context (``bat.evaluation.context``, kept
in the Invoke configuration by ``bat.tasks._chain``): eval.yaml read once, its secrets,
the run folder, and what each stage tells the next (the command line's gates and
exports, a dry run, the numbers' trust problems, the gates that failed). A stage run
alone makes its own.

Every stage that works on one run resolves it the same way (:func:`_stage_run`:
``--run``, else the run an earlier stage of this command line worked on, else the
latest) and records it in the context for the stages chained after it: ``bat
eval.judge --run OLD`` summarizes OLD, not the latest run. ``eval.plot`` charts every
run under the output folder (or ``--folder``) instead. The stages after ``eval.run``
(``stage=True``) do nothing after ``eval.run --dry-run``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from invoke import Collection, Context, task

from bat.figures import counted
from bat.tasks._chain import run_context
from bat.tasks._options import BatTask, command, setting

if TYPE_CHECKING:
    from bat.evaluation.context import RunContext

DEFAULTS = {"file": "eval/eval.yaml", "image": None, "charts": True}


def context(c: Context) -> RunContext:
    """This command line's evaluation run context, made by its first evaluation stage.

    For a project's own task chained after ``eval.run`` (docs/reuse.md): ``run_dir`` is
    the run its stages worked on, ``untrusted`` why its numbers are incomplete, and
    ``gates_failed`` the gates that did not hold (``conclude`` turns those into exit
    statuses); ``resolved`` is eval.yaml as read.
    """
    ctx = run_context(c, setting(c, None, "eval.file", DEFAULTS["file"]))
    if ctx.team_prices is None:
        ctx.team_prices = _team_prices(c)
    return ctx


def _team_prices(c: Context) -> Any:
    """bat.yaml's ``eval.prices`` (the layers merged model by model), or None."""
    from bat.evaluation.inputs.prices import team_prices

    return team_prices(c.config.get("eval", {}).get("prices"))


def _config(c: Context):
    return context(c).resolved


def _stage_run(c: Context, run: str | None, *, batcli: bool = False):
    """The run a stage works on, recorded for the stages chained after it.

    ``--run``, else the run an earlier stage of this command line worked on (the run
    context's), else the latest. With ``batcli``, a run folder of bat-cli 2026.10 (no
    run.json) is taken too.
    """
    from pathlib import Path

    from bat.errors import InputError
    from bat.evaluation.log import batcli as batcli_files
    from bat.evaluation.log import layout
    from bat.evaluation.log.run import find_run

    ctx = context(c)
    if run:
        _check_run(run, "--run")
    chosen = run or (str(ctx.run_dir) if ctx.run_dir else None)
    found = None
    if chosen and layout.is_run_folder(Path(chosen)):
        found = Path(chosen)
    elif chosen and batcli_files.model_folders(Path(chosen)):  # a path: no eval.yaml needed
        if not batcli:
            raise InputError(
                f"{chosen} is a bat-cli 2026.10 run folder: this stage works on bat's runs "
                "(eval.plot, eval.compare, eval.export, eval.verdict and eval.view read it)"
            )
        found = Path(chosen)
    else:
        try:
            output_dir = _config(c).output_dir
        except InputError:
            # A run named by a path that holds none, where no eval.yaml could name one by
            # its id: the path is what is wrong, not the missing eval.yaml.
            no_config = ctx.config_file is not None and not ctx.config_file.exists()
            if chosen and no_config and ("/" in chosen or Path(chosen).exists()):
                raise InputError(
                    f"{chosen}: not a run folder (no run.json, nor bat-cli's model folders)"
                ) from None
            raise
        if chosen and batcli:
            found = next(
                (p for p in (Path(chosen), output_dir / chosen) if batcli_files.model_folders(p)),
                None,
            )
        if found is None and batcli and not chosen:
            _no_latest_but_batcli(output_dir)
        found = found or find_run(output_dir, chosen)
    ctx.run_dir = Path(found)
    return ctx.run_dir


def _no_latest_but_batcli(output_dir) -> None:
    """Without a run of bat's under ``output_dir``, bat-cli's run folders there are named
    (which is "the latest" between two formats is not bat's to guess)."""
    from bat.errors import InputError
    from bat.evaluation.log import batcli as batcli_files
    from bat.evaluation.log.layout import RUN_FILE

    if not output_dir.is_dir() or any(output_dir.glob(f"*/{RUN_FILE}")):
        return
    theirs = sorted(p.name for p in output_dir.iterdir() if batcli_files.model_folders(p))
    if theirs:
        raise InputError(
            f"no runs of bat's in {output_dir}, but bat-cli run folders: {', '.join(theirs[:5])}"
            f" — name one with --run (e.g. --run {theirs[-1]})"
        )


@contextmanager
def _stage(doing: str, kept: str, again: str) -> Iterator[None]:
    """Ctrl-C during a stage: exit 130 with one line saying what is kept and what finishes
    the job (every file is written atomically, so what was finished is whole)."""
    from bat.errors import Interrupted

    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while {doing}: {kept}; {again}") from None


@command(short={"force": "f"}, help={"force": "Overwrite existing eval files."})
def init(c: Context, force: bool = False) -> None:
    """Write eval/eval.yaml (and its schema), an example eval/input/tasks.json, eval/output/."""
    from pathlib import Path

    from bat.evaluation.inputs.starter import init_eval

    for path in init_eval(Path("."), force=force):
        print(f"Wrote {path}{'/' if path.is_dir() else ''}")
    print("Next: edit eval/input/tasks.json, check with bat eval.show, then bat eval.run")


@command(
    positional=["name"],
    optional_positional=True,
    help={"name": "eval.yaml, tasks.json or episode (none: list the names)."},
)
def schema(c: Context, name: str | None = None) -> None:
    """Print the JSON Schema of one of bat's files (without NAME: list them)."""
    from bat.errors import InputError
    from bat.evaluation.inputs.schemas import SCHEMAS, schema_text

    if not name:
        width = max(map(len, SCHEMAS))
        for key, entry in SCHEMAS.items():
            print(f"{key:<{width}}  {entry.description}")
        return
    if name not in SCHEMAS:
        raise InputError(f"no schema named {name[:60]!r} (names: {', '.join(SCHEMAS)})")
    print(schema_text(name), end="")


@command(help={"json": "Print the resolved configuration as JSON, for scripts."})
def show(c: Context, json: bool = False) -> None:
    """Print the fully resolved evaluation configuration (and check the dataset)."""

    from bat.evaluation.inputs.dataset import check_dataset
    from bat.evaluation.present.show import describe, warnings_of

    ctx = context(c)
    resolved = ctx.resolved
    # Once: a large one takes seconds. Then the checks eval.run makes (refusals too).
    dataset = check_dataset(resolved.dataset, unknown_keys=resolved.unknown_keys)
    warnings = warnings_of(resolved, dataset)
    print(describe(resolved, as_json=json, dataset=dataset, team_prices=ctx.team_prices))
    for warning in warnings:
        context(c).warn(warning)


@command(
    optional=["resume", "image"],
    iterable=["task", "tag", "exclude_tag", "gate", "export"],
    leading="agent",  # `bat eval run weather`, bat-cli's spelling
    help={
        "agent": "AGENT (or a bare word after the command): evaluate the agent in the "
        "folder of that name (./AGENT, agents/AGENT, or below) of a blueprint repository.",
        "resume": "Run only the episodes missing from RUN (default: the latest run).",
        "retry_infra": "Also run again the episodes that failed for infrastructure reasons "
        "(of RUN, or of the latest run); earlier records are kept in <model>/retried/.",
        "task": "Run only the tasks whose id matches this glob (repeatable: any of them).",
        "tag": "Run only the tasks with this tag (repeatable: all of them).",
        "exclude_tag": "Leave out the tasks with this tag (repeatable).",
        "limit": "Run only the first N tasks chosen.",
        "dry_run": "Check everything and print the plan and its cost estimate (from the "
        "last run's cost per episode); start and write nothing.",
        "max_cost": "The run's budget, in its prices' currency (over evaluation.max_cost): "
        "no new episode starts once the cost spent and in flight reach it (exit 3; "
        "--resume with a higher one finishes the run).",
        "gate": "A gate, 'FIGURE OP NUMBER' (repeatable), beside eval.yaml's gates.",
        "baseline": "Gate on no significant regression against this run.",
        "max_drop": "With --baseline: the largest pass-rate drop allowed, a fraction (0.05 = "
        "5 points). No default: without it a drop too small a sample cannot judge fails.",
        "export": "NAME:PATH, repeatable: export the run at its end (as eval.export --to; "
        "checked before the agent starts; PATH - is standard output).",
        "view": "Serve the viewer (eval.view) beside the run and print its URL; it stops "
        "when the run ends.",
        "view_port": "With --view: the viewer's port (default 8765, or a free one).",
        "shard": "Run slice I of N of the episodes (I/N; auto: GitLab's CI_NODE_INDEX/"
        "CI_NODE_TOTAL; auto/N: a Kubernetes Indexed Job's JOB_COMPLETION_INDEX); "
        "bat eval.merge puts the slices together.",
        "image": "Start the agent from image REF on the Docker engine (default: the image "
        "bat build built earlier on this command line, else the last one it built here); "
        "evaluation.agent.replicas containers share the episodes.",
    },
)
def run(
    c: Context,
    resume: str | None = None,
    retry_infra: bool = False,
    task: list[str] | None = None,
    tag: list[str] | None = None,
    exclude_tag: list[str] | None = None,
    limit: str | None = None,
    dry_run: bool = False,
    gate: list[str] | None = None,
    baseline: str | None = None,
    max_drop: str | None = None,
    export: list[str] | None = None,
    view: bool = False,
    view_port: str | None = None,
    shard: str | None = None,
    image: str | bool | None = None,
    agent: str | None = None,
    max_cost: str | None = None,
) -> None:
    """Run the dataset k times per model against the live agent, then judge, summarize, gate.

    Chain: start the agent (per model; restarted if it dies) -> episodes -> stop it ->
    eval.judge -> eval.summarize -> eval.gate -> eval.plot -> eval.export -> conclude.
    Each episode is written to the run directory as it ends; Ctrl-C keeps them, and
    --resume finishes the run. Exit status 1 when a gate failed, 3 when the numbers are incomplete
    (infrastructure failures over the budget, a model could not be evaluated, or the cost
    budget --max-cost stopped the run).
    """
    from bat.evaluation.inputs.gate_specs import command_line_gates
    from bat.evaluation.inputs.selection import Selection
    from bat.evaluation.inputs.shards import Shard
    from bat.evaluation.pipeline import run_evaluation
    from bat.evaluation.present.export import check_targets

    if agent:
        _enter_agent(c, agent)
    if isinstance(resume, str) and resume:
        _check_run(resume, "--resume")
    if baseline:
        _check_run(baseline, "--baseline")
    selection = Selection.of(task, tag, exclude_tag, _number(limit, "--limit", int))
    cli_gates = command_line_gates(gate or [], baseline, _number(max_drop, "--max-drop"))
    sliced = Shard.parse(shard) if shard is not None else None
    budget = _max_cost(max_cost)
    ctx = context(c)
    image = setting(c, image, "eval.image", None)  # eval.image: a chain's way to set it
    if image not in (None, False):  # --image alone is True: the image bat build made
        ctx.with_image(image if isinstance(image, str) and image else _built_image(c))
    resolved = ctx.resolved
    # A bad one (unknown name, a device, an input) before any agent starts or episode runs.
    checked = check_targets(export or [], inputs=_inputs(ctx), flag="--export")
    exports = [target for target, _ in checked]
    if dry_run:
        from bat.evaluation.present.show import plan

        ctx.dry_run = True
        gates = [*resolved.config.gates, *cli_gates]
        text, warnings = plan(
            resolved,
            selection,
            gates,
            sliced,
            extra=_estimate(ctx, budget),
            team_prices=ctx.team_prices,
        )
        for warning in warnings:
            ctx.warn(warning)
        print(text)
        return
    ctx.cli_gates = list(cli_gates)
    ctx.exports = [target.label for target in exports]
    if view:
        from bat.evaluation.present.view.server import serve_beside

        ctx.viewer = serve_beside(
            resolved.output_dir,
            _number(view_port, "--view-port", int),
            announce=lambda line: print(line, flush=True),
        )
    try:
        report = run_evaluation(
            ctx,
            resume=resume if resume not in ("", None) else None,
            retry_infra=retry_infra,
            selection=selection,
            shard=sliced,
            max_cost=budget,
        )
    except BaseException:
        ctx.stop_viewer()
        raise
    ctx.run_dir = report.run_dir
    ctx.untrusted = report.untrusted
    ctx.chained = True


def _max_cost(text: str | None) -> float | None:
    """``--max-cost``'s amount (None: not given); a bad one is one line, exit 2."""
    from bat.errors import UsageError
    from bat.evaluation.inputs.budget import parse_max_cost

    if text is None:
        return None
    try:
        return parse_max_cost(str(text))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _estimate(ctx, flag: float | None):
    """The dry run's cost lines, for the tasks it would run (``present.show.plan``)."""
    from bat.evaluation.budgeting import dry_run_lines

    return lambda tasks: dry_run_lines(ctx, flag, tasks)


def _enter_agent(c: Context, name: str) -> None:
    """``bat eval run AGENT``: work from the agent's folder for the rest of this command
    line, as ``cd FOLDER && bat eval.run`` would (the chained stages too)."""
    import os
    from pathlib import Path

    from bat.errors import UsageError
    from bat.evaluation.inputs.blueprint import agent_folder
    from bat.tasks._chain import chain_of

    state = chain_of(c.config)
    if state is not None and state.evaluation is not None:
        raise UsageError("AGENT must come with the first evaluation command of the line")
    eval_file = setting(c, None, "eval.file", DEFAULTS["file"])
    folder = agent_folder(name, Path.cwd(), eval_file)
    print(f"Agent {name}: {folder}")
    os.chdir(folder)


def _built_image(c: Context) -> str:
    """The image ``bat build`` built here: by a build earlier on this command line (``bat
    build --version 2 eval.run --image``, its flags), else the last one recorded in the
    context (``bat.images.last_build``), else the tag a build would give now (said)."""
    import sys

    from bat.images.last_build import image_to_evaluate
    from bat.tasks._chain import chain
    from bat.tasks.images import _target
    from bat.terminal import safe

    target = _target(c, {}, require_registry=False)
    if chain(c).images_built:
        return target.settings.ref
    choice = image_to_evaluate(target.settings)
    # Printed as it is: image references and dates, no secret of eval.yaml (and the
    # scrubber is not made before eval.yaml is read with the image).
    if choice.recorded:
        print(safe(choice.note))
    else:
        print(f"warning: {safe(choice.note)}", file=sys.stderr)
    return choice.ref


@task(klass=BatTask)
def conclude(c: Context) -> None:
    """The last stage of eval.run: exit 3 when its numbers are incomplete, 1 when a gate
    failed."""
    from bat.errors import GateFailed, IncompleteRun

    ctx = context(c)
    ctx.stop_viewer()  # the viewer of --view, if any: the run's chain ends here
    if ctx.dry_run:
        return
    if ctx.untrusted:
        raise IncompleteRun("the run's numbers are incomplete", details=ctx.untrusted)
    failed = ctx.gates_failed
    if failed:
        raise GateFailed(f"{counted(len(failed), 'gate')} failed", details=failed)


@command(
    stage=True,
    iterable=["gate"],
    help={
        "run": "Run directory or run id (default: the latest run); a directory needs no "
        "eval.yaml (the gates the run ran with are read from its run.json).",
        "gate": "A gate, 'FIGURE OP NUMBER' (repeatable), beside eval.yaml's gates.",
        "baseline": "Gate on no significant regression against this run.",
        "max_drop": "With --baseline: the largest pass-rate drop allowed, a fraction (0.05 = "
        "5 points). No default: without it a drop too small a sample cannot judge fails.",
        "save": "Record the answer as the run's gates: write gates.json and redraw the "
        "report beside the run (without it, nothing is written).",
    },
)
def gate(
    c: Context,
    run: str | None = None,
    gate: list[str] | None = None,
    baseline: str | None = None,
    max_drop: str | None = None,
    save: bool = False,
) -> None:
    """Check a run against gates (eval.yaml's gates: and --gate): a what-if, or --save.

    Prints the table and exits 1 when a gate failed, 3 when the run's numbers cannot be
    trusted (infrastructure failures over evaluation.max_infra_failures, a model not
    evaluated). A run's gates are those it ran with: this writes nothing unless --save,
    which replaces the run's gates.json and redraws the report beside it together.
    Without any gate, nothing is checked and nothing is written.
    """
    from bat.errors import GateFailed, IncompleteRun
    from bat.evaluation.inputs.gate_specs import command_line_gates
    from bat.evaluation.pipeline import gate_stage
    from bat.evaluation.present.gate_inputs import gate_inputs
    from bat.evaluation.present.gates import trust_problems

    if baseline:
        _check_run(baseline, "--baseline")
    ctx = context(c)
    if ctx.chained:  # the flags of eval.run (or eval.merge) reach this stage in the context
        specs = ctx.cli_gates
    else:
        specs = command_line_gates(gate or [], baseline, _number(max_drop, "--max-drop"))
    run_dir = _stage_run(c, run)
    record = ctx.chained or save  # a chain records the gates its run ran with
    result = gate_stage(ctx, run_dir, specs, save=record)
    failed = [f"{g.name} [{g.model}]: {g.detail}" for g in (result.failed if result else [])]
    if ctx.chained:
        ctx.gates_failed = failed  # conclude decides the exit status, last
        return
    if result is None and not specs and not gate_inputs(ctx, run_dir).specs:
        print(f"No gates to check on {run_dir.name}: add gates: to eval.yaml, or give --gate")
    if result is not None:
        print(
            f"Recorded in {run_dir.name}/gates.json"
            if save
            else f"A what-if: nothing recorded ({run_dir.name}'s gates are those it ran "
            "with; --save records these)"
        )
    budget = gate_inputs(ctx, run_dir).max_infra_failures
    untrusted = trust_problems(run_dir, budget, ctx.infra)
    if untrusted:
        raise IncompleteRun(f"{run_dir.name}: the numbers are incomplete", details=untrusted)
    if failed:
        raise GateFailed(f"{counted(len(failed), 'gate')} failed", details=failed)


@command(stage=True, help={"run": "Run directory or run id (default: the latest run)."})
def judge(c: Context, run: str | None = None) -> None:
    """Score every episode of a run with the LLM judge(s) of eval.yaml, then re-summarize.

    Needs evaluation.qualitative: true and a judge (with qualitative off, only the tasks
    with natural-language assertions are judged). Unchanged episodes are answered from
    the run's judge cache (no request), so re-judging after changing the judge model
    only asks about what changed.
    """
    from bat.evaluation.pipeline import judge_stage

    ctx = context(c)
    _config(c)  # eval.yaml is read (and refused) before a run is looked for
    run_dir = _stage_run(c, run)  # the summary and charts that follow: this run's
    ctx.chained = True  # its gates are checked by conclude, after the charts
    with _stage(
        f"judging {run_dir.name}",
        "every episode is kept, those judged so far with their scores",
        f"judge the rest with: bat eval.judge --run {run_dir.name}",
    ):
        judge_stage(ctx, run_dir)


@command(stage=True, help={"run": "Run directory or run id (default: the latest run)."})
def summarize(c: Context, run: str | None = None) -> None:
    """Write summary.json and metrics.json of a run from its episode files."""
    from bat.evaluation.pipeline import summarize_run

    run_dir = _stage_run(c, run)
    with _stage(
        f"summarizing {run_dir.name}",
        "every episode is kept",
        f"write the summaries with: bat eval.summarize --run {run_dir.name}",
    ):
        written = summarize_run(context(c), run_dir)
    print(f"Wrote {counted(len(written), 'file')} in {run_dir}")


@command(
    help={"run": "Run directory or run id (default: the latest run); or a bat-cli run folder."}
)
def verdict(c: Context, run: str | None = None) -> None:
    """Re-check every episode of a run against the dataset's current expectations."""
    from bat.evaluation.inputs.dataset import load_dataset
    from bat.evaluation.pipeline import recheck_run

    ctx = context(c)
    run_dir = _stage_run(c, run, batcli=True)
    path, unknown_keys = _dataset_of(ctx, run_dir)
    recheck_run(ctx, run_dir, load_dataset(path, unknown_keys=unknown_keys))


def _dataset_of(ctx: RunContext, run_dir):
    """The dataset a stage re-reads, and what its unknown keys do: eval.yaml's; without
    an eval.yaml here (``--run DIR`` from anywhere), the one the run recorded in run.json,
    as ``eval.gate`` and ``eval.export`` read the run's own record. A broken eval.yaml is
    an error, never silently replaced by the record."""
    from pathlib import Path

    from bat.errors import InputError
    from bat.evaluation.log import layout
    from bat.evaluation.log.run import read_run

    try:
        return ctx.resolved.dataset, ctx.resolved.unknown_keys
    except InputError:
        if ctx.config_file is None or ctx.config_file.exists():
            raise
        if not layout.is_run_folder(run_dir):
            raise
        record = read_run(run_dir)
        if not record.dataset:
            raise
    compat = record.config.get("compat") if isinstance(record.config, dict) else None
    warn = isinstance(compat, dict) and compat.get("unknown_keys") == "warn"
    return Path(record.dataset), "warn" if warn else "refuse"


@command(
    stage=True,
    short={"folder": "f", "filter": "F"},
    help={
        "folder": "Folder whose sub-folders holding a metrics.json are runs (default: output_dir).",
        "filter": "Only these tasks in per-task charts and tables: a glob, or a task id "
        "(a word naming no task: every id holding it).",
    },
)
def plot(c: Context, folder: str | None = None, filter: str | None = None) -> None:
    """Charts (PNG and SVG) and report.html of every run under a folder, written into it.

    Every folder holding a metrics.json under --folder (default: the evaluation's
    output_dir) is one run; one that cannot be read is left out with a warning. Charts:
    pass rate with 95 % intervals, task × run heatmap, pass^k against k, latency,
    tokens, judge scores (when a run has them).
    """
    from pathlib import Path

    from bat.evaluation.present.plot.render import plot_folder

    ctx = context(c)
    if ctx.chained and not setting(c, None, "eval.charts", True):
        return  # eval.charts: false — a CI job that only gates draws nothing
    with _stage(
        "drawing the charts and report",
        "every episode and summary is kept",
        "draw them with: bat eval.plot" + (f" --folder {folder}" if folder else ""),
    ):
        chained = ctx.plot_folder  # eval.merge -o DIR
        base = Path(folder or chained) if folder or chained else ctx.resolved.output_dir
        result = plot_folder(base, filter or None, scrubber=ctx.scrubber)
    print(f"{counted(len(result.runs), 'run')} in {base}")
    for path in result.removed:
        print(f"Removed {path} (no longer drawn)")
    for note in result.notes:
        print(note)
    if result.renderer is not None:  # the report is still written, without those charts
        ctx.warn(f"charts skipped: {result.renderer}")
    for problem in result.unusable:
        ctx.warn(f"left out of the charts and report: {problem}")
    for path in result.written:
        print(f"Wrote {path}")


@command(
    help={
        "a": "First side: a run (id or directory), RUN:MODEL, or a model folder.",
        "b": "Second side, the same way.",
        "json": "Print the comparison as JSON, for scripts.",
        "fail_on_regression": "Exit 1 when B regressed from A: McNemar's p < 0.05 with "
        "more tasks regressed than improved, a drop over --max-drop, or (without "
        "--max-drop) a drop too few tasks flipped to judge.",
        "max_drop": "With --fail-on-regression: the largest pass-rate drop allowed, a "
        "fraction (0.05 = 5 points). No default.",
    },
)
def compare(
    c: Context,
    a: str,
    b: str,
    json: bool = False,
    fail_on_regression: bool = False,
    max_drop: str | None = None,
) -> None:
    """Compare two runs or models: per-task pass-rate change, flipped tasks, McNemar's p,
    and the cost change beside the pass-rate change."""
    import json as json_module
    import sys

    from bat.errors import GateFailed, UsageError
    from bat.evaluation.inputs.gate_specs import checked_drop
    from bat.evaluation.present.compare import (
        cannot_tell_of,
        card_warnings,
        cost_warnings,
        drop_of,
        regression,
        render,
        resolve_side,
    )
    from bat.evaluation.present.compare import compare as compare_sides

    _check_run(a, "-a")
    _check_run(b, "-b")
    output_dir = _output_dir_or_cwd(c)
    drop_allowed = checked_drop(_number(max_drop, "--max-drop"))
    if drop_allowed is not None and not fail_on_regression:
        raise UsageError("--max-drop goes with --fail-on-regression")
    side_a, side_b = resolve_side(a, output_dir), resolve_side(b, output_dir)
    result = compare_sides(side_a, side_b)
    print(json_module.dumps(result, indent=2) if json else render(result))
    if not json and drop_of(result) > 0 and (note := cannot_tell_of(result)):
        print(f"Whether B regressed: {note}")  # "not significant" would say too much
    for line in card_warnings(side_a, side_b):  # what makes the two not comparable
        print(f"warning: {line}", file=sys.stderr)
    for line in cost_warnings(result):  # costs in two currencies, or one side without
        print(f"warning: {line}", file=sys.stderr)
    if fail_on_regression:
        _, regressed, why = regression(result, max_drop=drop_allowed)
        if regressed:
            raise GateFailed(f"B regressed from A: {why}")


@command(
    stage=True,
    variadic=True,  # `bat eval.merge A B C` means `bat eval.merge A,B,C`
    short={"output": "o"},
    iterable=["gate"],
    help={
        "runs": "The shards' run folders (or run ids under output_dir), one for each slice.",
        "output": "The folder to write the merged run into (default: output_dir).",
        "gate": "A gate, 'FIGURE OP NUMBER' (repeatable), beside eval.yaml's gates.",
        "partial": "Merge even with planned episodes missing; run.json then says partial.",
    },
)
def merge(
    c: Context,
    runs: str,
    output: str | None = None,
    gate: list[str] | None = None,
    partial: bool = False,
) -> None:
    """Put the shards of a run (eval.run --shard I/N) back together into one run folder.

    The shards must be one plan's slices, each once, of the same dataset, eval.yaml and
    versions, holding every planned episode of their slice and nothing else (else one
    line says what does not fit, and nothing is written). --partial merges a run with
    episodes missing, marked partial (its numbers are incomplete: exit 3). The merged
    run is then summarized, gated and plotted as after eval.run (its post tasks), with
    eval.run's exit statuses.
    """
    from pathlib import Path

    from bat.errors import UsageError
    from bat.evaluation.inputs.gate_specs import command_line_gates
    from bat.evaluation.log import run as rundir
    from bat.evaluation.merge import merge as merge_runs
    from bat.evaluation.present.gates import trust_problems

    references = [part for part in runs.split(",") if part.strip()]
    if not references:
        raise UsageError("eval.merge needs the shards' run folders: bat eval.merge RUN...")
    cli_gates = command_line_gates(gate or [], None, None)  # a bad one before any write
    folders = [_shard_folder(c, reference) for reference in references]
    ctx = context(c)
    target = Path(output) if output else ctx.resolved.output_dir
    merged = merge_runs(folders, target, ctx.scrubber, partial=partial, warn=ctx.warn)
    print(f"Merged {counted(len(folders), 'shard')} into {merged}")
    ctx.plot_folder = target
    ctx.cli_gates = list(cli_gates)
    ctx.run_dir = merged
    # the budget the shards ran with (the merge job may have no eval.yaml of its own)
    config = rundir.read_run(merged).config.get("evaluation", {})
    budget = int(config.get("max_infra_failures", 0))
    ctx.untrusted = trust_problems(merged, budget, ctx.infra)
    ctx.chained = True


def _shard_folder(c: Context, reference: str):
    """A shard named by its folder, else by its run id under output_dir."""
    from pathlib import Path

    from bat.evaluation.log import layout
    from bat.evaluation.log import run as rundir

    _check_run(reference, "eval.merge")
    if layout.is_run_folder(Path(reference)):
        return Path(reference)
    return rundir.find_run(_config(c).output_dir, reference)


def _number(value: str | None, flag: str, kind: type = float):
    """A flag's number (Invoke gives text for a flag whose default is None)."""
    from bat.errors import UsageError

    if value is None or value == "":
        return None
    try:
        return kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise UsageError(f"{flag} {str(value)[:40]!r}: give {what}") from None


@command(
    stage=True,
    iterable=["to"],
    help={
        "run": "Run directory or run id (default: the latest run).",
        "to": "NAME:PATH, repeatable: junit, csv, markdown, json, or a plugin's exporter "
        "(PATH: a regular file, or - for standard output).",
    },
)
def export(c: Context, run: str | None = None, to: list[str] | None = None) -> None:
    """Export a run for other tools: --to junit:report.xml --to markdown:summary.md ...

    One file per --to (parent folders made; - is standard output). A device, a link,
    a file of a run or one of bat's inputs is refused. Markdown is also appended to
    $GITHUB_STEP_SUMMARY when that is set. More formats come from plugins (the
    'bat.exporters' entry-point group): see docs/exporters.md.
    """
    from bat.evaluation.present.export import export_run, parse_target

    ctx = context(c)
    if ctx.chained and not to:  # after eval.run: its --export values, if any
        to = ctx.exports
        if not to:
            return
    targets = [parse_target(spec) for spec in to or []]  # a bad --to before any run is read
    export_run(_stage_run(c, run, batcli=True), targets, inputs=_inputs(ctx))


def _inputs(ctx: RunContext) -> list:
    """The project's input files an export must not replace: eval.yaml and what it
    names once it can be read (an export of ``--run`` works without it)."""
    from bat.errors import InputError
    from bat.evaluation.present.export.targets import project_inputs

    try:
        resolved = ctx.resolved
    except InputError:
        resolved = None
    return project_inputs(ctx.config_file, resolved)


@command(
    short={"folder": "f"},
    help={
        "folder": "Folder whose sub-folders are runs (default: the evaluation's output_dir).",
        "port": "Port to serve on (default 8765; 0: any free port).",
        "host": "Address to listen on (default 127.0.0.1; any other needs a token).",
        "token": "Token every request must carry (made and printed when --host is not "
        "loopback and none is given).",
        "open": "Open the viewer in the browser.",
    },
)
def view(
    c: Context,
    folder: str | None = None,
    port: str | None = None,
    host: str | None = None,
    token: str | None = None,
    open: bool = False,
) -> None:
    """Watch runs live and explore their episodes in the browser (reads only).

    Serves every run under --folder: the runs page, each run's task × attempt grid
    (filled live as episodes end, over Server-Sent Events) and each episode's turns,
    events, tool calls, verdict and judge scores. Ctrl-C stops it. See docs/view.md.
    """
    from pathlib import Path

    from bat.evaluation.present.view.server import DEFAULT_HOST, DEFAULT_PORT, listen, serve

    base = Path(folder) if folder else _output_dir_or_cwd(c)
    base = _runs_folder(base)
    chosen = _number(port, "--port", int)
    listening = listen(host or DEFAULT_HOST, DEFAULT_PORT if chosen is None else chosen, token)
    serve(base, listening, open_browser=open, announce=lambda line: print(line, flush=True))


def _runs_folder(base):
    """``--folder`` names the folder whose sub-folders are runs; given a run itself (bat's
    or bat-cli's, as ``--run DIR`` takes it), the folder holding it is served."""
    from bat.evaluation.log import batcli, layout

    if layout.is_run_folder(base) or batcli.is_run_folder(base):
        print(f"{base} is a run: serving the runs of {base.resolve().parent}")
        return base.resolve().parent
    return base


def _check_run(reference: str, source: str) -> None:
    from bat.scaffold.names import check_run_reference

    check_run_reference(reference, source)


def _output_dir_or_cwd(c: Context):
    """The evaluation's output_dir, or the current folder when there is no eval.yaml."""
    from pathlib import Path

    from bat.errors import InputError

    try:
        return _config(c).output_dir
    except InputError:
        return Path(".")


# Invoke runs each task once, where it first appears in the expanded chain: judge.post
# must hold the whole tail in order, or its own plot would come before eval.run's gate.
_AFTER_JUDGE = [summarize, gate, plot, export, conclude]
judge.post = list(_AFTER_JUDGE)
run.post = [judge, *_AFTER_JUDGE]
merge.post = list(_AFTER_JUDGE)

ns = Collection("eval")
for _task in (
    init,
    schema,
    show,
    run,
    merge,
    judge,
    summarize,
    gate,
    verdict,
    plot,
    compare,
    export,
):
    ns.add_task(_task)
ns.add_task(view)
ns.configure({"eval": dict(DEFAULTS)})

# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["compare", "context", "export", "gate", "init", "judge", "merge", "ns", "plot", "run"]
__all__ += ["schema", "show", "summarize", "verdict", "view"]
