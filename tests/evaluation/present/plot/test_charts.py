"""``bat eval.plot``: runs found under a folder, charts as PNG and SVG, report.html.

Every run folder is written by bat's own code (:mod:`tests.evaluation.present.plot.runkit`):
episodes, ``metrics.row_of``, ``metrics.summarize``, ``store.write_results``; the
``bat.metrics/1`` folders of older bat versions by the one helper that makes that shape.
"""

from __future__ import annotations

import json
import shutil
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import run_bat
from tests.evaluation.present.plot.runkit import (
    ALL_CHARTS,
    DIMENSIONS,
    HOSTILE_ID,
    HOSTILE_JUDGE,
    HOSTILE_OUTPUT,
    HOSTILE_REASON,
    TASKS,
    svg_texts,
    tags_of,
    write_run,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def runs_dir(tmp_path):
    """Three runs: an old (bat.metrics/1) folder, one with judge scores, one without."""
    base = tmp_path / "output"
    write_run(base, "20260101-000000-old", "openai:gpt-4.1-mini", TASKS, old_format=True)
    write_run(base, "20260102-000000-new", "openai:gpt-4.1-mini", TASKS, judge=True)
    write_run(base, "20260102-000000-new", "ollama:qwen2.5", TASKS)
    return base


def plot(folder: Path, *extra: str):
    return run_bat("eval.plot", "-f", str(folder), *extra, timeout=120)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# --- the chart set ----------------------------------------------------------------------


def test_every_chart_as_png_and_svg_with_judge_scores(runs_dir):
    result = plot(runs_dir)
    assert result.code == 0, result.err
    assert "3 runs" in result.out
    for name in ALL_CHARTS:
        png = (runs_dir / f"{name}.png").read_bytes()
        width, height = png_size(png)
        assert width >= 300 and height >= 100, name
        assert len(png) > 5000, name
        assert svg_texts(runs_dir / f"{name}.svg"), name
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


def test_without_judge_scores_the_judge_chart_is_skipped_and_its_old_files_removed(tmp_path):
    base = tmp_path / "runs"
    write_run(base, "20260101-000000-a", "openai:gpt-4.1-mini", TASKS, old_format=True)
    write_run(base, "20260101-000000-a", "ollama:qwen2.5", TASKS)
    (base / "judge_scores.svg").write_text("<svg/>")  # from an earlier plot
    (base / "judge_scores.png").write_bytes(PNG_SIGNATURE)
    result = plot(base)
    assert result.code == 0, result.err
    assert "judge_scores skipped: no run has judge scores" in result.out
    assert f"Removed {base / 'judge_scores.svg'}" in result.out
    assert f"Removed {base / 'judge_scores.png'}" in result.out
    written = sorted(p.stem for p in base.glob("*.png"))
    assert written == sorted(set(ALL_CHARTS) - {"judge_scores"})
    assert not (base / "judge_scores.svg").exists()
    report = (base / "report.html").read_text()
    assert "No judge_scores chart: no run has judge scores." in report


def test_old_and_new_folders_side_by_side(runs_dir):
    """A bat.metrics/1 folder is read as today's: the same episodes, the same numbers."""
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
    assert rates.count("50.0 % (6/12)") == 3  # 6 of 12 episodes passed in every run
    report = (runs_dir / "report.html").read_text()
    assert report.count("25.4 % – 74.6 %") == 3  # Wilson, 6 of 12, for old and new alike
    old = runs_dir / "20260101-000000-old" / "openai_gpt-4.1-mini" / "metrics.json"
    assert json.loads(old.read_text())["schema"] == "bat.metrics/1"  # left as it was


def test_a_run_without_any_judged_attempt_has_no_pass_hat_line(tmp_path):
    base = tmp_path / "runs"
    write_run(base, "20260101-000000-a", "openai:ok", {"t": "pp"})
    write_run(base, "20260101-000000-a", "openai:down", {"t": "ii"})
    result = plot(base)
    assert result.code == 0, result.err
    legend = " ".join(svg_texts(base / "pass_hat_k.svg"))
    assert "openai:ok @ 20260101-000000-a" in legend
    assert "openai:down" not in legend


# --- --filter ---------------------------------------------------------------------------


def test_filter_narrows_the_heatmap_and_task_tables_only(runs_dir):
    result = plot(runs_dir, "-F", "weather")
    assert result.code == 0, result.err
    heatmap = svg_texts(runs_dir / "task_heatmap.svg")
    assert "weather-rome" in heatmap and "weather-paris" in heatmap
    assert not any("calc-add" in t or "search-docs" in t for t in heatmap)
    assert any("containing 'weather'" in t for t in heatmap)  # said in the title
    # Summary charts still cover every run and every task: 6 of 12 passed.
    assert "50.0 % (6/12)" in svg_texts(runs_dir / "pass_rate.svg")
    report = (runs_dir / "report.html").read_text()
    assert "2 of 4 tasks" in report
    assert 'id="task-weather-rome"' in report
    assert "calc-add" not in report

    wide = plot(runs_dir, "--filter", "")  # an empty filter keeps every task
    assert wide.code == 0, wide.err
    heatmap = svg_texts(runs_dir / "task_heatmap.svg")
    assert "calc-add" in heatmap and "search-docs" in heatmap


def test_a_dataset_of_thousands_of_tasks_shows_its_worst_in_the_heatmap(tmp_path):
    """1,500 tasks once overflowed the renderer's stack (the heatmap was skipped); it now
    shows the 60 with the lowest pass rate, worst first, and says so."""
    # every task passes but every 25th, which fails one attempt in three or all three
    outcomes = {
        f"task-{n:04d}": ("fff" if n % 50 == 0 else "pfp") if n % 25 == 0 else "ppp"
        for n in range(1500)
    }
    base = tmp_path / "output"
    write_run(base, "20260101-000000-big", "openai:m", outcomes)
    result = plot(base)
    assert result.code == 0, result.err
    assert "task_heatmap skipped" not in result.out + result.err
    texts = svg_texts(base / "task_heatmap.svg")
    assert any("the 60 of 1,500 with the lowest pass rate" in t for t in texts)
    worst = [t for t in outcomes if outcomes[t] == "fff"]  # 30 of them
    partial = [t for t in outcomes if outcomes[t] == "pfp"]  # 30 more: exactly 60
    labels = [t for t in texts if t.startswith("task-")]
    assert labels == worst + partial  # worst first, then in the dataset's order
    assert "task-0001" not in texts


def test_filter_is_a_case_sensitive_substring(runs_dir):
    result = plot(runs_dir, "-F", "-r")
    assert result.code == 0, result.err
    heatmap = svg_texts(runs_dir / "task_heatmap.svg")
    assert "weather-rome" in heatmap and "search-docs" not in heatmap
    assert "weather-paris" not in heatmap

    upper = plot(runs_dir, "-F", "WEATHER")
    assert upper.code == 0, upper.err
    assert "task_heatmap skipped: no task matches 'WEATHER'" in upper.out
    assert not (runs_dir / "task_heatmap.svg").exists()  # no stale, unfiltered heatmap
    assert (runs_dir / "pass_rate.svg").is_file()


# --- hostile text -----------------------------------------------------------------------


def test_hostile_ids_and_outputs_are_escaped(tmp_path):
    base = tmp_path / "runs"
    write_run(
        base,
        "20260101-000000-x",
        "evil:<b>model</b>",
        {HOSTILE_ID: "pf", "plain": "p"},
        judge=True,
        output=HOSTILE_OUTPUT,
        reason_fail=HOSTILE_REASON,
        judge_reasoning=HOSTILE_JUDGE,
    )
    result = plot(base)
    assert result.code == 0, result.err
    html = (base / "report.html").read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;/td&gt;&lt;/tr&gt;&lt;script&gt;" in html
    assert "&lt;/details&gt;&lt;script&gt;alert(&#39;judge&#39;)" in html
    assert "evil:&lt;b&gt;model&lt;/b&gt;" in html
    tags = tags_of(html)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "iframe", "object", "embed", "link", "svg"}
    assert [tag for tag, _ in tags].count("style") == 1  # our own style sheet
    images = [attrs for tag, attrs in tags if tag == "img"]
    assert len(images) == len(ALL_CHARTS)
    assert all(img["src"].startswith("data:image/svg+xml;base64,") for img in images)
    # Nothing but a chart <img> and our own markup: every <b> is ours (a card or a label).
    assert all(attrs == {} for tag, attrs in tags if tag == "b")
    links = [attrs["href"] for tag, attrs in tags if tag == "a"]
    assert all(not href.startswith(("http:", "https:", "javascript:")) for href in links)
    # The SVG charts carry the id as text, never as markup.
    heatmap = base / "task_heatmap.svg"
    assert HOSTILE_ID in svg_texts(heatmap)
    root = ET.parse(heatmap).getroot()
    assert not [el for el in root.iter() if el.tag.endswith("script")]


