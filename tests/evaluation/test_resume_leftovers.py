"""``--resume`` removes the temporary files a killed bat left in the run folder (issue 27).

The leftovers are made by the real writers, killed with SIGKILL at the worst moment: a
child process writes through ``bat.atomic`` or the episodes' ``BatchWriter`` with the
data's ``fsync`` turned into a ``kill -9`` of itself, so the temporary file is on disk
and its rename never happens, as when bat is killed mid-write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.evalkit import episodes, make_project, run_dirs

MODEL = "agent-default"

KILLED_WRITE = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    target, how = Path(sys.argv[1]), sys.argv[2]
    def die(*args):
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "atomic":
        from bat import atomic
        atomic.os.fsync = die
        atomic.write_text_atomic(target, "new")
    else:
        from bat.evaluation.log import batch_writer
        batch_writer._sync_data = die
        writer = batch_writer.BatchWriter()
        writer.put(target, b"new")
        writer.flush()
    """
)


def killed_write(target: Path, how: str) -> None:
    """Write ``target`` with the real writer ``how``, killed before the rename."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITE, str(target), how],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def tasks(n: int) -> list[dict]:
    return [
        {"id": f"t{i}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(n)
    ]


def test_resume_removes_what_killed_writes_left_and_keeps_everything_else(tmp_path, bat, home):
    project = make_project(tmp_path, tasks(3))
    first = bat("eval.run", cwd=project)
    assert first.code == 0, first.out + first.err
    run_dir = run_dirs(project)[0]
    folder = run_dir / MODEL / "episodes"
    (folder / "t2__try1.json").unlink()  # something for the resume to do
    kept = (folder / "t0__try1.json").read_text()
    killed_write(run_dir / "run.json", "atomic")
    killed_write(run_dir / MODEL / "summary.json", "atomic")
    killed_write(folder / "t0__try1.json", "batch")
    leftovers = sorted(p.name for p in run_dir.rglob("*.tmp"))
    assert len(leftovers) == 3, leftovers
    mine = [run_dir / "notes.tmp", run_dir / ".draft.tmp", run_dir / MODEL / ".a.b.tmp"]
    for path in mine:
        path.write_text("mine")

    again = bat("eval.run", "--resume", cwd=project)
    assert again.code == 0, again.out + again.err
    assert "removed 3 temporary files a stopped bat left" in again.out
    assert sorted(p for p in run_dir.rglob("*.tmp")) == sorted(mine)
    assert (folder / "t0__try1.json").read_text() == kept  # the killed write lost nothing
    found = episodes(run_dir)
    assert sorted(found) == [f"t{i}__try1.json" for i in range(3)]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"


# -- the names: property tests -------------------------------------------------------------

NAMES = st.text(st.characters(blacklist_characters="/\0"), min_size=1, max_size=40)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(NAMES, st.integers(1, 2**22), st.integers(1, 10**6))
def test_every_temporary_name_the_writers_make_is_recognised(name, pid, count):
    import tempfile

    from bat.evaluation.pipeline import _TEMPORARY

    random_part = next(tempfile._RandomNameSequence())
    assert _TEMPORARY.fullmatch(f".{name}.{random_part}.tmp")
    assert _TEMPORARY.fullmatch(f".{name}.{pid}.{count}.tmp")


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(NAMES)
def test_names_bat_does_not_give_its_temporaries_are_left_alone(name):
    """No file of bat's own (none starts with a dot) and no hidden file without the
    writers' middle part is taken for a temporary."""
    from bat.evaluation.pipeline import _TEMPORARY

    assert not _TEMPORARY.fullmatch(name.lstrip("."))
    assert not _TEMPORARY.fullmatch(f".{name.replace('.', '')}.tmp")


# -- an episode that does not read: refused before the agent starts ---------------------------


@pytest.mark.parametrize("damage", ["garbage", "fifo", "large"])
def test_resume_refuses_an_unreadable_episode_before_the_agent_starts(tmp_path, bat, home, damage):
    """Exit 2 is "found before anything ran": an episode of the run that is not one is one
    error naming it, and run.json (still "interrupted") and the agent's log are untouched."""
    project = make_project(tmp_path, tasks(3))
    first = bat("eval.run", cwd=project)
    assert first.code == 0, first.out + first.err
    run_dir = run_dirs(project)[0]
    folder = run_dir / MODEL / "episodes"
    (folder / "t2__try1.json").unlink()  # something for the resume to do
    record = json.loads((run_dir / "run.json").read_text())
    record["status"] = "interrupted"
    (run_dir / "run.json").write_text(json.dumps(record))
    bad = folder / "t0__try1.json"
    bad.unlink()
    if damage == "garbage":
        bad.write_text("garbage\n")
    elif damage == "fifo":
        os.mkfifo(bad)
    else:
        bad.write_text(json.dumps({"padding": "x" * 5_000_000}))
    before = {p: p.read_bytes() for p in run_dir.glob("*") if p.is_file()}

    again = bat("eval.run", "--resume", cwd=project, timeout=60)
    assert again.code == 2, again.out + again.err
    lines = again.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bat: error: "), again.err
    assert str(bad) in lines[0] or f"episodes/{bad.name}" in lines[0], lines[0]
    assert {p: p.read_bytes() for p in run_dir.glob("*") if p.is_file()} == before
    assert not (folder / "t2__try1.json").exists()  # nothing ran
