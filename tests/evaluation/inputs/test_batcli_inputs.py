"""bat-cli 2026.10's eval.yaml and tasks.json, and its run folders re-judged by eval.verdict.

The files under ``tests/data/bat-cli-2026.10/`` are what bat-cli wrote, copied unchanged:
``eval-init/`` is its ``eval init`` (eval.yaml, tasks.json), ``run-echo/`` one run of an
echo agent (k = 5) and the dataset it ran with.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from bat.evaluation.inputs.config import load_config
from bat.evaluation.inputs.dataset import load_dataset
from tests.conftest import REPO
from tests.evalkit import episodes, make_project, run_dirs, start_model_server, summary
from tests.evaluation.judging.test_eval_judge import judge_reply
from tests.evaluation.log.test_batcli_runs import copy_run
from tests.evaluation.present.plot.runkit import svg_texts

DATA = REPO / "tests" / "data" / "bat-cli-2026.10"
INIT = DATA / "eval-init"
RUN = DATA / "run-echo" / "20261201_033105"
MODEL = "benchmark_openai-echo-model"
CLASS_NAMES = re.compile(
    r"JudgeSpec|JudgePrompts|EvalConfig|EvaluationSection|AgentSpec|ModelSpec|"
    r"TaskSpec|TaskExpected|list\[|dict\["
)
STATUS_ONLY = "nothing but the final status"


def batcli_project(root: Path, eval_yaml: str | None = None, tasks: Path | None = None) -> Path:
    """An agent root holding bat-cli's eval.yaml (or ``eval_yaml``) and tasks.json."""
    (root / "eval" / "input").mkdir(parents=True)
    text = (INIT / "eval.yaml").read_text() if eval_yaml is None else eval_yaml
    (root / "eval" / "eval.yaml").write_text(text)
    shutil.copy(tasks or INIT / "tasks.json", root / "eval" / "input" / "tasks.json")
    return root


def uncommented(text: str) -> str:
    """bat-cli's eval.yaml with every commented-out key switched on."""
    return re.sub(r"(?m)^(\s*)# ", r"\1", text)


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


# --- eval.yaml ---------------------------------------------------------------------------