def test_a_secret_in_an_output_is_not_on_the_page(tmp_path):
    """A key an agent repeated, in an episode written before bat knew it, is scrubbed."""
    from bat.evaluation.present.plot.render import plot_folder
    from bat.secrets import Scrubber

    key = "sk-test-0123456789abcdefghijklmnop"
    base = tmp_path / "runs"
    write_run(base, "20260101-000000-x", "openai:m", {"t": "pf"}, output=f"my key is {key}")
    plot_folder(base, scrubber=Scrubber([key]))
    html = (base / "report.html").read_text()
    assert key not in html and "my key is" in html


def test_report_links_every_episode_file_relatively(runs_dir):
    result = plot(runs_dir)
    assert result.code == 0, result.err
    html = (runs_dir / "report.html").read_text()
    episodes = [
        a["href"] for t, a in tags_of(html) if t == "a" and a.get("href", "").endswith(".json")
    ]
    assert len(episodes) == 3 * 12
    for href in episodes:
        assert not href.startswith("/")
        assert (runs_dir / href).is_file(), href
    assert "output: missing &#39;Paris&#39;" in html  # a verdict reason
    assert "on topic (hallucination_score)" in html  # judge reasoning
    assert "not judged: infrastructure failure" in html  # the scores' own error
    assert "infra: timeout" in html


