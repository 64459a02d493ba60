"""``bat build`` and ``bat push`` read the Docker client's config file through bat's
bounded reader before the Docker SDK opens it (``bat.images.engine.read_config``): the SDK
opens it with a plain ``open()`` as its client is made, so a FIFO there hung both
commands. No engine is needed: the file is refused before one is asked."""

from __future__ import annotations

import json
import os
import time

import pytest

LIMIT_S = 30  # a process's start-up, far below a hang


def project(tmp_path):
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM scratch\n")
    (folder / "agent.json").write_text(json.dumps({"name": "x", "version": "1.0.0"}))
    return folder


@pytest.mark.parametrize("command", ["build", "push"])
@pytest.mark.parametrize("kind", ["fifo", "deep", "not-an-object"])
def test_a_hostile_docker_config_is_one_line_not_a_hang(command, kind, tmp_path, bat, home):
    config = home / ".docker" / "config.json"
    config.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "deep":
        config.write_text("[" * 100_000 + "]" * 100_000)
    else:
        config.write_text("[]")
    started = time.monotonic()
    args = ["--docker-registry", "127.0.0.1:9"] if command == "push" else []
    result = bat(command, *args, cwd=project(tmp_path), process=True, timeout=LIMIT_S)
    assert time.monotonic() - started < LIMIT_S
    assert result.code == 2, result.err
    (line,) = result.err.strip().splitlines()
    assert line.startswith("bat: error: ") and str(config) in line, line