def test_batcli_eval_init_files_are_accepted_as_written(tmp_path, bat, home, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    project = batcli_project(tmp_path)
    result = bat("eval.show", "--json", cwd=project)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["timeouts_s"]["agent_startup"] == 45 and data["k"] == 1
    assert [m["label"] for m in data["models"]] == [
        "openai:your-model-name",
        "ollama:your-local-model",
    ]
    (judge,) = data["judges"]
    assert (judge["provider"], judge["model"], judge["base_url"]) == (
        "ollama",
        "local-judge-model",
        "http://localhost:11434",
    )
    assert judge["mode"] == "full" and judge["budget_chars"] == 12000
    # Its example task checks only the status (its expected_outcome is for the judge), and
    # its openai model has no key here (issue 28); the ollama one needs none.
    warning, key = warnings(result.err)
    assert STATUS_ONLY in warning and "(smoke_test)" in warning
    assert "model openai:your-model-name: provider openai needs OPENAI_API_KEY" in key
    assert result.err.strip().splitlines() == [warning, key]


def test_every_commented_key_of_batcli_eval_yaml_means_what_it_meant(tmp_path, bat, home):
    project = batcli_project(tmp_path, uncommented((INIT / "eval.yaml").read_text()))
    result = bat("eval.show", "--json", cwd=project)
    assert result.code == 0, result.err
    assert "judge.mode" not in result.err  # mode: full is ours: nothing to say
    data = json.loads(result.out)
    (judge,) = data["judges"]
    assert judge["budget_chars"] == 24000  # max_trajectory_chars
    assert judge["api_key_env"] == "BAT_JUDGE_API_KEY"
    assert judge["prompts"]["task_completion_quality"] == "A draft is not a deployed network."
    assert data["agent"]["extra_spans"] == [str(project / "../other-agent/spans.jsonl")]


def test_batcli_judge_prompt_names_are_ours(tmp_path):
    project = batcli_project(
        tmp_path,
        "judge:\n  model: j\n  prompts:\n    relevance: R\n    task_completion: C\n"
        "    hallucination: H\n    tool_call: T\n",
    )
    (judge,) = load_config(project / "eval" / "eval.yaml", base=project).config.judges
    assert judge.prompts.model_dump() == {
        "response_relevance": "R",
        "task_completion_quality": "C",
        "hallucination_score": "H",
        "tool_call_appropriateness": "T",
    }


def test_judge_mode_outcome_is_accepted_with_a_warning_naming_the_key(tmp_path, bat, home):
    text = (INIT / "eval.yaml").read_text().replace("# mode: full", "mode: outcome")
    project = batcli_project(tmp_path, text)
    result = bat("eval.show", cwd=project)
    assert result.code == 0, result.err
    assert warnings(result.err)[0] == (
        "warning: eval/eval.yaml: judge.mode: 'outcome' (bat-cli's one lenient score) is not "
        "supported; bat scores its four dimensions from the whole episode"
    )
    # In a list of judges, the one that says so.
    (project / "eval" / "eval.yaml").write_text(
        "judge:\n  - model: a\n  - {model: b, mode: outcome}\n"
    )
    result = bat("eval.show", cwd=project)
    assert result.code == 0 and "judge[1].mode: 'outcome'" in result.err
    # bat doctor says it too, as a warning of its eval.yaml check (not a failure)
    result = bat("doctor", "--json", cwd=project)
    (check,) = [c for c in json.loads(result.out) if c["name"] == "eval.yaml"]
    assert check["status"] == "warn" and not check["required"]
    assert "judge[1].mode: 'outcome'" in check["detail"]


def test_extra_spans_that_cannot_be_read_are_said_so(tmp_path, bat, home):
    """They join the agent's own spans; without a file of its own, none is read."""
    project = batcli_project(
        tmp_path,
        "evaluation:\n  extra_spans: [helper-spans.jsonl]\n  agent:\n    start: false\n",
    )
    result = bat("eval.show", cwd=project)
    assert result.code == 0, result.err
    assert [w for w in warnings(result.err) if STATUS_ONLY not in w] == [
        "warning: evaluation.extra_spans is not read: evaluation.agent.spans_file (the "
        "running agent's own span file) is not set; they join the agent's own spans"
    ]
    text = (project / "eval" / "eval.yaml").read_text()
    (project / "eval" / "eval.yaml").write_text(text + "    spans_file: agent-spans.jsonl\n")
    result = bat("eval.show", cwd=project)
    assert result.code == 0 and "extra_spans" not in result.err
    # bat starts the agent, which has no config file to send its spans to
    make_project(tmp_path / "started", [{"id": "a", "turns": ["x"], "expected": {}}])
    config = tmp_path / "started" / "eval" / "eval.yaml"
    config.write_text(config.read_text() + "  extra_spans: [helper-spans.jsonl]\n")
    result = bat("eval.show", cwd=tmp_path / "started")
    assert "the agent has no config file for bat to send its own spans to" in result.err


def test_max_trajectory_chars_and_budget_chars_together_is_an_error(tmp_path, bat, home):
    project = batcli_project(
        tmp_path, "judge:\n  model: j\n  budget_chars: 9000\n  max_trajectory_chars: 24000\n"
    )
    result = bat("eval.show", cwd=project)
    assert result.code == 2
    assert (
        "eval/eval.yaml: judge (line 1): set budget_chars or max_trajectory_chars "
        "(the same thing), not both"
    ) in result.err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("judge: {model: j, mode: fast}\n", "judge.mode (line 1): Input should be 'full' or"),
        ("judge:\n  model: j\n  mode: fast\n", "judge.mode (line 3)"),
        ("judge: 5\n", "judge (line 1): expected a mapping of keys, got the number 5"),
        ("judge: [5]\n", "judge[0] (line 1): expected a mapping of keys, got the number 5"),
        ("judge: true\n", "judge (line 1): expected a mapping of keys, got true"),
        ("evaluation: 3\n", "evaluation (line 1): expected a mapping of keys, got the number 3"),
        ("evaluation:\n  agent: [1]\n", "evaluation.agent (line 2): expected a mapping of keys"),
        ("judge: {model: j, env: 5}\n", "judge.env (line 1): expected a mapping of keys"),
        ("judge: {model: j, prompts: {relevance: 5}}\n", "judge.prompts.relevance (line 1)"),
        ("judge: {model: j, max_trajectory_chars: 10}\n", "judge.max_trajectory_chars (line 1)"),
        ("models: [5]\n", "models[0] (line 1): expected a mapping of keys, got the number 5"),
    ],
)
def test_errors_speak_the_keys_of_the_file(tmp_path, bat, home, content, says):
    project = batcli_project(tmp_path, content)
    result = bat("eval.show", cwd=project)
    assert result.code == 2, result.err
    assert says in result.err
    assert not CLASS_NAMES.search(result.err), result.err
    assert "Traceback" not in result.err
    if not content.startswith("judge: ["):
        assert "judge[0]" not in result.err  # the file has one judge, not a list


