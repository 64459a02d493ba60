"""``report.html``: one self-contained page of the runs ``bat eval.plot`` charted.

The page needs nothing but itself: the charts are inline (the SVG as a ``data:`` URI of
an ``<img>``, so the ids inside one chart cannot clash with another's and nothing in a
chart can run), the style sheet is inline, there is no script, and a Content Security
Policy forbids any load but ``data:`` images. The episode files are linked with
relative hrefs, so the folder can be moved or archived whole.

Every piece of text that comes from an agent, a dataset or a file (task ids, outputs,
verdict reasons, judge reasoning, model names, run ids) is HTML-escaped: a hostile
``<script>`` shows as text.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bat.atomic import write_text_atomic
from bat.errors import InputError
from bat.evaluation import secrets
from bat.evaluation.charts import ChartSet, Run, matches, task_order, without_surrogates
from bat.evaluation.log import batcli

REPORT_FILE = "report.html"
OUTPUT_PREVIEW_CHARS = 400
VACUOUS = "an empty answer, or only the status was checked: the pass proves little"
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       margin: 0 auto; padding: 24px; max-width: 1200px; color: #1d2329; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 10px; border-bottom: 1px solid #d8dde3; padding-bottom: 4px; }
.meta, .note { color: #56606b; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid #d8dde3; border-radius: 6px; padding: 10px 16px; min-width: 120px; }
.card b { display: block; font-size: 22px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d8dde3; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.cell { text-align: center; white-space: nowrap; }
td.label { white-space: nowrap; }
.scroll { overflow-x: auto; }
figure { margin: 16px 0 28px; }
figure img { max-width: 100%; height: auto; border: 1px solid #eef0f2; }
figcaption { color: #56606b; margin-top: 4px; }
details { margin: 6px 0; border: 1px solid #e3e7eb; border-radius: 6px; padding: 4px 10px; }
summary { cursor: pointer; }
.pass { color: #1b7f3b; font-weight: 600; }
.fail { color: #b42318; font-weight: 600; }
.infra { color: #8a5a00; font-weight: 600; }
.agent { color: #9a1b6b; font-weight: 600; }
.vacuous { color: #56606b; font-style: italic; }
.text { white-space: pre-wrap; word-break: break-word; max-width: 560px; }
code { font-size: 13px; }
"""


@dataclass
class EpisodeView:
    """What the page shows of one episode (its row in metrics.json and its own file)."""

    task_id: str
    attempt: int | None
    passed: bool | None = None
    status: str = ""
    infra: str | None = None
    agent_error: str | None = None  # the kind, when the agent answered with an error
    vacuous: bool = False
    reason: str = ""
    output: str = ""
    judge: list[tuple[str, str, str]] = field(default_factory=list)  # dimension, score, why
    href: str | None = None


def write_report(
    folder: Path, runs: list[Run], chart_set: ChartSet, task_filter: str | None = None
) -> Path:
    """Write ``report.html`` into ``folder``; return its path."""
    path = Path(folder) / REPORT_FILE
    write_text_atomic(path, render_report(Path(folder), runs, chart_set, task_filter))
    return path


