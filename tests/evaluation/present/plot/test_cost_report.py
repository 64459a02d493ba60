"""What a run cost, in the report (eval.plot) and the viewer (eval.view).

The runs are written by bat's own code (runkit, logkit), their costs by the real
``episode_cost`` and ``with_judges`` at prices of a real ``PriceBook``, the figures by
the real ``summarize``. The chart is checked on its Vega-Lite spec (its data, not its
pixels), and drawn once, by the real renderer, in the one test that looks at it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bat.evaluation import stats
from bat.evaluation.card import host
from bat.evaluation.cost import PriceBook, episode_cost, with_judges
from bat.evaluation.inputs.prices import Prices
from bat.evaluation.log import run as rundir
from bat.evaluation.log import store
from bat.evaluation.log.card import (
    Card,
    CardAgent,
    CardDataset,
    CardRetries,
    CardTimeouts,
    CardVersions,
    write_card_file,
)
from bat.evaluation.log.episode import Usage
from bat.evaluation.present.plot.report import render_report
from bat.evaluation.present.plot.runs import find_runs
from bat.evaluation.present.plot.specs import ChartSet, build_charts, pareto_front
from tests import logkit
from tests.evaluation.present.plot.runkit import write_run

# Four models, each a price (input, output per million tokens) and its outcomes (k=3):
# "mid" passes most and is cheaper than "dear", which passes as often; "bad" is dearer
# than "mid" and passes less; "cheap" passes least and costs least.
MODELS = {
    "p:cheap": ((0.1, 0.4), {"t1": "pfp", "t2": "ffp"}),  # 3/6
    "p:mid": ((1.0, 4.0), {"t1": "ppp", "t2": "pfp"}),  # 5/6
    "p:dear": ((10.0, 40.0), {"t1": "ppp", "t2": "ppf"}),  # 5/6, dearer than mid
    "p:bad": ((2.0, 8.0), {"t1": "pff", "t2": "pff"}),  # 2/6
}
FRONTIER = {"p:cheap", "p:mid"}


def book(**notes: str) -> PriceBook:
    entries = {
        label: {"input": price[0], "output": price[1], "note": notes.get(label.split(":")[1])}
        for label, (price, _) in MODELS.items()
    }
    return PriceBook(Prices.model_validate(entries))


def write_card(run_dir: Path, prices: dict) -> None:
    """The run's card.json through the real writer, with the ``prices`` record the run
    keeps (``PriceBook.record()``)."""
    card = Card(
        run_id=run_dir.name,
        started_at="2026-01-01T00:00:00.000Z",
        dataset=CardDataset(path="tasks.json", sha256="0" * 64, tasks=2),
        agent=CardAgent(start=False),
        versions=CardVersions(),
        k=3,
        concurrency=1,
        timeouts=CardTimeouts(turn_s=30, agent_startup_s=30, agent_shutdown_s=5),
        retries=CardRetries(agent_max_restarts=0),
        host=host(),
        prices=prices,
    )
    write_card_file(run_dir, card, scrubber=logkit.NO_SECRETS)


@pytest.fixture(scope="module")
def priced(tmp_path_factory) -> Path:
    """Two runs: one of the four priced models ("dear"'s price illustrative, as the
    demo's are), and one of an older bat (no cost at all)."""
    base = tmp_path_factory.mktemp("priced")
    prices = book(dear="illustrative: a stand-in's")
    for model, (_, outcomes) in MODELS.items():
        write_run(base, "20260101-000000-priced", model, outcomes, prices=prices)
    write_card(base / "20260101-000000-priced", prices.record())
    write_run(base, "20250101-000000-old", "p:old", {"t1": "ppf", "t2": "pfp"})
    return base


def layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def test_the_cost_chart_has_a_point_per_run_and_the_pareto_frontier(priced):
    charts = build_charts(find_runs(priced))
    [chart] = [c for c in charts.charts if c.name == "pass_rate_cost"]
    line, ring, points = layers(chart.spec)
    drawn = {row["model"]: row for row in points["data"]["values"]}
    assert set(drawn) == set(MODELS)  # the run without cost is not a point
    assert drawn["p:mid"]["rate"] == pytest.approx(5 / 6, abs=1e-4)  # as metrics.json has it
    assert drawn["p:dear"]["cost"] == pytest.approx(10 * drawn["p:mid"]["cost"])
    assert {m for m, row in drawn.items() if row["frontier"]} == FRONTIER
    # the line and the rings go through the frontier only, the cheapest first
    assert [row["model"] for row in line["data"]["values"]] == ["p:cheap", "p:mid"]
    assert line["mark"]["interpolate"] == "step-after"
    assert [row["model"] for row in ring["data"]["values"]] == ["p:cheap", "p:mid"]
    assert {t["title"] for t in points["encoding"]["tooltip"]} >= {
        "run", "model", "pass rate", "cost per episode", "total cost",
    }  # fmt: skip
    assert drawn["p:mid"]["run_id"] == "20260101-000000-priced"
    # a hundred times dearer: the cost axis is logarithmic, and says so, and its currency
    assert points["encoding"]["x"]["title"] == "cost per episode (mean, USD, log scale)"
    subtitle = " ".join(chart.spec["title"]["subtitle"])  # lines: as wide as the chart
    assert "1 run without a known cost in USD left out" in subtitle
    assert "prices are illustrative" in subtitle


def test_the_pareto_frontier_keeps_what_nothing_beats():
    points = [(1.0, 0.5), (2.0, 0.9), (3.0, 0.9), (2.5, 0.4), (1.0, 0.5), (0.5, 0.1)]
    assert pareto_front(points) == [True, True, False, False, True, True]


def test_the_report_has_the_cost_column_and_each_tasks_cost(priced):
    runs = find_runs(priced)
    page = render_report(priced, runs, ChartSet(), scrubber=logkit.NO_SECRETS)
    assert "<th>cost: total / per episode / per pass</th>" in page
    mid = next(run for run in runs if run.model == "p:mid")
    cost = mid.cost
    assert f"{_money(cost.total)} USD<br>{_money(cost.per_episode.mean)} USD / episode" in page
    assert f"{_money(cost.per_pass)} USD / pass" in page
    row = re.search(r"<tr><td class=\"num\">\d+</td><td class=\"label run\">p:old @ [^<]*</td>"
                    r"(.*?)</tr>", page)  # fmt: skip
    assert row and '<td class="num cost">–</td>' in row[1]  # the older run: no cost
    # "dear"'s card price is illustrative: the whole run says so (one card per run)
    assert page.count("prices are illustrative") == 4
    # each task's cell: under the counts, what one of its episodes cost (the currency above)
    t1 = mid.results.summary.task("t1").cost
    assert f'3/3<br><span class="cost">{_money(t1.per_episode.mean)}</span>' in page
    assert "what an episode of the task cost (mean, USD" in page


def test_an_unpriced_model_is_a_lower_bound_in_the_report(tmp_path):
    unpriced = PriceBook(Prices.model_validate({"p:judge": {"input": 1, "output": 1}}))
    model_dir = write_run(tmp_path, "20260101-000000-x", "p:unknown", {"t1": "pp"}, k=2,
                          prices=unpriced)  # fmt: skip
    for _, episode in store.episodes(model_dir, []):  # judged at a price: a cost > 0
        judge = type("Spec", (), {"provider": "p", "model": "judge", "script": None})
        episode.cost = with_judges(episode.cost, unpriced, [(judge, Usage(prompt_tokens=100))])
        store.write_episode(model_dir, episode.task_id, episode, scrubber=logkit.NO_SECRETS)
    rows = [stats.row_of(episode) for _, episode in store.episodes(model_dir, [])]
    summary, metrics = stats.summarize(rows, k=2, model="p:unknown", task_order=["t1"],
                                       run_id="20260101-000000-x")  # fmt: skip
    store.write_results(model_dir, summary, metrics, scrubber=logkit.NO_SECRETS)
    runs = find_runs(tmp_path)
    page = render_report(tmp_path, runs, ChartSet(), scrubber=logkit.NO_SECRETS)
    assert "at least 0.000200 USD<br>" in page
    assert "unpriced: p:unknown (a lower bound)" in page
    assert '2/2<br><span class="cost">≥ 0.000100</span>' in page


def test_a_run_with_nothing_priced_says_unpriced_and_is_no_point(tmp_path):
    said: list[str] = []
    write_run(tmp_path, "20260101-000000-x", "p:nowhere", {"t1": "pf"}, k=2,
              prices=PriceBook(say=said.append))  # fmt: skip
    runs = find_runs(tmp_path)
    assert runs[0].cost is not None and runs[0].cost.total == 0
    assert build_charts(runs).absent == ["pass_rate_cost"]  # not a point at zero cost
    page = render_report(tmp_path, runs, ChartSet(), scrubber=logkit.NO_SECRETS)
    assert '<td class="num cost">unpriced<br><span class="note">no price for p:nowhere' in page
    assert "at least 0" not in page and '<span class="cost">' not in page


def test_runs_without_cost_have_no_cost_chart_column_or_word(tmp_path):
    write_run(tmp_path, "20250101-000000-old", "p:old", {"t1": "ppf"})
    runs = find_runs(tmp_path)
    charts = build_charts(runs)
    assert "pass_rate_cost" not in [c.name for c in charts.charts]
    assert charts.absent == ["pass_rate_cost"] and "pass_rate_cost" not in charts.skipped
    page = render_report(tmp_path, runs, charts, scrubber=logkit.NO_SECRETS)
    assert "<th>cost" not in page and 'class="num cost"' not in page
    assert '<span class="cost">' not in page and "pass_rate_cost" not in page


def test_the_cost_chart_draws(priced, tmp_path):
    """The renderer takes the spec: a step line, rings and points on a log axis."""
    from bat.evaluation.present.plot.render import render

    charts = build_charts(find_runs(priced))
    chart_set = ChartSet(charts=[c for c in charts.charts if c.name == "pass_rate_cost"])
    assert render(chart_set) is None and not chart_set.skipped
    [chart] = chart_set.charts
    assert (
        chart.png.startswith(b"\x89PNG") and "cost per episode (mean, USD, log scale)" in chart.svg
    )


def _money(amount: float) -> str:
    from bat.figures import money

    return money(amount, "USD").removesuffix(" USD")


# --- the viewer --------------------------------------------------------------------------


def test_the_viewer_shows_an_episodes_cost_parts_and_the_models_figures(tmp_path):
    from starlette.testclient import TestClient

    from bat.evaluation.present.view.app import make_app

    prices = PriceBook(
        Prices.model_validate(
            {
                "p:agent": {"input": 2, "output": 8},
                "p:judge": {"input": 1, "output": 4},
                "p:user": {"input": 0.5, "output": 1, "note": "illustrative"},
            }
        )
    )
    spec = {name: type("Spec", (), {"provider": "p", "model": name, "script": None})
            for name in ("agent", "judge", "user", "gone")}  # fmt: skip
    run_dir = tmp_path / "20260101-000000-view"
    model_dir = run_dir / "agent"
    episode = logkit.conversation("book", 1, True, ended="goal_met", turns=3, model="p:agent")
    episode.trace.usage = Usage(prompt_tokens=1000, completion_tokens=500, total_tokens=1500)
    episode.cost = episode_cost(prices, episode, spec["agent"], spec["user"])
    judged = [(spec["judge"], Usage(prompt_tokens=2000, completion_tokens=100)),
              (spec["gone"], Usage(prompt_tokens=5))]  # fmt: skip
    episode.cost = with_judges(episode.cost, prices, judged)
    logkit.write_model(model_dir, [episode], model="p:agent", k=1, run_id=run_dir.name)
    record = rundir.RunRecord(
        run_id=run_dir.name, status="completed", started_at="2026-01-01T00:00:00.000Z",
        tasks=["book"], k=1, models=[rundir.ModelEntry(label="p:agent", dir="agent")],
    )  # fmt: skip
    rundir.write_run(run_dir, record, scrubber=logkit.NO_SECRETS)
    write_card(run_dir, prices.record())
    cost = episode.cost
    with TestClient(make_app(tmp_path, token=None), base_url="http://127.0.0.1:8765") as client:
        page = client.get(f"/runs/{run_dir.name}/episodes/agent/book__try1.json").text
        run_page = client.get(f"/runs/{run_dir.name}").text
    shown = re.search(r'<p class="meta cost" id="cost">(.*?)</p>', page, re.S)[1]
    assert "agent 0.00600 USD" in shown and f"simulated user {_money(cost.user)} USD" in shown
    assert "judges 0.00240 USD" in shown and "unpriced: p:gone" in shown
    assert f"<b>total at least {_money(cost.total)} USD</b>" in shown
    assert "prices are illustrative" in shown  # the card's user price says so
    assert '<table class="figures cost">' in run_page and "prices are illustrative" in run_page
    assert f"at least {_money(cost.total)} USD" in run_page and "p:gone" in run_page


def test_a_linear_cost_axis_starts_at_zero(tmp_path):
    """Costs within a factor of the log ratio: a linear axis, from 0 (never below)."""
    prices = book()
    for model in ("p:cheap", "p:mid"):
        write_run(tmp_path, "20260101-000000-near", model, MODELS[model][1], prices=prices)
    [chart] = [c for c in build_charts(find_runs(tmp_path)).charts if c.name == "pass_rate_cost"]
    _, _, points = layers(chart.spec)
    x = points["encoding"]["x"]
    assert x["title"] == "cost per episode (mean, USD)"
    dearest = max(row["cost"] for row in points["data"]["values"])
    assert x["scale"]["domain"] == [0, pytest.approx(dearest * 1.1)]
