"""Shards (``eval.run --shard I/N``) and ``eval.merge``: N slices run at once, put back
together, equal to the unsharded run episode by episode. The runs are real ``bat eval.run``
processes against the echo agent."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.errors import UsageError
from bat.evaluation.inputs.shards import Shard
from tests.conftest import run_bat
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


# --- eval.merge verifies what the shards hold (issue 27) -------------------------------------


def merge_into(bat, sharded, shards, target, *flags, timeout=60):
    """``bat eval.merge SHARDS -o TARGET FLAGS`` where the project's eval.yaml is."""
    root = sharded[0]
    argv = ("eval.merge", *map(str, shards), "-o", str(target), *flags)
    return bat(*argv, cwd=root / "whole", timeout=timeout)


def copied(run_dir, tmp_path, name):
    """A copy of a finished shard, to break."""
    return shutil.copytree(run_dir, tmp_path / name)


def refused(result, target, *says):
    """Exit 2, one ``bat: error:`` line saying ``says``, and no folder at ``target``."""
    assert result.code == 2, result.out + result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bat: error: "), result.err
    for words in says:
        assert words in lines[0], (words, lines[0])
    assert not target.exists(), sorted(target.rglob("*"))


def test_merge_refuses_a_shard_with_an_episode_deleted(sharded, bat, tmp_path):
    _, _, _, shards = sharded
    cut = copied(shards[1], tmp_path, "cut")
    gone = sorted(cut.glob("openai_b/episodes/*.json"))[0]
    gone.unlink()
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [shards[0], cut, shards[2]], target)
    refused(result, target, "1 planned episode missing", f"openai_b/episodes/{gone.name}")
    assert "--partial" in result.err


def test_merge_names_a_few_missing_episodes_then_counts_the_rest(sharded, bat, tmp_path):
    _, _, _, shards = sharded
    cut = copied(shards[2], tmp_path, "cut")
    gone = sorted(cut.glob("*/episodes/*.json"))
    for path in gone:
        path.unlink()
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [shards[0], shards[1], cut], target)
    refused(result, target, f"{len(gone)} planned episodes missing", "and 11 more")
    assert len(result.err) < 400


def test_merge_with_partial_says_the_run_is_partial(sharded, bat, tmp_path):
    _, _, _, shards = sharded
    cut = copied(shards[0], tmp_path, "cut")
    gone = sorted(cut.glob("openai_a/episodes/*.json"))[-1]
    gone.unlink()
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [cut, *shards[1:]], target, "--partial")
    assert result.code == 3, result.out + result.err  # numbers not to be trusted
    assert "1 planned episode missing" in result.err and "Traceback" not in result.err
    (merged,) = run_dirs_in(target)
    record = json.loads((merged / "run.json").read_text())
    assert record["status"] == "partial"
    assert record["missing_episodes"] == [f"openai_a/episodes/{gone.name}"]
    assert len(episodes_of(merged)) == len(TASKS) * 2 * len(MODELS) - 1
    again = bat("eval.gate", "--run", str(merged), cwd=sharded[0] / "whole")
    assert again.code == 3 and "missing" in again.err  # the gate knows too


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("stranger__try1.json", "not in the run's plan"),  # a task outside the dataset
        ("t0__try3.json", "not in the run's plan"),  # an attempt beyond k = 2
        ("notes.json", "not in the run's plan"),  # not an episode's name at all
    ],
)
def test_merge_refuses_an_episode_outside_the_plan(sharded, bat, tmp_path, name, says):
    _, _, _, shards = sharded
    extra = copied(shards[0], tmp_path, "extra")
    model = extra / "openai_a" / "episodes"
    shutil.copy(sorted(model.glob("*.json"))[0], model / name)
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [extra, *shards[1:]], target)
    refused(result, target, says, f"openai_a/episodes/{name}")


