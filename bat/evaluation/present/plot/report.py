"""``report.html``: one self-contained page of the runs ``bat eval.plot`` charted.

The page needs nothing but itself: the charts are inline (the SVG as a ``data:`` URI of
an ``<img>``, so the ids inside one chart cannot clash with another's and nothing in a
chart can run), the style sheet is inline, there is no script, and a Content Security
Policy forbids any load but ``data:`` images. The episode files are linked with
relative hrefs, so the folder can be moved or archived whole.

The page is the Jinja2 template ``templates/report.html.j2``, rendered with autoescape
on: every value put into it (task ids, outputs, verdict reasons, judge reasoning, model
names, run ids) is HTML-escaped, so a hostile ``<script>`` shows as text, and every
value first goes through the configuration's secret scrubber. The numbers are
metrics.json's and summary.json's (read through :class:`~bat.evaluation.present.plot.runs.Run`),
only formatted here; the episodes are the metrics rows joined with the episode files,
read by the log's one episode reader.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bat.atomic import write_text_atomic
from bat.errors import InputError
from bat.evaluation.log import batcli, layout, store
from bat.evaluation.log.episode import EpisodeResult
from bat.evaluation.log.outcome import EpisodeOutcome, episode_outcome, row_outcome
from bat.evaluation.log.scores import JudgeScores
from bat.evaluation.log.summary import EpisodeRow
from bat.evaluation.present.conversation import TABLE_HEADER, table_cells
from bat.evaluation.present.cost_view import figures_cells, nothing_priced
from bat.evaluation.present.plot.runs import Run, matches, task_order
from bat.evaluation.present.plot.specs import ChartSet
from bat.figures import MISSING, counted, integer, interval, money, percent, seconds
from bat.secrets import Scrubber

REPORT_FILE = "report.html"
TEMPLATE = "report.html.j2"
OUTPUT_PREVIEW_CHARS = 400
VACUOUS = "an empty answer, or only the status was checked: the pass proves little"
# A passed attempt the judge scored below this on some dimension is one where the
# deterministic checks and the judge disagree: the report opens its task and says so.
DOUBTED_BELOW = 0.5
# And the reverse: a failed attempt the judge scored this high or higher on every
# dimension (a check too strict, or a judge too lenient): the report says so too.
PRAISED_FROM = 0.8
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


@dataclass
class EpisodeView:
    """What the page shows of one episode (its row in metrics.json and its own file)."""

    task_id: str
    attempt: int
    passed: bool = False
    status: str = ""
    infra: str | None = None
    agent_error: str | None = None  # the kind, when the agent answered with an error
    vacuous: bool = False
    reason: str = ""
    output: str = ""
    judge: list[tuple[str, str, str]] = field(default_factory=list)  # dimension, score, why
    lowest_score: float | None = None  # the lowest judge score of any dimension
    href: str | None = None
    conversation: str = ""  # a simulated user's: how it ended, in how many user turns
    # the task's natural-language assertions as the judges decided them: (text, passed)
    assertions: list[tuple[str, bool | None]] = field(default_factory=list)

    @property
    def doubted(self) -> bool:
        """Passed its checks, yet the judge scored some dimension below DOUBTED_BELOW."""
        return self.passed and self.lowest_score is not None and self.lowest_score < DOUBTED_BELOW

    @property
    def praised(self) -> bool:
        """Failed (not for want of an observation), yet the judge scored every dimension
        PRAISED_FROM or higher: the checks and the judge disagree the other way."""
        failed = not self.passed and self.infra is None
        return failed and self.lowest_score is not None and self.lowest_score >= PRAISED_FROM


def write_report(
    folder: Path,
    runs: list[Run],
    chart_set: ChartSet,
    task_filter: str | None = None,
    *,
    scrubber: Scrubber,
    unreadable: list[str] | None = None,
) -> Path:
    """Write ``report.html`` into ``folder``; return its path. The episode files it could
    not read are appended to ``unreadable`` (the caller warns of them)."""
    path = Path(folder) / REPORT_FILE
    page = render_report(
        Path(folder), runs, chart_set, task_filter, scrubber=scrubber, told=unreadable
    )
    write_text_atomic(path, page)
    return path


def render_report(
    folder: Path,
    runs: list[Run],
    chart_set: ChartSet,
    task_filter: str | None = None,
    *,
    scrubber: Scrubber,
    told: list[str] | None = None,
) -> str:
    """The whole page as a string, every value printed without a secret of ``scrubber``;
    the episode files it could not read are appended to ``told`` too."""
    unreadable: list[str] = []
    episodes = {run.label: load_episodes(run, folder, unreadable) for run in runs}
    if told is not None:
        told.extend(unreadable)
    all_tasks = task_order(runs)
    tasks = [task_id for task_id in all_tasks if matches(task_id, task_filter, all_tasks)]
    total = sum(run.episodes for run in runs)
    passed = sum(run.passed for run in runs)
    page = {
        "csp": CSP,
        "title": folder.resolve().name,
        "folder": str(folder),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
        "cards": [
            _tile(len(runs), "run"),
            _tile(len(all_tasks), "task"),
            _tile(total, "episode"),
            ("passed", f"{passed} ({percent(passed / total if total else None)})"),
            _tile(sum(sum(run.agent_errors.values()) for run in runs), "agent error"),
            _tile(sum(run.infra_failures for run in runs), "infra failure"),
            _tile(sum(run.vacuous_passes for run in runs), "vacuous pass", "vacuous passes"),
        ],
        "task_filter": task_filter,
        "tasks_shown": len(tasks),
        "tasks_total": len(all_tasks),
        "runs_table": _runs_table(runs),
        "simulated_users": _simulated_users(runs, tasks),
        "gates": _gates(runs),
        "benchmark_cards": benchmark_cards(runs),
        "charts": [
            {
                "name": chart.name,
                "title": chart.title,
                "reading": chart.reading,
                "src": "data:image/svg+xml;base64,"
                + base64.b64encode(chart.svg.encode("utf-8")).decode("ascii"),
                "svg": quote(chart.name) + ".svg",
                "png": quote(chart.name) + ".png",
            }
            for chart in chart_set.charts
        ],
        "skipped": chart_set.skipped,
        "task_rows": _task_rows(runs, tasks),
        "task_currency": task_currency(runs),
        "costed": any(run.cost is not None for run in runs),
        "by_task": _episodes_by_task(runs, tasks, episodes),
        "unreadable": unreadable,
        "vacuous_title": VACUOUS,
        "doubted_below": DOUBTED_BELOW,
        "praised_from": PRAISED_FROM,
    }
    return _template(scrubber).render(**page)


def _template(scrubber: Scrubber) -> Any:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("bat.evaluation.present.plot", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # every value printed: without any secret of the configuration, then escaped
        finalize=lambda value: scrubber.text(str(value)) if value is not None else "",
    )
    environment.filters["anchor"] = anchor
    environment.filters["counted"] = counted
    return environment.get_template(TEMPLATE)


def _gates(runs: list[Run]) -> list[dict[str, Any]]:
    """The gates.json of each run folder charted, the latest run first (CI's question
    first: did this release pass?)."""
    from bat.evaluation.present.cost_view import gate_value
    from bat.evaluation.present.gates import read, wanted

    folders = dict.fromkeys(
        run.folder.parent for run in runs if layout.is_run_folder(run.folder.parent)
    )
    found = []
    for folder in sorted(folders, key=lambda f: f.name, reverse=True):
        gates = read(folder)
        if gates is None:
            continue
        rows = [
            {
                "passed": gate.passed,
                "name": gate.name,
                "model": gate.model,
                "value": gate_value(gate),
                "wanted": wanted(gate.op, gate.threshold),
                "detail": gate.detail,
            }
            for gate in gates.gates
        ]
        found.append({"run_id": gates.run_id, "passed": gates.passed, "rows": rows,
                      "failed": len(gates.failed), "total": len(gates.gates)})  # fmt: skip
    return found


# --- benchmark cards ----------------------------------------------------------------------


def benchmark_cards(runs: list[Run]) -> list[dict[str, Any]]:
    """The benchmark card of each run folder the runs belong to (in the runs' order), as
    rows of text; runs without a card (older ones, bat-cli's) are left out, and a card
    that cannot be read says so."""
    import json

    from bat.evaluation.log.card import read_card

    shown: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for run in runs:
        run_dir = run.folder.parent
        if run_dir.resolve() in seen or not layout.is_run_folder(run_dir):
            continue
        seen.add(run_dir.resolve())
        try:
            card = read_card(run_dir)
        except InputError as exc:
            shown.append({"run_id": run_dir.name, "problem": exc.message})
            continue
        if card is None:
            continue
        document = card.agent.card
        shown.append(
            {
                "run_id": card.run_id,
                "problem": None,
                "summary": f"{card.dataset.tasks} tasks · k={card.k} · bat {card.versions.bat}",
                "rows": _card_rows(card),
                "agent_card": json.dumps(document, indent=2, ensure_ascii=False)
                if document
                else None,
            }
        )
    return shown


def _card_rows(card: Any) -> list[tuple[str, list[str]]]:
    """The card as (heading, lines) pairs, every value as text."""
    import shlex

    agent, versions, t, host = card.agent, card.versions, card.timeouts, card.host
    if agent.git is None:
        git = "not known (no git, or not a repository)"
    else:
        git = agent.git.commit + (" (uncommitted changes)" if agent.git.dirty else " (clean)")
    # bat_adk: the requirement's key in cards written before agent.runtime existed
    wanted = versions.bat_adk_requirement or (versions.model_extra or {}).get("bat_adk")
    adk = f"{wanted} ({versions.bat_adk_source})" if wanted else "none"
    runtime = agent.runtime
    ran = (
        f"Python {runtime.python or 'unknown'} · bat-adk {runtime.bat_adk or 'none'} "
        f"(in {runtime.environment})"
        if runtime is not None
        else "not known (in a container, not started by bat, or no environment found)"
    )
    models = [
        f"{m.label}: " + ("/".join(x for x in (m.provider, m.model) if x) or "the agent's own")
        + (f" at {m.base_url}" if m.base_url else "")
        for m in card.models
    ]  # fmt: skip
    judges = [
        f"{j.label}: {j.provider}/{j.model}" + (f" at {j.base_url}" if j.base_url else "")
        + f", rubric {j.rubric_version}, prompt sha256 {j.prompt_sha256[:16]}, "
        f"timeout {j.timeout_s:g} s, {j.max_retries} retries"
        for j in card.judges
    ]  # fmt: skip
    if not card.qualitative:
        judges = ["off (evaluation.qualitative: false)"]
    started = f"{agent.command} (in {agent.root})" if agent.start else "not started by bat"
    rows: list[tuple[str, str | list[str]]] = [
        ("run", card.run_id + (f" ({card.run_name})" if card.run_name else "")),
        ("started / ended", f"{card.started_at} / {card.ended_at or 'not ended'}"),
        ("dataset", f"{card.dataset.path} · {card.dataset.tasks} tasks"),
        ("dataset sha256", card.dataset.sha256),
        ("selection", _selection(card.selection)),
        ("agent", " ".join(x for x in (agent.name, agent.version) if x) or "unnamed"),
        ("agent url", agent.url or ""),
        ("agent command", started),
        ("agent git commit", git),
        ("agent ran with", ran),
        ("versions", f"bat {versions.bat} · a2a-sdk {versions.a2a_sdk} · Python "
                     f"{versions.python} · the agent asks for bat-adk {adk}"),
        ("models", models),
        ("judges", judges or ["none"]),
        ("k · concurrency", f"{card.k} · {card.concurrency}"),
        ("timeouts", f"turn {t.turn_s:g} s · agent start-up {t.agent_startup_s:g} s · "
                     f"shutdown {t.agent_shutdown_s:g} s"),
        ("retries", f"agent restarts up to {card.retries.agent_max_restarts} per model"),
        ("command", shlex.join(card.command)),
        ("host", f"{host.os} {host.machine} · {host.implementation} {host.python} · "
                 f"{host.cpu_count} CPUs · {host.platform}"),
    ]  # fmt: skip
    return [(key, value if isinstance(value, list) else [value]) for key, value in rows]


def _selection(selection: dict[str, Any] | None) -> str:
    if not selection:
        return "every task"
    return "; ".join(f"{key}: {value}" for key, value in selection.items())


# --- episodes -----------------------------------------------------------------------------


def load_episodes(
    run: Run, folder: Path, unreadable: list[str]
) -> dict[tuple[str, int], EpisodeView]:
    """The run's episodes by ``(task id, attempt)``: metrics rows joined with episode files.

    A file that cannot be read is listed in ``unreadable`` (its row still shows).
    """
    views = {(row.task_id, row.attempt): _from_row(row) for row in run.rows}
    for path, episode in _episode_files(run, unreadable):
        key = (episode.task_id, episode.attempt)
        view = views.get(key)
        if view is None:  # a file without a row: what the file says
            outcome = episode_outcome(episode)
            view = views[key] = _view(episode.task_id, episode.attempt, episode.status, outcome)
        _fill_from_file(view, episode)
        view.href = _href(path, folder)
    return views


def _episode_files(run: Run, unreadable: list[str]) -> Iterator[tuple[Path, EpisodeResult]]:
    """The run's episode files, never one read through a link out of the run."""
    model_dir = run.folder
    folder = layout.episodes_dir(model_dir)
    if folder.is_symlink():
        raise InputError(f"{folder} is a symbolic link; the report reads no file through one")
    inside = model_dir.resolve()
    for path in layout.episode_files(model_dir):
        if not path.resolve().is_relative_to(inside):
            raise InputError(f"{path} leads outside {model_dir} (a symbolic link out of the run)")
    if batcli.is_model_folder(model_dir):  # bat-cli 2026.10's files, converted
        yield from batcli.episodes(model_dir, unreadable)
    else:
        yield from store.episodes(model_dir, unreadable)


def _from_row(row: EpisodeRow) -> EpisodeView:
    view = _view(row.task_id, row.attempt, row.status, row_outcome(row))
    view.reason = row.verdict.reason
    return view


def _view(task_id: str, attempt: int, status: str, outcome: EpisodeOutcome) -> EpisodeView:
    return EpisodeView(
        task_id=task_id,
        attempt=attempt,
        passed=outcome.passed,
        status=status,
        infra=outcome.infra,
        agent_error=outcome.agent_error,
        vacuous=outcome.vacuous,
    )


def _fill_from_file(view: EpisodeView, episode: EpisodeResult) -> None:
    if episode.verdict is not None and episode.verdict.reason:
        view.reason = episode.verdict.reason
    if episode.infra_error is not None and not view.reason:
        view.reason = f"{episode.infra_error.kind}: {episode.infra_error.message}"
    output = episode.final_output
    if len(output) > OUTPUT_PREVIEW_CHARS:
        output = output[:OUTPUT_PREVIEW_CHARS] + " …"
    view.output = output
    view.judge = _judge_lines(episode.scores)
    view.lowest_score = _lowest_score(episode.scores)
    if episode.scores is not None:
        view.assertions = [(item.assertion, item.passed) for item in episode.scores.assertions]
    user = episode.trace.simulated_user
    if user is not None:
        ended = (user.ended or "cut short").replace("_", " ")
        view.conversation = (
            f"simulated user: {ended} after {counted(user.turns, 'user turn')} "
            f"({user.simulated_turns} simulated, at most {user.max_turns})"
        )


def _judge_lines(scores: JudgeScores | None) -> list[tuple[str, str, str]]:
    """``(dimension, score, reasoning)`` per judged dimension, then the judges' errors."""
    if scores is None:
        return []
    lines = []
    for dimension, detail in scores.dimensions.items():
        if detail.score is not None or detail.reasoning:
            lines.append((dimension, score_text(detail.score), detail.reasoning))
    if scores.error:  # not judged, or every judge failed
        lines.append(("not scored", "", scores.error))
    elif scores.judge_errors:
        failed = "; ".join(f"{k}: {v}" for k, v in scores.judge_errors.items())
        lines.append(("judge errors", "", failed))
    return lines


def _lowest_score(scores: JudgeScores | None) -> float | None:
    dimensions = scores.dimensions.values() if scores else ()
    values = [detail.score for detail in dimensions if detail.score is not None]
    return min(values) if values else None


def _href(path: Path, folder: Path) -> str:
    return quote(Path(os.path.relpath(path, folder)).as_posix(), safe="/")


def _episodes_by_task(
    runs: list[Run], tasks: list[str], episodes: dict[str, dict[tuple[str, int], EpisodeView]]
) -> list[dict[str, Any]]:
    by_task: dict[str, list[tuple[Run, EpisodeView]]] = {task_id: [] for task_id in tasks}
    for run in runs:
        for (task_id, _), view in sorted(episodes[run.label].items(), key=lambda i: i[0][1]):
            if task_id in by_task:
                by_task[task_id].append((run, view))
    return [
        {
            "task_id": task_id,
            "passed": sum(view.passed for _, view in views),
            "doubted": sum(view.doubted for _, view in views),
            "praised": sum(view.praised for _, view in views),
            "views": views,
            "assertions": _assertion_counts(views),
        }
        for task_id, views in by_task.items()
    ]


def _assertion_counts(views: list[tuple[Run, EpisodeView]]) -> dict[str, Any] | None:
    """How often each assertion of the task passed over the attempts that decided it, per
    run ("2/3": a reader sees which assertion fails, not only that the task did); None
    when no attempt has one. An assertion is known by its words, so a run of an edited
    tasks.json gets a row of its own; an attempt no judge decided is counted apart."""
    runs: list[Run] = []
    counts: dict[str, dict[str, list[int]]] = {}  # assertion -> run label -> [pass, of, undecided]
    for run, view in views:
        if view.assertions and run not in runs:
            runs.append(run)
        for text, passed in view.assertions:
            tally = counts.setdefault(text, {}).setdefault(run.label, [0, 0, 0])
            tally[0] += passed is True
            tally[1] += passed is not None
            tally[2] += passed is None
    if not counts:
        return None
    rows = []
    for text, by_run in counts.items():
        cells = []
        for run in runs:
            passed, decided, undecided = by_run.get(run.label, (0, 0, 0))
            shown = f"{passed}/{decided}" if decided else "–"
            # green only when every attempt passed it: an undecided one fails a verdict too
            css = "" if not decided else "pass" if passed == decided + undecided else "fail"
            cells.append((shown, css, f"{undecided} undecided" if undecided else ""))
        rows.append({"assertion": text, "cells": cells})
    return {"runs": runs, "rows": rows}


# --- tables -------------------------------------------------------------------------------


def _tile(count: int, noun: str, plural: str | None = None) -> tuple[str, str]:
    """A figure tile of the report's head: its label agrees with its number ("1 run")."""
    number, word = counted(count, noun, plural).split(" ", 1)
    return word, number


def _runs_table(runs: list[Run]) -> dict[str, Any]:
    dimensions: list[str] = []
    for run in runs:
        for dimension in run.judge:
            if dimension not in dimensions:
                dimensions.append(dimension)
    # k in the heading when the runs share it: a column less wide, so that the table
    # fits a 1366-pixel screen (the judge scores have a table of their own).
    ks = {run.k for run in runs}
    shared_k = ks.pop() if len(ks) == 1 else None
    at_k, hat_k = (
        ("pass@k", "pass^k") if shared_k is None else (f"pass@{shared_k}", f"pass^{shared_k}")
    )
    head = [
        "#",
        "run",
        "episodes",
        "passed",
        "pass rate",
        "95 % interval",
        at_k,
        hat_k,
        "agent errors",
        "infra failures",
        "latency median / p90 / p99",
        "tokens / episode",
    ]
    # a cost column only when some run has a cost (an older bat's runs keep their table),
    # beside the pass figures: what a model choice weighs is the two side by side
    costed = any(run.cost is not None for run in runs)
    if costed:
        head.insert(head.index(hat_k) + 1, "cost: total / per episode / per pass")

    def with_k(value: float | None, k: int) -> str:
        return percent(value) if shared_k is not None else f"{percent(value)} (k={k})"

    rows = []
    for run in runs:
        latency = run.latency
        tokens = run.tokens_per_episode
        rows.append(
            {
                "number": run.index + 1,
                "label": run.label,
                "episodes": str(run.episodes),
                "passed": str(run.passed),
                "pass_rate": percent(run.pass_rate),
                "interval": interval(run.pass_rate_ci95),
                "pass_at_k": with_k(run.pass_at_k, run.k),
                "pass_hat_k": with_k(run.pass_hat_k, run.k),
                "agent_errors": [f"{n} {kind}" for kind, n in run.agent_errors.items()] or ["0"],
                "infra": str(run.infra_failures),
                "latency": " / ".join(
                    seconds(value) for value in (latency.median, latency.p90, latency.p99)
                ),
                # on a line of its own: the table stays narrow enough for the cost column
                "cold": _cold_note(run.stats.cold_episodes, run.stats.episodes).strip(),
                "tokens": f"{integer(round(tokens[0]))} + {integer(round(tokens[1]))}"
                if tokens
                else MISSING,
                "judge": [
                    score_text(run.judge[d].mean if d in run.judge else None) for d in dimensions
                ],
                "cost": _cost_cell(run) if costed else None,
            }
        )
    return {"head": head, "rows": rows, "judge_head": ["#", "run", *dimensions]}


def _cost_cell(run: Run) -> dict[str, Any]:
    """The run's cost cell: three amounts, or MISSING for a run without cost; the models
    without a price named (the amounts are then lower bounds, "at least"), and whether
    the card says the prices are made up."""
    cells = figures_cells(run.cost)
    if run.cost is None:
        return {"lines": [MISSING], "notes": []}
    named = ", ".join(cells["unpriced"])
    if nothing_priced(run.cost):  # no amount to give: "unpriced", and which models
        lines, notes = ["unpriced"], [f"no price for {named}"] if named else []
    else:
        lines = [cells["total"], f"{cells['per_episode']} / episode", f"{cells['per_pass']} / pass"]
        notes = [f"unpriced: {named} (a lower bound)"] if named else []
    if run.illustrative_prices:
        notes.append("prices are illustrative")
    return {"lines": lines, "notes": notes}


def _simulated_users(runs: list[Run], tasks: list[str]) -> dict[str, Any] | None:
    """The "Simulated users" table: a row per run that had conversations with a simulated
    user, then one per task and run (None: no run had one, and the page has no section)."""
    rows = []
    for run in runs:
        found = run.results.summary.conversation
        if found is not None:
            rows.append({"number": run.index + 1, "label": run.label, "cells": table_cells(found)})
    if not rows:
        return None
    by_task = []
    for task_id in tasks:
        for run in runs:
            task = run.results.summary.task(task_id)
            if task is not None and task.conversation is not None:
                by_task.append(
                    {
                        "task_id": task_id,
                        "number": run.index + 1,
                        "label": run.label,
                        "cells": table_cells(task.conversation),
                    }
                )
    return {"head": TABLE_HEADER, "rows": rows, "task_rows": by_task}


def task_currency(runs: list[Run]) -> str | None:
    """The one currency of every run with a cost (then the task table's cells give bare
    amounts, the currency said once above it); None: no cost, or several currencies."""
    currencies = {run.cost.currency for run in runs if run.cost is not None}
    return currencies.pop() if len(currencies) == 1 else None


def _task_rows(runs: list[Run], tasks: list[str]) -> list[dict[str, Any]]:
    counts = [run.tasks() for run in runs]
    costs = [run.task_costs() for run in runs]
    shared = task_currency(runs)
    rows = []
    for task_id in tasks:
        cells, passed, attempts = [], 0, 0
        for count, task_costs in zip((c.get(task_id) for c in counts), costs, strict=True):
            if count is None or not count.attempts:
                cells.append(None)
                continue
            passed += count.passed
            attempts += count.attempts
            infra = f" [{count.infra}]" if count.infra else ""
            text = f"{count.passed}/{count.attempts}{infra}"
            cells.append({"text": text, "shade": shade(count.rate),
                          "cost": _task_cost(task_costs.get(task_id), shared)})  # fmt: skip
        rows.append({"task_id": task_id, "cells": cells, "all": f"{passed}/{attempts}"})
    return rows


def _task_cost(cost: Any, shared: str | None) -> str:
    """A task cell's cost: the mean of an episode, bare when the table's currency is one
    ("" when the task has no cost; "≥" before a lower bound)."""
    if cost is None or cost.per_episode.mean is None or nothing_priced(cost):
        return ""
    amount = money(cost.per_episode.mean, cost.currency)
    if shared is not None:
        amount = amount.removesuffix(f" {shared}")
    return ("≥ " if cost.unpriced_episodes else "") + amount


# --- formatting ---------------------------------------------------------------------------


def anchor(task_id: str) -> str:
    """A fragment id for a task: percent-encoded, so any id is safe and unique."""
    return "task-" + quote(str(task_id), safe="")


def score_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return MISSING if value is None else str(value)
    return f"{value:.2f}"


def shade(rate: float | None) -> str:
    """A background from red (0 %) through yellow to green (100 %)."""
    hue = 0 if rate is None else round(120 * max(0.0, min(1.0, rate)))
    return f"hsl({hue}, 70%, 86%)"


def _cold_note(cold: int, episodes: int) -> str:
    """Says the latency leaves the agent's cold starts out (stats.py), or holds them all."""
    if not cold:
        return ""
    if cold >= episodes:
        return f" (all {cold} episodes cold: start-up included)"
    return f" ({cold} cold left out)"
