"""The scaling examples are what docs/scaling.md says: a GitHub Actions workflow and a
Kubernetes Indexed Job that validate against their schemas (GitHub's workflow schema as
check-jsonschema ships it; Kubernetes 1.33's, as kubernetes-validate ships it), whose
slices are each slice of the plan once, and whose commands, run here, evaluate an agent
slice by slice and merge the slices into a gated run."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from importlib.resources import files

import jsonschema
import kubernetes_validate
import yaml

from bat.evaluation.inputs.shards import Shard
from tests.conftest import BAT, REPO, run_bat
from tests.evalkit import make_project, run_dirs

WORKFLOW = REPO / "examples" / "github-actions" / "sharded.yml"
MANIFEST = REPO / "examples" / "kubernetes" / "indexed-job.yaml"
CHECK = {"output_must_contain": ["echo"]}


def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True)  # YAML 1.1 reads the key `on` as true; GitHub does not
    return data


def run_of(step_name: str, job: str) -> str:
    (step,) = [
        s for s in workflow()["jobs"][job]["steps"] if s.get("name", "").startswith(step_name)
    ]
    return step["run"]


def test_the_workflow_validates_against_githubs_workflow_schema():
    schema = json.loads(
        (files("check_jsonschema.builtin_schemas.vendor") / "github-workflows.json").read_text()
    )
    jsonschema.validate(workflow(), schema)  # raises with the path of what is wrong


def test_the_workflows_slices_are_each_slice_once_and_the_merge_takes_them_all():
    shards = workflow()["jobs"]["slice"]["strategy"]["matrix"]["shard"]
    command = run_of("Evaluate slice", "slice")
    given = []
    for value in shards:
        args = shlex.split(command.replace("${{ matrix.shard }}", str(value)))
        given.append(Shard.parse(args[args.index("--shard") + 1]))
    total = given[0].total
    assert sorted(given, key=lambda s: s.index) == [Shard(n, total) for n in range(1, total + 1)]
    merge = run_of("Merge the slices", "merge")
    assert all(f"slices/slice-{value}/*/" in merge for value in shards)
    assert workflow()["jobs"]["merge"]["needs"] == "slice"


def test_the_workflows_commands_evaluate_slice_by_slice_and_gate_the_merged_run(tmp_path):
    tasks = [{"id": f"task-{n}", "turns": [f"hello {n}"], "expected": CHECK} for n in range(6)]
    project = make_project(tmp_path / "agent", tasks, k=2)
    env = {"HOME": str(tmp_path / "home"), "CI": "1"}
    for value in workflow()["jobs"]["slice"]["strategy"]["matrix"]["shard"]:
        checkout = tmp_path / f"runner-{value}"  # each slice job has its own checkout
        shutil.copytree(project, checkout)
        args = shlex.split(
            run_of("Evaluate slice", "slice").replace("${{ matrix.shard }}", str(value))
        )
        result = run_bat(*args[1:], cwd=checkout, env=env, timeout=120)
        assert result.code == 0, result.out + result.err
        # upload-artifact of eval/output/, downloaded by the merge job into slices/slice-N
        shutil.copytree(checkout / "eval" / "output", project / "slices" / f"slice-{value}")
    merge = run_of("Merge the slices", "merge")
    proc = subprocess.run(
        ["bash", "-c", merge.replace("bat ", f"{BAT} ", 1)],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (merged,) = run_dirs(project)
    episodes = list(merged.glob("agent-default/episodes/*.json"))
    assert len(episodes) == 12
    gates = json.loads((merged / "gates.json").read_text())
    assert gates["passed"] and "pass_rate" in gates["gates"][0]["name"]
    assert (project / "eval" / "output" / "report.html").is_file()


def test_the_manifest_validates_against_kubernetes_and_runs_every_slice_once():
    documents = list(yaml.safe_load_all(MANIFEST.read_text()))
    for document in documents:
        kubernetes_validate.validate(document, "1.33.0", strict=True)
    slices, merge = documents
    spec = slices["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    (container,) = spec["template"]["spec"]["containers"]
    command = container["command"]
    given = {
        Shard.parse(command[command.index("--shard") + 1], {"JOB_COMPLETION_INDEX": str(n)})
        for n in range(spec["completions"])
    }
    assert given == {Shard(n, spec["completions"]) for n in range(1, spec["completions"] + 1)}
    (merger,) = merge["spec"]["template"]["spec"]["containers"]
    assert "bat eval.merge" in merger["command"][-1]
    claims = {
        doc["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        for doc in documents
    }
    assert len(claims) == 1  # the merge reads the volume the slices wrote
