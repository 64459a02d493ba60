"""Natural-language assertions (issue 30) where a user looks: the viewer's episode page,
the report's "Episodes by task" and the Markdown export.

One run, written by bat's own code: the task ``refund`` has two assertions in its
verdict, decided by two judges over three attempts (the judges' answers combined by the
judge stage's own ``combine``, written with ``store.write_scores``, the verdict made by
``verdict.with_assertions``); the task ``plain`` has none. No agent, no judge server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bat.evaluation.inputs.dataset import TaskExpected
from bat.evaluation.judging.assertions import combine
from bat.evaluation.log import layout, store
from bat.evaluation.log.scores import AssertionScore, JudgeScores
from bat.evaluation.verdict import with_assertions
from tests import logkit
from tests.evaluation.test_simulated_user_figures import write_run
from tests.logkit import NO_SECRETS

RUN = "20261206-000000-asserted"
ASKED = "The agent asked for the order number before refunding"
PROMISED = "The agent never promised a refund it had not made"
EXPECTED = TaskExpected(assertions=[ASKED, PROMISED], assertions_in_verdict=True)
# per attempt, what each judge said of each assertion: (passed, reason)
ANSWERS = {
    1: {"j1": [(True, "It asked for #123 first."), (True, "No promise.")],
        "j2": [(True, "Asked first."), (True, "None made.")]},
    2: {"j1": [(True, "It asked."), (False, "It said 'refunded' too early.")],
        "j2": [(True, "Asked."), (False, "Promised early.")]},
    3: {"j1": [(None, "undecided: the judge left this assertion out"), (True, "Fine.")],
        "j2": [(None, "undecided: the judge left this assertion out"), (True, "Fine.")]},
}  # fmt: skip


def scores_of(attempt: int) -> JudgeScores:
    entries = combine(EXPECTED.assertions, ANSWERS[attempt])
    return JudgeScores(
        rubric_version="bat.rubric/1",
        judges=["j1", "j2"],
        assertions=[AssertionScore(**entry) for entry in entries],
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    refunds = []
    for attempt in ANSWERS:
        found = logkit.episode("refund", attempt, True, output="refunded order #123")
        found.verdict = with_assertions(
            found.verdict, EXPECTED, found.model_copy(update={"scores": scores_of(attempt)})
        )
        refunds.append(found)
    run = write_run(
        tmp_path_factory.mktemp("asserted"), [*refunds, *logkit.outcomes({"plain": "ppp"})], RUN
    )
    for attempt in ANSWERS:
        path = layout.episode_path(run / "m", "refund", attempt)
        assert store.write_scores(
            path, store.read_episode(path), scores_of(attempt), scrubber=NO_SECRETS
        )
    return run


def test_the_viewer_shows_each_assertion_its_decision_and_reason(run_dir):
    from starlette.testclient import TestClient

    from bat.evaluation.present.view.app import make_app

    app = make_app(run_dir.parent, token=None, poll_s=0.05)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        pages = {n: client.get(f"/runs/{RUN}/episodes/m/refund__try{n}.json").text for n in (2, 3)}
        plain = client.get(f"/runs/{RUN}/episodes/m/plain__try1.json").text
    section = pages[2].split('<section id="assertions">', 1)[1].split("</section>", 1)[0]
    rows = section.split("<tr")[2:]
    assert ASKED in rows[0] and '<span class="cell-word pass">passed</span>' in rows[0]
    assert "[j1] It asked.\n[j2] Asked." in rows[0]
    assert PROMISED in rows[1] and '<span class="cell-word fail">failed</span>' in rows[1]
    assert "It said &#39;refunded&#39; too early." in rows[1]
    assert 'j2: <span class="said-failed">failed</span>' in rows[1]  # two judges: each shown
    assert "checks of the verdict too" in section
    undecided = pages[3].split('<section id="assertions">', 1)[1].split("</section>", 1)[0]
    assert '<span class="cell-word undecided">undecided</span>' in undecided
    assert "the judge left this assertion out" in undecided
    assert "assertion" not in plain.lower()


def test_the_report_counts_how_often_each_assertion_passed(run_dir):
    from bat.evaluation.present.plot.report import render_report
    from bat.evaluation.present.plot.runs import find_runs
    from bat.evaluation.present.plot.specs import ChartSet

    runs = find_runs(run_dir.parent, [])
    page = render_report(run_dir.parent, runs, ChartSet(), scrubber=NO_SECRETS)
    task = page.split('<details id="task-refund"', 1)[1].split("</details>", 1)[0]
    table = task.split('<table class="assertions">', 1)[1]
    asked, promised = table.split("<tr>")[2:]
    assert ASKED in asked and '<span class="fail">2/2</span>' in asked
    assert "1 undecided" in asked
    assert PROMISED in promised and '<span class="fail">2/3</span>' in promised
    plain = page.split('<details id="task-plain"', 1)[1].split("</details>", 1)[0]
    assert "assertion" not in plain.lower()


def test_the_markdown_export_names_the_failing_assertions(run_dir):
    from bat.evaluation.present.export import markdown
    from bat.evaluation.present.export.data import load_run

    text = markdown.render(load_run(run_dir))
    part = text.split("### Failing assertions", 1)[1]
    assert f"| m | refund | {PROMISED} | 1/3 failed | attempt 2: [j1] It said 'refunded'" in part
    assert f"| m | refund | {ASKED} | 1/3 undecided | attempt 3: [j1] undecided: the" in part
    assert "plain" not in part
