"""The fuzz suite's own helpers must not hang on what the inputs under test may hold."""

from __future__ import annotations

import hashlib
import os

from tests.fuzzkit import snapshot


def test_a_snapshot_names_a_fifo_without_opening_it(tmp_path):
    """Opening a FIFO nobody writes blocks: the snapshot records its kind instead."""
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    found = snapshot(tmp_path)
    assert found["pipe"].startswith("special:")
    assert found["file"].endswith(":" + hashlib.sha256(b"x").hexdigest())
