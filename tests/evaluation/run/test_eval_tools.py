"""Tool calls and usage from the stream and from span files; the agent's settings respected."""

import json

import pytest

from tests.evalkit import episodes, make_project, run_dirs, summary

CONFIG = """# the agent's own configuration: bat must never change this file
agent_card: ./agent.json
checkpoints: true
endpoint:
  url: http://localhost
  port: ${PORT}
telemetry:
  privacy: %s
  output:
    - type: local
      file_path: my-own-spans.jsonl
"""


def run_tool_dataset(tmp_path, bat, *, agent_env=None, privacy="none"):
    project = make_project(
        tmp_path,
        "tool_tasks.json",
        agent="tool_agent",
        agent_env=agent_env,
        config_yaml=CONFIG % privacy,
        k=2,
    )
    result = bat("eval.run", cwd=project)
    return project, result


@pytest.mark.parametrize(
    ("agent_env", "source"),
    [
        ({}, "stream"),
        ({"NO_STREAM_METADATA": "1"}, "spans"),
        ({"NO_STREAM_METADATA": "1", "SPANS_DELAY_MS": "300"}, "spans"),
        ({"NO_STREAMING": "1"}, "stream"),
    ],
    ids=["stream-metadata", "span-file", "late-spans", "not-streaming"],
)
def test_tool_dataset_passes_from_either_source(tmp_path, bat, home, agent_env, source):
    before = CONFIG % "none"
    project, result = run_tool_dataset(tmp_path, bat, agent_env=agent_env)
    assert result.code == 0, result.err
    (run_dir,) = run_dirs(project)
    found = episodes(run_dir)
    failing = {n: e["verdict"]["reason"] for n, e in found.items() if not e["verdict"]["passed"]}
    assert failing == {}
    with_tools = [e for e in found.values() if e["trace"]["tool_calls"]]
    assert with_tools and all(e["trace"]["tool_source"] == source for e in with_tools)
    assert all(e["trace"]["usage"]["total_tokens"] > 0 for e in found.values())
    # The user's config.yaml is byte-for-byte unchanged; the spans went to the run directory.
    assert (project / "config.yaml").read_text() == before
    assert not (project / "my-own-spans.jsonl").exists()
    assert (run_dir / "agent-default" / "spans.jsonl").stat().st_size > 0
    copy = (run_dir / "agent-default" / "agent-config.yaml").read_text()
    assert "my-own-spans.jsonl" not in copy and "privacy: none" in copy
    assert summary(run_dir)["totals"]["passed"] == summary(run_dir)["totals"]["attempts"]


def test_usage_counts_match_the_agents_report(tmp_path, bat, home):
    tasks = [{"id": "calc", "turns": ["calculate 6*7"], "expected": {}}]
    project = make_project(
        tmp_path,
        tasks,
        agent="tool_agent",
        config_yaml=CONFIG % "none",
        agent_env={"NO_STREAM_METADATA": "1"},
    )
    assert bat("eval.run", cwd=project).code == 0
    (episode,) = episodes(run_dirs(project)[0]).values()
    usage = episode["trace"]["usage"]
    # tool agent: prompt = 10 × words of the question, completion = 5 × words of the answer
    assert usage == {
        "prompt_tokens": 20,
        "completion_tokens": 5,
        "total_tokens": 25,
        "model_calls": 2,
    }
    assert episode["trace"]["tool_calls"][0]["args"] == {"expression": "6*7"}


def test_privacy_full_is_refused_before_anything_starts(tmp_path, bat, home):
    project, result = run_tool_dataset(tmp_path, bat, privacy="full")
    assert result.code == 2
    assert "telemetry.privacy is 'full'" in result.err and "config.yaml" in result.err
    assert run_dirs(project) == []