@pytest.mark.parametrize("damage", ["garbage", "not an episode", "large"])
def test_merge_refuses_an_episode_that_does_not_read(sharded, bat, tmp_path, damage):
    """An episode that is not one (garbage, a JSON that is no episode, a large one) is
    refused before the merged folder is renamed into place: one error naming it, exit 2,
    and no folder left behind (nor another on a retry)."""
    _, _, _, shards = sharded
    broken = copied(shards[1], tmp_path, "broken")
    episode = sorted(broken.glob("openai_b/episodes/*.json"))[0]
    if damage == "garbage":
        episode.write_text("garbage\n")
    elif damage == "not an episode":
        episode.write_text('{"schema": "bat.episode/v1"}')
    else:
        episode.write_text(json.dumps({"padding": "x" * 5_000_000}))
    target = tmp_path / "out"
    for _ in range(2):
        result = merge_into(bat, sharded, [shards[0], broken, shards[2]], target)
        refused(result, target, f"openai_b/episodes/{episode.name}", "not an episode file")
        assert "Merged" not in result.out


def test_merge_refuses_an_episode_of_another_slice(sharded, bat, tmp_path):
    """An episode in the wrong shard (moved there, or doubled) is refused before anything
    is written: not even the output folder is made."""
    _, _, _, shards = sharded
    first, second = copied(shards[0], tmp_path, "first"), copied(shards[1], tmp_path, "second")
    stray = sorted(second.glob("openai_a/episodes/*.json"))[0]
    shutil.copy(stray, first / "openai_a" / "episodes" / stray.name)
    target = tmp_path / "out" / "deeper"
    result = merge_into(bat, sharded, [first, second, shards[2]], target)
    refused(result, target, "not of slice 1/3", stray.name)
    assert not target.parent.exists()
    stray.unlink()  # now only in the wrong shard: every episode present once, one misplaced
    result = merge_into(bat, sharded, [first, second, shards[2]], target)
    refused(result, target, "not of slice 1/3", stray.name)


@pytest.mark.parametrize(
    ("shard", "says"),
    [
        ({"index": "x", "total": 3}, "shard: index"),
        ({"total": 3}, "shard: index"),
        ({"index": 1}, "shard: total"),
        ({"index": 1, "total": 10**12}, "shard: total"),
        ({"index": 1, "total": -3}, "shard: total"),
        ({"index": 1, "total": 10_001}, "shard: total"),
        ({"index": 2.7, "total": 3}, "shard: index"),
        ({"index": 1.0, "total": 1}, "shard: index"),
        ({"index": True, "total": 1}, "shard: index"),
        ({"index": "1", "total": "1"}, "shard: index"),
        ({"index": 0, "total": 1}, "shard: index"),
        ({"index": 2, "total": 1}, "shard: index"),
        ("1/1", "shard"),
        ([1, 1], "shard"),
    ],
)
def test_merge_refuses_a_shard_record_that_is_not_a_slice(sharded, bat, tmp_path, shard, says):
    """run.json's ``shard`` is read by the log's model: whole numbers (no bool, float or
    text), 1 <= index <= total <= 10,000; one line naming the file, at once."""
    _, _, _, shards = sharded
    broken = _with(copied(shards[0], tmp_path, "broken"), shard=shard)
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [broken], target, timeout=15)
    refused(result, target, f"{broken / 'run.json'}: {says}")


def test_a_fifo_among_a_shards_files_is_skipped_with_a_warning(sharded, bat, tmp_path):
    """A FIFO is never opened: the merge does not hang on it, says it skipped it, and an
    episode that is a FIFO counts as missing. (A symbolic link in a shard is refused as
    in any run folder: tests/evaluation/log/test_run_paths.py.)"""
    _, _, _, shards = sharded
    odd = copied(shards[0], tmp_path, "odd")
    os.mkfifo(odd / "openai_a" / "episodes" / "junk.json")
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [odd, *shards[1:]], target, timeout=20)
    assert result.code == 0, result.out + result.err
    assert "junk.json is a FIFO" in result.err
    (merged,) = run_dirs_in(target)
    assert len(episodes_of(merged)) == len(TASKS) * 2 * len(MODELS)
    episode = sorted((odd / "openai_a" / "episodes").glob("t*.json"))[0]
    episode.unlink()
    os.mkfifo(episode)
    again = tmp_path / "again"
    result = merge_into(bat, sharded, [odd, *shards[1:]], again, timeout=20)
    refused_lines = [line for line in result.err.splitlines() if line.startswith("bat: error:")]
    assert result.code == 2 and len(refused_lines) == 1, result.err
    assert "1 planned episode missing" in refused_lines[0] and not again.exists()


