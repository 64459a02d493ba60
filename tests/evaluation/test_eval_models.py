"""Several models, each on its own (issue 8, part 4).

A model whose agent cannot be evaluated is recorded with its reason and the end of its
log, and the next model runs, is summarized and charted; the run ends ``partial`` with
exit 3. Every ``models:`` entry gets a folder of its own; real duplicates are refused.
"""

import json

from tests.evalkit import episodes, make_project, run_dirs, summary

WHICH = [
    {
        "id": "which",
        "turns": ["MODEL?"],
        "expected": {"output_regex": "^model: .+/openai$"},
    }
]


def test_a_model_that_cannot_start_does_not_stop_the_next(tmp_path, bat, home):
    models = [
        {"provider": "openai", "model": "broken", "env": {"EXIT_ON_START": "1"}},
        "openai:fine",
    ]
    project = make_project(tmp_path, WHICH, models=models)
    result = bat("eval.run", cwd=project)
    assert result.code == 3, result.out + result.err
    assert "openai:broken could not be evaluated" in result.err
    (run_dir,) = run_dirs(project)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "partial"
    broken, fine = record["models"]
    assert broken["status"] == "failed" and "exited with status 4" in broken["reason"]
    assert any("exiting during start-up" in line for line in broken["log_tail"])
    assert fine["status"] == "completed"
    assert summary(run_dir, "openai_fine")["totals"]["passed"] == 1
    assert not (run_dir / "openai_broken" / "summary.json").exists()
    output = project / "eval" / "output"
    assert (output / "report.html").is_file() and (output / "pass_rate.png").is_file()


def test_no_model_could_be_evaluated(tmp_path, bat, home):
    models = [{"provider": "openai", "model": m, "env": {"EXIT_ON_START": "1"}} for m in "ab"]
    project = make_project(tmp_path, WHICH, models=models)
    result = bat("eval.run", cwd=project)
    assert result.code == 1
    assert "no model could be evaluated" in result.err and "Traceback" not in result.err
    (run_dir,) = run_dirs(project)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"


def test_entries_that_would_share_a_folder_get_their_own(tmp_path, bat, home):
    models = [
        {"provider": "openai", "model": "a/b"},
        {"provider": "openai", "model": "a_b"},
        {"provider": "openai", "model": "same", "env": {"LATENCY_MS": "1"}},
        {"provider": "openai", "model": "same", "env": {"LATENCY_MS": "2"}},
        {"provider": "openai", "model": "named", "name": "my-pick"},
    ]
    project = make_project(tmp_path, WHICH, models=models)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    record = json.loads((run_dir / "run.json").read_text())
    dirs = [model["dir"] for model in record["models"]]
    assert len(set(dirs)) == 5 and dirs[4] == "my-pick"
    assert dirs[0].startswith("openai_a_b-") and dirs[1].startswith("openai_a_b-")
    labels = [model["label"] for model in record["models"]]
    assert len(set(labels)) == 5 and labels[:2] == ["openai:a/b", "openai:a_b"]
    outputs = [episodes(run_dir, d)["which__try1.json"]["final_output"] for d in dirs]
    assert outputs == [
        "model: a/b/openai",
        "model: a_b/openai",
        "model: same/openai",
        "model: same/openai",
        "model: named/openai",
    ]
    for folder in dirs:  # each folder holds its own model's results, summarized
        assert summary(run_dir, folder)["totals"]["attempts"] == 1
    # RUN:LABEL picks a model as RUN:FOLDER does
    a, b = f"{run_dir.name}:openai:a/b", f"{run_dir.name}:{dirs[1]}"
    both = bat("eval.compare", a, b, "--json", cwd=project)
    assert both.code == 0, both.err
    sides = json.loads(both.out)
    assert (sides["a"]["folder"], sides["b"]["folder"]) == (
        str(run_dir / dirs[0]),
        str(run_dir / dirs[1]),
    )
    # The same entries give the same folders next time, so runs compare model by model.
    assert bat("eval.run", cwd=project).code == 0
    second = json.loads((run_dirs(project)[1] / "run.json").read_text())
    assert [model["dir"] for model in second["models"]] == dirs


def test_real_duplicates_are_refused(tmp_path, bat, home):
    models = ["openai:gpt", {"provider": "openai", "model": "gpt"}]
    project = make_project(tmp_path, WHICH, models=models)
    result = bat("eval.show", cwd=project)
    assert result.code == 2
    assert "models[1]" in result.err and "the same model as models[0]" in result.err
    assert "line" in result.err
    taken = make_project(
        tmp_path / "taken", WHICH, models=[{"provider": "x", "model": "a", "name": "agent-default"}]
    )
    result = bat("eval.show", cwd=taken)
    assert result.code == 2 and "'agent-default' is reserved" in result.err
    assert not run_dirs(project)
