"""The single machine near its limit (issue 13): every target, measured, as medians.

    python benchmarks/scale.py [--repeat 5] [--big 20000] [--skip-big]

Figures, each against a real agent process on 127.0.0.1 sharing this machine's cores:

1. **Whole ``bat eval.run``**, 40 tasks × k=5 = 200 episodes, the echo agent (a2a-sdk's
   server, streaming) answering each turn after 100 ms, no telemetry, at concurrency 8,
   16 and 64; then the fast agent (below) with the same 100 ms, at 8. Targets: at most
   4.0 s at 8 (the turns alone take at least 200 × 0.1 s / 8 = 2.5 s); 64 never slower
   than 16 (within 5 %, the noise of a run). The echo agent's own CPU (about 4 ms a
   streamed turn) is serial in its one process: at 8 it adds a few ms to every turn.
2. **bat's own CPU per episode**: the evaluation engine in this process (the runner,
   adapter, verdicts, episode files), its CPU time (user + system, all its threads) over
   2,000 episodes at 0 ms, the agent's CPU apart (another process). Against the fast
   agent (``eval_fixtures/fast_agent.py``: non-streaming, a few tens of µs a message)
   and the echo agent (streaming: four events a turn). Target: at most 1 ms.
3. **Episodes per second** at 0 ms latency where the agent keeps up (the fast agent),
   concurrency 16. Target: at least 500; and 64 never slower than 16 (within 5 %).
4. **The plot stage**: ``bat eval.plot`` of one 200-episode run, and again with nothing
   changed (the charts are rendered once per change).
5. **A big run**: ``--big`` episodes (default 20,000: 4,000 tasks ×
   k=5) through the whole ``bat eval.run`` against the fast agent. Targets: exit 0,
   ``report.html`` written, peak memory of the bat process at most 200 MB.

Peak memory is bat's own (``ru_maxrss`` of the bat process, read at its exit through a
wrapper that runs bat's entry point), not the agent's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bat.secrets import Scrubber

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bat.evaluation.inputs.dataset import TaskSpec  # noqa: E402
from bat.evaluation.run.agent_process import AgentProcess  # noqa: E402
from bat.evaluation.run.runner import EpisodeRunner, plan  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from eval_throughput import ECHO, free_port, start_agent  # noqa: E402

FAST = f"{sys.executable} -m eval_fixtures.fast_agent"
# Runs bat as its entry point does (BatProgram().run) and writes the process's peak memory
# (KiB) to $BAT_PEAK_FILE before it ends (bat ends with os._exit: no atexit).
WRAPPER = (
    "import os, resource, sys\n"
    "sys.argv[0] = 'bat'\n"
    "from bat.cli.program import BatProgram\n"
    "code = BatProgram().run(exit=False)\n"
    "with open(os.environ['BAT_PEAK_FILE'], 'w') as f:\n"
    "    f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
    "sys.stdout.flush(); sys.stderr.flush(); os._exit(code)\n"
)

failed = False


def report(text: str, ok: bool | None = None) -> None:
    global failed
    if ok is not None:
        text += f": {'ok' if ok else 'MISSED'}"
        failed |= not ok
    print(text, flush=True)


# --- whole command lines ------------------------------------------------------------------


def project(folder: Path, *, tasks: int, k: int, concurrency: int, agent: str, latency_ms: int):
    dataset = folder / "eval" / "input" / "tasks.json"
    dataset.parent.mkdir(parents=True)
    dataset.write_text(
        json.dumps(
            [
                {
                    "id": f"t{i:05d}",
                    "turns": [f"q{i}"],
                    "expected": {"output_must_contain": [f"q{i}"]},
                }
                for i in range(tasks)
            ],
            indent=1,
        )
    )
    (folder / "config.yaml").write_text(
        "checkpoints: true\nendpoint: {url: http://localhost, port: '${PORT}'}\n"
    )
    (folder / "eval" / "eval.yaml").write_text(
        "evaluation:\n"
        f"  agent_url: http://127.0.0.1:{free_port()}\n"
        f"  k: {k}\n"
        f"  concurrency: {concurrency}\n"
        "  agent:\n"
        f"    command: {agent}\n"
        f"    env: {{PYTHONPATH: '{ROOT}', LATENCY_MS: '{latency_ms}'}}\n"
    )


def bat(folder: Path, *args: str) -> dict:
    """Run ``bat ARGS`` in ``folder``: seconds, exit status, peak memory (MB), output."""
    peak = folder / ".peak"
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        cwd=folder,
        env={**os.environ, "HOME": str(folder), "NO_COLOR": "1", "BAT_PEAK_FILE": str(peak)},
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    peak_mb = int(peak.read_text()) / 1024 if peak.is_file() else float("nan")
    return {
        "seconds": seconds,
        "code": proc.returncode,
        "peak_mb": peak_mb,
        "out": proc.stdout + proc.stderr,
    }


def whole_run(concurrency: int, *, tasks=40, k=5, agent=ECHO, latency_ms=100) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        project(
            folder, tasks=tasks, k=k, concurrency=concurrency, agent=agent, latency_ms=latency_ms
        )
        result = bat(folder, "eval.run")
        output = folder / "eval" / "output"
        result["report"] = (output / "report.html").is_file()
        runs = list(output.glob("*/run.json"))
        result["episodes_s"] = float("nan")
        if runs:
            record = json.loads(runs[0].read_text())
            if record.get("ended_at"):
                result["episodes_s"] = (
                    _time(record["ended_at"]) - _time(record["started_at"])
                ).total_seconds()
        if result["code"] == 0 and tasks * k <= 200:
            again = bat(folder, "eval.plot")  # nothing changed since eval.run plotted
            result["replot_s"] = again["seconds"]
            for chart in output.glob("*.svg"):
                chart.unlink()  # a change: the charts are drawn again
            result["plot_s"] = bat(folder, "eval.plot")["seconds"]
        return result


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- the engine in this process -----------------------------------------------------------


def engine(agent: AgentProcess, out: Path, episodes: int, concurrency: int) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) of ``episodes`` one-turn episodes."""
    work = plan(
        [
            TaskSpec(id=f"t{i:05d}", turns=[f"q{i}"], expected={"output_must_contain": [f"q{i}"]})
            for i in range(episodes)
        ],
        1,
        set(),
    )
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
    cpu, started = time.process_time(), time.perf_counter()
    asyncio.run(runner.run(work))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if sum(passed) != episodes:
        raise SystemExit(f"only {sum(passed)}/{episodes} episodes passed: not measuring success")
    return seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--big", type=int, default=20_000)
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args()

    medians = {}
    for concurrency in (8, 16, 64):
        runs = [whole_run(concurrency) for _ in range(args.repeat)]
        bad = [r for r in runs if r["code"] != 0 or not r["report"]]
        if bad:
            raise SystemExit(f"eval.run failed at concurrency {concurrency}:\n{bad[0]['out']}")
        medians[concurrency] = statistics.median(r["seconds"] for r in runs)
        episodes = statistics.median(r["episodes_s"] for r in runs)
        report(
            f"200 episodes, 100 ms a turn, concurrency {concurrency}: whole eval.run median "
            f"{medians[concurrency]:.2f} s (episodes {episodes:.2f} s, "
            f"peak {statistics.median(r['peak_mb'] for r in runs):.0f} MB; runs "
            f"{[round(r['seconds'], 2) for r in runs]})",
            medians[concurrency] <= 4.0 if concurrency == 8 else None,
        )
        if concurrency == 8:
            plot = statistics.median(r["plot_s"] for r in runs)
            replot = statistics.median(r["replot_s"] for r in runs)
            report(
                f"eval.plot of that run: median {plot:.2f} s; with nothing changed {replot:.2f} s"
            )
    report(
        f"concurrency 64 against 16: {medians[64]:.2f} s vs {medians[16]:.2f} s",
        medians[64] <= medians[16] * 1.05,
    )
    runs = [whole_run(8, agent=FAST) for _ in range(args.repeat)]
    fast = statistics.median(r["seconds"] for r in runs)
    report(
        f"the same with the fast agent (100 ms a turn), concurrency 8: whole eval.run median "
        f"{fast:.2f} s (episodes {statistics.median(r['episodes_s'] for r in runs):.2f} s)",
        fast <= 4.0,
    )

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        rates = {}
        cases = (("fast", FAST, 16), ("fast", FAST, 64), ("echo", ECHO, 16))
        for name, command, concurrency in cases:
            agent = start_agent(0, workdir, command)
            try:
                engine(agent, workdir / f"warm-{name}-{concurrency}", 200, concurrency)
                runs = [
                    engine(agent, workdir / f"{name}-{concurrency}-{r}", 2000, concurrency)
                    for r in range(args.repeat)
                ]
            finally:
                agent.stop()
            cpu_ms = statistics.median(cpu for _, cpu in runs) / 2000 * 1000
            rate = rates[name, concurrency] = 2000 / statistics.median(s for s, _ in runs)
            target = name == "fast" and concurrency == 16
            report(
                f"2,000 episodes, {name} agent, 0 ms, concurrency {concurrency}: bat's CPU "
                f"median {cpu_ms:.2f} ms per episode",
                cpu_ms <= 1.0 if target else None,
            )
            report(f"  episodes per second median {rate:.0f}", rate >= 500 if target else None)
        report(
            f"0 ms, fast agent, concurrency 64 against 16: {rates['fast', 64]:.0f} vs "
            f"{rates['fast', 16]:.0f} episodes/s",
            rates["fast", 64] >= rates["fast", 16] * 0.95,
        )

    if not args.skip_big:
        tasks = max(1, args.big // 5)
        big = whole_run(16, tasks=tasks, k=5, agent=FAST, latency_ms=0)
        report(
            f"{tasks * 5:,} episodes, whole eval.run: {big['seconds']:.1f} s, exit {big['code']}, "
            f"report {'written' if big['report'] else 'MISSING'}, peak memory of bat "
            f"{big['peak_mb']:.0f} MB",
            big["code"] == 0 and big["report"] and big["peak_mb"] <= 200,
        )
        if big["code"] != 0:
            print(big["out"][-2000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