def test_env_values_of_any_yaml_type_are_text_as_written(tmp_path):
    """bat-cli's ``PORT: 9431``, ``DEBUG: true``. YAML 1.1 reads ``010`` as 8, ``0x1F`` as
    31, ``1:30`` as 90 and ``on`` as True; an environment value is text, and the text
    written is what the user meant."""
    project = batcli_project(
        tmp_path,
        "evaluation:\n  agent:\n    env: {PORT: 9431, DEBUG: true, QUIET: false, EMPTY: null,"
        " RATIO: 1.5, A: 010, B: 0x1F, C: 1:30, D: 0.50, E: no, F: on, G: 2024-01-01,"
        " H: 'kept', I: ~}\nmodels:\n  - {provider: openai, model: m, env: {TEMPERATURE: 0}}"
        "\n  - provider: openai\n    model: n\n    env:\n      Y: +1_000\n"
        "judge:\n  model: j\n  env: {JUDGE_KEY: 12345}\n",
    )
    resolved = load_config(project / "eval" / "eval.yaml", base=project)
    assert resolved.evaluation.agent.env == {
        "PORT": "9431",
        "DEBUG": "true",
        "QUIET": "false",
        "EMPTY": "",
        "RATIO": "1.5",
        "A": "010",
        "B": "0x1F",
        "C": "1:30",
        "D": "0.50",
        "E": "no",
        "F": "on",
        "G": "2024-01-01",
        "H": "kept",
        "I": "",
    }
    assert [m.env for m in resolved.config.models] == [{"TEMPERATURE": "0"}, {"Y": "+1_000"}]
    assert resolved.config.judges[0].env == {"JUDGE_KEY": "12345"}


# --- tasks.json --------------------------------------------------------------------------


def test_batcli_dataset_keys(tmp_path):
    path = tmp_path / "tasks.json"
    path.write_text(
        json.dumps(
            [
                {
                    "id": "delegates",
                    "turns": ["plan it"],
                    "expected": {"status": None, "agent_calls": [{"agent": "planner", "times": 2}]},
                }
            ]
        )
    )
    (task,) = load_dataset(path).tasks
    assert task.expected.status is None
    (call,) = task.expected.agent_calls
    assert (call.name, call.times) == ("planner", 2)


def test_show_warns_about_tasks_that_check_only_the_status(tmp_path, bat, home):
    tasks = [{"id": f"weak{i}", "turns": ["x"], "expected": {}} for i in range(7)]
    tasks.append({"id": "nothing", "turns": ["x"], "expected": {"status": None}})
    tasks.append({"id": "strong", "turns": ["x"], "expected": {"output_regex": "x"}})
    project = batcli_project(tmp_path, "evaluation: {}\n")
    (project / "eval" / "input" / "tasks.json").write_text(json.dumps(tasks))
    result = bat("eval.show", cwd=project)
    assert result.code == 0, result.err
    assert warnings(result.err) == [
        "warning: 7 tasks check nothing but the final status (weak0, weak1, weak2, weak3, "
        "weak4 and 2 more): an empty or wrong answer passes them (add output_must_contain, "
        "output_regex or tool_calls)",
        "warning: 1 task checks nothing at all (nothing: status: null and no other "
        "expectation): every answer passes it",
    ]
    (project / "eval" / "input" / "tasks.json").write_text(json.dumps(tasks[-1:]))
    result = bat("eval.show", cwd=project)
    assert result.code == 0 and result.err == ""


def test_a_batcli_style_run_with_the_echo_agent(tmp_path, bat, home):
    """run_name with spaces, env values that are not strings, ``status: null``."""
    tasks = [
        {
            "id": "any-status",
            "turns": ["please ASK me"],
            "expected": {"status": None, "output_must_contain": ["What exactly do you mean?"]},
        },
        {
            "id": "completed-status",
            "turns": ["please ASK me"],
            "expected": {"output_must_contain": ["What exactly do you mean?"]},
        },
        {"id": "env", "turns": ["MODEL?"], "expected": {"output_must_contain": ["model:"]}},
    ]
    project = make_project(
        tmp_path,
        tasks,
        run_name="nightly run #3",
        agent_env={"MODEL": 42, "MODEL_PROVIDER": True, "EMPTY": None},
    )
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    assert re.fullmatch(r"\d{8}-\d{6}-nightly-run-3", run_dir.name), run_dir.name
    assert json.loads((run_dir / "run.json").read_text())["run_name"] == "nightly run #3"
    found = {e["task_id"]: e for e in episodes(run_dir).values()}
    assert found["env"]["final_output"] == "model: 42/true"
    assert found["any-status"]["status"] == "input-required"
    assert found["any-status"]["verdict"]["passed"] is True
    assert found["completed-status"]["verdict"]["passed"] is False
    assert "expected 'completed'" in found["completed-status"]["verdict"]["reason"]
    assert summary(run_dir)["totals"]["passed"] == 2


