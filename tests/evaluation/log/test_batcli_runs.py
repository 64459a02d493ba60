"""Run folders written by bat-cli 2026.10, read by ``bat eval.plot`` and ``bat eval.compare``.

The bat-cli files under ``tests/data/bat-cli-2026.10/`` are the ones its release wrote
(one run of an echo agent, k = 5), copied unchanged. Every expectation about latency,
tokens and pass^k is computed here from those files, not copied from bat's output.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest

from tests.conftest import REPO, run_bat
from tests.evaluation.present.plot.runkit import TASKS, svg_texts, tags_of, write_run
from tests.logkit import NO_SECRETS

RUN = REPO / "tests" / "data" / "bat-cli-2026.10" / "run-echo" / "20261201_033105"
MODEL_DIR = RUN / "benchmark_openai-echo-model"
LABEL = "openai:echo-model @ 20261201_033105"
COUNTS = {"t00": (5, 5), "t07": (5, 5), "t09": (5, 0), "t11": (5, 5)}  # attempts, passed
DRAWN = ["pass_rate", "task_heatmap", "pass_hat_k", "latency", "tokens"]


def metrics_rows() -> list[dict]:
    return json.loads((MODEL_DIR / "metrics.json").read_text())["per_episode"]


def episode_files() -> dict[tuple[str, int], dict]:
    """bat-cli's episode files by (task id, attempt index from 0)."""
    found = {}
    for path in sorted((MODEL_DIR / "episodes").glob("*.json")):
        data = json.loads(path.read_text())
        found[(data["task_id"], data["aux"]["attempt_index"])] = data
    return found


