"""`eval.run --image` without a reference: the image `bat build` last built here (issue 28).

The record (``<context>/.bat/last-build.json``) is written by ``build_image`` itself in
the Docker tests (tests/images/test_eval_image.py); here it is written by the same
function, ``record_build``, and read back by ``eval.run --image --dry-run``, which
starts nothing and so needs no engine. Also here: ``replicas:`` in eval.yaml with the
image given on the command line only.
"""

from __future__ import annotations

import json

import pytest
import yaml

from bat.errors import InputError, UsageError
from bat.evaluation.inputs.config import load_config
from bat.images.last_build import image_to_evaluate, read_last_build, record_build, record_path
from bat.images.settings import HostSpec, resolve
from tests.evalkit import make_project


@pytest.fixture
def project(tmp_path):
    """An evaluation project that is also a build context of version 0.1.0."""
    root = make_project(tmp_path / "weather", "echo_tasks.json")
    (root / "Dockerfile").write_text("FROM scratch\n")
    (root / "agent.json").write_text(json.dumps({"name": "weather", "version": "0.1.0"}))
    return root


def dry_run(bat, root, *args):
    result = bat("eval.run", "--dry-run", *args, cwd=root)
    assert result.code == 0, result.out + result.err
    return result


def test_the_last_build_is_evaluated_not_the_tag_a_build_would_give_now(bat, home, project):
    settings = resolve(project, version_flag="t3", environ={})  # as `bat build --version t3`
    path = record_build(settings, "sha256:" + "ab" * 32, None)
    assert path == project / ".bat" / "last-build.json"
    recorded = json.loads(path.read_text())
    assert recorded["ref"] == "localhost:5000/weather:t3"
    assert recorded["version_source"] == "--version" and recorded["host"] is None
    result = dry_run(bat, project, "--image")
    assert "started by bat from image localhost:5000/weather:t3" in result.out
    said = [line for line in result.out.splitlines() if line.startswith("--image:")]
    assert said == [
        f"--image: evaluating localhost:5000/weather:t3, built last here by bat build "
        f"({recorded['built_at']}); a build now would tag localhost:5000/weather:0.1.0"
    ]


def test_without_a_record_it_says_which_tag_it_looks_for_and_why(bat, home, project):
    result = dry_run(bat, project, "--image")
    assert "started by bat from image localhost:5000/weather:0.1.0" in result.out
    assert (
        f"warning: --image: no build is recorded in {record_path(project)} (bat build records "
        "each one); looking for localhost:5000/weather:0.1.0, the tag bat build would give it "
        "now (version 0.1.0 from the version in agent.json)"
    ) in result.err


def test_a_record_that_cannot_be_read_is_said_and_not_used(bat, home, project):
    record_path(project).parent.mkdir()
    record_path(project).write_text('{"schema": "bat.last-build/1", "ref": 3}')
    with pytest.raises(InputError, match="ref, image_id, version, version_source, built_at"):
        read_last_build(project)
    result = dry_run(bat, project, "--image")
    assert "from image localhost:5000/weather:0.1.0" in result.out
    assert "the build record cannot be used" in result.err and "Traceback" not in result.err


def test_a_remote_build_names_its_host(project):
    settings = resolve(project, version_flag="2", environ={})
    record_build(settings, "sha256:" + "cd" * 32, HostSpec("builder.example", "ci", 2222))
    assert read_last_build(project).host == "ci@builder.example:2222"
    choice = image_to_evaluate(resolve(project, environ={}))
    assert choice.recorded and choice.ref == "localhost:5000/weather:2"
    assert "on ci@builder.example:2222)" in choice.note


def test_replicas_take_the_image_of_the_command_line(bat, home, project):
    config = yaml.safe_load((project / "eval" / "eval.yaml").read_text())
    config["evaluation"]["agent"]["replicas"] = 2
    (project / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    result = dry_run(bat, project, "--image", "registry.example/weather:9")
    assert "started by bat from image registry.example/weather:9, 2 replicas" in result.out
    # Without an image anywhere, replicas are still refused, saying how to give one.
    refused = bat("eval.run", "--dry-run", cwd=project)
    assert refused.code == 2 and "set image (or --image)" in refused.err
    # The library's reading: the image given as if eval.yaml said it.
    loaded = load_config(project / "eval" / "eval.yaml", base=project, image="r/w:1")
    assert loaded.evaluation.agent.image == "r/w:1" and loaded.evaluation.agent.replicas == 2


def test_the_image_of_the_command_line_needs_an_agent_bat_starts(bat, home, project):
    config = yaml.safe_load((project / "eval" / "eval.yaml").read_text())
    config["evaluation"]["agent"]["start"] = False
    (project / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(UsageError, match=r"evaluation\.agent\.start is false"):
        load_config(project / "eval" / "eval.yaml", base=project, image="r/w:1")
    result = bat("eval.run", "--dry-run", "--image", "r/w:1", cwd=project)
    assert result.code == 2 and "--image starts the agent from its image" in result.err
    assert "Traceback" not in result.err
