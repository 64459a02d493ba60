"""Regression checks that can say "cannot tell" (issue 28): with too few flipped tasks
McNemar's exact test can never reach p < alpha, so "not significant" proves nothing.
``eval.compare --fail-on-regression`` and the ``--baseline`` gate say so, say how many
paired tasks it would take, and fail unless ``--max-drop`` decides by the drop.

Two real runs of the echo agent on 8 tasks, the second with 2 of them failing (a
25-point drop, McNemar p = 0.5: the case of the issue)."""

from __future__ import annotations

import json
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.evaluation.present.compare import mcnemar_exact, regression
from bat.evaluation.present.power import flips_needed, reach, smallest_p
from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs

GOOD = [
    {"id": f"t{i}", "turns": [f"ok {i}"], "expected": {"output_must_contain": ["echo"]}}
    for i in range(8)
]
TWO_FAIL = [dict(t, turns=["FAIL: down"]) if i < 2 else t for i, t in enumerate(GOOD)]
SAYS = "cannot tell: 8 paired tasks, 2 flipped; McNemar's exact test needs at least 6"
MORE = "about 24 paired tasks at this flip rate (16 more)"


def bat(*args, cwd):
    return run_bat(*args, cwd=cwd, env={"HOME": str(cwd / ".home")})


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A base run (8 of 8 passed) and a run gated against it (6 of 8: what it said)."""
    project = make_project(tmp_path_factory.mktemp("power") / "p", GOOD, k=1)
    assert bat("eval.run", cwd=project).code == 0
    (base,) = run_dirs(project)
    (project / "eval/input/tasks.json").write_text(json.dumps(TWO_FAIL))
    gated = bat("eval.run", "--baseline", base.name, cwd=project)
    newer = run_dirs(project)[-1]
    return project, base.name, newer.name, gated


def test_the_baseline_gate_of_a_run_says_cannot_tell_and_fails(two_runs):
    project, _, newer, gated = two_runs
    assert gated.code == 1, gated.err
    (gate,) = json.loads((project / "eval/output" / newer / "gates.json").read_text())["gates"]
    assert gate["passed"] is False and gate["value"] == 0.25
    assert "McNemar p = 0.5" in gate["detail"] and SAYS in gate["detail"]
    assert MORE in gate["detail"] and "--max-drop" in gate["detail"]


def test_compare_fails_on_a_drop_it_cannot_tell_about(two_runs):
    project, base, newer, _ = two_runs
    result = bat("eval.compare", base, newer, "--fail-on-regression", cwd=project)
    assert result.code == 1 and "B regressed from A" in result.err
    assert SAYS in result.err and MORE in result.err
    assert "fails unless a largest drop is allowed (--max-drop" in result.err
    # Without --fail-on-regression it still says so, and exits 0.
    result = bat("eval.compare", base, newer, cwd=project)
    assert result.code == 0
    assert f"Whether B regressed: {SAYS}" in result.out and MORE in result.out
    # The other way round B improved: nothing to tell, nothing failed.
    result = bat("eval.compare", newer, base, "--fail-on-regression", cwd=project)
    assert result.code == 0, result.err
    assert "cannot tell" not in result.out + result.err


@pytest.mark.parametrize(("allowed", "code"), [("0.3", 0), ("0.25", 0), ("0.2", 1)])
def test_with_max_drop_the_drop_decides(two_runs, allowed, code):
    project, base, newer, _ = two_runs
    args = ("--fail-on-regression", "--max-drop", allowed)
    result = bat("eval.compare", base, newer, *args, cwd=project)
    assert result.code == code, result.err
    gate = bat("eval.gate", "--run", newer, "--baseline", base, "--max-drop", allowed, cwd=project)
    assert gate.code == code, gate.err
    if code:
        assert f"the drop is over {allowed}" in result.err and SAYS in result.err


def test_max_drop_help_says_there_is_no_default(two_runs):
    project = two_runs[0]
    for command in ("eval.compare", "eval.gate", "eval.run"):
        text = " ".join(bat(command, "--help", cwd=project).out.split())
        assert "No default" in text, command


# --- the computation --------------------------------------------------------------------


def brute_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p, written out independently of bat's."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(0, min(b, c) + 1)) / 2**n
    return round(min(1.0, 2 * tail), 6)


alphas = st.floats(min_value=1e-9, max_value=0.999, allow_nan=False)


@given(alpha=alphas)
def test_flips_needed_is_the_fewest_that_can_reach_alpha(alpha):
    needed = flips_needed(alpha)
    assert brute_p(needed, 0) < alpha
    assert needed == 0 or brute_p(needed - 1, 0) >= alpha


@given(paired=st.integers(0, 200), flipped=st.integers(0, 200), alpha=alphas)
def test_cannot_tell_exactly_when_no_direction_of_the_flips_is_significant(paired, flipped, alpha):
    flipped = min(flipped, paired)
    found = reach(paired, flipped, alpha)
    some_split = any(mcnemar_exact(b, flipped - b) < alpha for b in range(flipped + 1))
    assert found.can_tell == some_split
    assert smallest_p(flipped) == min(brute_p(b, flipped - b) for b in range(flipped + 1))
    if not found.can_tell:
        assert found.text().startswith(f"cannot tell: {paired} paired task")
        wanted = found.paired_needed
        if flipped:  # at this flip rate, that many paired tasks give the flips needed
            assert wanted >= found.needed and wanted * flipped >= found.needed * paired
            assert (wanted - 1) * flipped < found.needed * paired or wanted == found.needed


@given(
    regressed=st.integers(0, 12),
    improved=st.integers(0, 12),
    same=st.integers(0, 30),
    drop=st.floats(-1, 1, allow_nan=False),
    max_drop=st.one_of(st.none(), st.floats(0, 1)),
)
def test_a_drop_the_test_cannot_judge_passes_only_within_max_drop(
    regressed, improved, same, drop, max_drop
):
    result = {
        "a": {"success_percentage": 100.0},
        "b": {"success_percentage": round(100.0 - drop * 100, 6)},
        "paired_tasks": regressed + improved + same,
        "regressed": [f"r{i}" for i in range(regressed)],
        "improved": [f"i{i}" for i in range(improved)],
        "mcnemar_p": mcnemar_exact(regressed, improved),
    }
    measured, failed, why = regression(result, max_drop=max_drop)
    unreachable = regressed + improved < flips_needed(0.05)
    if measured > 0 and unreachable:
        assert "cannot tell" in why
        assert failed == (max_drop is None or measured > max_drop)
    else:
        assert "cannot tell" not in why
    if measured <= 0:
        assert not failed or result["mcnemar_p"] < 0.05