def test_agent_errors_are_counted_and_shown(tmp_path):
    base = tmp_path / "runs"
    write_run(base, "20260101-000000-x", "openai:m", {"t": "pa", "u": "a"})
    result = plot(base)
    assert result.code == 0, result.err
    html = (base / "report.html").read_text()
    assert "2 model_error" in html  # the runs table
    assert html.count("agent error: model_error") == 2  # each episode


def test_a_task_whose_passes_the_judge_doubts_is_open_and_says_so(tmp_path):
    base = tmp_path / "runs"
    write_run(
        base, "20260101-000000-x", "openai:m", {"doubted": "pp"}, judge=True, judge_shift=-0.5
    )
    write_run(base, "20260101-000000-x", "openai:n", {"doubted": "pp"}, judge=True)
    result = plot(base)
    assert result.code == 0, result.err
    html = (base / "report.html").read_text()
    # openai:m's two passes score 0.2 to 0.5 (below 0.5 but for the last dimension)
    assert html.count("the judge scored 2 passed attempts below 0.5") == 1
    assert '<details id="task-doubted" open>' in html
    write_run(base, "20260101-000000-x", "openai:m", {"doubted": "pp"}, judge=True)
    assert plot(base).code == 0
    html = (base / "report.html").read_text()
    assert "passed attempts below" not in html and '<details id="task-doubted">' in html


def test_an_unreadable_episode_file_loses_only_its_details(tmp_path):
    base = tmp_path / "runs"
    model_dir = write_run(base, "20260101-000000-x", "openai:m", {"t": "pf"})
    broken = model_dir / "episodes" / "t__try2.json"
    broken.write_text("{not json")
    result = plot(base)
    assert result.code == 0, result.err
    html = (base / "report.html").read_text()
    assert "<b>t</b> — 1/2 attempts passed" in html  # the row still counts
    assert f"{broken} is not an episode file" in html


# --- finding runs and errors ------------------------------------------------------------


