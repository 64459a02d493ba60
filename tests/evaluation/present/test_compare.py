"""``bat eval.compare``: per-task change, flips and McNemar's exact test."""

import pytest

from bat.evaluation.present.compare import compare, mcnemar_exact
from tests import logkit
from tests.logkit import NO_SECRETS


def write_model(folder, model, rates):
    """A model folder whose tasks passed ``rate`` of 4 attempts, summarized by bat."""
    letters = {t: "p" * round(r * 4) + "f" * (4 - round(r * 4)) for t, r in rates.items()}
    return logkit.write_model(folder, logkit.outcomes(letters, model=model), model=model)


@pytest.mark.parametrize(
    ("b", "c", "p"), [(0, 0, 1.0), (3, 0, 0.25), (5, 0, 0.0625), (2, 2, 1.0), (6, 1, 0.125)]
)
def test_mcnemar_exact(b, c, p):
    assert mcnemar_exact(b, c) == p


def test_compare_lists_changes_and_flips(tmp_path):
    a = write_model(tmp_path / "r1" / "m", "m", {"t1": 1.0, "t2": 0.75, "t3": 0.25, "only-a": 1.0})
    b = write_model(tmp_path / "r2" / "m", "m", {"t1": 1.0, "t2": 0.25, "t3": 0.75, "only-b": 0.0})
    result = compare(a, b)
    rows = {r["task_id"]: r for r in result["tasks"]}
    assert rows["t2"]["change"] == -0.5 and rows["t2"]["flip"] == "regressed"
    assert rows["t3"]["flip"] == "improved" and rows["t1"]["flip"] is None
    assert rows["only-a"]["b"] is None and rows["only-b"]["a"] is None
    assert result["paired_tasks"] == 3 and result["mean_change"] == 0.0
    assert result["regressed"] == ["t2"] and result["improved"] == ["t3"]
    assert result["mcnemar_p"] == 1.0


def test_the_table_spells_rates_and_changes_as_every_other_place(tmp_path):
    """Percentages as the report and the console print them, changes in points."""
    from bat.evaluation.present.compare import render

    a = write_model(tmp_path / "r1" / "m", "m", {"t1": 1.0, "t2": 0.75, "only-a": 1.0})
    b = write_model(tmp_path / "r2" / "m", "m", {"t1": 1.0, "t2": 0.25})
    lines = render(compare(a, b)).splitlines()
    assert lines[0].endswith(": 91.7 % of episodes passed")  # 11 of 12
    assert lines[1].endswith(": 62.5 % of episodes passed")  # 5 of 8
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines[4:7]}
    assert rows["t1"].split() == ["100.0", "%", "100.0", "%", "+0.0", "points"]
    assert rows["t2"].split()[:6] == ["75.0", "%", "25.0", "%", "-50.0", "points"]
    assert rows["only-a"].split() == ["100.0", "%", "–", "–"]
    assert lines[-1].startswith("2 tasks on both sides; mean change -25.0 points; 1 regressed")
    assert lines[-1].endswith("McNemar exact p = 1")


def test_a_run_without_summaries_says_how_to_make_them(tmp_path):
    from bat.errors import InputError
    from bat.evaluation.log import run as rundir
    from bat.evaluation.present.compare import resolve_side

    run_dir = tmp_path / "20260101-000000"
    run_dir.mkdir()
    model = rundir.ModelEntry(label="m", dir="m")
    record = rundir.RunRecord(run_id=run_dir.name, status="completed", started_at="x")
    record.models.append(model)
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    with pytest.raises(InputError, match=r"no summarized model \(bat eval.summarize --run 2026"):
        resolve_side(run_dir.name, tmp_path)
