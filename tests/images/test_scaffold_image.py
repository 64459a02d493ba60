"""A generated agent shipped and evaluated as shipped: init.agent → build → eval.run --image.

Nothing is edited by hand between the commands: ``bat init.agent --tools`` writes the
project, ``bat eval.init`` its sample evaluation (with the stand-in model), ``bat build``
builds the generated Dockerfile as it is (on a stand-in ``python:3.12-slim`` when none
can be pulled: tests/python_slim.py; ``--network host`` because this engine has no
bridge network for the build's ``pip install``), and ``bat eval.run --image`` evaluates
that image, the stand-in model served on 127.0.0.1 and reached over the host network
the containers share. Every sample task passes, the tool call among them seen in the
spans the container wrote into the run folder.
"""

from __future__ import annotations

import re
import uuid

import docker
import pytest

from tests.conftest import run_bat
from tests.evalkit import episodes, free_port, run_dirs
from tests.imagekit import require
from tests.python_slim import python_slim
from tests.pythons import find_python

pytestmark = pytest.mark.slow


def test_a_scaffolded_agent_builds_and_its_image_passes_its_evaluation(tmp_path, home):
    facts = require("engine")
    client = docker.APIClient(base_url=facts["BAT_CI_DOCKER_HOST"], version="auto")
    name = f"shipped-{uuid.uuid4().hex[:8]}"
    made = run_bat("init.agent", name, "--tools", "--port", str(free_port()), cwd=tmp_path)
    assert made.code == 0, made.err
    agent = tmp_path / name
    assert run_bat("eval.init", cwd=agent).code == 0
    env = {"DOCKER_HOST": facts["BAT_CI_DOCKER_HOST"]}
    ref = None
    try:
        with python_slim(client, find_python()):
            built = run_bat("build", "--network", "host", cwd=agent, env=env, timeout=900)
        assert built.code == 0, built.out + built.err
        ref = re.search(r"^Building (\S+)", built.out, re.M)[1]
        result = run_bat("eval.run", "--image", cwd=agent, env=env, timeout=600)
        assert result.code == 0, result.out + result.err
        assert f"starting the agent: {ref}" in result.out
        (run_dir,) = run_dirs(agent)
        found = episodes(run_dir, "openai_scripted")
        failing = {
            n: e["verdict"]["reason"] for n, e in found.items() if not e["verdict"]["passed"]
        }
        assert failing == {}, failing
        added = [e for e in found.values() if e["task_id"] == "uses-the-add-tool"]
        assert added and all(e["trace"]["tool_calls"][0]["source"] == "spans" for e in added)
    finally:
        if ref is not None:
            client.remove_image(ref, force=True)
        client.close()
