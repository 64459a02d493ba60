"""Episode files written in batches off the event loop (``batch_writer``): what a flush
promises, what a failed write says, and what a process killed mid-write leaves."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bat.evaluation.log import batch_writer, layout
from bat.evaluation.log.batch_writer import BatchWriter

ROOT = Path(__file__).resolve().parents[3]


def test_after_a_flush_every_file_is_whole_under_its_name_and_no_temporary_is_left(tmp_path):
    writer = BatchWriter()
    expected = {}
    for i in range(600):  # more than one batch
        path = tmp_path / f"e{i:04d}.json"
        expected[path.name] = json.dumps({"n": i, "pad": "x" * (i % 97)}).encode()
        writer.put(path, expected[path.name])
    writer.flush()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == expected
    writer.put(tmp_path / "late.json", b"{}")  # the thread serves puts after a flush too
    writer.flush()
    assert (tmp_path / "late.json").read_bytes() == b"{}"


def test_new_files_get_the_mode_the_umask_allows(tmp_path):
    old = os.umask(0o027)
    try:
        writer = BatchWriter()
        writer.put(tmp_path / "a.json", b"{}")
        writer.flush()
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640


def test_a_failed_write_is_raised_naming_the_file_and_the_writer_stops(tmp_path):
    writer = BatchWriter()
    missing = tmp_path / "gone" / "e.json"
    writer.put(missing, b"{}")
    with pytest.raises(OSError) as caught:
        writer.flush()
    assert caught.value.filename == str(missing)
    with pytest.raises(OSError):  # nothing more is taken once a write failed
        writer.put(tmp_path / "next.json", b"{}")
    assert not (tmp_path / "next.json").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_a_process_killed_while_writing_leaves_only_whole_files(tmp_path):
    """SIGKILL in the middle of thousands of writes: every file under an episode's name
    holds exactly what was put for it (the part left out is the batch being written)."""
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from bat.evaluation.log.batch_writer import BatchWriter
        folder = Path(sys.argv[1])
        writer = BatchWriter()
        for i in range(1_000_000):
            data = json.dumps({{"n": i, "pad": "y" * 4000}}).encode()
            writer.put(folder / f"e{{i:07d}}.json", data)
            time.sleep(0.0002)  # as a runner between episodes: the interpreter is let go
            if i % 200 == 0:
                print(i, flush=True)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while len(layout_files(tmp_path)) < 500 and time.monotonic() < deadline:
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(10)
        child.stdout.close()
    files = layout_files(tmp_path)
    assert len(files) >= 500
    for path in files:
        data = json.loads(path.read_text())  # whole: it parses
        assert f"e{data['n']:07d}.json" == path.name and data["pad"] == "y" * 4000


def layout_files(folder: Path) -> list[Path]:
    """The files the run's reader would take as episodes (temporary files are not)."""
    names = sorted(folder.glob("*.json"))
    assert not [p for p in names if p.name.endswith(".tmp")]
    return names


def test_the_episode_reader_skips_what_a_killed_writer_left_half_done(tmp_path):
    episodes = tmp_path / "episodes"
    episodes.mkdir()
    (episodes / ".t1__1.json.123.4.tmp").write_text('{"half')
    (episodes / "t1__1.json").write_text("{}")
    assert [p.name for p in layout.episode_files(tmp_path)] == ["t1__1.json"]


def test_an_idle_writer_thread_ends_and_the_next_put_starts_another(tmp_path, monkeypatch):
    monkeypatch.setattr(batch_writer, "IDLE_S", 0.05)
    writer = BatchWriter()
    writer.put(tmp_path / "a.json", b"1")
    writer.flush()
    first = writer._thread
    deadline = time.monotonic() + 5
    while writer._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer._thread is None and not first.is_alive()
    writer.put(tmp_path / "b.json", b"2")
    writer.flush()
    assert (tmp_path / "b.json").read_bytes() == b"2"


def test_a_writer_that_falls_behind_makes_put_wait_for_room(tmp_path, monkeypatch):
    """A producer faster than the disk is held back at MAX_QUEUED waiting files, so
    the queue (bat's memory) stays bounded; everything is still written."""
    monkeypatch.setattr(batch_writer, "MAX_QUEUED", 8)
    monkeypatch.setattr(batch_writer, "MAX_BATCH", 2)
    writer = BatchWriter()
    longest = 0
    for i in range(200):
        writer.put(tmp_path / f"e{i:03d}.json", b"{}")
        longest = max(longest, len(writer._queue))
    writer.flush()
    assert longest <= 8
    assert len(list(tmp_path.glob("*.json"))) == 200
