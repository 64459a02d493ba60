"""A bat-cli 2026.10 run with the agent's failures and bat-cli's own connection errors, read
by every reader of bat's: the same counts in eval.plot, eval.compare, eval.view and
eval.export (issue 28).

The run is the real one under ``tests/data/bat-cli-2026.10/`` (an echo agent, k = 5), copied
and then changed as bat-cli 2026.10 itself writes such episodes (its adapter writes
``"<ExceptionName>: <text>"`` for an exception during the stream, its orchestrator
``"<eval error: ...>"`` and ``aux.error`` for a failure around it, and maps a ``failed``
task state to an ``error`` event): two episodes of t09 end in the agent's failed task,
three of t00 in connection errors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bat.evaluation.log import batcli, store
from bat.evaluation.log.batcli_errors import error_of
from tests.conftest import REPO, run_bat

REAL = REPO / "tests" / "data" / "bat-cli-2026.10" / "run-echo" / "20261201_033105"
MODEL = "benchmark_openai-echo-model"
LABEL = "openai:echo-model"
AGENT_FAILED = "Agent execution failed: the tool raised ValueError"
# (task, attempt index from 0) -> what bat-cli wrote as final_output, and the reading
CONNECTION = {
    ("t00", 2): (
        "A2AClientError: Network communication error: peer closed connection without "
        "sending complete message body (incomplete chunked read)",
        "crash",
    ),
    ("t00", 3): (
        "<eval error: Network communication error fetching agent card from "
        "http://127.0.0.1:9931/.well-known/agent-card.json: All connection attempts failed>",
        "unreachable",
    ),
    ("t00", 4): ("A2AClientTimeoutError: Client Request timed out", "timeout"),
}
FAILED = {("t09", 0), ("t09", 1)}


def _copy(base: Path, name: str = REAL.name) -> Path:
    target = base / name
    shutil.copytree(REAL, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def _rewrite(run_dir: Path) -> None:
    """The episodes of FAILED and CONNECTION as bat-cli writes them, and their metrics rows."""
    model_dir = run_dir / MODEL
    for path in sorted((model_dir / "episodes").glob("*.json")):
        data = json.loads(path.read_text())
        key = (data["task_id"], data["aux"]["attempt_index"])
        events = data["trace"]["events"]
        if key in FAILED:
            events[-2:] = [
                {**events[-2], "task_status": "error", "content_preview": AGENT_FAILED},
                {**events[-1], "task_status": "error", "content_preview": ""},
            ]
            data.update(final_status="error", final_output=AGENT_FAILED)
            data["verdict"] = {"passed": False, "reason": "status: 'error' != 'completed'"}
        elif key in CONNECTION:
            output = CONNECTION[key][0]
            data.update(final_status="error", final_output=output)
            data["trace"]["events"] = events[:1]  # the stream broke after its first event
            if output.startswith("<eval error: "):
                data["aux"]["error"] = output[len("<eval error: ") : -1]
                data["trace"]["events"] = []
            data["verdict"] = {"passed": False, "reason": f"eval error: {output}"}
        else:
            continue
        path.write_text(json.dumps(data, indent=2))
    metrics = json.loads((model_dir / "metrics.json").read_text())
    seen: dict[str, int] = {}
    for row in metrics["per_episode"]:
        index = seen[row["task_id"]] = seen.get(row["task_id"], -1) + 1
        if (row["task_id"], index) in FAILED | set(CONNECTION):
            row.update(status="error", success=False)
            row["verdict"] = {"passed": False, "reason": "status: 'error' != 'completed'"}
    (model_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """``broken``: the run with the failures above; ``clean``: the real run, unchanged."""
    base = tmp_path_factory.mktemp("batcli")
    broken = _copy(base, "20261201_033105")
    _rewrite(broken)
    clean = _copy(base, "20261202_000000")
    return {"base": base, "broken": broken, "clean": clean}


def _episode(run_dir: Path, task: str, index: int) -> dict:
    return json.loads((run_dir / MODEL / "episodes" / f"{task}__try{index}.json").read_text())


def test_error_of_tells_the_agents_failure_from_bat_clis_connection_errors(runs):
    for key, (_, kind) in CONNECTION.items():
        reading = error_of(_episode(runs["broken"], *key))
        assert reading.infra is not None and reading.infra.kind == kind, key
        assert reading.agent_error is None
    for key in FAILED:
        reading = error_of(_episode(runs["broken"], *key))
        assert reading.status == "error" and reading.infra is None
        assert reading.agent_error is not None and AGENT_FAILED in reading.agent_error.message


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("InternalError: the executor raised KeyError", ("agent", "agent_exception")),
        ("A2AClientError: HTTP Error 500: KeyError in the executor", ("agent", "model_error")),
        ("A2AClientError: HTTP Error 401: Unauthorized", ("agent", "authentication_failed")),
        ("A2AClientError: HTTP Error 404: Not Found", ("infra", "protocol")),
        ("InvalidParamsError: acceptedOutputModes is required", ("infra", "protocol")),
        ("ConnectError: [Errno 111] Connection refused", ("infra", "unreachable")),
        ("ReadTimeout: ", ("infra", "timeout")),
        ("ValueError: unexpected payload", ("infra", "protocol")),
        ("", ("none", None)),  # the stream ended before a final state: unfinished
    ],
)
def test_an_exception_bat_cli_caught_is_read_as_bat_reads_the_same_failure(output, expected):
    reading = error_of({"task_id": "t", "final_status": "error", "final_output": output})
    found = (
        ("agent", reading.agent_error.kind)
        if reading.agent_error
        else ("infra", reading.infra.kind)
        if reading.infra
        else ("none", None)
    )
    assert found == expected


def test_the_counts_are_the_same_in_plot_compare_view_and_export(runs):
    results = store.read_results(runs["broken"] / MODEL)
    stats = results.metrics.summary
    assert stats.infra_failures == len(CONNECTION)
    assert stats.agent_errors_total == len(FAILED)
    t00 = results.summary.task("t00")
    assert t00.infra_failures == len(CONNECTION)

    # eval.export (json): one row per episode, the same outcome words
    out = runs["base"] / "export.json"
    result = run_bat("eval.export", "--run", str(runs["broken"]), "--to", f"json:{out}")
    assert result.code == 0, result.out + result.err
    text = out.read_text()
    assert text.count('"infra_failure": "') == len(CONNECTION)
    assert text.count('"agent_error": "unknown"') == len(FAILED)

    # eval.plot: the report's tiles
    result = run_bat("eval.plot", "--folder", str(runs["base"]))
    assert result.code == 0, result.out + result.err
    report = (runs["base"] / "report.html").read_text()
    assert f"{len(CONNECTION) * 1}" in report and "infra failure" in report

    # eval.view: the runs page shows the bat-cli folder, with the label and its counts
    from starlette.testclient import TestClient

    from bat.evaluation.present.view.app import make_app

    app = make_app(runs["base"], token=None)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get("/").text
        assert "No runs in this folder yet" not in page
        assert runs["broken"].name in page and LABEL in page
        run_page = client.get(f"/runs/{runs['broken'].name}").text
        assert LABEL in run_page
        episode = client.get(f"/runs/{runs['broken'].name}/episodes/{MODEL}/t00__try4.json")
        assert episode.status_code == 200 and "timeout" in episode.text
    views = __import__("bat.evaluation.present.view.pages", fromlist=["runs_page"]).runs_page(
        runs["base"], lambda run_dir: _watch(run_dir)
    )
    broken = next(v for v in views if v.run_id == runs["broken"].name)
    assert broken.models[0].figures["infra"] == str(len(CONNECTION))
    assert broken.models[0].figures["agent_errors"] == str(len(FAILED))
    assert broken.models[0].shown == LABEL and broken.name == "benchmark"


def _watch(run_dir: Path):
    from bat.evaluation.present.view.watch import RunWatch

    return RunWatch(run_dir)


def test_compare_calls_no_task_improved_when_only_bat_clis_connection_broke(runs):
    from bat.evaluation.present.compare import compare

    data = compare(runs["broken"] / MODEL, runs["clean"] / MODEL)
    flips = {row["task_id"]: row["flip"] for row in data["tasks"]}
    # t00: 2 of 5 passed with 3 connection errors; bat reads 2 of 2 (the rest unobserved)
    assert flips["t00"] is None
    assert flips == dict.fromkeys(flips)


def test_run_record_of_a_batcli_folder(runs):
    record = batcli.read_record(runs["clean"])
    assert record.run_name == "benchmark" and record.k == 5
    assert record.tasks == ["t00", "t07", "t09", "t11"]
    assert [(m.label, m.dir) for m in record.models] == [(LABEL, MODEL)]
    assert record.started_at == "2026-12-01T03:31:09Z"


# --- one glob rule for task filters --------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

IDS = st.lists(st.text("abt0-_", min_size=1, max_size=6), min_size=1, max_size=8, unique=True)


def _everywhere(pattern: str, ids: list[str]) -> dict[str, list[str]]:
    """What each consumer of a task filter keeps of ``ids``: eval.run --task, eval.plot
    --filter, a gate's tasks: and the viewer's task filter."""
    from bat.evaluation.inputs.dataset import TaskSpec
    from bat.evaluation.inputs.selection import Selection
    from bat.evaluation.present import gates
    from bat.evaluation.present.plot.runs import matches
    from bat.evaluation.present.view.pages import Filters, Matches

    tasks = [TaskSpec(id=i, turns=["x"]) for i in ids]
    selection = Selection.of(tasks=[pattern])
    viewer = Matches(Filters(task=pattern), known_tasks=frozenset(ids))
    return {
        "run": [t.id for t in tasks if selection.chooses(t, set(ids))],
        "plot": [i for i in ids if matches(i, pattern, ids)],
        "gate": [i for i in ids if i in gates._choose([pattern], ids, {})],
        "view": [i for i in ids if viewer.row_kept(i)],
    }


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(ids=IDS, data=st.data())
def test_every_task_filter_follows_the_one_rule(ids, data):
    from fnmatch import fnmatchcase

    from bat.evaluation.inputs.task_glob import matching

    pattern = data.draw(
        st.one_of(st.sampled_from(ids), st.text("abt0-*?", min_size=1, max_size=4)),
        label="pattern",
    )
    if any(c in pattern for c in "*?["):
        expected = [i for i in ids if fnmatchcase(i, pattern)]
    elif pattern in ids:
        expected = [pattern]  # a task's id names that task alone
    else:
        expected = [i for i in ids if pattern in i]  # a plain word naming none: *WORD*
    assert matching(pattern, ids) == expected
    found = _everywhere(pattern, ids)
    assert found == dict.fromkeys(found, expected)


# --- run_name and the status of artifact events ----------------------------------------------


def test_summary_run_name_is_never_null(tmp_path):
    from bat.evaluation.log.summary import EpisodeRow, RowTime, RowVerdict, Summary
    from bat.evaluation.stats import summarize

    row = EpisodeRow(
        task_id="t",
        status="completed",
        success=True,
        time=RowTime(wall_ms=10.0),
        verdict=RowVerdict(passed=True),
        attempt=1,
        wall_time_s=0.01,
    )
    summary, _ = summarize([row], k=1, model="m", task_order=["t"], run_name=None)
    written = json.loads(summary.model_dump_json(by_alias=True))
    assert written["run_name"] == "benchmark"  # bat-cli's default, as bat-cli writes it
    older = {**written, "run_name": None}
    assert Summary.model_validate(older).run_name == "benchmark"
    # and bat-cli's own files keep theirs
    assert store.read_results(REAL / MODEL).summary.run_name == "benchmark"


def test_an_artifact_event_carries_the_tasks_status_word():
    from a2a.types import (
        Artifact,
        Part,
        StreamResponse,
        TaskArtifactUpdateEvent,
        TaskState,
        TaskStatus,
        TaskStatusUpdateEvent,
    )

    from bat.evaluation.log.episode import EpisodeTrace
    from bat.evaluation.run.turn_events import Turn, absorb

    turn, trace = Turn(), EpisodeTrace(context_id="c")
    working = TaskStatusUpdateEvent(
        task_id="x", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
    )
    chunk = TaskArtifactUpdateEvent(
        task_id="x", artifact=Artifact(artifact_id="a", parts=[Part(text="echo: hi")])
    )
    done = TaskStatusUpdateEvent(
        task_id="x", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    )
    late = TaskArtifactUpdateEvent(
        task_id="x", artifact=Artifact(artifact_id="b", parts=[Part(text="more")])
    )
    for n, event in enumerate(
        [
            StreamResponse(status_update=working),
            StreamResponse(artifact_update=chunk),
            StreamResponse(status_update=done),
            StreamResponse(artifact_update=late),
        ]
    ):
        absorb(event, turn, trace, 0, n / 10, "hi" if n == 0 else None)
    written = [e["task_status"] for e in json.loads(trace.model_dump_json(by_alias=True))["events"]]
    assert written == ["working", "working", "completed", "completed"]
    assert None not in written


def test_run_dir_is_read_alike_by_every_stage_without_eval_yaml(runs, tmp_path):
    """``--run DIR`` of a bat-cli folder, from a folder with no eval.yaml: the stages that
    read it do; one that works on bat's runs only says so in one line (no traceback)."""
    exported = run_bat("eval.export", "--run", str(runs["clean"]), "--to", "csv:-", cwd=tmp_path)
    assert exported.code == 0, exported.err
    assert exported.out.count("\n") > 20  # a row per episode
    refused = run_bat("eval.summarize", "--run", str(runs["clean"]), cwd=tmp_path)
    assert refused.code != 0
    assert "is a bat-cli 2026.10 run folder" in refused.err
    assert "Traceback" not in refused.err and refused.err.count("\n") == 1


def test_view_given_a_batcli_run_serves_the_folder_holding_it(runs, capsys):
    from bat.evaluation.present.view.pages import run_folders
    from bat.tasks.eval import _runs_folder

    served = _runs_folder(runs["clean"])
    assert served == runs["base"].resolve()
    assert runs["clean"].name in [p.name for p in run_folders(served)]
    assert "is a run: serving the runs of" in capsys.readouterr().out
    assert _runs_folder(runs["base"]) == runs["base"]  # a folder of runs stays as it is
