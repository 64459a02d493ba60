"""Throughput of LLM judging (bat.evaluation.judging) against the scripted model server.

    python benchmarks/judge_throughput.py [--repeat 5] [--episodes 200] [--concurrency 16]

Two figures, each the median over ``--repeat`` runs:

1. Judging 200 episodes × 4 dimensions at concurrency 16, nothing cached: prompts built,
   200 HTTP requests (the four dimensions are one request per episode, see
   bat/evaluation/judging/rubrics.py), replies parsed, cache files and episode files
   written atomically. Target: under 3 s.
2. Re-judging the same run with every judgement cached: no HTTP request at all.
   Target: under 0.5 s.

The model server is a real process (eval_fixtures/model_server.py) on 127.0.0.1,
answering every judgement with a scripted JSON reply; its /stats confirms the request
counts. Episode files are written directly, as an evaluation run would leave them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bat.secrets import Scrubber

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bat.evaluation.inputs.config import JUDGE_DIMENSIONS, JudgeSpec  # noqa: E402
from bat.evaluation.inputs.dataset import TaskSpec  # noqa: E402
from bat.evaluation.judging import judge_run  # noqa: E402
from bat.evaluation.log.episode import (  # noqa: E402
    EpisodeResult,
    EpisodeTrace,
    ToolCall,
    TurnRecord,
)

TARGET_FRESH_S = 3.0
TARGET_CACHED_S = 0.5


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval_fixtures.model_server", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"the model server did not start: {line!r}")
    return proc, line.split()[-1]


def write_episodes(folder: Path, count: int) -> dict[str, TaskSpec]:
    """``count`` realistic episodes (a turn, an output, two tool calls) under ``folder``."""
    episodes = folder / "openai_bench" / "episodes"
    episodes.mkdir(parents=True)
    tasks = {}
    for i in range(count):
        task = TaskSpec(
            id=f"task-{i:04d}",
            turns=[f"What is the weather in city {i}, and what is {i} * 7?"],
            expected={"expected_outcome": f"Reports the weather in city {i} and {i * 7}."},
        )
        tasks[task.id] = task
        output = f"It is sunny in city {i}, and {i} * 7 = {i * 7}. " * 5
        calls = [
            ToolCall(name="get_weather", args={"city": f"city {i}"}, result="sunny " * 40),
            ToolCall(name="calculator", args={"expression": f"{i}*7"}, result=str(i * 7)),
        ]
        episode = EpisodeResult(
            task_id=task.id,
            attempt=1,
            model="openai:bench",
            status="completed",
            final_output=output,
            trace=EpisodeTrace(
                context_id=f"ctx-{i}",
                turns=[TurnRecord(input=task.turns[0], status="completed", output=output)],
                tool_calls=calls,
            ),
            started_at="2024-01-01T00:00:00Z",
            ended_at="2024-01-01T00:00:01Z",
        )
        (episodes / f"{task.id}__try1.json").write_text(episode.to_json(Scrubber()))
    return tasks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    reply = json.dumps({d: {"reasoning": "fine", "score": 0.75} for d in JUDGE_DIMENSIONS})
    proc, url = start_server()
    work = Path(tempfile.mkdtemp(prefix="bat-judge-bench-"))
    try:
        httpx.post(f"{url}/control", json={"rules": [{"reply": reply}]}, timeout=5)
        spec = JudgeSpec(
            provider="openai", model="scripted", base_url=f"{url}/v1", concurrency=args.concurrency
        )
        template = work / "template"
        tasks = write_episodes(template, args.episodes)
        fresh, cached = [], []
        for n in range(args.repeat):
            run = work / f"run-{n}"
            shutil.copytree(template, run)
            httpx.post(f"{url}/control", json={"reset_stats": True}, timeout=5)
            started = time.perf_counter()
            first = judge_run(run, [spec], tasks, env={}, say=lambda _: None, scrubber=Scrubber())
            fresh.append(time.perf_counter() - started)
            started = time.perf_counter()
            again = judge_run(run, [spec], tasks, env={}, say=lambda _: None, scrubber=Scrubber())
            cached.append(time.perf_counter() - started)
            served = httpx.get(f"{url}/stats", timeout=5).json()["requests"]
            if (first.errors, first.requests_made, again.requests_made, again.cached) != (
                0,
                args.episodes,
                0,
                args.episodes,
            ) or served != args.episodes:
                raise SystemExit(f"unexpected counts: {first}, {again}, served {served}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)

    fresh_s, cached_s = statistics.median(fresh), statistics.median(cached)
    n, c = args.episodes, args.concurrency
    print(
        f"judging {n} episodes × {len(JUDGE_DIMENSIONS)} dimensions ({n} requests) at "
        f"concurrency {c}: median {fresh_s:.3f} s (target < {TARGET_FRESH_S} s) "
        f"{'OK' if fresh_s < TARGET_FRESH_S else 'SLOW'}"
    )
    print(
        f"re-judging them, all cached (0 requests): median {cached_s:.3f} s "
        f"(target < {TARGET_CACHED_S} s) {'OK' if cached_s < TARGET_CACHED_S else 'SLOW'}"
    )
    return 0 if fresh_s < TARGET_FRESH_S and cached_s < TARGET_CACHED_S else 1


if __name__ == "__main__":
    sys.exit(main())
