"""eval.run --image: the agent evaluated from the image bat build made, on the real engine.

The image is the echo fixture agent on a Python base made with ``docker import``
(tests/agent_image.py), built by ``bat build`` in the project's folder. One replica and
three (one of which dies under a CRASH task), a container that never gets ready, Ctrl-C:
every episode is accounted for, and no container of the run is left on the engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import docker
import pytest
import yaml

from bat.evaluation.run.agent_container import LABEL
from tests.agent_image import agent_context, python_base
from tests.conftest import BAT, run_bat
from tests.evalkit import episodes, make_project, run_dirs, summary
from tests.imagekit import require, tags

TASKS = [
    {"id": f"echo-{n}", "turns": [f"hello {n}"], "expected": {"output_must_contain": [f"{n}"]}}
    for n in range(8)
] + [
    {
        "id": "memory",
        "turns": ["first", "second", "HISTORY"],
        "expected": {"output_must_contain": ["first | second"]},
    }
]


@pytest.fixture(scope="module")
def engine():
    facts = require("engine")
    client = docker.APIClient(base_url=facts["BAT_CI_DOCKER_HOST"], version="auto")
    yield facts, client, python_base(client)
    client.close()


@pytest.fixture(scope="module")
def agent(engine, tmp_path_factory):
    """A project folder whose image `bat build` has built; removed from the engine after."""
    facts, client, base = engine
    name = f"image-agent-{uuid.uuid4().hex[:8]}"
    root = agent_context(tmp_path_factory.mktemp("agent") / name, base, name=name, version="1.0")
    env = {"DOCKER_HOST": facts["BAT_CI_DOCKER_HOST"]}
    built = run_bat("build", cwd=root, env=env, timeout=180)
    assert built.code == 0, built.out + built.err
    ref = f"localhost:5000/{name}:1.0"
    yield root, ref, env
    client.remove_image(ref, force=True)


def project(root, tasks=TASKS, section=None, **agent):
    make_project(root, tasks, k=2, concurrency=6, **(section or {}))
    config = yaml.safe_load((root / "eval" / "eval.yaml").read_text())
    config["evaluation"]["agent"].update(agent)
    (root / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    return root


def left_behind(client, run_dir) -> list:
    return client.containers(all=True, filters={"label": f"{LABEL}={run_dir.resolve()}"})


def test_the_image_bat_build_tagged_is_evaluated(agent, engine):
    root, ref, env = agent
    _, client, _ = engine
    project(root)
    result = run_bat("eval.run", "--image", cwd=root, env=env, timeout=180)
    assert result.code == 0, result.out + result.err
    assert f"starting the agent: {ref} ×1" in result.out
    (run_dir,) = run_dirs(root)
    found = episodes(run_dir)
    assert len(found) == len(TASKS) * 2
    assert all(e["verdict"]["passed"] for e in found.values()), [
        e["verdict"]["reason"] for e in found.values() if not e["verdict"]["passed"]
    ]
    record = json.loads((run_dir / "run.json").read_text())
    (model,) = record["models"]
    assert model["image"] == client.inspect_image(ref)["Id"] and model["replicas"] == 1
    assert record["config"]["evaluation"]["agent"]["image"] == ref
    assert "listening on" in (run_dir / "agent-agent-default.log").read_text()
    assert left_behind(client, run_dir) == []


def test_three_replicas_share_the_episodes_and_a_dead_one_is_restarted(agent, engine, tmp_path):
    root, ref, env = agent
    _, client, _ = engine
    crash = {"id": "crash", "turns": ["CRASH now"], "expected": {"status": "completed"}}
    project(root, [*TASKS, crash], image=ref, replicas=3, max_restarts=4)
    for earlier in run_dirs(root):  # the first test's run
        shutil.rmtree(earlier)
    result = run_bat("eval.run", cwd=root, env=env, timeout=240)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(root)
    found = episodes(run_dir)
    assert len(found) == (len(TASKS) + 1) * 2
    for name, episode in found.items():
        if name.startswith("crash"):
            assert episode["agent_error"]["kind"] == "crashed", episode
        else:
            assert episode["verdict"]["passed"], (name, episode["verdict"])
    # Every replica took episodes; each of its own port, so its own URL in the episodes.
    urls = {episode["aux"]["agent_url"] for episode in found.values()}
    assert len(urls) == 3, urls
    record = json.loads((run_dir / "run.json").read_text())
    assert record["models"][0]["restarts"] >= 2  # the crash, and the crash run alone
    assert "died (exit status 3); restarting it" in result.out + result.err
    totals = summary(run_dir)["totals"]
    assert totals["infra_failures"] == 0 and totals["agent_errors"]["crashed"] == 2
    for n in (1, 2, 3):
        assert "listening on" in (run_dir / f"agent-agent-default.replica-{n}.log").read_text()
    assert left_behind(client, run_dir) == []


def test_a_replica_that_exits_at_start_is_a_model_not_evaluated(agent, engine, tmp_path):
    _root, ref, env = agent
    _, client, base = engine
    folder = project(tmp_path / "exits", image=ref, env={"EXIT_ON_START": "1"})
    result = run_bat("eval.run", cwd=folder, env=env, timeout=120)
    assert result.code == 1, result.out + result.err
    assert "ended with exit status 4 before it was ready" in result.err
    (run_dir,) = run_dirs(folder)
    assert json.loads((run_dir / "run.json").read_text())["models"][0]["status"] == "failed"
    assert left_behind(client, run_dir) == []
    # An image with nothing to run: the engine's own words, on one line.
    other = project(tmp_path / "nothing", image=base)
    result = run_bat("eval.run", cwd=other, env=env, timeout=120)
    assert result.code == 1 and "Traceback" not in result.err
    assert f"cannot start a container of {base}: No command specified" in result.err
    (run_dir,) = run_dirs(other)
    assert left_behind(client, run_dir) == []


def test_an_image_the_engine_lacks_is_one_line(engine, tmp_path):
    facts, _, _ = engine
    root = project(tmp_path / "agent")
    env = {"DOCKER_HOST": facts["BAT_CI_DOCKER_HOST"]}
    result = run_bat("eval.run", "--image=127.0.0.1:9/none:1", cwd=root, env=env, timeout=120)
    assert result.code != 0
    assert "image 127.0.0.1:9/none:1 is not on the engine" in result.out + result.err
    assert "Traceback" not in result.err


def test_ctrl_c_removes_every_container(agent, engine, tmp_path):
    _root, ref, env = agent
    _, client, _ = engine
    hang = [{"id": f"hang-{n}", "turns": ["HANG"], "expected": {}} for n in range(4)]
    folder = project(tmp_path / "hang", hang, image=ref, replicas=2)
    proc = subprocess.Popen(
        [str(BAT), "eval.run"],
        cwd=folder,
        env={**os.environ, **env, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(len(left_behind(client, d)) == 2 for d in run_dirs(folder)):
            break
        time.sleep(0.2)
    else:
        pytest.fail("the two replicas never ran")
    time.sleep(2)  # the replicas are up and the episodes hang in them
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    (run_dir,) = run_dirs(folder)
    assert left_behind(client, run_dir) == []


def test_build_eval_of_that_image_gate_push_on_one_command_line(agent, engine, tmp_path):
    """The release chain: push runs only when the gate on the built image's run passed."""
    root, _ref, env = agent
    _facts, client, _ = engine
    registry = require("registry")["BAT_CI_REGISTRY"]
    failing = {"id": "fails", "turns": ["hi"], "expected": {"output_must_contain": ["nope"]}}
    project(root, [TASKS[0], failing])
    chain = ["build", "--docker-registry", registry, "--version", "2.0", "eval.run", "--image"]
    result = run_bat(*chain, "--gate", "pass_rate >= 0.9", "push", cwd=root, env=env, timeout=240)
    ref = f"{registry}/{root.name}:2.0"
    try:
        assert result.code == 1, result.out + result.err
        assert f"starting the agent: {ref} ×1" in result.out
        assert "1 gate failed" in result.err and "Pushed" not in result.out
        assert tags(registry, root.name) == []
        result = run_bat(*chain, "--gate", "pass_rate >= 0.5", "push", cwd=root, env=env)
        assert result.code == 0, result.out + result.err
        assert f"Pushed {ref}" in result.out and tags(registry, root.name) == ["2.0"]
    finally:
        with contextlib.suppress(Exception):
            client.remove_image(ref, force=True)


