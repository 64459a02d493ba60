"""Files in a run folder that are not regular files (a FIFO, a device, a link to one) are
never opened: every reader of the log refuses them through ``log.files.read_regular``,
naming the file, and the readers that go on without a file (the report, the judge, the
viewer) skip them. Opening a FIFO for reading blocks until a writer comes, so each test
runs under a time limit: on a reader that opens one, it fails instead of hanging."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bat.errors import InputError
from bat.evaluation.log import card as cards
from bat.evaluation.log import run as rundir
from bat.evaluation.log import store
from bat.evaluation.log.files import read_json_object
from bat.evaluation.log.run import RunRecord
from tests.fuzzkit import time_limit
from tests.logkit import NO_SECRETS, outcomes, write_model

LIMIT_S = 5


@pytest.fixture
def run_dir(tmp_path):
    """A run folder written by the log's own code: run.json and one model's episodes."""
    folder = tmp_path / "output" / "20260101-000000"
    folder.mkdir(parents=True)
    record = RunRecord(run_id=folder.name, status="completed", started_at="2026-01-01T00:00:00Z")
    record.models = [rundir.ModelEntry(label="m", dir="m", status="completed")]
    record.tasks, record.k = ["t1", "t2"], 1
    rundir.write_run(folder, record, scrubber=NO_SECRETS)
    write_model(folder / "m", outcomes({"t1": "p", "t2": "f"}))
    return folder


def fifo_instead(path):
    """``path`` replaced by a FIFO no one writes to."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def test_an_episode_that_is_a_fifo_is_refused_without_being_opened(run_dir):
    path = fifo_instead(run_dir / "m" / "episodes" / "t1__try1.json")
    started = time.monotonic()
    with time_limit(LIMIT_S), pytest.raises(InputError) as caught:
        store.read_episode(path)
    assert f"{path} is a FIFO, not a regular file" in caught.value.message
    assert time.monotonic() - started < 1


def test_a_link_to_a_fifo_or_a_device_is_refused_too(run_dir):
    os.mkfifo(run_dir / "m" / "pipe")
    linked = run_dir / "m" / "episodes" / "t1__try1.json"
    linked.unlink()
    linked.symlink_to("../pipe")
    device = run_dir / "m" / "episodes" / "t2__try1.json"
    device.unlink()
    device.symlink_to("/dev/null")
    with time_limit(LIMIT_S):
        for path, kind in ((linked, "a FIFO"), (device, "a character device")):
            with pytest.raises(InputError) as caught:
                store.read_episode(path)
            assert f"is {kind}, not a regular file" in caught.value.message


def test_the_readers_that_go_on_skip_a_fifo_and_say_so(run_dir):
    fifo_instead(run_dir / "m" / "episodes" / "t1__try1.json")
    unreadable: list[str] = []
    with time_limit(LIMIT_S):
        read = [episode.task_id for _, episode in store.episodes(run_dir / "m", unreadable)]
        assert store.infra_failures(run_dir / "m") == set()
    assert read == ["t2"]
    assert len(unreadable) == 1 and "t1__try1.json is a FIFO" in unreadable[0]


def test_a_card_that_is_a_fifo_is_no_card(run_dir):
    fifo_instead(run_dir / "card.json")
    with time_limit(LIMIT_S):
        assert cards.read_card(run_dir) is None  # as for a run without one


@pytest.mark.parametrize("name", ["run.json", "m/metrics.json", "m/summary.json"])
def test_run_json_and_the_summaries_that_are_fifos_are_refused(run_dir, name):
    path = fifo_instead(run_dir / name)
    read = {
        "run.json": lambda: rundir.read_run(run_dir),
        "m/metrics.json": lambda: read_json_object(path),
        "m/summary.json": lambda: store.read_results(run_dir / "m"),
    }[name]
    with time_limit(LIMIT_S), pytest.raises(InputError) as caught:
        read()
    assert f"{path} is a FIFO" in caught.value.message


def test_the_latest_run_is_never_a_fifo(run_dir):
    later = run_dir.parent / "20990101-000000"
    later.mkdir()
    os.mkfifo(later / "run.json")
    with time_limit(LIMIT_S):
        assert rundir.find_run(run_dir.parent, None) == run_dir


def test_the_judge_cache_and_the_viewer_read_around_a_fifo(run_dir):
    from bat.evaluation.judging.cache import JudgeCache
    from bat.evaluation.present.view import pages

    cache = JudgeCache(run_dir / "judge-cache")
    (run_dir / "judge-cache").mkdir()
    os.mkfifo(cache.path("k"))
    path = fifo_instead(run_dir / "m" / "episodes" / "t1__try1.json")
    with time_limit(LIMIT_S):
        assert cache.get("k") is None  # judged again, not waited on
        view = pages.episode_page(run_dir, "m", path)
    assert "is a FIFO" in view.problem


# --- run.json's shard, read by the log's model (Hypothesis) ------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**20), 10**20),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
SHARDS = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries({"index": JSON_VALUES, "total": JSON_VALUES}),
    st.fixed_dictionaries({"index": st.integers(-2, 12), "total": st.integers(-2, 12)}),
    st.fixed_dictionaries({"index": st.integers(1, 3)}, optional={"total": st.integers(0, 10**13)}),
)


@given(shard=SHARDS)
def test_any_shard_in_run_json_is_a_slice_or_one_error_line(shard):
    """Whatever a hand-edited run.json says for ``shard``: a slice the merge can count
    with (whole numbers, 1 <= index <= total <= 10,000), or one InputError naming the key."""
    from bat.evaluation.inputs.shards import MOST, Shard

    data = {"run_id": "r", "status": "completed", "started_at": "2026", "shard": shard}
    try:
        record = RunRecord.model_validate(data)
    except ValueError as error:  # pydantic's; read_run words it as one line (below)
        assert error.errors()[0]["loc"][0] == "shard"
        return
    found = Shard.from_record(record.shard)
    if found is not None:
        assert type(found.index) is int and type(found.total) is int
        assert 1 <= found.index <= found.total <= MOST


@given(shard=SHARDS)
def test_read_run_words_a_bad_shard_as_one_line(tmp_path_factory, shard):
    import json

    folder = tmp_path_factory.mktemp("run")
    data = {"run_id": "r", "status": "completed", "started_at": "2026", "shard": shard}
    (folder / "run.json").write_text(json.dumps(data))
    try:
        rundir.read_run(folder)
    except InputError as error:
        assert "\n" not in error.message and "run.json" in error.message


# -- deep JSON: the decoder's RecursionError is the file's problem, named -----------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_run_files_are_named_not_a_recursion_error(run_dir, tmp_path):
    """An outside probe found ``[`` × 100,000 in run.json, summary.json, card.json or the
    agent's process record to be a RecursionError traceback in every reader (and a 500
    of the viewer's index); now each is the file's one-line problem or skipped."""
    from bat.evaluation.log import batcli
    from bat.evaluation.run.agent_process import stop_stale

    (run_dir / "run.json").write_text(DEEP)
    with pytest.raises(InputError, match="nested too deeply") as caught:
        rundir.read_run(run_dir)
    assert str(run_dir / "run.json") in caught.value.message
    (run_dir / "m" / "summary.json").write_text(DEEP)
    assert batcli.is_model_folder(run_dir / "m") is False
    record = tmp_path / "agent-m.process.json"
    record.write_text(DEEP)
    assert stop_stale(record, 0.1) is None