def render_report(
    folder: Path, runs: list[Run], chart_set: ChartSet, task_filter: str | None = None
) -> str:
    """The whole page as a string."""
    episodes = {run.label: load_episodes(run, folder) for run in runs}
    all_tasks = task_order(runs)
    tasks = [task_id for task_id in all_tasks if matches(task_id, task_filter)]
    total = sum(run.episodes() for run in runs)
    passed = sum(run.passed() for run in runs)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Evaluation report: {_e(folder.resolve().name)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        "<h1>Evaluation report</h1>",
        f'<p class="meta">{_e(str(folder))} · {len(runs)} run(s) · written {generated} '
        "by <code>bat eval.plot</code></p>",
        '<div class="cards">',
        _card("runs", str(len(runs))),
        _card("tasks", str(len(all_tasks))),
        _card("episodes", str(total)),
        _card("passed", f"{passed} ({_percent(passed / total if total else None)})"),
        _card("agent errors", str(sum(sum(run.agent_errors().values()) for run in runs))),
        _card("infra failures", str(sum(run.infra_failures() for run in runs))),
        _card("vacuous passes", str(sum(run.vacuous_passes() for run in runs))),
        "</div>",
    ]
    if task_filter:
        parts.append(
            f'<p class="note">Task filter: ids containing <code>{_e(task_filter)}</code> — '
            f"{len(tasks)} of {len(all_tasks)} tasks in the heatmap and the task tables; "
            "the run-level numbers and charts cover every task.</p>"
        )
    parts += _runs_section(runs)
    parts += _charts_section(chart_set)
    parts += _tasks_section(runs, tasks)
    parts += _episodes_section(runs, tasks, episodes)
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def load_episodes(run: Run, folder: Path) -> dict[tuple[str, int | None], EpisodeView]:
    """The run's episodes by ``(task id, attempt)``: metrics rows joined with episode files."""
    views: dict[tuple[str, int | None], EpisodeView] = {}
    for row in run.rows:
        attempt = row.get("attempt") if isinstance(row.get("attempt"), int) else None
        view = EpisodeView(task_id=str(row["task_id"]), attempt=attempt)
        view.passed = bool(row.get("passed"))
        view.status = str(row.get("status") or "")
        view.infra = None if row.get("infra_error") is None else str(row["infra_error"])
        error = row.get("agent_error")
        view.agent_error = error if isinstance(error, str) else None
        view.vacuous = row.get("vacuous") is True
        views[(view.task_id, attempt)] = view
    directory = run.folder / "episodes"
    paths = sorted(directory.glob("*.json")) if directory.is_dir() else []
    inside = run.folder.resolve()
    for path in paths:
        if not path.resolve().is_relative_to(inside):  # never read a file from elsewhere
            raise InputError(f"{path} leads outside {run.folder} (a symbolic link out of the run)")
        try:
            # A crafted file may hold "\ud800", which no HTML page can be encoded with.
            data = without_surrogates(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, RecursionError):
            continue  # an unreadable episode file only loses its details on the page
        if not isinstance(data, dict) or not isinstance(data.get("task_id"), str | int):
            continue
        data = batcli.episode(data)  # a bat-cli 2026.10 episode in our shape
        task_id = str(data["task_id"])
        attempt = data.get("attempt") if isinstance(data.get("attempt"), int) else None
        view = views.get((task_id, attempt))
        if view is None:
            view = views[(task_id, attempt)] = EpisodeView(task_id=task_id, attempt=attempt)
        _fill_from_file(view, data)
        view.href = _href(path, folder)
    return views


def _fill_from_file(view: EpisodeView, data: dict[str, Any]) -> None:
    verdict = data.get("verdict")
    if isinstance(verdict, dict):
        if isinstance(verdict.get("reason"), str):
            view.reason = verdict["reason"]
        if view.passed is None and isinstance(verdict.get("passed"), bool):
            view.passed = verdict["passed"]
    if not view.status and isinstance(data.get("status"), str):
        view.status = data["status"]
    error = data.get("agent_error")
    if isinstance(error, dict) and isinstance(error.get("kind"), str):
        view.agent_error = view.agent_error or error["kind"]
    if isinstance(verdict, dict) and verdict.get("vacuous") is True:
        view.vacuous = True
    infra = data.get("infra_error")
    if isinstance(infra, dict):
        kind, message = infra.get("kind"), infra.get("message")
        view.infra = view.infra or str(kind or "infra")
        if message and not view.reason:
            view.reason = f"{kind}: {message}"
    if isinstance(data.get("final_output"), str):
        output = data["final_output"]
        if len(output) > OUTPUT_PREVIEW_CHARS:
            output = output[:OUTPUT_PREVIEW_CHARS] + " …"
        view.output = output
    scores = data.get("scores")
    dimensions = scores.get("dimensions") if isinstance(scores, dict) else None
    if isinstance(dimensions, dict):
        for dimension, detail in dimensions.items():
            if isinstance(detail, dict):
                score = next((detail[key] for key in ("score", "value") if key in detail), None)
                why = detail.get("reasoning") or detail.get("error") or ""
                if score is not None or why:
                    view.judge.append((str(dimension), _score(score), str(why)))
            elif detail is not None:
                view.judge.append((str(dimension), _score(detail), ""))
    if isinstance(scores, dict):
        if scores.get("error"):  # not judged, or every judge failed
            view.judge.append(("not scored", "", str(scores["error"])))
        elif isinstance(scores.get("judge_errors"), dict) and scores["judge_errors"]:
            failed = "; ".join(f"{k}: {v}" for k, v in scores["judge_errors"].items())
            view.judge.append(("judge errors", "", failed))