def test_privacy_floor_in_code_is_found(tmp_path, bat, home):
    tasks = [
        {
            "id": "w",
            "turns": ["weather in Rome"],
            "expected": {"tool_calls": [{"name": "get_weather", "args_subset": {"city": "Rome"}}]},
        }
    ]
    project = make_project(tmp_path, tasks, agent="tool_agent", config_yaml=CONFIG % "none")
    (project / "__main__.py").write_text(
        "AgentApplication(AgentGraphType=G, AgentStateType=S,\n"
        "                 telemetry_privacy_floor='content').run()\n"
    )
    result = bat("eval.run", cwd=project)
    assert result.code == 2
    assert "__main__.py: telemetry_privacy_floor is 'content'" in result.err


def test_privacy_that_hides_nothing_checked_is_fine(tmp_path, bat, home):
    tasks = [
        {
            "id": "plain",
            "turns": ["no tools here"],
            "expected": {"output_must_contain": ["no tools"]},
        }
    ]
    project = make_project(tmp_path, tasks, agent="tool_agent", config_yaml=CONFIG % "full")
    assert bat("eval.run", cwd=project).code == 0


def test_multi_turn_without_checkpoints_warns(tmp_path, bat, home):
    tasks = [{"id": "two", "turns": ["a", "HISTORY"], "expected": {}}]
    project = make_project(
        tmp_path,
        tasks,
        config_yaml=(CONFIG % "none").replace("checkpoints: true", "checkpoints: false"),
    )
    # A bat-adk agent: checkpoints is bat-adk's key (a plain a2a-sdk agent gets no warning).
    (project / "pyproject.toml").write_text('[project]\nname = "a"\ndependencies = ["bat-adk"]\n')
    result = bat("eval.run", cwd=project)
    assert result.code == 0
    assert "warning: 1 task has several turns" in result.err and "checkpoints" in result.err


def test_agent_calls_are_counted(tmp_path, bat, home):
    tasks = [
        {
            "id": "delegate",
            "turns": ["ASK_AGENT planner"],
            "expected": {"agent_calls": [{"name": "planner", "times": 1}]},
        }
    ]
    for env in ({}, {"NO_STREAM_METADATA": "1"}):
        project = make_project(
            tmp_path / str(len(env)),
            tasks,
            agent="tool_agent",
            config_yaml=CONFIG % "none",
            agent_env=env,
        )
        assert bat("eval.run", cwd=project).code == 0
        (episode,) = episodes(run_dirs(project)[0]).values()
        assert episode["verdict"]["passed"], episode["verdict"]["reason"]
        assert json.dumps(episode["trace"]["agent_calls"]).count("planner") == 1


NO_TELEMETRY = "checkpoints: true\nendpoint: {url: http://localhost, port: '${PORT}'}\n"
SILENT = NO_TELEMETRY + "telemetry:\n  output:\n    - {type: local, file_path: spans.jsonl}\n"


def test_spans_that_will_not_come_are_not_waited_for(tmp_path, bat, home):
    """An agent that is not on bat-adk and whose config has no telemetry writes no spans:
    no episode waits for them (they used to wait 5 s each, in the first waves)."""
    tasks = [{"id": f"t{i}", "turns": [f"q{i}"], "expected": {}} for i in range(12)]
    project = make_project(tmp_path, tasks, config_yaml=NO_TELEMETRY)
    assert bat("eval.run", cwd=project).code == 0
    (model,) = json.loads((run_dirs(project)[0] / "run.json").read_text())["models"]
    assert model["spans"] == "not expected" and model["span_waits"] == 0


def test_spans_that_should_come_but_do_not_stop_being_waited_for(tmp_path, bat, home):
    """Telemetry configured, but the agent writes nothing: once one wait runs out on an
    empty file, the waits in flight end and no later episode waits."""
    tasks = [{"id": f"t{i}", "turns": [f"q{i}"], "expected": {}} for i in range(12)]
    project = make_project(tmp_path, tasks, config_yaml=SILENT, concurrency=4)
    assert bat("eval.run", cwd=project).code == 0
    (model,) = json.loads((run_dirs(project)[0] / "run.json").read_text())["models"]
    assert model["spans"] == "silent"
    assert 1 <= model["span_waits"] <= 4  # the first wave at most, never all 12