def test_replicas_of_eval_yaml_take_the_image_of_the_command_line(agent, engine, tmp_path):
    """eval.yaml says `replicas: 2` and no image: `--image REF` is the image (issue 28)."""
    _root, ref, env = agent
    _, client, _ = engine
    folder = project(tmp_path / "replicas", TASKS[:4], replicas=2)
    result = run_bat("eval.run", "--image", ref, cwd=folder, env=env, timeout=180)
    assert result.code == 0, result.out + result.err
    assert f"starting the agent: {ref} ×2" in result.out
    (run_dir,) = run_dirs(folder)
    assert all(e["verdict"]["passed"] for e in episodes(run_dir).values())
    model = json.loads((run_dir / "run.json").read_text())["models"][0]
    assert model["replicas"] == 2 and model["image"] == client.inspect_image(ref)["Id"]
    assert left_behind(client, run_dir) == []


def test_image_alone_evaluates_what_a_separate_bat_build_made(agent, engine):
    """`bat build --version t3`, then `bat eval.run --image` on its own command line: the
    image evaluated is :t3, read from the build's record, not the tag agent.json gives."""
    root, ref, env = agent
    _, client, _ = engine
    record = root / ".bat" / "last-build.json"
    saved = record.read_text()  # the module's build: the other tests evaluate that one
    t3 = ref.rsplit(":", 1)[0] + ":t3"
    try:
        built = run_bat("build", "--version", "t3", cwd=root, env=env, timeout=180)
        assert built.code == 0, built.out + built.err
        assert json.loads(record.read_text())["image_id"] == client.inspect_image(t3)["Id"]
        project(root, TASKS[:2])
        result = run_bat("eval.run", "--image", cwd=root, env=env, timeout=180)
        assert result.code == 0, result.out + result.err
        assert f"--image: evaluating {t3}, built last here by bat build (" in result.out
        assert f"a build now would tag {ref}" in result.out
        assert f"starting the agent: {t3} ×1" in result.out
        run_dir = run_dirs(root)[-1]
        model = json.loads((run_dir / "run.json").read_text())["models"][0]
        assert model["image"] == client.inspect_image(t3)["Id"]
    finally:
        record.write_text(saved)
        with contextlib.suppress(Exception):
            client.remove_image(t3, force=True)