def test_a_fifo_in_an_old_run_does_not_hang_the_charts(sharded, bat, tmp_path):
    """eval.plot reads every run of the output folder: an old run holding a FIFO (as an
    episode, metrics.json or run.json) is read around, with a warning, never opened."""
    _, _, unsharded, _ = sharded
    output = tmp_path / "output"
    old = shutil.copytree(unsharded, output / unsharded.name)
    episode = sorted((old / "openai_a" / "episodes").glob("*.json"))[0]
    episode.unlink()
    os.mkfifo(episode)
    linked = sorted((old / "openai_a" / "episodes").glob("*.json"))[-1]
    linked.unlink()
    os.mkfifo(old / "openai_a" / "pipe")
    os.symlink("../pipe", linked)  # a link to a FIFO: followed to look, never opened
    (old / "openai_b" / "metrics.json").unlink()
    os.mkfifo(old / "openai_b" / "metrics.json")
    result = bat("eval.plot", "--folder", str(output), cwd=sharded[0] / "whole", timeout=30)
    assert result.code == 0, result.out + result.err
    assert f"{episode.name} is a FIFO" in result.err, result.err
    assert f"{linked.name} is a FIFO" in result.err
    assert "metrics.json is a FIFO" in result.err and "Traceback" not in result.err
    assert (output / "report.html").is_file()


def test_a_run_json_that_is_a_fifo_is_not_opened(sharded, bat, tmp_path):
    _, _, unsharded, _ = sharded
    output = tmp_path / "output"
    old = shutil.copytree(unsharded, output / unsharded.name)
    (old / "run.json").unlink()
    os.mkfifo(old / "run.json")
    target = tmp_path / "out"
    result = merge_into(bat, sharded, [old], target, timeout=15)
    assert result.code == 2 and "Traceback" not in result.err, result.err
    assert not target.exists()
    found = bat("eval.summarize", "--run", str(old), cwd=sharded[0] / "whole", timeout=15)
    assert found.code == 2 and "Traceback" not in found.err, found.err


# --- eval.merge under generated damage (Hypothesis) -------------------------------------------

