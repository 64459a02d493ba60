"""run.json says how a run ended early, even on a full disk (``mark_ended``).

With no room for the atomic rewrite, the status is changed in place within the bytes
run.json already has; the file must stay valid JSON, read as the same record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from bat.evaluation.log.run import (
    RUN_FILE,
    ModelEntry,
    RunRecord,
    mark_ended,
    now_iso,
    patch_status,
    read_run,
    status_member,
    write_run,
)
from tests.conftest import fill
from tests.logkit import NO_SECRETS

STATUSES = get_args(RunRecord.model_fields["status"].annotation)
PAGE = 4096  # tmpfs allocates whole pages


def running_run(folder: Path, note: str = "") -> Path:
    """A run folder whose run.json says ``running``, as bat writes it."""
    run_dir = folder / "20260101-000000-run"
    run_dir.mkdir(exist_ok=True)
    record = RunRecord(
        run_id=run_dir.name,
        status="running",
        started_at=now_iso(),
        config={"note": note, "env": {"status": "running"}},  # a nested look-alike
        models=[ModelEntry(label="openai:m", dir="openai_m", status="completed")],
    )
    write_run(run_dir, record, scrubber=NO_SECRETS)
    return run_dir


@pytest.mark.parametrize("status", ["interrupted", "failed"])
def test_on_a_full_disk_the_status_changes_in_place_and_run_json_stays_json(small_disk, status):
    run_dir = running_run(small_disk)
    # run.json ending on a page boundary: one byte more would need a page the disk has not
    size = (run_dir / RUN_FILE).stat().st_size
    run_dir = running_run(small_disk, note="x" * (-size % PAGE))
    size = (run_dir / RUN_FILE).stat().st_size
    assert size % PAGE == 0
    before = json.loads((run_dir / RUN_FILE).read_text())
    fill(small_disk)

    mark_ended(
        run_dir,
        status,
        [{"label": "openai:m", "dir": "openai_m", "status": "failed"}],
        scrubber=NO_SECRETS,
    )

    after = json.loads((run_dir / RUN_FILE).read_text())  # valid JSON, whole
    assert after == {**before, "status": status}  # the status alone: no room for the rest
    assert after["config"]["env"] == {"status": "running"}  # the run's own member changed
    assert read_run(run_dir).status == status
    assert (run_dir / RUN_FILE).stat().st_size == size
    assert sorted(p.name for p in run_dir.iterdir()) == [RUN_FILE]  # no temporary file left


def test_with_room_the_whole_end_is_written(tmp_path):
    run_dir = running_run(tmp_path)
    mark_ended(
        run_dir, "interrupted", [{"label": "openai:m", "dir": "openai_m"}], scrubber=NO_SECRETS
    )
    record = read_run(run_dir)
    assert record.status == "interrupted" and record.ended_at is not None
    assert [m.status for m in record.models] == ["pending"]  # the models given, not the old


@pytest.mark.parametrize("status", STATUSES)
def test_every_status_fits_in_the_bytes_of_running(tmp_path, status):
    run_dir = running_run(tmp_path)
    path = run_dir / RUN_FILE
    before, size = json.loads(path.read_text()), path.stat().st_size
    assert patch_status(path, status)
    assert json.loads(path.read_text()) == {**before, "status": status}
    assert path.stat().st_size == size


def test_a_run_json_not_laid_out_by_bat_is_left_as_it_is(tmp_path):
    run_dir = running_run(tmp_path)
    path = run_dir / RUN_FILE
    path.write_text(json.dumps(json.loads(path.read_text())))  # compact: another writer's
    before = path.read_bytes()
    assert not patch_status(path, "interrupted")
    assert path.read_bytes() == before


def test_a_status_longer_than_the_room_is_never_half_written():
    assert status_member("interrupted", 24) == b'"status":"interrupted", '
    assert status_member("failed", 24) == b'\n "status": "failed", \n '
    assert status_member("x" * 20, 24) is None
