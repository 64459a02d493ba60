"""examples/release_gate/tasks.py: a project's own task chaining build, eval.run of that
image, a gate, push.

The example runs under plain ``invoke`` in a folder holding a fixture agent's
evaluation (two tasks, k=1, see tests/evalkit.py), the echo agent's build context
(tests/agent_image.py) and a ``.env`` naming the local registry of .ci/services.sh.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent_image import agent_context, python_base
from tests.conftest import REPO
from tests.evalkit import DATASETS, make_project
from tests.imagekit import docker_client, remove_images, require, tags, unique_repo

INVOKE = str(Path(sys.executable).with_name("invoke"))
EXAMPLE = REPO / "examples" / "release_gate" / "tasks.py"


@pytest.fixture(scope="module")
def svc():
    facts = {**require("engine", "registry"), "_repos": []}
    client = docker_client(facts)
    facts["_base"] = python_base(client.api)
    client.close()
    yield facts
    remove_images(facts, facts["_repos"])


def gate_project(root: Path, svc: dict, tasks: list[dict]) -> str:
    repo = unique_repo("gate")
    svc["_repos"].append(repo)
    agent_context(root, svc["_base"], name="Gate Agent", version="1.0.0")
    make_project(root, tasks)
    (root / ".env").write_text(
        f"BAT_DOCKER_REGISTRY={svc['BAT_CI_REGISTRY']}\nBAT_DOCKER_REPO={repo}\n"
    )
    shutil.copy(EXAMPLE, root / "tasks.py")
    return repo


def invoke(root: Path, svc: dict, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "DOCKER_HOST": svc["BAT_CI_DOCKER_HOST"]}
    return subprocess.run(
        [INVOKE, *args], cwd=root, env=env, capture_output=True, text=True, check=False, timeout=120
    )


def test_gate_passes_then_builds_and_pushes(tmp_path, home, svc):
    echo = json.loads((DATASETS / "echo_tasks.json").read_text())
    repo = gate_project(tmp_path / "agent", svc, echo[:2])
    result = invoke(tmp_path / "agent", svc, "release")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "release gate: agent-default: 2/2 passed" in out
    ref = f"{svc['BAT_CI_REGISTRY']}/{repo}:1.0.0"
    assert out.index(f"Built {ref}") < out.index(f"starting the agent: {ref}")
    assert out.index("release gate: pass rate 100%") < out.index(f"Pushed {ref}")
    assert out.count("Built ") == 1
    assert tags(svc["BAT_CI_REGISTRY"], repo) == ["1.0.0"]
    # What was pushed is the very image the run evaluated.
    (run_dir,) = (p.parent for p in (tmp_path / "agent" / "eval" / "output").glob("*/run.json"))
    evaluated = json.loads((run_dir / "run.json").read_text())["models"][0]["image"]
    client = docker_client(svc)
    try:
        assert client.images.get(ref).id == evaluated
    finally:
        client.close()


def test_gate_fails_below_the_threshold_and_nothing_is_built(tmp_path, home, svc):
    echo = json.loads((DATASETS / "echo_tasks.json").read_text())
    failing = {
        "id": "fails-on-purpose",
        "turns": ["hello"],
        "expected": {"status": "completed", "output_must_contain": ["not what the agent says"]},
    }
    repo = gate_project(tmp_path / "agent", svc, [echo[0], failing])
    result = invoke(tmp_path / "agent", svc, "release")
    assert result.returncode == 1
    assert "release gate: agent-default: 1/2 passed" in result.stdout
    assert "release gate: a pass rate of 50% is below 90%" in result.stderr
    assert "Pushed " not in result.stdout
    assert tags(svc["BAT_CI_REGISTRY"], repo) == []
    # The threshold is the task's flag too (and release.threshold in the configuration).
    result = invoke(tmp_path / "agent", svc, "release", "--threshold", "0.5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert tags(svc["BAT_CI_REGISTRY"], repo) == ["1.0.0"]


PLAIN_TASKS = """\
from invoke import Collection, task

from bat.tasks import images


@task(post=[images.push])
def ship(c):
    print("shipping")


ns = Collection(ship, images.ns)  # no ns.configure: the root lacks the images defaults
"""


def test_push_as_a_post_task_of_a_root_without_the_images_defaults(tmp_path, svc):
    """push builds in its own body, so it needs nothing of the root's configuration; what
    it built counts for the image tasks after it (images.build then builds nothing)."""
    repo = unique_repo("post")
    svc["_repos"].append(repo)
    root = tmp_path / "agent"
    root.mkdir()
    (root / "Dockerfile").write_text("FROM scratch\nARG VERSION\nLABEL v=${VERSION}\n")
    (root / "agent.json").write_text(json.dumps({"name": "Post Agent", "version": "2.0.0"}))
    (root / ".env").write_text(
        f"BAT_DOCKER_REGISTRY={svc['BAT_CI_REGISTRY']}\nBAT_DOCKER_REPO={repo}\n"
    )
    (root / "tasks.py").write_text(PLAIN_TASKS)
    result = invoke(root, svc, "ship", "images.build")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    ref = f"{svc['BAT_CI_REGISTRY']}/{repo}:2.0.0"
    assert out.index("shipping") < out.index(f"Built {ref} ") < out.index(f"Pushed {ref} ")
    assert out.count("Built ") == 1
    assert out.index(f"Pushed {ref} ") < out.index(f"{ref} is already built in this run")
    assert tags(svc["BAT_CI_REGISTRY"], repo) == ["2.0.0"]