DROP = object()  # a key taken out of run.json
ODD = st.one_of(
    st.just(DROP),
    st.none(),
    st.booleans(),
    st.integers(-3, 5),
    st.integers(10**4, 10**15),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["index", "total", "of", "x"]), st.integers(-1, 4), max_size=3),
)
EPISODE_CHANGES = ["delete", "double", "stranger", "move"]
RECORD_KEYS = [("shard", "index"), ("shard", "total"), ("shard",), ("k",), ("tasks",), ("status",)]
MERGE_CASES = st.fixed_dictionaries(
    {
        "shard": st.integers(0, 2),  # the shard that is damaged
        "record": st.lists(st.tuples(st.sampled_from(RECORD_KEYS), ODD), max_size=2),
        "episodes": st.lists(
            st.tuples(
                st.sampled_from(["delete", "double", "stranger", "move"]), st.integers(0, 99)
            ),
            max_size=3,
        ),
        "partial": st.booleans(),
    }
)
MERGE_FUZZ = settings(
    max_examples=int(25 * float(os.environ.get("FUZZ_SCALE", "1"))),
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


def damaged(shards, scratch, case) -> list:
    """Copies of the three shards with ``case``'s damage done to one of them."""
    copies = [shutil.copytree(s, scratch / f"shard-{n}") for n, s in enumerate(shards, 1)]
    victim, neighbour = copies[case["shard"]], copies[(case["shard"] + 1) % 3]
    path = victim / "run.json"
    record = json.loads(path.read_text())
    for keys, value in case["record"]:
        holder = record
        for key in keys[:-1]:
            holder = holder.setdefault(key, {}) if isinstance(holder.get(key), dict) else {}
        if value is DROP:
            holder.pop(keys[-1], None)
        else:
            holder[keys[-1]] = value
    path.write_text(json.dumps(record))
    for change, n in case["episodes"]:
        files = sorted(victim.glob("*/episodes/*.json"))
        if not files:
            break
        episode = files[n % len(files)]
        elsewhere = neighbour / episode.relative_to(victim)
        if change == "delete":
            episode.unlink()
        elif change == "double":
            shutil.copy(episode, elsewhere)
        elif change == "stranger":
            shutil.copy(episode, episode.with_name(f"stranger-{n}__try1.json"))
        else:
            episode.replace(elsewhere)
    return copies


def check_merge(result, target, partial: bool) -> None:
    """A merge ends whole or not at all: exit 0 and the complete run; with --partial, exit
    3 and a run marked partial listing what it lacks; else exit 2 with one ``bat: error:``
    line and no folder at ``target``. Never a traceback."""
    assert "Traceback" not in result.err, result.err
    planned = len(TASKS) * 2 * len(MODELS)
    if result.code == 0 or (partial and result.code == 3):
        (merged,) = run_dirs_in(target)
        record = json.loads((merged / "run.json").read_text())
        missing = record.get("missing_episodes") or []
        assert len(episodes_of(merged)) + len(missing) == planned
        assert (record["status"] == "partial") == (result.code == 3)
        assert bool(missing) == (result.code == 3)
        return
    assert result.code == 2, result.out + result.err
    lines = result.err.strip().splitlines()
    headlines = [line for line in lines if line.startswith("bat: error: ")]
    assert len(headlines) == 1, result.err
    assert all(line.startswith(("bat: error: ", "warning: ")) for line in lines), result.err
    assert not target.exists()


@given(case=MERGE_CASES)
@MERGE_FUZZ
def test_any_damage_to_the_shards_merges_whole_or_not_at_all(sharded, case):
    _, _, _, shards = sharded
    with tempfile.TemporaryDirectory() as scratch:
        copies = damaged(shards, Path(scratch), case)
        target = Path(scratch) / "out"
        flags = ["--partial"] if case["partial"] else []
        result = merge_into(run_bat, sharded, copies, target, *flags, timeout=20)
        check_merge(result, target, case["partial"])


def test_the_merge_check_can_fail(sharded, monkeypatch, tmp_path):
    """The canary: with a shard reader that fails as main's did (a bare ValueError for
    ``"index": "x"``), the same check reports the traceback instead of passing it."""

    def broken(cls, data):
        raise ValueError(f"invalid literal for int() with base 10: {data!r}")

    monkeypatch.setattr(Shard, "from_record", classmethod(broken))
    _, _, _, shards = sharded
    case = {"shard": 0, "record": [], "episodes": [], "partial": False}
    copies = damaged(shards, tmp_path, case)
    target = tmp_path / "out"
    result = merge_into(run_bat, sharded, copies, target)
    with pytest.raises(AssertionError):
        check_merge(result, target, partial=False)


def test_a_merge_that_fails_half_way_leaves_nothing_behind(sharded, bat, tmp_path, monkeypatch):
    """The disk fills while run.json is written, after every episode was copied: no
    half-made run is left, nor the -o folders the merge made."""
    from bat.evaluation.log import run as rundir

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", "run.json")

    monkeypatch.setattr(rundir, "write_run", full)
    _, _, _, shards = sharded
    target = tmp_path / "out" / "deeper"
    result = merge_into(bat, sharded, shards, target)
    assert result.code != 0 and "Traceback" not in result.err, result.err
    assert "No space left on device" in result.err
    assert not (tmp_path / "out").exists(), sorted((tmp_path / "out").rglob("*"))