def _href(path: Path, folder: Path) -> str:
    relative = Path(os.path.relpath(path, folder)).as_posix()
    return quote(relative, safe="/")


def _runs_section(runs: list[Run]) -> list[str]:
    dimensions: list[str] = []
    for run in runs:
        for dimension in run.judge():
            if dimension not in dimensions:
                dimensions.append(dimension)
    head = [
        "#",
        "run",
        "episodes",
        "passed",
        "pass rate",
        "95 % interval",
        "pass@k",
        "pass^k",
        "agent errors",
        "infra failures",
        "latency p50 / p90 / p99 (s)",
        "tokens / episode",
        *(f"judge: {d}" for d in dimensions),
    ]
    parts = [
        '<h2 id="runs">Runs</h2>',
        '<div class="scroll"><table>',
        "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>",
    ]
    for run in runs:
        interval = run.pass_rate_ci95()
        latency = run.latency()
        tokens = run.tokens_per_episode()
        judged = run.judge()
        k = run.k()
        cells = [
            _num(str(run.index + 1)),
            f'<td class="label">{_e(run.label)}</td>',
            _num(str(run.episodes())),
            _num(str(run.passed())),
            _num(_percent(run.pass_rate())),
            _num(f"{_percent(interval[0])} – {_percent(interval[1])}" if interval else "–"),
            _num(_percent(run.pass_at_k()) + (f" (k={k})" if k else "")),
            _num(_percent(run.pass_hat_k()) + (f" (k={k})" if k else "")),
            f'<td class="label">{"<br>".join(map(_e, _tally(run.agent_errors())))}</td>',
            _num(str(run.infra_failures())),
            _num(" / ".join(_seconds(latency[key]) for key in ("p50", "p90", "p99"))),
            _num(f"{tokens[0]:.0f} + {tokens[1]:.0f}" if tokens else "–"),
            *(_num(_score(judged.get(d, {}).get("mean"))) for d in dimensions),
        ]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    parts.append(
        '<p class="note">tokens / episode: prompt + completion (mean). The pass rate '
        "counts every episode; pass@k and pass^k leave infrastructure failures out (bat "
        "could not observe the agent) and count agent errors (the agent answered with a "
        "failure) as the agent's own outcome.</p>"
    )
    return parts


def _charts_section(chart_set: ChartSet) -> list[str]:
    parts = ['<h2 id="charts">Charts</h2>']
    for chart in chart_set.charts:
        data = base64.b64encode(chart.svg.encode("utf-8")).decode("ascii")
        files = (
            f'<a href="{_e(quote(chart.name))}.svg">{_e(chart.name)}.svg</a>, '
            f'<a href="{_e(quote(chart.name))}.png">{_e(chart.name)}.png</a>'
        )
        parts += [
            f'<figure id="chart-{_e(chart.name)}">',
            f'<img src="data:image/svg+xml;base64,{data}" alt="{_e(chart.title)}">',
            f"<figcaption>{_e(chart.title)} ({files})</figcaption>",
            "</figure>",
        ]
    for name, reason in chart_set.skipped.items():
        parts.append(f'<p class="note">No {_e(name)} chart: {_e(reason)}.</p>')
    return parts


def _tasks_section(runs: list[Run], tasks: list[str]) -> list[str]:
    parts = [
        '<h2 id="tasks">Tasks</h2>',
        '<p class="note">Passed / attempts per task and run (infrastructure failures in '
        "brackets); the columns are the runs numbered as in the table above.</p>",
        '<div class="scroll"><table>',
        "<tr><th>task</th>"
        + "".join(f'<th title="{_e(run.label)}">#{run.index + 1}</th>' for run in runs)
        + "<th>all runs</th></tr>",
    ]
    counts = [run.tasks() for run in runs]
    for task_id in tasks:
        cells = [f'<td><a href="#task-{_anchor(task_id)}">{_e(task_id)}</a></td>']
        passed = attempts = 0
        for count in (per_run.get(task_id) for per_run in counts):
            if count is None or not count.attempts:
                cells.append('<td class="cell">–</td>')
                continue
            passed += count.passed
            attempts += count.attempts
            infra = f" [{count.infra}]" if count.infra else ""
            cells.append(
                f'<td class="cell" style="background:{_shade(count.rate)}">'
                f"{count.passed}/{count.attempts}{infra}</td>"
            )
        cells.append(f'<td class="cell">{passed}/{attempts}</td>')
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></div>")
    if not tasks:
        parts.append('<p class="note">No task to show.</p>')
    return parts


