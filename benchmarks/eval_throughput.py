"""Throughput and memory of the evaluation engine against the echo fixture agent.

    python benchmarks/eval_throughput.py [--repeat 5] [--memory-episodes 10000]

Three figures (issue 3), each a median over ``--repeat`` runs where it is a time:

1. 40 tasks × k=5 = 200 episodes against an agent answering each turn after 100 ms, at
   concurrency 16: the time of the episodes alone (the agent is started before the
   clock starts). Ideal: 200 × 0.1 s / 16 = 1.25 s; target: within 1.5× (1.875 s).
2. Harness overhead: episodes per second against a 0 ms agent at concurrency 16;
   target: at least 100 episodes/s.
3. Peak memory (max RSS) of this process while it runs ``--memory-episodes`` episodes
   against the 0 ms agent; target: under 300 MB.

The agent is a real process (eval_fixtures/echo_agent.py) on 127.0.0.1; the engine is
the library bat eval.run uses (adapter, runner, verdicts, atomic episode files).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bat.secrets import Scrubber

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bat.evaluation.inputs.dataset import TaskSpec  # noqa: E402
from bat.evaluation.run.agent_process import AgentProcess  # noqa: E402
from bat.evaluation.run.runner import EpisodeRunner, plan  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


ECHO = f"{sys.executable} -m eval_fixtures.echo_agent"


def start_agent(latency_ms: int, workdir: Path, command: str = ECHO) -> AgentProcess:
    """A fixture agent (the echo agent unless ``command`` names another) on a free port."""
    port = free_port()
    env = {**os.environ, "PORT": str(port), "LATENCY_MS": str(latency_ms), "PYTHONPATH": str(ROOT)}
    agent = AgentProcess(
        command,
        root=ROOT,
        env=env,
        log=workdir / f"agent-{port}.log",
        url=f"http://127.0.0.1:{port}",
        startup_timeout_s=30,
        shutdown_timeout_s=5,
    )
    agent.start()
    agent.wait_ready()
    return agent


def tasks(count: int) -> list[TaskSpec]:
    return [
        TaskSpec(
            id=f"task-{i:05d}",
            turns=[f"question {i}"],
            expected={"output_must_contain": [f"question {i}"]},
        )
        for i in range(count)
    ]


async def run_episodes(agent: AgentProcess, work, out: Path, concurrency: int) -> tuple[float, int]:
    passed = []
    runner = EpisodeRunner(
        agent.url,
        model="bench",
        model_dir=out,
        concurrency=concurrency,
        turn_timeout_s=60,
        on_done=lambda outcome: passed.append(outcome.passed),
        scrubber=Scrubber(),
    )
    started = time.perf_counter()
    await runner.run(work)  # the connection (card read) is opened inside, as in eval.run
    elapsed = time.perf_counter() - started
    return elapsed, sum(passed)


def timed(
    agent: AgentProcess, n_tasks: int, k: int, concurrency: int, repeat: int, workdir: Path
) -> list[float]:
    times = []
    for r in range(repeat):
        work = plan(tasks(n_tasks), k, set())
        elapsed, passed = asyncio.run(
            run_episodes(agent, work, workdir / f"run-{n_tasks}-{r}", concurrency)
        )
        if passed != len(work):
            raise SystemExit(
                f"only {passed}/{len(work)} episodes passed: the benchmark is not measuring success"
            )
        times.append(elapsed)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory-episodes", type=int, default=10_000)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        slow = start_agent(100, workdir)
        try:
            times = timed(slow, 40, 5, 16, args.repeat, workdir)
        finally:
            slow.stop()
        median = statistics.median(times)
        ok = median <= 1.875
        failed |= not ok
        print(
            f"200 episodes, 100 ms agent, concurrency 16: median {median:.3f} s "
            f"(ideal 1.250 s, target <= 1.875 s: {'ok' if ok else 'MISSED'}); "
            f"runs {[round(t, 3) for t in times]}"
        )

        fast = start_agent(0, workdir)
        try:
            times = timed(fast, 100, 5, 16, args.repeat, workdir)
            rate = 500 / statistics.median(times)
            ok = rate >= 100
            failed |= not ok
            print(
                f"500 episodes, 0 ms agent, concurrency 16: median {rate:.0f} episodes/s "
                f"(target >= 100: {'ok' if ok else 'MISSED'})"
            )
            if args.memory_episodes:
                n = args.memory_episodes
                elapsed, _ = asyncio.run(
                    run_episodes(fast, plan(tasks(n), 1, set()), workdir / "memory", 16)
                )
                peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                ok = peak_mb < 300
                failed |= not ok
                print(
                    f"{n} episodes in {elapsed:.1f} s: "
                    f"peak memory of the bat process {peak_mb:.0f} MB "
                    f"(target < 300 MB: {'ok' if ok else 'MISSED'})"
                )
        finally:
            fast.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
