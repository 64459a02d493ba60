"""The fast fixture agent (benchmarks only) is a real A2A 1.0 agent to bat's client: its
card resolves, and every episode the runner sends it passes, in one conversation each."""

import asyncio
import json

from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.log import store
from bat.evaluation.run.runner import EpisodeRunner, plan
from tests.evalkit import free_port, start_fixture
from tests.logkit import NO_SECRETS


def test_bat_runs_episodes_against_the_fast_agent(tmp_path):
    port = free_port()
    agent = start_fixture("fast_agent", port)
    try:
        tasks = [
            TaskSpec(
                id=f"t{i}",
                turns=[f"question {i}"],
                expected={"output_must_contain": [f"question {i}"]},
            )
            for i in range(30)
        ]
        outcomes = []
        runner = EpisodeRunner(
            f"http://127.0.0.1:{port}",
            model="m",
            model_dir=tmp_path,
            concurrency=8,
            turn_timeout_s=10,
            on_done=outcomes.append,
            scrubber=NO_SECRETS,
        )
        asyncio.run(runner.run(plan(tasks, 2, set())))
    finally:
        agent.terminate()
        agent.wait(5)
        agent.stdout.close()
    assert len(outcomes) == 60 and all(o.passed and not o.infra for o in outcomes)
    assert runner.binding == "JSONRPC 1.0"
    episodes = [episode for _, episode in store.episodes(tmp_path)]
    assert len(episodes) == 60
    assert len({e.trace.context_id for e in episodes}) == 60  # one conversation each
    first = json.loads(next(tmp_path.glob("episodes/t0__try1.json")).read_text())
    assert first["final_output"] == "echo: question 0" and first["status"] == "completed"
