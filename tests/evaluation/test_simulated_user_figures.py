"""The figures of conversations with a simulated user (issue 30), wherever figures are shown.

One run, written by bat's own code (``tests/logkit``: real episodes with a
``SimulatedUserRecord``, the real ``summarize``, the log's writers): the task ``book`` met
its goal in 3 user turns, then hit ``max_turns`` (10), then its user model failed (an
infrastructure failure, left out); the task ``plain`` has no user. Read back by the real
readers: summary.json and metrics.json, ``bat eval.gate``, the exporters, the report and
the viewer's episode page.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bat.evaluation.log import layout
from bat.evaluation.log import run as rundir
from bat.evaluation.present.export import csv_rows, json_doc, junit, markdown
from bat.evaluation.present.export.data import load_run
from tests import logkit
from tests.conftest import run_bat
from tests.logkit import NO_SECRETS

RUN = "20261206-000000-talk"


def write_run(output: Path, episodes, run_id: str = RUN) -> Path:
    run_dir = output / run_id
    run_dir.mkdir(parents=True)
    tasks = list(dict.fromkeys(e.task_id for e in episodes))
    record = rundir.RunRecord(
        run_id=run_id,
        status="completed",
        started_at="2026-12-06T00:00:00Z",
        tasks=tasks,
        k=3,
        config={"evaluation": {"max_infra_failures": 1}},  # the user model's failure
    )
    record.models.append(rundir.ModelEntry(label="m", dir="m", status="completed"))
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    logkit.write_model(run_dir / "m", episodes, run_id=run_id, k=3)
    return run_dir


def talks():
    return [
        logkit.conversation("book", 1, True, ended="goal_met", turns=3, user_tokens=30),
        logkit.conversation("book", 2, False, ended="max_turns", turns=10, user_tokens=100),
        logkit.conversation("book", 3, False, ended=None, turns=2, infra="user_model"),
        *logkit.outcomes({"plain": "pp"}),
    ]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_run(tmp_path_factory.mktemp("talk"), talks())


def read(run_dir: Path, name: str) -> dict:
    return json.loads((run_dir / "m" / name).read_text())


def test_summary_and_metrics_hold_the_figures_of_the_conversations(run_dir):
    summary = read(run_dir, layout.SUMMARY_FILE)
    found = summary["conversation"]
    assert (found["tasks"], found["conversations"], found["infra_failures"]) == (1, 2, 1)
    assert (found["passed"], found["pass_rate"]) == (1, 0.5)
    assert (found["pass_at_k"], found["pass_hat_k"]) == (1.0, 0.0)  # k=3, 2 judged: k=2
    assert found["pass_hat"] == {"1": 0.5, "2": 0.0}
    assert found["turns"] == {"mean": 6.5, "p50": 6.5, "p90": 9.3, "max": 10.0}
    assert found["ended"] == {"goal_met": 1, "stopped_unmet": 0, "max_turns": 1, "agent_ended": 0}
    assert found["ended_rate"]["goal_met"] == 0.5
    assert found["user_tokens"]["total_tokens"] == 160  # the infra failure's spent too
    assert summary["totals"]["attempts"] == 5  # the agent's figures are as before
    book, plain = summary["attempts"]
    assert book["conversation"]["turns"]["max"] == 10.0 and "conversation" not in plain
    metrics = read(run_dir, layout.METRICS_FILE)
    assert metrics["summary"]["conversation"] == found
    row = metrics["per_episode"][0]["conversation"]
    assert (row["ended"], row["turns"], row["simulated_turns"]) == ("goal_met", 3, 2)
    assert "conversation" not in metrics["per_episode"][-1]
    # the agent's tokens stay the agent's
    assert metrics["summary"]["tokens"]["total_tokens_total"] == 5 * 15


def test_a_run_without_simulated_users_keeps_its_files(tmp_path):
    run = write_run(tmp_path, logkit.outcomes({"plain": "pp"}))
    for name in (layout.SUMMARY_FILE, layout.METRICS_FILE):
        assert "conversation" not in (run / "m" / name).read_text()


def gate(run: Path, *gates: str):
    args = [arg for text in gates for arg in ("--gate", text)]
    return run_bat("eval.gate", "--run", str(run), *args, cwd=run.parent)


def test_gates_on_conversation_figures(run_dir, tmp_path):
    failing = gate(run_dir, "conversation.turns.p90 <= 6", "conversation.goal_met >= 80%")
    assert failing.code == 1, failing.err
    assert "9.3 is not <= 6" in failing.err and "0.5 is not >= 0.8" in failing.err
    passing = gate(run_dir, "conversation.turns.p90 <= 10", "conversation.pass_hat_1 >= 0.5")
    assert passing.code == 0, passing.err
    plain = write_run(tmp_path, logkit.outcomes({"plain": "pp"}), run_id="20261206-000001-plain")
    missing = gate(plain, "conversation.turns.p90 <= 6")
    assert missing.code == 1 and "Traceback" not in missing.err
    assert "no conversation with a simulated user in the tasks chosen" in missing.err
    wrong = gate(plain, "conversation.turns.p99 <= 6")
    assert wrong.code == 2 and len(wrong.err.splitlines()) == 1
    assert "no conversation figure 'turns.p99'" in wrong.err


def test_the_exports_carry_the_figures(run_dir):
    run = load_run(run_dir)
    suite = ET.fromstring(junit.render(run)).find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["conversation.turns.p90"] == "9.3"
    assert props["conversation.goal_met"] == "0.5" and props["conversation.ended.max_turns"] == "1"
    assert props["conversation.pass^2"] == "0.0"
    assert props["conversation.user_tokens.total"] == "160"
    rows = list(csv.DictReader(io.StringIO(csv_rows.render(run))))
    assert [r["conversation_ended"] for r in rows] == ["goal_met", "max_turns", "", "", ""]
    assert [r["user_turns"] for r in rows][:2] == ["3", "10"] and rows[-1]["user_tokens"] == ""
    assert list(rows[0])[-1] == "reason"
    (model,) = json_doc.document(run).model_dump(mode="json", by_alias=True)["models"]
    assert model["conversation"]["turns"]["p90"] == 9.3
    assert model["episodes"][0]["conversation"]["ended"] == "goal_met"
    assert model["episodes"][-1]["conversation"] is None
    text = markdown.render(run)
    assert "### Simulated users" in text
    assert "| m | 2 (+1 infra) | 0.0 % | 6.5 / 6.5 / 9.3 / 10 | 1 (50.0 %) |" in text


def test_the_report_has_a_simulated_users_section(run_dir):
    from bat.evaluation.present.plot.report import render_report
    from bat.evaluation.present.plot.runs import find_runs
    from bat.evaluation.present.plot.specs import ChartSet

    page = render_report(
        run_dir.parent, find_runs(run_dir.parent, []), ChartSet(), scrubber=NO_SECRETS
    )
    section = page.split('<h2 id="simulated-users">', 1)[1].split("<h2", 1)[0]
    assert "6.5 / 6.5 / 9.3 / 10" in section and 'href="#task-book"' in section
    assert "simulated user: goal met after 3 user turns (2 simulated, at most 10)" in page


def test_the_viewer_marks_simulated_turns_and_the_ending(run_dir):
    from starlette.testclient import TestClient

    from bat.evaluation.present.view.app import make_app

    app = make_app(run_dir.parent, token=None, poll_s=0.05)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get(f"/runs/{RUN}/episodes/m/book__try1.json").text
        plain = client.get(f"/runs/{RUN}/episodes/m/plain__try1.json").text
        run_page = client.get(f"/runs/{RUN}").text
    assert page.count('<span class="badge simulated">simulated user</span>') == 3  # 2 turns + head
    assert page.count('<span class="badge dataset">dataset</span>') == 1
    assert '<b class="ending ending-goal_met">goal met</b>' in page
    assert "<q>thanks, that&#39;s all</q>" in page
    assert "badge" not in plain and "simulated" not in plain
    assert "simulated-user conversations" in run_page and "1 goal met, 1 max turns" in run_page
