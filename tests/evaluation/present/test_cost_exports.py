"""What a run cost, in every export (JUnit, CSV, Markdown, JSON) and in ``eval.compare``:
runs priced by bat's own code (``costkit``), exported and compared by ``bat`` in this
process; a run without cost exports as it always did."""

import csv
import io
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest
import xmlschema

from bat.evaluation.inputs.schemas import schema
from bat.evaluation.present.export.csv_rows import COST_COLUMNS
from bat.figures import money
from tests.conftest import REPO, run_bat
from tests.evaluation.present.costkit import write_run

LETTERS = {"t1": "pp", "t2": "pf"}


def bat(*args, cwd):
    return run_bat(*args, cwd=cwd, env={"HOME": str(cwd / ".home")})


def exported(run_dir, tmp_path):
    """The run's four exports: JUnit, CSV, Markdown, JSON (their text)."""
    paths = {kind: tmp_path / f"{run_dir.name}.{kind}" for kind in ("junit", "csv", "markdown")}
    paths["json"] = tmp_path / f"{run_dir.name}.json"
    args = [arg for kind, path in paths.items() for arg in ("--to", f"{kind}:{path}")]
    result = bat("eval.export", "--run", str(run_dir), *args, cwd=tmp_path)
    assert result.code == 0, result.err
    return {kind: path.read_text() for kind, path in paths.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cost-exports")
    return root, {
        "priced": write_run(root, "priced", LETTERS),
        "dearer": write_run(root, "dearer", {"t1": "pp", "t2": "pp"}, tokens=30),
        "unpriced": write_run(root, "unpriced", LETTERS, agent="script:ours"),
        "old": write_run(root, "old", LETTERS, priced=False),
        "nothing": write_run(root, "nothing", LETTERS, agent="script:a", judge="script:j"),
        "euros": write_run(root, "euros", LETTERS, currency="EUR"),
    }


def test_every_export_carries_the_cost(runs, tmp_path):
    _, made = runs
    run_dir = made["priced"]
    cost = json.loads((run_dir / "m/summary.json").read_text())["cost"]
    rows = json.loads((run_dir / "m/metrics.json").read_text())["per_episode"]
    found = exported(run_dir, tmp_path)
    # JUnit: the model's figures as properties of its suite, each attempt's in system-out
    xmlschema.XMLSchema(REPO / "tests/data/junit.xsd").validate(io.StringIO(found["junit"]))
    suite = ET.fromstring(found["junit"]).find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["cost.currency"] == "USD"
    assert float(properties["cost.total"]) == cost["total"]
    assert float(properties["cost.per_episode.p90"]) == cost["per_episode"]["p90"]
    assert float(properties["cost.per_pass"]) == cost["per_pass"]
    assert float(properties["cost.judge.total"]) == cost["judge"]
    assert "cost.unpriced" not in properties
    out = suite.find("testcase[@name='t1']/system-out").text
    assert f"answer: done\n  cost: {money(rows[0]['cost']['total'])}\nattempt 2" in out
    # CSV: the cost columns last, one row per episode
    table = list(csv.reader(io.StringIO(found["csv"])))
    assert tuple(table[0][-len(COST_COLUMNS) :]) == COST_COLUMNS
    assert table[0][-len(COST_COLUMNS) - 1] == "reason"
    first = dict(zip(table[0], table[1], strict=True))
    assert float(first["cost.total"]) == rows[0]["cost"]["total"]
    assert float(first["cost.judge"]) == rows[0]["cost"]["judge"]
    assert not any("e-" in first[column] for column in COST_COLUMNS)  # plain decimals
    assert (first["cost.currency"], first["cost.unpriced"], first["cost.user"]) == ("USD", "", "")
    # Markdown: total, per episode, per pass in the models table
    header, _, line = found["markdown"].split("| Model |", 1)[1].splitlines()[:3]
    assert header.endswith("| Cost | Cost/episode | Cost/pass |")
    amounts = (cost["total"], cost["per_episode"]["mean"], cost["per_pass"])
    assert line.endswith(" | ".join(money(amount) for amount in amounts) + " |")
    assert "at least" not in found["markdown"]
    # JSON: the model's figures and each episode's, as its schema says
    document = json.loads(found["json"])
    jsonschema.Draft202012Validator(schema("export.json")).validate(document)
    (model,) = document["models"]
    assert model["cost"] == cost
    assert [episode["cost"] for episode in model["episodes"]] == [row["cost"] for row in rows]


def test_unpriced_parts_are_said_and_a_run_without_cost_exports_as_before(runs, tmp_path):
    _, made = runs
    found = exported(made["unpriced"], tmp_path)
    properties = dict(
        (p.get("name"), p.get("value")) for p in ET.fromstring(found["junit"]).iter("property")
    )
    assert properties["cost.unpriced"] == "script:ours"
    assert (
        "cost: at least 0.000420 USD (no price for script:ours)" in found["junit"]
    )  # each attempt
    assert "| at least " in found["markdown"]
    assert (
        "Cost of m is at least the amount shown: 4 episodes of 4 used models with no price "
        "(script:ours); set prices: in eval.yaml." in found["markdown"]
    )
    first = next(iter(csv.DictReader(io.StringIO(found["csv"]))))
    assert first["cost.unpriced"] == "script:ours"
    old = exported(made["old"], tmp_path)
    assert "cost" not in old["csv"] and "Cost" not in old["markdown"]
    assert "cost." not in old["junit"]
    (model,) = json.loads(old["json"])["models"]
    assert model["cost"] is None and model["episodes"][0]["cost"] is None
    # nothing priced (no prices: for any model): "unpriced", never "0 USD", and no column
    nothing = exported(made["nothing"], tmp_path)
    assert (
        "Cost of m unpriced: no price for script:a, script:j (set prices: in eval.yaml)."
        in (nothing["markdown"])
    )
    assert "| Cost |" not in nothing["markdown"]
    assert "cost: unpriced (no price for script:a, script:j)" in nothing["junit"]


def test_compare_shows_the_cost_change_beside_the_pass_rate_change(runs):
    root, made = runs
    result = bat("eval.compare", "priced", "dearer", cwd=root)
    assert result.code == 0, result.err
    a = json.loads((made["priced"] / "m/summary.json").read_text())["cost"]
    b = json.loads((made["dearer"] / "m/summary.json").read_text())["cost"]
    change = 100 * (b["total"] / a["total"] - 1)
    assert (
        f"cost              {money(a['total'])} → {money(b['total'])} ({change:+.1f} %); "
        "pass rate +25.0 points" in result.out
    )
    mean = 100 * (b["per_episode"]["mean"] / a["per_episode"]["mean"] - 1)
    assert (
        f"cost per episode  {money(a['per_episode']['mean'])} → "
        f"{money(b['per_episode']['mean'])} ({mean:+.1f} %)" in result.out
    )
    assert "warning" not in result.err
    data = json.loads(bat("eval.compare", "priced", "dearer", "--json", cwd=root).out)
    assert data["cost"]["total"] == {
        "a": a["total"],
        "b": b["total"],
        "change": round(change / 100, 4),
    }


@pytest.mark.parametrize(
    ("a", "b", "warning", "shown"),
    [
        ("priced", "euros", "A is priced in USD and B in EUR: the costs are not compared", "EUR"),
        ("old", "priced", "A has no cost (a run made before bat priced episodes)", "no cost →"),
        (
            "priced",
            "unpriced",
            "B's cost is a lower bound (script:ours had no price)",
            "→ at least ",
        ),
        ("nothing", "priced", "A's cost is a lower bound (script:a, script:j had no", "unpriced →"),
    ],
)
def test_compare_warns_when_the_runs_price_differently(runs, a, b, warning, shown):
    root, _ = runs
    result = bat("eval.compare", a, b, cwd=root)
    assert result.code == 0, result.err
    costs = result.out.split("McNemar")[1]
    assert shown in costs and "%)" not in costs  # no change computed
    assert f"warning: {warning}" in result.err
    assert "no cost" not in bat("eval.compare", "nothing", "old", cwd=root).out  # none known