def copy_run(base: Path) -> Path:
    """A writable copy of the bat-cli run folder under ``base``."""
    target = base / RUN.name
    shutil.copytree(RUN, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def write_our_run(base: Path, run_id: str, model: str, outcomes: dict[str, str]) -> Path:
    """A run of ours written by bat's own code: episode files, run.json, summarize_run."""
    from bat.evaluation.context import RunContext
    from bat.evaluation.log import layout
    from bat.evaluation.log import run as rundir
    from bat.evaluation.log.episode import EpisodeResult, EpisodeTrace, Verdict
    from bat.evaluation.pipeline import summarize_run

    run_dir = base / run_id
    run_dir.mkdir(parents=True)
    record = rundir.RunRecord(
        run_id=run_id,
        status="completed",
        started_at=rundir.now_iso(),
        k=5,
        tasks=list(outcomes),
        models=[rundir.ModelEntry(label=model, dir="model-a")],
    )
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    for task_id, letters in outcomes.items():
        for attempt, letter in enumerate(letters, 1):
            episode = EpisodeResult(
                task_id=task_id,
                attempt=attempt,
                model=model,
                status="completed",
                final_output=f"answer {task_id}",
                trace=EpisodeTrace(context_id="c", wall_time_s=0.5 + attempt / 10),
                verdict=Verdict(passed=letter == "p", reason=f"ours: {letter}"),
                started_at=rundir.now_iso(),
                ended_at=rundir.now_iso(),
            )
            path = layout.episode_path(run_dir / "model-a", task_id, attempt)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(episode.to_json(NO_SECRETS))
    summarize_run(RunContext(config_file=None), run_dir, say=lambda line: None)
    return run_dir


# --- reading the run ------------------------------------------------------------------


def test_find_runs_reads_the_batcli_run_folder():
    from bat.evaluation.present.plot.runs import find_runs

    [run] = find_runs(RUN)
    assert run.source == "bat-cli 2026.10"
    assert run.label == LABEL and run.model == "openai:echo-model"
    assert run.run_id == "20261201_033105"
    assert (run.episodes, run.passed, run.infra_failures) == (20, 15, 0)
    assert run.pass_rate == 0.75
    tasks = {task_id: (c.attempts, c.passed) for task_id, c in run.tasks().items()}
    assert tasks == COUNTS and list(tasks) == ["t00", "t07", "t09", "t11"]
    assert run.k == 5
    assert run.pass_at_k == 0.75 and run.pass_hat_k == 0.75


def test_latency_and_tokens_come_from_wall_ms_and_the_nested_tokens():
    from bat.evaluation.present.plot.runs import find_runs

    [run] = find_runs(RUN)
    rows = metrics_rows()
    seconds = sorted(row["time"]["wall_ms"] / 1000 for row in rows)
    assert sorted(row.wall_time_s for row in run.rows) == pytest.approx(seconds, abs=1e-4)

    def linear(q):  # the percentile with linear interpolation between ranks
        rank = (len(seconds) - 1) * q
        low = math.floor(rank)
        high = min(low + 1, len(seconds) - 1)
        return seconds[low] + (seconds[high] - seconds[low]) * (rank - low)

    latency = run.latency
    assert latency.count == 20
    assert latency.min == pytest.approx(seconds[0], abs=1e-4)
    assert latency.max == pytest.approx(seconds[-1], abs=1e-4)
    assert latency.mean == pytest.approx(statistics.fmean(seconds), abs=1e-4)
    for name, q in (("p25", 0.25), ("median", 0.5), ("p75", 0.75), ("p90", 0.9), ("p99", 0.99)):
        assert getattr(latency, name) == pytest.approx(linear(q), abs=1e-4), name
    assert latency.median == pytest.approx(statistics.median(seconds), abs=1e-4)
    assert 0.04 < latency.median < 0.1  # seconds, not milliseconds
    prompt = sum(row["tokens"]["prompt_tokens"] for row in rows) / len(rows)
    completion = sum(row["tokens"]["completion_tokens"] for row in rows) / len(rows)
    assert run.tokens_per_episode == pytest.approx((prompt, completion), abs=1e-4)


def test_pass_hat_curve_is_computed_from_the_episodes():
    from bat.evaluation.present.plot.runs import find_runs

    tally: dict[str, list[int]] = {}
    for (task_id, _), data in episode_files().items():
        counts = tally.setdefault(task_id, [0, 0])
        counts[0] += 1
        counts[1] += data["verdict"]["passed"]
    expected = [
        (k, statistics.fmean(math.comb(c, k) / math.comb(n, k) for n, c in tally.values()))
        for k in range(1, 6)
    ]
    [run] = find_runs(RUN)
    curve = run.pass_hat_curve
    assert [k for k, _ in curve] == [k for k, _ in expected]
    assert [value for _, value in curve] == pytest.approx([value for _, value in expected])
    assert [value for _, value in expected] == [0.75] * 5  # t09 0, the other three 1


def test_rows_are_numbered_as_the_episode_files_attempts():
    from bat.evaluation.present.plot.runs import find_runs

    [run] = find_runs(RUN)
    files = episode_files()
    assert len(run.rows) == len(files) == 20
    for row in run.rows:
        data = files[(row.task_id, row.attempt - 1)]
        assert row.wall_time_s == pytest.approx(data["trace"]["wall_ms"] / 1000, abs=1e-4)
        assert row.success is data["verdict"]["passed"]
        assert row.status == data["final_status"] and row.infra_error is None


def test_the_episode_files_convert_to_episode_results():
    from bat.evaluation.log import batcli

    unreadable: list[str] = []
    converted = {(e.task_id, e.attempt): e for _, e in batcli.episodes(MODEL_DIR, unreadable)}
    assert unreadable == [] and len(converted) == 20
    for (task_id, index), data in episode_files().items():
        episode = converted[(task_id, index + 1)]
        assert episode.model == data["model_name"]
        assert episode.final_output == data["final_output"]
        assert episode.verdict.passed is data["verdict"]["passed"]
        assert episode.verdict.reason == data["verdict"]["reason"]
        assert episode.trace.wall_time_s == pytest.approx(data["trace"]["wall_ms"] / 1000)


def test_exact_wall_times_give_bat_clis_own_totals():
    """No rounding before the statistics: the total is the one bat-cli wrote itself, to
    the 4 decimals of a second that metrics.json keeps (docs/eval-formats.md)."""
    from bat.evaluation.present.plot.runs import find_runs

    [run] = find_runs(RUN)
    written = json.loads((MODEL_DIR / "metrics.json").read_text())["summary"]["time"]
    assert run.latency.total == round(written["total_wall_ms"] / 1000, 4)
    assert run.latency.max == round(written["max_wall_ms"] / 1000, 4)


def with_statuses(run_dir: Path, statuses: dict[str, str]) -> Path:
    """The copied run with the episodes of some tasks ending in another status, in both
    of bat-cli's files (as bat-cli writes a task that failed: ``failed``, not passed)."""
    model_dir = run_dir / MODEL_DIR.name
    metrics = json.loads((model_dir / "metrics.json").read_text())
    for row in metrics["per_episode"]:
        if row["task_id"] in statuses:
            row["status"] = statuses[row["task_id"]]
    (model_dir / "metrics.json").write_text(json.dumps(metrics))
    for path in (model_dir / "episodes").glob("*.json"):
        data = json.loads(path.read_text())
        if data["task_id"] in statuses:
            data["final_status"] = statuses[data["task_id"]]
            data["final_output"] = "the model said: Error code: 500 Internal Server Error"
            path.write_text(json.dumps(data))
    return model_dir


def test_failed_rejected_canceled_episodes_of_bat_cli_are_agent_errors(tmp_path):
    from bat.evaluation.log import batcli

    model_dir = with_statuses(copy_run(tmp_path), {"t09": "failed", "t00": "canceled"})
    converted = batcli.load(model_dir)
    totals = converted.summary.totals
    # t09's five failed with a model error in their words; t00's five were canceled
    assert {kind: n for kind, n in totals.agent_errors.items() if n} == {
        "model_error": 5,
        "canceled": 5,
    }
    rows = {(r.task_id, r.attempt): r for r in converted.metrics.per_episode}
    assert rows[("t09", 1)].status == "error" and rows[("t09", 1)].agent_error == "model_error"
    assert rows[("t11", 1)].status == "completed" and rows[("t11", 1)].agent_error is None
    episodes = {(e.task_id, e.attempt): e for _, e in batcli.episodes(model_dir)}
    assert episodes[("t00", 2)].status == "error"
    assert episodes[("t00", 2)].agent_error.kind == "canceled"
    assert episodes[("t00", 2)].agent_error.state == "canceled"


def test_vacuous_passes_of_a_batcli_run_are_counted_as_in_ours():
    """t07 checks only the status (input-required): its five passes say nothing."""
    from bat.evaluation.log import batcli

    converted = batcli.load(MODEL_DIR)
    status_only = {
        data["task_id"]
        for data in episode_files().values()
        if data["verdict"]["passed"]
        and data["verdict"]["reason"].startswith("status:")
        and ";" not in data["verdict"]["reason"]
    }
    assert status_only == {"t07"}
    assert converted.summary.totals.vacuous_passes == 5
    assert {r.task_id for r in converted.metrics.per_episode if r.vacuous} == status_only


def test_without_episode_files_the_label_is_the_model_name_of_summary_json(tmp_path):
    from bat.evaluation.present.plot.runs import find_runs

    run_dir = copy_run(tmp_path)
    shutil.rmtree(run_dir / MODEL_DIR.name / "episodes")
    [run] = find_runs(run_dir)
    assert run.label == "echo-model @ 20261201_033105"
    assert run.passed == 15


def test_a_summary_json_of_bat_is_not_taken_for_bat_clis(tmp_path):
    """bat.summary/2 has bat-cli's ``attempts`` list too; its ``schema`` tells them apart."""
    from bat.evaluation.log import batcli
    from bat.evaluation.present.plot.runs import find_runs

    model_dir = write_run(tmp_path, "20260101-000000-ours", "openai:m", {"t": "pf"})
    assert not batcli.is_model_folder(model_dir)
    assert batcli.is_model_folder(MODEL_DIR)
    [run] = find_runs(tmp_path)
    assert run.source == "bat"


# --- eval.plot --------------------------------------------------------------------------


def test_plot_of_the_batcli_run_folder(tmp_path):
    run_dir = copy_run(tmp_path)
    result = run_bat("eval.plot", "-f", str(run_dir), timeout=120)
    assert result.code == 0, result.err
    assert "1 run" in result.out
    for name in DRAWN:
        assert (run_dir / f"{name}.png").is_file() and (run_dir / f"{name}.svg").is_file()
        texts = " ".join(svg_texts(run_dir / f"{name}.svg"))
        assert LABEL in texts, name
        assert "benchmark_openai-echo-model" not in texts, name
    assert "75.0 % (15/20)" in svg_texts(run_dir / "pass_rate.svg")
    html = (run_dir / "report.html").read_text()
    assert "openai:echo-model" in html
    assert "output: missing &#39;never present&#39;" in html  # t09's verdict reason
    assert "echo: hello number 9" in html and "which one?" in html  # final outputs
    # Each attempt once: the metrics rows and the episode files joined by attempt.
    assert "<b>t09</b> — 0/5 attempts passed" in html
    assert "<b>t07</b> — 5/5 attempts passed" in html
    assert "could not be read" not in html
    links = [a["href"] for t, a in tags_of(html) if t == "a" and a["href"].endswith(".json")]
    assert len(set(links)) == len(links) == 20
    assert all((run_dir / link).is_file() for link in links)


def test_plot_of_a_batcli_run_beside_one_of_ours(tmp_path):
    base = tmp_path / "runs"
    copy_run(base)
    write_run(base, "20260101-000000-ours", "openai:gpt-4.1-mini", TASKS)
    result = run_bat("eval.plot", "-f", str(base), timeout=120)
    assert result.code == 0, result.err
    assert "2 runs" in result.out
    ours = "openai:gpt-4.1-mini @ 20260101-000000-ours"
    rates = svg_texts(base / "pass_rate.svg")
    assert "75.0 % (15/20)" in rates and "50.0 % (6/12)" in rates
    for name in DRAWN:
        texts = " ".join(svg_texts(base / f"{name}.svg"))
        assert LABEL in texts and ours in texts, name
    heatmap = svg_texts(base / "task_heatmap.svg")
    assert "t09" in heatmap and "weather-rome" in heatmap
    html = (base / "report.html").read_text()
    assert "missing &#39;never present&#39;" in html and "missing &#39;Paris&#39;" in html


# --- eval.compare -----------------------------------------------------------------------


def compare_json(*sides: str, cwd: Path) -> dict:
    result = run_bat("eval.compare", *sides, "--json", cwd=cwd)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_compare_two_batcli_model_folders(tmp_path):
    data = compare_json(str(MODEL_DIR), str(MODEL_DIR), cwd=tmp_path)
    rates = {row["task_id"]: (row["a"], row["b"], row["change"]) for row in data["tasks"]}
    assert rates == {task: (c / n, c / n, 0.0) for task, (n, c) in COUNTS.items()}
    for side in ("a", "b"):
        assert data[side]["model"] == "openai:echo-model"
        assert data[side]["run_id"] == "20261201_033105"
        assert data[side]["success_percentage"] == 75.0
    assert data["regressed"] == [] and data["improved"] == [] and data["mcnemar_p"] == 1.0
    # The run folder (no run.json) with its one model, and RUN:MODEL, name the same side.
    same = compare_json(str(RUN), f"{RUN}:{MODEL_DIR.name}", cwd=tmp_path)
    assert same["tasks"] == data["tasks"]
    assert same["a"]["folder"] == same["b"]["folder"] == str(MODEL_DIR)
    # RUN:LABEL, the label the side is shown under, names it too
    by_label = compare_json(f"{RUN}:openai:echo-model", str(MODEL_DIR), cwd=tmp_path)
    assert by_label["a"]["folder"] == str(MODEL_DIR)


def test_compare_a_batcli_run_with_one_of_ours(tmp_path):
    from bat.evaluation.present.compare import mcnemar_exact

    copy_run(tmp_path)
    outcomes = {"t00": "ppppp", "t07": "fffff", "t09": "ppppf", "t11": "ppfff"}
    write_our_run(tmp_path, "20260102-000000-ours", "openai:gpt-4.1-mini", outcomes)
    data = compare_json("20261201_033105", "20260102-000000-ours", cwd=tmp_path)
    rows = {row["task_id"]: row for row in data["tasks"]}
    assert {t: (r["a"], r["b"]) for t, r in rows.items()} == {
        "t00": (1.0, 1.0),
        "t07": (1.0, 0.0),
        "t09": (0.0, 0.8),
        "t11": (1.0, 0.4),
    }
    assert data["regressed"] == ["t07", "t11"] and data["improved"] == ["t09"]
    assert data["mcnemar_p"] == mcnemar_exact(2, 1)
    assert data["a"]["model"] == "openai:echo-model"
    assert data["b"]["model"] == "openai:gpt-4.1-mini"
    text = run_bat("eval.compare", "20261201_033105", "20260102-000000-ours", cwd=tmp_path)
    assert text.code == 0, text.err
    assert "A  openai:echo-model (20261201_033105): 75.0 % of episodes passed" in text.out
    # Our own lookups are unchanged: an unknown run is still named with where bat looked.
    missing = run_bat("eval.compare", "no-such-run", "20260102-000000-ours", cwd=tmp_path)
    assert missing.code == 2 and "no run 'no-such-run'" in missing.err


# --- malformed files --------------------------------------------------------------------


def _broken_row(**changes) -> str:
    rows = metrics_rows()
    rows[3].update(changes)
    return json.dumps({"per_episode": rows, "summary": {}})


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "is not valid JSON"),
        ('{"per_episode": {}, "summary": {}}', "'per_episode' is not a list"),
        (_broken_row(task_id=None), "per_episode row 4 has no task_id"),
        (_broken_row(success="yes"), "per_episode row 4: 'success' is not true or false"),
        (_broken_row(time={"wall_ms": "fast"}), "row 4: 'time.wall_ms' is not a number"),
        (_broken_row(tokens={"prompt_tokens": -1}), "row 4: 'tokens.prompt_tokens' is not"),
    ],
)
def test_a_malformed_batcli_metrics_file_is_one_line_naming_it(tmp_path, content, says):
    run_dir = copy_run(tmp_path)
    bad = run_dir / MODEL_DIR.name / "metrics.json"
    bad.write_text(content)
    for result in (
        run_bat("eval.plot", "-f", str(run_dir), timeout=120),
        run_bat("eval.compare", str(bad.parent), str(MODEL_DIR), cwd=tmp_path),
    ):
        assert result.code == 2
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bat: error: "), result.err
        assert str(bad) in lines[0] and says in lines[0]