def test_labels_are_unique(tmp_path):
    from bat.evaluation.present.plot.runs import find_runs

    write_run(tmp_path / "a", "20260101-000000-x", "openai:m", {"t": "p"})
    write_run(tmp_path / "b", "20260101-000000-x", "openai:m", {"t": "f"})
    write_run(tmp_path / "b", "20260101-000000-x", "openai:n", {"t": "f"})
    labels = [run.label for run in find_runs(tmp_path)]
    assert len(set(labels)) == 3
    assert "openai:n @ 20260101-000000-x" in labels
    assert "openai:m @ 20260101-000000-x [a/20260101-000000-x/openai_m]" in labels


def test_chart_labels_are_drawable_and_distinct():
    from bat.evaluation.present.plot.specs import LABEL_LIMIT, chart_labels

    labels = chart_labels(["a\x1bb", "a\x1bb", "if", "😀" * 60, "x" * 100, ""])
    assert labels["a\x1bb"] == "a\\x1bb"
    assert labels["if"] == "if "  # not taken for the renderer's own name
    assert labels["😀" * 60].endswith("…") and len(labels["😀" * 60]) <= LABEL_LIMIT // 2
    assert labels["x" * 100] == "x" * (LABEL_LIMIT - 1) + "…"
    assert labels[""] == "(empty)"
    again = chart_labels(["a\x01b", "a\\x01b"])  # two texts drawn alike stay two labels
    assert len(set(again.values())) == 2


def test_a_folder_without_metrics_is_an_input_error(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    result = plot(tmp_path / "empty")
    assert result.code == 2
    assert f"no metrics.json in {tmp_path / 'empty'}" in result.err
    missing = plot(tmp_path / "nowhere")
    assert missing.code == 2
    assert str(tmp_path / "nowhere") in missing.err


def _break(path: Path, how: str) -> str:
    """Break a real metrics.json; what the warning says about it."""
    data = json.loads(path.read_text())
    if how == "not json":
        path.write_text("{not json")
        return "is not valid JSON"
    if how == "not an object":
        path.write_text("[1, 2]")
        return "expected a JSON object"
    if how == "rows not a list":
        data["per_episode"] = {}
        path.write_text(json.dumps(data))
        return "per_episode is not a list"
    if how == "no summary":
        del data["summary"]
        path.write_text(json.dumps(data))
        return "summary: Field required"
    if how == "later schema":
        data["schema"] = "bat.metrics/9"
        path.write_text(json.dumps(data))
        return "schema 'bat.metrics/9'"
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how", ["not json", "not an object", "rows not a list", "no summary", "later schema"]
)
def test_a_malformed_metrics_file_is_named(tmp_path, how):
    write_run(tmp_path, "20260101-000000-ok", "openai:m", {"t": "p"})
    bad_dir = write_run(tmp_path, "20260101-000000-bad", "openai:m", {"t": "p"})
    bad = bad_dir / "metrics.json"
    says = _break(bad, how)
    result = plot(tmp_path)  # the good run is drawn, the bad one named and left out
    assert result.code == 0, result.err
    assert f"warning: left out of the charts and report: {bad}" in result.err
    assert says in result.err and "Traceback" not in result.err
    assert "1 run in" in result.out
    other = write_run(tmp_path, "20260101-000000-more", "openai:m", {"t": "p"})
    _break(other / "metrics.json", how)
    shutil.rmtree(tmp_path / "20260101-000000-ok")
    alone = plot(tmp_path)  # nothing usable: an error naming each file
    assert alone.code == 2 and str(bad) in alone.err and "Traceback" not in alone.err
    assert str(other / "metrics.json") in alone.err


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
        "print('HEAVY', [m for m in sys.modules if m.split('.')[0] in "
        "('altair', 'vl_convert', 'jinja2')])\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "--filter" in proc.stdout
    assert "HEAVY []" in proc.stdout


def test_the_plot_package_imports_in_one_direction():
    """chart_worker <- runs <- specs <- report <- render: no module imports one that
    imports it (the renderer's process imports nothing of bat's charts but its own)."""
    import ast

    from bat.evaluation.present import plot

    folder = Path(plot.__file__).parent
    order = ["chart_worker", "runs", "specs", "report", "render"]
    for position, name in enumerate(order):
        tree = ast.parse((folder / f"{name}.py").read_text())
        imported = {
            node.module.rsplit(".", 1)[-1]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("bat.evaluation.present.plot.")
        }
        assert imported <= set(order[:position]), (name, imported)
