"""Shards (``eval.run --shard I/N``) and ``eval.merge``: N slices run at once, put back
together, equal to the unsharded run episode by episode. The runs are real ``bat eval.run``
processes against the echo agent."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.errors import UsageError
from bat.evaluation.inputs.shards import Shard
from tests.evalkit import make_project, run_dirs, start_bat

# Two models (the echo agent says which it is), a task that fails, one the agent errs on.
TASKS = [
    {"id": f"t{n}", "turns": [f"question {n}"], "expected": {"output_must_contain": [f"{n}"]}}
    for n in range(9)
]
TASKS.append({"id": "model", "turns": ["MODEL?"], "expected": {"output_must_contain": ["a/"]}})
TASKS.append({"id": "refused", "turns": ["FAIL: no"], "expected": {}})
MODELS = ["openai:a", "openai:b"]


# --- the slices ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "env", "shard"),
    [
        ("2/4", {}, Shard(2, 4)),
        (" 1 / 1 ", {}, Shard(1, 1)),
        ("auto", {"CI_NODE_INDEX": "3", "CI_NODE_TOTAL": "5"}, Shard(3, 5)),
        ("auto/4", {"JOB_COMPLETION_INDEX": "0"}, Shard(1, 4)),
        ("auto/4", {"JOB_COMPLETION_INDEX": "3", "CI_NODE_INDEX": "1"}, Shard(4, 4)),
        ("auto/4", {"CI_NODE_INDEX": "2"}, Shard(2, 4)),
    ],
)
def test_a_slice_from_the_command_line_or_the_engines_variables(text, env, shard):
    assert Shard.parse(text, env) == shard


@pytest.mark.parametrize(
    ("text", "env", "says"),
    [
        ("0/4", {}, "the slice is 1 to 4 (counted from 1)"),
        ("5/4", {}, "the slice is 1 to 4"),
        ("1/0", {}, "the number of slices is 1 to"),
        ("2", {}, "give the number of slices too"),
        ("two/4", {}, "expected I/N"),
        ("auto", {}, "CI_NODE_INDEX and CI_NODE_TOTAL are not set"),
        ("auto/3", {}, "neither JOB_COMPLETION_INDEX"),
        ("auto/3", {"JOB_COMPLETION_INDEX": "x"}, "JOB_COMPLETION_INDEX='x'"),
        ("auto", {"CI_NODE_INDEX": "0", "CI_NODE_TOTAL": "2"}, "CI_NODE_INDEX='0'"),
        ("auto/3", {"JOB_COMPLETION_INDEX": "3"}, "the slice is 1 to 3"),
        # One integer rule (bat.numbers): ASCII digits of a bounded length.
        ("9" * 5000 + "/3", {}, "a number of 5000 digits"),
        ("1/" + "9" * 5000, {}, "a number of 5000 digits"),
        ("auto", {"CI_NODE_INDEX": "²", "CI_NODE_TOTAL": "3"}, "CI_NODE_INDEX='²'"),
        ("auto", {"CI_NODE_INDEX": "1", "CI_NODE_TOTAL": "٣"}, "CI_NODE_TOTAL='٣'"),
        ("auto/3", {"JOB_COMPLETION_INDEX": "9" * 5000}, "a number of 5000 digits"),
        ("auto/" + "9" * 5000, {"CI_NODE_INDEX": "1"}, "a number of 5000 digits"),
        ("auto/3", {"CI_NODE_INDEX": "-1"}, "CI_NODE_INDEX='-1'"),
    ],
)
def test_a_slice_that_is_not_one_is_said_so(text, env, says):
    with pytest.raises(UsageError) as caught:
        Shard.parse(text, env)
    assert says in caught.value.message
    assert len(caught.value.message) < 200


@given(text=st.text(max_size=30), index=st.text(max_size=12), total=st.text(max_size=12))
def test_any_shard_text_is_a_slice_or_a_usage_error(text, index, total):
    """Whatever the flag and the CI variables hold: a Shard, or one UsageError line."""
    env = {"CI_NODE_INDEX": index, "CI_NODE_TOTAL": total, "JOB_COMPLETION_INDEX": index}
    for flag in (text, "auto", f"auto/{total}"):
        try:
            shard = Shard.parse(flag, env)
        except UsageError as error:
            assert "\n" not in error.message
        else:
            assert 1 <= shard.index <= shard.total


@given(
    models=st.integers(1, 4),
    tasks=st.integers(1, 40),
    k=st.integers(1, 6),
    total=st.integers(1, 12),
)
def test_the_slices_cut_the_plan_into_balanced_disjoint_parts(models, tasks, k, total):
    plan = [(m, a, t) for m in range(models) for a in range(1, k + 1) for t in range(tasks)]
    slices = [Shard(index, total) for index in range(1, total + 1)]
    owners = [[s for s in slices if s.keeps(*item, tasks, k)] for item in plan]
    assert all(len(found) == 1 for found in owners)  # every episode in exactly one slice
    for m in range(models):  # and every model's episodes spread evenly
        sizes = [sum(s.keeps(m, a, t, tasks, k) for (mm, a, t) in plan if mm == m) for s in slices]
        assert max(sizes) - min(sizes) <= 1


# --- sharded runs, merged --------------------------------------------------------------------


def episodes_of(run_dir) -> dict[tuple[str, str], dict]:
    found = {}
    for path in sorted(run_dir.glob("*/episodes/*.json")):
        data = json.loads(path.read_text())
        found[(path.parent.parent.name, path.name)] = {
            "status": data["status"],
            "final_output": data["final_output"],
            "verdict": (data["verdict"]["passed"], data["verdict"]["reason"]),
            "agent_error": (data["agent_error"] or {}).get("kind"),
            "infra_error": data["infra_error"],
        }
    return found


def totals_of(run_dir, model: str) -> dict:
    totals = json.loads((run_dir / model / "summary.json").read_text())["totals"]
    keys = ("attempts", "passed", "pass_at_k", "pass_hat_k", "agent_errors", "infra_failures")
    return {key: totals[key] for key in keys}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """The same project run unsharded, and as three shards run at once; then merged."""
    root = tmp_path_factory.mktemp("shards")
    home = root / "home"
    home.mkdir()
    whole = make_project(root / "whole", TASKS, k=2, models=MODELS)
    unsharded = start_bat("eval.run", cwd=whole, home=home)
    out, err = unsharded.communicate(timeout=180)
    assert unsharded.returncode == 0, out + err
    # The three slices at once, as a CI matrix runs them; on one machine, each agent on
    # a port of its own (where the agent listens is no difference eval.merge minds).
    procs = []
    for index in (1, 2, 3):
        folder = make_project(root / f"shard-{index}", TASKS, k=2, models=MODELS)
        procs.append(start_bat("eval.run", "--shard", f"{index}/3", cwd=folder, home=home))
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, out + err
    shards = [run_dirs(root / f"shard-{index}")[0] for index in (1, 2, 3)]
    return root, home, run_dirs(whole)[0], shards


def test_merged_shards_equal_the_unsharded_run_episode_by_episode(sharded, bat):
    root, _home, unsharded, shards = sharded
    target = root / "merged"
    result = bat(
        "eval.merge",
        *map(str, reversed(shards)),
        "-o",
        str(target),
        cwd=root / "whole",
        charts=True,
    )
    assert result.code == 0, result.out + result.err
    (merged,) = run_dirs_in(target)
    assert episodes_of(merged) == episodes_of(unsharded)  # every field that is the agent's
    assert len(episodes_of(merged)) == len(TASKS) * 2 * len(MODELS)
    for model in ("openai_a", "openai_b"):
        assert totals_of(merged, model) == totals_of(unsharded, model)
    record = json.loads((merged / "run.json").read_text())
    assert record["status"] == "completed" and record["shard"] is None
    assert [m["shard"] for m in record["merged_from"]] == ["1/3", "2/3", "3/3"]
    assert [m["episodes_run"] for m in record["models"]] == [22, 22]
    card = json.loads((merged / "card.json").read_text())
    assert card["shard"] is None and len(card["merged_from"]) == 3
    assert (target / "report.html").is_file()  # the chain plotted it, into -o
    for index in (1, 2, 3):
        assert (merged / f"agent-openai_a.shard-{index}.log").is_file()


def test_a_shard_says_which_slice_it_holds(sharded):
    _, _, _, shards = sharded
    sizes = []
    for index, run_dir in enumerate(shards, 1):
        record = json.loads((run_dir / "run.json").read_text())
        assert record["shard"]["index"] == index and record["shard"]["total"] == 3
        card = json.loads((run_dir / "card.json").read_text())
        assert card["shard"] == record["shard"]
        sizes.append(len(episodes_of(run_dir)))
    assert sorted(sizes) == [14, 15, 15]  # 44 episodes, balanced


def run_dirs_in(folder):
    return sorted(p.parent for p in folder.glob("*/run.json"))


def test_merge_refuses_shards_that_do_not_make_one_run(sharded, bat, tmp_path):
    root, _home, unsharded, shards = sharded
    whole = root / "whole"
    cases = [
        ([shards[0], shards[1]], "slice 3/3 missing"),
        ([shards[0], shards[1], shards[1], shards[2]], "slice 2/3 is given twice"),
        ([shards[0], unsharded], "is not a shard (it ran without --shard)"),
    ]
    other = tmp_path / "other"
    shutil.copytree(shards[2], other)
    record = json.loads((other / "run.json").read_text())
    cases.append(([shards[0], shards[1], _with(other, dataset_sha256="0" * 64)], "dataset"))
    running = tmp_path / "running"
    shutil.copytree(shards[2], running)
    cases.append(([shards[0], shards[1], _with(running, status="running")], "is running"))
    cut = tmp_path / "cut"
    shutil.copytree(shards[2], cut)
    cases.append(
        ([shards[0], shards[1], _with(cut, shard={**record["shard"], "total": 4})], "different")
    )
    target = tmp_path / "nothing"
    for shards_given, says in cases:
        result = bat("eval.merge", *map(str, shards_given), "-o", str(target), cwd=whole)
        assert result.code == 2 and says in result.err, (says, result.err)
        assert len(result.err.strip().splitlines()) == 1
        assert not target.exists() or not any(target.iterdir())  # nothing written


def _with(run_dir, **changes):
    path = run_dir / "run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return run_dir


def test_a_shard_resumes_its_own_slice_only(tmp_path, bat, home):
    project = make_project(tmp_path / "p", TASKS, k=1)
    assert bat("eval.run", "--shard", "2/2", cwd=project).code == 0
    (run_dir,) = run_dirs(project)
    first = sorted(p.name for p in run_dir.glob("*/episodes/*.json"))
    for path in run_dir.glob("*/episodes/t1__*.json"):
        path.unlink()  # as if interrupted before it
    again = bat("eval.run", "--resume", cwd=project)
    assert again.code == 0, again.err
    assert sorted(p.name for p in run_dir.glob("*/episodes/*.json")) == first
    refused = bat("eval.run", "--resume", "--shard", "1/2", cwd=project)
    assert refused.code == 2 and "holds slice 2/2" in refused.err
    plan = bat("eval.run", "--shard", "1/2", "--dry-run", cwd=project)
    assert plan.code == 0 and "slice 1/2: 6 of those 11 episodes" in plan.out
