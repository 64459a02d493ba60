"""``bat eval.plot``: runs found under a folder, charts as PNG and SVG, report.html.

The run files are written here by hand (not by bat's summarizer), in both shapes:
the metrics files from before the richer statistics (no ``pass_rate_ci95``,
``pass_hat``, ``latency_s``, ``judge``, per-episode ``scores``) and from after.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from math import comb, isclose
from pathlib import Path

import pytest

from tests.conftest import run_bat

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALL_CHARTS = ["pass_rate", "task_heatmap", "pass_hat_k", "latency", "tokens", "judge_scores"]
DIMENSIONS = [
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
]
HOSTILE_ID = "<script>alert('id')</script>"
HOSTILE_OUTPUT = "<img src=x onerror=alert(1)><script>alert('out')</script>"
HOSTILE_REASON = "output: missing '</td></tr><script>alert(\"reason\")</script>'"
HOSTILE_JUDGE = "</details><script>alert('judge')</script>"


# --- writing run folders ----------------------------------------------------------------


def write_run(
    base: Path,
    run_id: str,
    model: str,
    outcomes: dict[str, str],
    *,
    new_fields: bool = False,
    judge: bool = False,
    output: str = "done",
    reason_fail: str = "output: missing 'Paris'",
    judge_reasoning: str = "on topic",
) -> Path:
    """One model's folder of a run: episodes, summary.json and metrics.json.

    ``outcomes`` maps a task id to one letter per attempt: ``p`` passed, ``f`` failed,
    ``i`` infrastructure failure.
    """
    run_dir = base / run_id
    model_dir = run_dir / re.sub(r"[^A-Za-z0-9._-]", "_", model)
    episodes = model_dir / "episodes"
    episodes.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"schema": "bat.run/1", "run_id": run_id}))
    rows, tasks = [], []
    for t, (task_id, letters) in enumerate(outcomes.items()):
        for attempt, letter in enumerate(letters, 1):
            passed = letter == "p"
            wall = round(0.2 + 0.05 * t + 0.1 * attempt, 4)
            prompt, completion = 40 + t, 10 + attempt
            row = {
                "task_id": task_id,
                "attempt": attempt,
                "passed": passed,
                "status": "completed" if letter != "i" else "unknown",
                "infra_error": "timeout" if letter == "i" else None,
                "wall_time_s": wall,
                "time_to_first_event_s": 0.05,
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "model_calls": 1,
                "tool_calls": 0,
            }
            scores = None
            if judge and letter == "i":
                scores = {"error": "not judged: infrastructure failure"}
            elif judge:
                values = {
                    d: round(0.5 + 0.1 * (i % 4) + (0.2 if passed else -0.3), 2)
                    for i, d in enumerate(DIMENSIONS)
                }
                scores = {
                    "dimensions": {
                        d: {"score": v, "reasoning": f"{judge_reasoning} ({d})"}
                        for d, v in values.items()
                    }
                }
            if new_fields:
                row["scores"] = dict(values) if judge and letter != "i" else None
            rows.append(row)
            episode = {
                "schema": "bat.episode/1",
                "task_id": task_id,
                "attempt": attempt,
                "model": model,
                "status": row["status"],
                "final_output": output if letter != "i" else "",
                "infra_error": {"kind": "timeout", "message": "no answer in 30 s"}
                if letter == "i"
                else None,
                "verdict": {
                    "passed": passed,
                    "reason": "status: 'completed'" if passed else reason_fail,
                    "checks": [],
                },
                "scores": scores,
                "trace": {"wall_time_s": wall, "events": [], "turns": []},
            }
            stem = re.sub(r"[^A-Za-z0-9._-]", "_", task_id)
            (episodes / f"{stem}__try{attempt}.json").write_text(json.dumps(episode))
        judged = [x for x in letters if x != "i"]
        n, c = len(judged), judged.count("p")
        tasks.append(
            {
                "task_id": task_id,
                "attempts": len(letters),
                "passed": letters.count("p"),
                "failed": len(letters) - letters.count("p"),
                "infra_failures": letters.count("i"),
                "success_percentage": round(100 * letters.count("p") / len(letters), 2),
                "judged": n,
                "pass_at_k": None if not n else 1 - comb(n - c, n) / comb(n, n),
                "pass_hat_k": None if not n else comb(c, n) / comb(n, n),
            }
        )
    count = len(rows)
    passed = sum(r["passed"] for r in rows)
    summary_stats = {
        "episodes": count,
        "passed": passed,
        "pass_rate": round(passed / count, 4),
        "infra_failures": sum(r["infra_error"] is not None for r in rows),
        "k": 3,
        "pass_at_k": 0.5,
        "pass_hat_k": 0.25,
        "wall_time_s": {"mean": 0.4, "median": 0.4, "p90": 0.6, "max": 0.7},
        "time_to_first_event_s": {"mean": 0.05, "median": 0.05, "p90": 0.05, "max": 0.05},
        "tokens": {
            "prompt_total": sum(r["prompt_tokens"] for r in rows),
            "completion_total": sum(r["completion_tokens"] for r in rows),
            "total": sum(r["total_tokens"] for r in rows),
            "mean_per_episode": 50.0,
        },
        "model_calls_total": count,
        "tool_calls_total": 0,
    }
    if new_fields:
        summary_stats["pass_rate_ci95"] = [0.11, 0.99]
        summary_stats["pass_at"] = {"1": 0.5, "2": 0.6, "3": 0.7}
        summary_stats["pass_hat"] = {"1": 0.5, "2": 0.4, "3": None}
        summary_stats["latency_s"] = {"p50": 0.4, "p90": 0.6, "p99": 0.7, "mean": 0.4, "max": 0.7}
        if judge:
            summary_stats["judge"] = {
                d: {"mean": 0.7, "min": 0.2, "max": 1.0, "count": count, "errors": 0}
                for d in DIMENSIONS
            }
        else:
            summary_stats["judge"] = None
    metrics = {
        "schema": "bat.metrics/1",
        "model": model,
        "run_id": run_id,
        "per_episode": rows,
        "summary": summary_stats,
    }
    summary = {"schema": "bat.summary/1", "model": model, "k": 3, "run_id": run_id, "tasks": tasks}
    (model_dir / "metrics.json").write_text(json.dumps(metrics))
    (model_dir / "summary.json").write_text(json.dumps(summary))
    return model_dir


TASKS = {
    "weather-rome": "ppf",
    "weather-paris": "ppp",
    "calc-add": "pfi",
    "search-docs": "fff",
}


@pytest.fixture
def runs_dir(tmp_path):
    """Three runs: old files, new files with judge scores, new files without."""
    base = tmp_path / "output"
    write_run(base, "20260101-000000-old", "openai:gpt-4.1-mini", TASKS)
    write_run(
        base, "20260102-000000-new", "openai:gpt-4.1-mini", TASKS, new_fields=True, judge=True
    )
    write_run(base, "20260102-000000-new", "ollama:qwen2.5", TASKS, new_fields=True)
    return base


def plot(folder: Path, *extra: str):
    return run_bat("eval.plot", "-f", str(folder), *extra, timeout=120)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def svg_texts(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return ["".join(el.itertext()) for el in root.iter("{http://www.w3.org/2000/svg}text")]


# --- the chart set ----------------------------------------------------------------------


def test_every_chart_as_png_and_svg_with_judge_scores(runs_dir):
    result = plot(runs_dir)
    assert result.code == 0, result.err
    assert "3 run(s)" in result.out
    for name in ALL_CHARTS:
        png = (runs_dir / f"{name}.png").read_bytes()
        width, height = png_size(png)
        assert width >= 300 and height >= 100, name
        assert len(png) > 5000, name
        texts = svg_texts(runs_dir / f"{name}.svg")
        assert texts, name
        assert f"Wrote {runs_dir / (name + '.png')}" in result.out
        assert f"Wrote {runs_dir / (name + '.svg')}" in result.out
    assert f"Wrote {runs_dir / 'report.html'}" in result.out
    assert "skipped" not in result.out
    judge = " ".join(svg_texts(runs_dir / "judge_scores.svg"))
    for dimension in DIMENSIONS:
        assert dimension in judge
    # Only the run with judge scores is in the judge chart's legend.
    assert "openai:gpt-4.1-mini @ 20260102-000000-new" in judge
    assert "ollama:qwen2.5" not in judge
    assert not list(runs_dir.glob(".*.tmp"))  # atomic writes left no temporary file


def test_without_judge_scores_the_judge_chart_is_skipped_and_said(tmp_path):
    base = tmp_path / "runs"
    write_run(base, "20260101-000000-a", "openai:gpt-4.1-mini", TASKS)
    write_run(base, "20260101-000000-a", "ollama:qwen2.5", TASKS, new_fields=True)
    (base / "judge_scores.svg").write_text("<svg/>")  # from an earlier plot
    result = plot(base)
    assert result.code == 0, result.err
    assert "judge_scores skipped: no run has judge scores" in result.out
    assert f"Removed {base / 'judge_scores.svg'}" in result.out
    written = sorted(p.stem for p in base.glob("*.png"))
    assert written == sorted(set(ALL_CHARTS) - {"judge_scores"})
    assert not (base / "judge_scores.svg").exists()
    report = (base / "report.html").read_text()
    assert "No judge_scores chart: no run has judge scores." in report


def test_old_and_new_files_side_by_side(runs_dir):
    result = plot(runs_dir)
    assert result.code == 0, result.err
    labels = [
        "openai:gpt-4.1-mini @ 20260101-000000-old",
        "openai:gpt-4.1-mini @ 20260102-000000-new",
        "ollama:qwen2.5 @ 20260102-000000-new",
    ]
    for name in ("pass_rate", "latency", "tokens", "pass_hat_k", "task_heatmap"):
        texts = " ".join(svg_texts(runs_dir / f"{name}.svg"))
        for label in labels:
            assert label in texts, (name, label)
    rates = svg_texts(runs_dir / "pass_rate.svg")
    assert "50% (6/12)" in rates  # 6 of 12 episodes passed in every run
    report = (runs_dir / "report.html").read_text()
    # The new files' own interval is shown; the old file's is computed (Wilson, 6 of 12).
    assert "11.0 % – 99.0 %" in report
    assert "25.4 % – 74.6 %" in report
    # Latency percentiles: given by the new files; computed from the rows for the old.
    assert "0.40 / 0.60 / 0.70" in report


def test_pass_hat_lines_use_the_given_values_or_the_episode_rows():
    from bat.evaluation.charts import Run

    rows = [
        {"task_id": "a", "passed": True, "infra_error": None},
        {"task_id": "a", "passed": True, "infra_error": None},
        {"task_id": "a", "passed": False, "infra_error": None},
        {"task_id": "b", "passed": True, "infra_error": None},
        {"task_id": "b", "passed": False, "infra_error": "timeout"},
    ]
    old = Run(Path("x"), "m", "r", {"per_episode": rows, "summary": {}}, None)
    # a: n=3, c=2 -> 2/3, 1/3, 0; b: n=1, c=1 -> 1 for every k (k lowered to n)
    expected = [(1, (2 / 3 + 1) / 2), (2, (1 / 3 + 1) / 2), (3, (0 + 1) / 2)]
    assert [(k, round(v, 6)) for k, v in old.pass_hat_curve()] == [
        (k, round(v, 6)) for k, v in expected
    ]
    given = {"pass_hat": {"2": 0.25, "1": 0.5, "3": None}}
    new = Run(Path("x"), "m", "r", {"per_episode": rows, "summary": given}, None)
    assert new.pass_hat_curve() == [(1, 0.5), (2, 0.25)]
    empty = Run(Path("x"), "m", "r", {"per_episode": [rows[-1]], "summary": {}}, None)
    assert empty.pass_hat_curve() == []


@pytest.mark.parametrize(
    ("passed", "total", "low", "high"),
    [(0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634), (6, 12, 0.2538, 0.7462)],
)
def test_wilson_interval(passed, total, low, high):
    from bat.evaluation.charts import wilson_interval

    got = wilson_interval(passed, total)
    assert isclose(got[0], low, abs_tol=1e-4) and isclose(got[1], high, abs_tol=1e-4)


def test_wilson_interval_without_episodes():
    from bat.evaluation.charts import wilson_interval

    assert wilson_interval(0, 0) is None


# --- --filter ---------------------------------------------------------------------------


def test_filter_narrows_the_heatmap_and_task_tables_only(runs_dir):
    result = plot(runs_dir, "-F", "weather")
    assert result.code == 0, result.err
    heatmap = svg_texts(runs_dir / "task_heatmap.svg")
    assert "weather-rome" in heatmap and "weather-paris" in heatmap
    assert not any("calc-add" in t or "search-docs" in t for t in heatmap)
    assert any("containing 'weather'" in t for t in heatmap)  # said in the title
    # Summary charts still cover every run and every task: 6 of 12 passed.
    assert "50% (6/12)" in svg_texts(runs_dir / "pass_rate.svg")
    report = (runs_dir / "report.html").read_text()
    assert "2 of 4 tasks" in report
    assert 'id="task-weather-rome"' in report
    assert "calc-add" not in report

    wide = plot(runs_dir, "--filter", "")  # an empty filter keeps every task
    assert wide.code == 0, wide.err
    heatmap = svg_texts(runs_dir / "task_heatmap.svg")
    assert "calc-add" in heatmap and "search-docs" in heatmap


def test_filter_is_a_case_sensitive_substring(runs_dir):
    result = plot(runs_dir, "-F", "-r")
    assert result.code == 0, result.err
    heatmap = svg_texts(runs_dir / "task_heatmap.svg")
    assert "weather-rome" in heatmap and "search-docs" not in heatmap
    assert "weather-paris" not in heatmap

    upper = plot(runs_dir, "-F", "WEATHER")
    assert upper.code == 0, upper.err
    assert "task_heatmap skipped: no task id contains 'WEATHER'" in upper.out
    assert not (runs_dir / "task_heatmap.svg").exists()  # no stale, unfiltered heatmap
    assert (runs_dir / "pass_rate.svg").is_file()


# --- hostile text -----------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_hostile_ids_and_outputs_are_escaped(tmp_path):
    base = tmp_path / "runs"
    write_run(
        base,
        "20260101-000000-x",
        "evil:<b>model</b>",
        {HOSTILE_ID: "pf", "plain": "p"},
        new_fields=True,
        judge=True,
        output=HOSTILE_OUTPUT,
        reason_fail=HOSTILE_REASON,
        judge_reasoning=HOSTILE_JUDGE,
    )
    result = plot(base)
    assert result.code == 0, result.err
    html = (base / "report.html").read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(&#x27;id&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;/td&gt;&lt;/tr&gt;&lt;script&gt;" in html
    assert "&lt;/details&gt;&lt;script&gt;alert(&#x27;judge&#x27;)" in html
    assert "evil:&lt;b&gt;model&lt;/b&gt;" in html
    parser = _Tags()
    parser.feed(html)
    tags = {tag for tag, _ in parser.tags}
    assert not tags & {"script", "iframe", "object", "embed", "link", "style", "svg"} - {"style"}
    assert [tag for tag, _ in parser.tags].count("style") == 1  # our own style sheet
    images = [attrs for tag, attrs in parser.tags if tag == "img"]
    assert len(images) == len(ALL_CHARTS)
    assert all(img["src"].startswith("data:image/svg+xml;base64,") for img in images)
    # Nothing but a chart <img> and our own markup: every <b> is ours (a card or a label).
    assert all(attrs == {} for tag, attrs in parser.tags if tag == "b")
    links = [attrs["href"] for tag, attrs in parser.tags if tag == "a"]
    assert all(not href.startswith(("http:", "https:", "javascript:")) for href in links)
    # The SVG charts carry the id as text, never as markup.
    heatmap = base / "task_heatmap.svg"
    assert HOSTILE_ID in svg_texts(heatmap)
    root = ET.parse(heatmap).getroot()
    assert not [el for el in root.iter() if el.tag.endswith("script")]


def test_report_links_every_episode_file_relatively(runs_dir):
    result = plot(runs_dir)
    assert result.code == 0, result.err
    html = (runs_dir / "report.html").read_text()
    parser = _Tags()
    parser.feed(html)
    episodes = [
        a["href"] for t, a in parser.tags if t == "a" and a.get("href", "").endswith(".json")
    ]
    assert len(episodes) == 3 * 12
    for href in episodes:
        assert not href.startswith("/")
        assert (runs_dir / href).is_file(), href
    assert "output: missing &#x27;Paris&#x27;" in html  # a verdict reason
    assert "on topic (hallucination_score)" in html  # judge reasoning
    assert "not judged: infrastructure failure" in html  # the scores' own error
    assert "infra: timeout" in html


# --- finding runs and errors ------------------------------------------------------------


def test_labels_are_unique(tmp_path):
    from bat.evaluation.charts import find_runs

    write_run(tmp_path / "a", "20260101-000000-x", "openai:m", {"t": "p"})
    write_run(tmp_path / "b", "20260101-000000-x", "openai:m", {"t": "f"})
    write_run(tmp_path / "b", "20260101-000000-x", "openai:n", {"t": "f"})
    labels = [run.label for run in find_runs(tmp_path)]
    assert len(set(labels)) == 3
    assert "openai:n @ 20260101-000000-x" in labels
    assert "openai:m @ 20260101-000000-x [a/20260101-000000-x/openai_m]" in labels


def test_a_folder_without_metrics_is_an_input_error(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    result = plot(tmp_path / "empty")
    assert result.code == 2
    assert f"no metrics.json in {tmp_path / 'empty'}" in result.err
    missing = plot(tmp_path / "nowhere")
    assert missing.code == 2
    assert str(tmp_path / "nowhere") in missing.err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"summary": {}, "per_episode": {}}', "'per_episode' is not a list"),
        ('{"per_episode": []}', "'summary' is not an object"),
        ('{"summary": {}, "per_episode": [{"attempt": 1}]}', "row 1 has no task_id"),
    ],
)
def test_a_malformed_metrics_file_is_named(tmp_path, content, says):
    write_run(tmp_path, "20260101-000000-ok", "openai:m", {"t": "p"})
    bad = tmp_path / "20260101-000000-bad" / "openai_m" / "metrics.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(content)
    result = plot(tmp_path)  # the good run is drawn, the bad one named and left out
    assert result.code == 0, result.err
    assert f"warning: left out of the charts and report: {bad}" in result.err
    assert says in result.err and "Traceback" not in result.err
    assert "1 run(s) in" in result.out
    bad.parent.parent.joinpath("more", "m").mkdir(parents=True)
    bad.parent.parent.joinpath("more", "m", "metrics.json").write_text(content)
    shutil.rmtree(tmp_path / "20260101-000000-ok")
    alone = plot(tmp_path)  # nothing usable: an error naming each file
    assert alone.code == 2 and str(bad) in alone.err and "Traceback" not in alone.err


def test_default_folder_is_the_output_dir_of_eval_yaml(tmp_path):
    assert run_bat("eval.init", cwd=tmp_path).code == 0
    write_run(tmp_path / "eval" / "output", "20260101-000000-x", "openai:m", TASKS)
    result = run_bat("eval.plot", cwd=tmp_path, timeout=120)
    assert result.code == 0, result.err
    assert (tmp_path / "eval" / "output" / "report.html").is_file()
    assert (tmp_path / "eval" / "output" / "pass_rate.png").is_file()


def test_folder_needs_no_eval_yaml(tmp_path, runs_dir):
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    result = run_bat("eval.plot", "--folder", str(runs_dir), cwd=workdir, timeout=120)
    assert result.code == 0, result.err


def test_help_for_plot_does_not_load_the_chart_libraries():
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from bat.cli.program import BatProgram\n"
        "BatProgram().run(['bat', '--help', 'eval.plot'], exit=False)\n"
        "print('HEAVY', [m for m in sys.modules if m.split('.')[0] in ('altair', 'vl_convert')])\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "--filter" in proc.stdout
    assert "HEAVY []" in proc.stdout
