"""Statistics agree: the charts and the report show metrics.json's numbers, as written.

The run is made by the real code (episodes -> ``metrics.row_of`` -> ``metrics.summarize``
-> ``store.write_results``), then read back as plain JSON; every number in the chart
specs' data and in the report's runs table must be that file's.
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from bat.evaluation.log.store import write_episode, write_results
from bat.evaluation.stats import row_of, summarize
from tests.evaluation.present.plot.runkit import episode_of, write_run
from tests.logkit import NO_SECRETS

# 22 episodes, so that every quartile falls between two of them (interpolated).
OUTCOMES = {"alpha": "ppfp", "beta": "pfff", "gamma": "ppip", "delta": "afpp", "eps": "pppp"}


@pytest.fixture
def run(tmp_path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    base = tmp_path / "runs"
    model_dir = write_run(base, "20260101-000000-x", "openai:m", {"warm-up": "pp"}, k=4)
    rows = []
    for position, (task_id, letters) in enumerate(OUTCOMES.items()):
        for attempt, letter in enumerate(letters, 1):
            episode = episode_of(
                task_id, attempt, letter, model="openai:m", position=position, judge=True
            )
            episode.trace.wall_time_s = round(0.137 * (position + 1) ** 1.5 + attempt / 7, 4)
            episode.trace.usage.prompt_tokens += 7 * position * attempt
            write_episode(model_dir, task_id, episode, scrubber=NO_SECRETS)
            rows.append(row_of(episode))
    warm = [row_of(episode_of("warm-up", n, "p", model="openai:m")) for n in (1, 2)]
    summary, metrics = summarize(
        [*warm, *rows], k=4, model="openai:m", task_order=["warm-up", *OUTCOMES],
        run_id="20260101-000000-x",
    )  # fmt: skip
    write_results(model_dir, summary, metrics, scrubber=NO_SECRETS)
    return (
        base,
        json.loads((model_dir / "metrics.json").read_text()),
        json.loads((model_dir / "summary.json").read_text()),
    )


def data_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every data row of a Vega-Lite spec (inline values, or named datasets)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and isinstance(data.get("values"), list):
                found.extend(data["values"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    for values in (spec.get("datasets") or {}).values():
        found.extend(values)
    unique = []
    for row in found:
        if row not in unique:
            unique.append(row)
    return unique


def test_the_chart_specs_hold_metrics_json_numbers(run):
    from bat.evaluation.present.plot.runs import find_runs
    from bat.evaluation.present.plot.specs import build_charts

    base, metrics, summary = run
    stats = metrics["summary"]
    runs = find_runs(base)
    charts = {chart.name: chart.spec for chart in build_charts(runs).charts}

    [rate] = data_of(charts["pass_rate"])
    assert rate["rate"] == stats["pass_rate"]
    assert [rate["low"], rate["high"]] == stats["pass_rate_ci95"]

    [latency] = data_of(charts["latency"])
    wall = stats["wall_time_s"]
    assert {key: latency[key] for key in ("min", "p25", "median", "p75", "max", "count")} == {
        key: wall[key] for key in ("min", "p25", "median", "p75", "max", "count")
    }
    assert wall["p25"] not in [row["wall_time_s"] for row in metrics["per_episode"]]

    tokens = {row["kind"]: row["tokens"] for row in data_of(charts["tokens"])}
    assert tokens == {
        "prompt": stats["tokens"]["prompt_mean"],
        "completion": stats["tokens"]["completion_mean"],
    }

    points = sorted((row["k"], row["value"]) for row in data_of(charts["pass_hat_k"]))
    assert points == sorted((int(k), v) for k, v in stats["pass_hat"].items() if v is not None)
    assert len(points) == 4

    heatmap = {row["task"]: (row["rate"], row["text"]) for row in data_of(charts["task_heatmap"])}
    for task in summary["attempts"]:
        assert heatmap[task["task_id"]] == (
            task["pass_rate"],
            f"{task['passed']}/{task['attempts']}",
        )

    judge = {row["dimension"]: row for row in data_of(charts["judge_scores"])}
    for dimension, given in stats["judge"].items():
        drawn = judge[dimension]
        assert (drawn["mean"], drawn["min"], drawn["max"], drawn["count"]) == (
            given["mean"],
            given["min"],
            given["max"],
            given["count"],
        )


def runs_table(html: str, section: str = '<h2 id="runs">') -> dict[str, str]:
    """The first table after ``section`` in the report, first data row: header -> cell text."""
    table = html.split(section, 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    head = [unescape(cell) for cell in re.findall(r"<th>(.*?)</th>", rows[0])]
    cells = [
        unescape(re.sub(r"<[^>]+>", " ", c)).strip()
        for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[1])
    ]
    return dict(zip(head, cells, strict=True))


def test_the_report_runs_table_shows_metrics_json_numbers(run):
    from bat.evaluation.present.plot.render import plot_folder

    base, metrics, summary = run
    stats = metrics["summary"]
    plot_folder(base, scrubber=NO_SECRETS)
    row = runs_table((base / "report.html").read_text())
    low, high = stats["pass_rate_ci95"]
    wall = stats["wall_time_s"]
    tokens = stats["tokens"]

    def pct(value: float) -> str:
        return f"{100 * value:.1f} %"

    assert row["episodes"] == str(stats["episodes"]) == "22"
    assert row["passed"] == str(stats["passed"])
    assert row["pass rate"] == pct(stats["pass_rate"])
    assert row["95 % interval"] == f"{pct(low)} – {pct(high)}"
    # One run: its k is in the heading, not repeated in the cell.
    assert row[f"pass@{summary['k']}"] == pct(stats["pass_at_k"])
    assert row[f"pass^{summary['k']}"] == pct(stats["pass_hat_k"])
    assert row["infra failures"] == str(stats["infra_failures"]) == "1"
    assert row["agent errors"] == "1 model_error"
    assert row["latency median / p90 / p99"] == (
        f"{wall['median']:.2f} s / {wall['p90']:.2f} s / {wall['p99']:.2f} s"
    )
    assert row["tokens / episode"] == (
        f"{tokens['prompt_mean']:,.0f} + {tokens['completion_mean']:,.0f}"
    )
    judged = runs_table((base / "report.html").read_text(), section='<h3 id="judge-means">')
    for dimension, given in stats["judge"].items():
        assert judged[dimension] == f"{given['mean']:.2f}"