def _episodes_section(
    runs: list[Run],
    tasks: list[str],
    episodes: dict[str, dict[tuple[str, int | None], EpisodeView]],
) -> list[str]:
    parts = [
        '<h2 id="episodes">Episodes by task</h2>',
        '<p class="note">Each attempt with its verdict reason, the start of the final '
        "output, the judge's reasoning when it scored the episode, and a link to the "
        "episode file. Tasks with a failed attempt are open.</p>",
    ]
    by_task: dict[str, list[tuple[Run, EpisodeView]]] = {task_id: [] for task_id in tasks}
    for run in runs:
        for (task_id, _), view in sorted(
            episodes[run.label].items(), key=lambda item: item[0][1] or 0
        ):
            if task_id in by_task:
                by_task[task_id].append((run, view))
    for task_id in tasks:
        views = by_task[task_id]
        passed = sum(bool(view.passed) for _, view in views)
        opened = " open" if passed < len(views) else ""
        parts += [
            f'<details id="task-{_anchor(task_id)}"{opened}>',
            f"<summary><b>{_e(task_id)}</b> — {passed}/{len(views)} attempts passed</summary>",
            '<div class="scroll"><table>',
            "<tr><th>run</th><th>try</th><th>verdict</th><th>reason</th>"
            "<th>output</th><th>judge</th><th>file</th></tr>",
        ]
        for run, view in views:
            parts.append(_episode_row(run, view))
        parts.append("</table></div></details>")
    return parts


def _episode_row(run: Run, view: EpisodeView) -> str:
    if view.infra:
        verdict = f'<span class="infra">infra: {_e(view.infra)}</span>'
    elif view.passed:
        verdict = '<span class="pass">passed</span>'
        if view.vacuous:
            verdict += f' <span class="vacuous" title="{VACUOUS}">(vacuous)</span>'
    else:
        verdict = '<span class="fail">failed</span>'
    if view.agent_error:
        verdict += f'<br><span class="agent">agent error: {_e(view.agent_error)}</span>'
    judge = "<br>".join(
        f"<b>{_e(dimension)}</b> {_e(score)}" + (f": {_e(why)}" if why else "")
        for dimension, score, why in view.judge
    )
    link = f'<a href="{_e(view.href)}">episode</a>' if view.href else "–"
    return (
        f'<tr><td title="{_e(run.label)}">#{run.index + 1}</td>'
        f'<td class="num">{"" if view.attempt is None else view.attempt}</td>'
        f"<td>{verdict}</td>"
        f'<td class="text">{_e(view.reason)}</td>'
        f'<td class="text">{_e(view.output)}</td>'
        f'<td class="text">{judge}</td>'
        f"<td>{link}</td></tr>"
    )


def _tally(counts: dict[str, int]) -> list[str]:
    """``["2 rate_limited", "1 crashed"]`` (or ``["0"]``), a line per kind."""
    return [f"{n} {kind}" for kind, n in counts.items()] or ["0"]


def _e(text: str) -> str:
    """Text from a file or an agent, HTML-escaped and without any secret bat knows of
    (every piece of text on the page goes through here)."""
    return escape(secrets.scrub(str(text)), quote=True)


def _anchor(task_id: str) -> str:
    """A fragment id for a task: percent-encoded, so any id is safe and unique."""
    return _e(quote(task_id, safe=""))


def _card(label: str, value: str) -> str:
    return f'<div class="card"><b>{_e(value)}</b>{_e(label)}</div>'


def _num(text: str) -> str:
    return f'<td class="num">{_e(text)}</td>'


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _score(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "–" if value is None else str(value)
    return f"{value:.2f}"


def _shade(rate: float | None) -> str:
    """A background from red (0 %) through yellow to green (100 %)."""
    hue = 0 if rate is None else round(120 * max(0.0, min(1.0, rate)))
    return f"hsl({hue}, 70%, 86%)"
