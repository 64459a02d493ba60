"""Scripts written for bat-cli 2026.10's files work on bat's.

The shared example (``tests/data/bat-cli-2026.10/run-echo``) is a real bat-cli run: its
echo agent, its ``tasks.json``, k = 5. bat runs the same tasks against its own echo
fixture agent (which answers those tasks the same way), and the same jq programs are
run on both folders with the real ``jq``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_bat
from tests.evalkit import episodes, make_project, run_dirs

BATCLI_RUN = Path(__file__).resolve().parents[2] / "data" / "bat-cli-2026.10" / "run-echo"
BATCLI_MODEL = BATCLI_RUN / "20261201_033105" / "benchmark_openai-echo-model"

# Programs a bat-cli user may have in a CI script or a dashboard, and what they must agree on.
SUMMARY_PROGRAMS = [
    "[.attempts[] | select(.passed < .attempts) | .task_id]",
    "[.attempts[] | {task_id, attempts, passed, failed, success_percentage}]",
    "{run_name, k, model_name, passed, qualitative_scores}",
]
METRICS_PROGRAMS = [
    "[.per_episode[].success]",
    "[.per_episode[] | {task_id, status, success, expected_outcome, verdict: .verdict.passed}]",
    ".summary | {episodes, k_attempts, total_runs, passed, failed, pass_rate}",
    "[.per_episode[].tokens | keys]",
    ".summary.tokens | {prompt_tokens_total, completion_tokens_total, total_tokens_total}",
    ".summary.time | keys",
    ".summary.time.avg_wall_ms | type",
]
EPISODE_PROGRAMS = [
    "[.task_id, .final_status, .verdict.passed, .aux.attempt_index, .expected_outcome]",
    ".trace.trajectory.totals | keys",
    "[.trace.wall_ms, .qualitative_scores, .trace.trajectory.truncated] | map(type)",
]

pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def jq(program: str, path: Path) -> object:
    done = subprocess.run(
        ["jq", "-c", program, str(path)], capture_output=True, text=True, check=True, timeout=30
    )
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def ours(tmp_path_factory) -> Path:
    """bat's model folder for the same tasks, k and model as the bat-cli run."""
    tasks = json.loads((BATCLI_RUN / "tasks.json").read_text())
    root = tmp_path_factory.mktemp("same-agent")
    (root / "home").mkdir()
    project = make_project(
        root,
        tasks,
        k=5,
        run_name="benchmark",
        models=["openai:echo-model"],
    )
    result = run_bat("eval.run", cwd=project, env={"HOME": str(root / "home")})
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    (model_dir,) = [p for p in run_dir.iterdir() if (p / "summary.json").is_file()]
    return model_dir


@pytest.mark.parametrize("program", SUMMARY_PROGRAMS)
def test_summary_programs_give_the_same_answers(program, ours):
    assert jq(program, ours / "summary.json") == jq(program, BATCLI_MODEL / "summary.json")


@pytest.mark.parametrize("program", METRICS_PROGRAMS)
def test_metrics_programs_give_the_same_answers(program, ours):
    assert jq(program, ours / "metrics.json") == jq(program, BATCLI_MODEL / "metrics.json")


@pytest.mark.parametrize("program", EPISODE_PROGRAMS)
def test_episode_programs_give_the_same_answers(program, ours):
    for name in ("t00__try0.json", "t07__try2.json", "t09__try4.json"):
        stem, attempt = name.removesuffix(".json").split("__try")
        mine = ours / "episodes" / f"{stem}__try{int(attempt) + 1}.json"  # bat counts from 1
        assert jq(program, mine) == jq(program, BATCLI_MODEL / "episodes" / name), name


def test_the_failing_task_of_the_documented_example(ours):
    program = ".attempts[] | select(.passed < .attempts) | .task_id"
    assert jq(f"[{program}]", ours / "summary.json") == ["t09"]


def test_milliseconds_are_derived_from_bat_s_seconds(ours):
    metrics = json.loads((ours / "metrics.json").read_text())
    rows = metrics["per_episode"]
    for row in rows:
        assert row["time"]["wall_ms"] == pytest.approx(row["wall_time_s"] * 1000, abs=0.1)
    walls = [row["time"]["wall_ms"] for row in rows]
    time = metrics["summary"]["time"]
    assert time["avg_wall_ms"] == pytest.approx(sum(walls) / len(walls), abs=0.2)
    assert time["min_wall_ms"] == min(walls) and time["max_wall_ms"] == max(walls)
    # bat-cli's time is every episode's; bat's wall_time_s leaves the cold ones out
    seconds = [row["wall_time_s"] for row in rows]
    warm = [row["wall_time_s"] for row in rows if not row["cold"]] or seconds
    assert len(warm) == metrics["summary"]["wall_time_s"]["count"]
    assert metrics["summary"]["wall_time_s"]["max"] == pytest.approx(max(warm), abs=1e-4)


def test_every_key_bat_cli_writes_is_in_our_files(ours):
    """Every key path of bat-cli's three files (list items merged) is in ours too."""
    (episode,) = [e for e in episodes(ours.parent, ours.name).values() if e["attempt"] == 1][:1]
    pairs = [
        (BATCLI_MODEL / "summary.json", ours / "summary.json"),
        (BATCLI_MODEL / "metrics.json", ours / "metrics.json"),
    ]
    for theirs, mine in pairs:
        missing = paths(json.loads(theirs.read_text())) - paths(json.loads(mine.read_text()))
        assert not missing, f"{mine.name} lacks {sorted(missing)}"
    batcli_episode = json.loads((BATCLI_MODEL / "episodes" / "t00__try0.json").read_text())
    assert not paths(batcli_episode) - paths(episode)


def paths(value: object, prefix: str = "") -> set[str]:
    found = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(f"{prefix}.{key}")
            found |= paths(item, f"{prefix}.{key}")
    elif isinstance(value, list):
        for item in value:
            found |= paths(item, f"{prefix}[]")
    return found


def test_every_file_of_the_run_matches_its_published_schema(ours):
    """run.json, summary.json, metrics.json and each episode, as ``bat eval.run`` wrote
    them, against ``docs/schemas`` (the files ``bat eval.schema`` prints)."""
    import jsonschema

    from bat.evaluation.inputs.schemas import schema as schema_for

    def check(name: str, path: Path) -> None:
        jsonschema.Draft202012Validator(schema_for(name)).validate(json.loads(path.read_text()))

    check("run.json", ours.parent / "run.json")
    check("summary.json", ours / "summary.json")
    check("metrics.json", ours / "metrics.json")
    for path in sorted((ours / "episodes").glob("*.json")):
        check("episode", path)