def test_agent_calls_written_as_bat_cli_writes_them(tmp_path, bat, home):
    tasks = [
        {
            "id": "once",
            "turns": ["ASK_AGENT planner"],
            "expected": {"agent_calls": [{"agent": "planner"}]},
        },
        {
            "id": "twice",
            "turns": ["ASK_AGENT planner"],
            "expected": {"agent_calls": [{"agent": "planner", "times": 2}]},
        },
    ]
    project = make_project(tmp_path, tasks, agent="tool_agent")
    result = bat("eval.run", cwd=project)
    assert result.code == 0, result.out + result.err
    (run_dir,) = run_dirs(project)
    verdicts = {e["task_id"]: e["verdict"] for e in episodes(run_dir).values()}
    assert verdicts["once"]["passed"] is True
    assert verdicts["once"]["reason"] == "status: 'completed'; agent_call:planner: called 1×"
    assert verdicts["twice"]["passed"] is False
    assert "agent_call:planner: called 1×, expected ≥2×" in verdicts["twice"]["reason"]


def test_judge_env_holds_the_judges_key_before_the_shell(tmp_path, bat, home):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"reply": judge_reply(0.75)}]))
    server, url = start_model_server(rules)
    try:
        project = make_project(
            tmp_path / "p",
            [{"id": "a", "turns": ["hello"], "expected": {"output_must_contain": ["hello"]}}],
            qualitative=True,
        )
        config = yaml.safe_load((project / "eval" / "eval.yaml").read_text())
        config["judge"] = {
            "provider": "openai",
            "model": "j",
            "base_url": url + "/v1",
            "api_key_env": "BATTEST_JUDGE_KEY",
            "env": {"BATTEST_JUDGE_KEY": 12345},  # a number, as YAML reads it
        }
        (project / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
        empty_shell = {"BATTEST_JUDGE_KEY": ""}  # would be "is empty" if the shell won
        result = bat("eval.run", cwd=project, env=empty_shell)
        assert result.code == 0, result.out + result.err
        (run_dir,) = run_dirs(project)
        (episode,) = episodes(run_dir).values()
        assert episode["scores"]["dimensions"]["response_relevance"]["score"] == 0.75
        del config["judge"]["env"]
        (project / "eval" / "eval.yaml").write_text(yaml.safe_dump(config))
        result = bat("eval.judge", cwd=project, env=empty_shell)
        assert result.code == 2
        assert "BATTEST_JUDGE_KEY is empty" in result.err
    finally:
        server.terminate()
        server.wait(timeout=10)


# --- eval.verdict on a bat-cli run folder ------------------------------------------------


def verdict_project(root: Path, change_t09: bool) -> Path:
    tasks = json.loads((DATA / "run-echo" / "tasks.json").read_text())
    if change_t09:
        (t09,) = [task for task in tasks if task["id"] == "t09"]
        t09["expected"]["output_must_contain"] = ["echo: hello number 9"]
    project = batcli_project(root, "evaluation:\n  agent_url: http://127.0.0.1:9\n")
    (project / "eval" / "input" / "tasks.json").write_text(json.dumps(tasks, indent=2))
    return project


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.json"))}


def rejudge(tmp_path, bat, change_t09: bool):
    """A copy of the bat-cli run re-judged by eval.verdict: (project, run, files before)."""
    project = verdict_project(tmp_path / "agent", change_t09=change_t09)
    run = copy_run(tmp_path / "runs")
    before = snapshot(run)
    result = bat("eval.verdict", "--run", str(run), cwd=project)
    assert result.code == 0, result.err
    assert result.out.strip() == f"{5 if change_t09 else 0} verdicts changed"
    return project, run, before


def test_verdict_rejudges_a_batcli_run_in_its_own_format(tmp_path, bat, home):
    project, run, before = rejudge(tmp_path, bat, change_t09=True)
    after = snapshot(run)
    changed = {name for name in after if after[name] != before[name]}
    assert changed == {
        f"{MODEL}/metrics.json",
        f"{MODEL}/summary.json",
        *(f"{MODEL}/episodes/t09__try{i}.json" for i in range(5)),
    }
    reason = "status: 'completed'; output: contains 'echo: hello number 9'"
    for i in range(5):
        episode = json.loads((run / MODEL / "episodes" / f"t09__try{i}.json").read_text())
        assert episode["verdict"] == {"passed": True, "reason": reason}
        old = json.loads(before[f"{MODEL}/episodes/t09__try{i}.json"])
        assert {k: v for k, v in episode.items() if k != "verdict"} == {
            k: v for k, v in old.items() if k != "verdict"
        }
    metrics = json.loads((run / MODEL / "metrics.json").read_text())
    rows = [row for row in metrics["per_episode"] if row["task_id"] == "t09"]
    assert len(rows) == 5
    assert all(row["success"] is True and row["verdict"]["reason"] == reason for row in rows)
    assert all(row["success"] for row in metrics["per_episode"])
    assert (metrics["summary"]["passed"], metrics["summary"]["failed"]) == (20, 0)
    assert metrics["summary"]["pass_rate"] == 1.0
    counts = json.loads((run / MODEL / "summary.json").read_text())
    assert counts["passed"] == 20
    (t09,) = [entry for entry in counts["attempts"] if entry["task_id"] == "t09"]
    assert t09 == {
        "task_id": "t09",
        "attempts": 5,
        "passed": 5,
        "failed": 0,
        "success_percentage": 100.0,
    }
    # The charts now read the new verdicts.
    plotted = bat("eval.plot", "-f", str(run), timeout=120)
    assert plotted.code == 0, plotted.err
    assert "100.0 % (20/20)" in svg_texts(run / "pass_rate.svg")
    # And so does eval.compare: against the original, t09 improved.
    compared = bat("eval.compare", "--json", str(RUN / MODEL), str(run / MODEL), cwd=project)
    assert compared.code == 0, compared.err
    assert json.loads(compared.out)["improved"] == ["t09"]
    # Once more: nothing left to change.
    again = bat("eval.verdict", "--run", str(run), cwd=project)
    assert again.out.strip() == "0 verdicts changed"


def test_verdict_with_the_dataset_it_ran_with_rewrites_nothing(tmp_path, bat, home):
    """bat's verdicts of bat-cli's episodes are bat-cli's own, word for word."""
    _, run, before = rejudge(tmp_path, bat, change_t09=False)
    assert snapshot(run) == before


def test_verdict_of_a_model_folder_keeps_tasks_the_dataset_no_longer_has(tmp_path, bat, home):
    project = verdict_project(tmp_path / "agent", change_t09=True)
    tasks = json.loads((project / "eval" / "input" / "tasks.json").read_text())
    (project / "eval" / "input" / "tasks.json").write_text(
        json.dumps([task for task in tasks if task["id"] in ("t00", "t09")])
    )
    run = copy_run(tmp_path / "runs")
    before = snapshot(run)
    result = bat("eval.verdict", "--run", str(run / MODEL), cwd=project)
    assert result.code == 0, result.err
    assert result.out.strip() == "5 verdicts changed"
    for name in ("t07__try0.json", "t11__try3.json", "t00__try2.json"):
        key = f"{MODEL}/episodes/{name}"
        assert snapshot(run)[key] == before[key]
    counts = json.loads((run / MODEL / "summary.json").read_text())
    assert counts["passed"] == 20
    assert [e["passed"] for e in counts["attempts"]] == [5, 5, 5, 5]


def test_verdict_finds_a_batcli_run_by_its_id_under_output_dir(tmp_path, bat, home):
    project = verdict_project(tmp_path / "agent", change_t09=True)
    copy_run(project / "eval" / "output")
    result = bat("eval.verdict", "--run", RUN.name, cwd=project)
    assert result.code == 0, result.err
    assert result.out.strip() == "5 verdicts changed"
    # Without --run and no run of bat's there, bat-cli's run folders are named
    result = bat("eval.verdict", cwd=project)
    assert result.code == 2
    assert f"bat-cli run folders: {RUN.name} — name one with --run" in result.err


def test_verdict_with_a_malformed_episode_changes_nothing(tmp_path, bat, home):
    project = verdict_project(tmp_path / "agent", change_t09=True)
    run = copy_run(tmp_path / "runs")
    (run / MODEL / "episodes" / "t11__try4.json").write_text('{"task_id": "t11", ')
    before = snapshot(run)
    result = bat("eval.verdict", "--run", str(run), cwd=project)
    assert result.code == 2 and "t11__try4.json is not valid JSON" in result.err
    assert "Traceback" not in result.err
    assert snapshot(run) == before  # not half rewritten: t09 would have changed first
