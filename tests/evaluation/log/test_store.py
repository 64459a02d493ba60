"""The log layer: one reader of episodes, versioned files, older formats read as today's."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.errors import InputError
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import Verdict
from bat.evaluation.log.scores import JudgeScores
from bat.evaluation.log.summary import dump
from bat.evaluation.stats import row_of, summarize
from tests import logkit
from tests.evaluation.present.plot.runkit import write_old_results
from tests.logkit import NO_SECRETS


def test_an_older_metrics_file_is_summarized_again_from_its_rows(tmp_path):
    episodes = logkit.outcomes({"a": "ppf", "b": "pip"})
    folder = tmp_path / "run" / "m"
    folder.mkdir(parents=True)
    rows = [row_of(e) for e in episodes]
    write_old_results(folder, rows, model="m", run_id="run", k=3)
    found = store.read_results(folder)
    summary, metrics = summarize(
        [row_of(e) for e in episodes], k=3, model="m", task_order=["a", "b"], run_id="run"
    )
    assert found.source == "bat (older format)"
    assert dump(found.metrics)["summary"] == dump(metrics)["summary"]
    assert dump(found.summary)["attempts"] == dump(summary)["attempts"]


def test_a_later_format_is_refused_with_a_message_saying_so(tmp_path):
    folder = logkit.write_model(tmp_path / "run" / "m", logkit.outcomes({"a": "p"}))
    data = json.loads((folder / "metrics.json").read_text())
    (folder / "metrics.json").write_text(json.dumps({**data, "schema": "bat.metrics/9"}))
    with pytest.raises(InputError, match=r"schema 'bat.metrics/9'.*reads bat.metrics/2"):
        store.read_results(folder)


def test_the_one_episode_reader_raises_or_collects(tmp_path):
    folder = logkit.write_model(tmp_path / "run" / "m", logkit.outcomes({"a": "pf"}))
    (folder / "episodes" / "broken__try1.json").write_text("{")
    with pytest.raises(InputError, match=r"broken__try1.json is not an episode file"):
        list(store.episodes(folder))
    problems: list[str] = []
    read = list(store.episodes(folder, problems))
    assert [e.attempt for _, e in read] == [1, 2] and len(problems) == 1
    assert "broken__try1.json" in problems[0]


def test_an_episode_of_the_first_format_reads_and_is_upgraded_when_rewritten(tmp_path):
    model_dir = tmp_path / "m"
    episode = logkit.episode("a", 1, False)
    path = store.write_episode(model_dir, "a", episode, scrubber=NO_SECRETS)
    data = json.loads(path.read_text())
    data["schema"] = "bat.episode/1"  # the event keys had bat's first names then
    data["trace"]["events"] = [
        {"t": 0.5, "turn": 0, "kind": "status", "status": "working", "preview": "", "input": "x"}
    ]
    path.write_text(json.dumps(data))
    old = store.read_episode(path)
    assert old.trace.events[0].status == "working" and old.trace.events[0].input == "x"
    assert store.write_verdict(
        path, old, Verdict(passed=True, reason="now passes"), scrubber=NO_SECRETS
    )
    new = json.loads(path.read_text())
    assert new["schema"] == "bat.episode/2" and new["verdict"]["passed"] is True
    assert new["trace"]["events"][0] == {
        "t": 0.5,
        "turn": 0,
        "kind": "status",
        "task_status": "working",
        "content_preview": "",
        "user_input": "x",
        "t_ms": 500.0,
    }
    assert not store.write_verdict(
        path, store.read_episode(path), new_verdict(new), scrubber=NO_SECRETS
    )


def new_verdict(data: dict) -> Verdict:
    return Verdict.model_validate(data["verdict"])


def test_a_retried_episode_keeps_the_earlier_record(tmp_path):
    model_dir = tmp_path / "m"
    store.write_episode(
        model_dir, "a", logkit.episode("a", 1, False, infra="timeout"), scrubber=NO_SECRETS
    )
    second = store.write_episode(model_dir, "a", logkit.episode("a", 1, True), scrubber=NO_SECRETS)
    assert store.read_episode(second).earlier == ["retried/a__try1.1.json"]
    assert (model_dir / "retried" / "a__try1.1.json").is_file()
    assert store.infra_failures(model_dir) == set()
    assert store.episodes_done(model_dir) == {("a", 1)}


def test_judge_scores_of_the_wrong_shape_are_not_written(tmp_path):
    """Scores built without validation (``model_construct``) are checked before writing."""
    path = store.write_episode(
        tmp_path / "m", "a", logkit.episode("a", 1, True), scrubber=NO_SECRETS
    )
    before = path.read_text()
    unchecked = JudgeScores.model_construct(judges="openai:x")  # not a list
    with pytest.raises(ValueError, match="judges"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns of the text it serializes
        store.write_scores(path, store.read_episode(path), unchecked, scrubber=NO_SECRETS)
    assert path.read_text() == before


def test_run_json_is_typed_and_its_problems_named(tmp_path):
    run_dir = tmp_path / "20260101-000000"
    run_dir.mkdir()
    record = rundir.RunRecord(
        run_id=run_dir.name, status="running", started_at="2026-12-01T03:31:09.123Z"
    )
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    assert rundir.read_run(run_dir).timestamp_utc() == "20261201_033109"
    data = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**data, "models": [{"label": "x"}]}))
    with pytest.raises(InputError, match=r"run.json: models\[0\].dir: Field required"):
        rundir.read_run(run_dir)


def test_every_file_name_is_spelled_in_the_layout_module_only():
    """The run folder's names appear in one module of bat (issue: one log layer); the
    folder names ``episodes`` and ``retried`` are also words, so a path built with them
    (``/ "episodes"``) is what is looked for."""
    root = Path(__file__).resolve().parents[3] / "bat"
    files = [layout.RUN_FILE, layout.SUMMARY_FILE, layout.METRICS_FILE, layout.SPANS_FILE]
    files += [layout.AGENT_CONFIG_COPY, layout.JUDGE_CACHE_DIR]
    needles = [f'"{name}"' for name in files]
    needles += [f'/ "{name}"' for name in (layout.EPISODES_DIR, layout.RETRIED_DIR)]
    needles += [f'"{name}/' for name in (layout.EPISODES_DIR, layout.RETRIED_DIR)]
    sources = {p: p.read_text(encoding="utf-8") for p in root.rglob("*.py")}
    for needle in needles:
        holders = [p.name for p, text in sources.items() if needle in text]
        assert holders in ([], ["layout.py"]), (needle, holders)
    assert all(f'"{name}"' in sources[root / "evaluation" / "log" / "layout.py"] for name in files)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metrics=JSON, summary=JSON)
def test_any_content_of_the_two_files_reads_or_is_one_input_error(tmp_path, metrics, summary):
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "summary.json").write_text(json.dumps(summary))
    try:
        store.read_results(folder)
    except InputError as exc:
        assert "\n" not in exc.message and str(folder) in exc.message


def test_an_episode_error_names_the_field_and_the_problem(tmp_path):
    path = tmp_path / "m" / "episodes" / "a__try1.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"task_id": 3}')
    with pytest.raises(InputError, match=r"a__try1.json is not an episode file: task_id: Input"):
        store.read_episode(path)
    path.write_text('{"task_id": ')
    with pytest.raises(InputError, match=r"is not an episode file: Invalid JSON: EOF"):
        store.read_episode(path)
