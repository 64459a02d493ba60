"""Several models, each on its own (issue 8, part 4).

A model whose agent cannot be evaluated is recorded with its reason and the end of its
log, and the next model runs, is summarized and charted; the run ends ``partial`` with
exit 3. Every ``models:`` entry gets a folder of its own; real duplicates are refused.
"""

import json
import re

import pytest
import requests

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
    result = bat("eval.run", cwd=project, charts=True)
    assert result.code == 3, result.out + result.err
    assert "openai:broken could not be evaluated" in result.err
    # The end of the agent's log under the reason, as the model fails and at the end.
    said = result.out.splitlines()
    (at,) = [n for n, line in enumerate(said) if "[openai:broken] could not be evaluated" in line]
    assert said[at].endswith("agent-openai_broken.log:"), said[at]
    assert said[at + 1] == "  | echo_agent: error: exiting during start-up, as asked", said
    assert "  - | echo_agent: error: exiting during start-up, as asked" in result.err
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


def test_a_script_is_served_by_bat_and_the_agent_pointed_at_it(tmp_path, bat, home):
    """A model's ``script``: bat serves it while that model runs, hands the agent its
    address (OpenAI's with /v1 and a placeholder key, Ollama's bare) and stops it."""
    (tmp_path / "rules.yaml").write_text("- reply: scripted\n")
    where = [{"id": "where", "turns": ["BASE_URL?"], "expected": {"output_regex": "^base_url"}}]
    models = [
        {"provider": "openai", "model": "stand-in", "script": "rules.yaml"},
        {"provider": "ollama", "model": "stand-in", "script": "rules.yaml"},
    ]
    project = make_project(tmp_path, where, models=models)
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    (openai,) = episodes(run_dir, "openai_stand-in").values()
    assert re.fullmatch(r"base_url: http://127\.0\.0\.1:\d+/v1 key: set", openai["final_output"])
    (ollama,) = episodes(run_dir, "ollama_stand-in").values()
    assert re.fullmatch(r"base_url: http://127\.0\.0\.1:\d+ key: unset", ollama["final_output"])
    assert result.out.count("scripted model from rules.yaml at http://127.0.0.1:") == 2


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (
            {"provider": "gemini", "model": "m", "script": "rules.yaml"},
            "script: the scripted model speaks openai, ollama and anthropic, not 'gemini'",
        ),
        (
            {"provider": "openai", "model": "m", "script": "rules.yaml", "base_url": "http://x/v1"},
            "give script or base_url, not both",
        ),
        (
            {"provider": "openai", "model": "m", "script": "missing.yaml"},
            "models[0].script: missing.yaml: No such file or directory",
        ),
        (
            {"provider": "openai", "model": "m", "script": "bad.yaml"},
            "rule 0: unknown key(s) ['answer']",
        ),
        (  # a test server's failure on cue: not what a stand-in model does
            {"provider": "ollama", "model": "m", "script": "faults.yaml"},
            "models[0].script: faults.yaml: rule 1: unknown key(s) ['body', 'status']",
        ),
    ],
)
def test_a_bad_script_entry_is_one_input_error_before_any_agent(tmp_path, bat, home, entry, words):
    (tmp_path / "rules.yaml").write_text("- reply: scripted\n")
    (tmp_path / "bad.yaml").write_text("- answer: oops\n")
    (tmp_path / "faults.yaml").write_text("- reply: fine\n- {status: 500, body: oops}\n")
    project = make_project(tmp_path, WHICH, models=[entry])
    result = bat("eval.run", cwd=project)
    assert result.code == 2, result.out + result.err
    assert words in result.err and "Traceback" not in result.err
    assert run_dirs(project) == []


def test_serving_answers_both_protocols_and_stops(tmp_path):
    from bat.evaluation.run.scripted_model import serving

    (tmp_path / "rules.yaml").write_text("- match: hi\n  reply: hello\n")
    chat = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    with serving(tmp_path / "rules.yaml") as address:
        openai = requests.post(f"{address}/v1/chat/completions", json=chat, timeout=10)
        assert openai.json()["choices"][0]["message"]["content"] == "hello"
        ollama = requests.post(f"{address}/api/chat", json=chat, timeout=10)
        assert ollama.json()["message"]["content"] == "hello"
    with pytest.raises(requests.ConnectionError):
        requests.post(f"{address}/api/chat", json=chat, timeout=5)
