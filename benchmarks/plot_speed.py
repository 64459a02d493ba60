"""Speed of ``bat eval.plot``, end to end: 10 runs × 50 tasks × k=3 (1,500 episodes).

    python benchmarks/plot_speed.py [--repeat 5] [--runs 10] [--tasks 50] [--k 3] [--bat PATH]

The run folders (run.json, metrics.json, summary.json and one file per episode, written
by bat's own code in today's format, with judge scores in half of the runs) are made
once in a temporary folder; then
``bat eval.plot -f FOLDER`` runs ``--repeat`` times as a new process each time, so every
figure includes interpreter start-up, imports, reading the files, building and
rendering all six charts (SVG and PNG) and writing report.html. The median is printed;
the target (issue: charts and report) is under 5 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bat.evaluation.log import run as rundir
from bat.evaluation.log import store
from bat.evaluation.log.episode import (
    EpisodeResult,
    EpisodeTrace,
    InfraError,
    StatusEvent,
    Usage,
    Verdict,
)
from bat.evaluation.log.scores import not_judged
from bat.evaluation.stats import row_of, summarize
from bat.secrets import Scrubber

TARGET_S = 5.0
DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)


def make_runs(base: Path, runs: int, tasks: int, k: int) -> int:
    """Write ``runs`` model folders of ``tasks`` × ``k`` episodes; return the episode count.

    Everything is written by bat's own code, in today's format: run.json by
    ``rundir.write_run``, each episode by ``store.write_episode``, and summary.json and
    metrics.json by ``metrics.summarize`` over ``metrics.row_of`` of the episodes.
    """
    rng = random.Random(7)
    written = 0
    task_ids = [
        f"task-{t:03d}-{['weather', 'calc', 'search', 'travel'][t % 4]}" for t in range(tasks)
    ]
    for r in range(runs):
        run_id = f"202601{1 + r // 2:02d}-120000-bench"
        model = f"openai:model-{r}"
        run_dir = base / run_id
        model_dir = run_dir / f"openai_model-{r}"
        model_dir.mkdir(parents=True)
        record = rundir.read_run(run_dir) if (run_dir / rundir.RUN_FILE).is_file() else None
        entry = rundir.ModelEntry(label=model, dir=model_dir.name, status="completed")
        if record is None:
            record = rundir.RunRecord(
                run_id=run_id,
                status="completed",
                started_at="2026-01-01T12:00:00.000Z",
                tasks=task_ids,
                k=k,
            )
        record.models.append(entry)
        rundir.write_run(run_dir, record, scrubber=Scrubber())
        judged = r % 2 == 0
        skill = 0.4 + 0.5 * rng.random()
        rows = []
        for task_id in task_ids:
            difficulty = rng.random()
            for attempt in range(1, k + 1):
                infra = rng.random() < 0.02
                passed = not infra and rng.random() < skill * (1.2 - difficulty)
                wall = round(rng.lognormvariate(0, 0.5), 4)
                prompt, completion = rng.randint(200, 900), rng.randint(20, 200)
                scores = None
                if judged and infra:
                    scores = not_judged()  # what eval.judge writes for one
                elif judged:
                    scores = {
                        "rubric_version": "bat.rubric/1",
                        "judges": ["openai:judge"],
                        "dimensions": {
                            d: {
                                "score": round(rng.random(), 2),
                                "reasoning": "The answer addresses the question.",
                            }
                            for d in DIMENSIONS
                        },
                        "error": None,
                        "judge_errors": {},
                    }
                episode = EpisodeResult(
                    task_id=task_id,
                    attempt=attempt,
                    model=model,
                    status="unknown" if infra else "completed",
                    final_output="" if infra else "The answer is 42. " * 20,
                    infra_error=InfraError(kind="timeout", message="no answer") if infra else None,
                    trace=EpisodeTrace(
                        context_id=f"ctx-{r}-{task_id}-{attempt}",
                        events=[
                            StatusEvent(t=0.1 * n, turn=1, kind="status", preview="working")
                            for n in range(10)
                        ],
                        wall_time_s=wall,
                        time_to_first_event_s=round(wall / 3, 4),
                        usage=Usage(
                            prompt_tokens=prompt,
                            completion_tokens=completion,
                            total_tokens=prompt + completion,
                            model_calls=2,
                        ),
                    ),
                    verdict=Verdict(
                        passed=passed,
                        reason="status: 'completed'; output: missing 'Paris'",
                    ),
                    scores=scores,
                    started_at="2026-01-01T12:00:00.000Z",
                    ended_at="2026-01-01T12:00:01.000Z",
                )
                store.write_episode(model_dir, task_id, episode, scrubber=Scrubber())
                rows.append(row_of(episode))
                written += 1
        summary, metrics = summarize(rows, k=k, model=model, task_order=task_ids, run_id=run_id)
        store.write_results(model_dir, summary, metrics, scrubber=Scrubber())
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bat-plot-bench-") as tmp:
        base = Path(tmp)
        episodes = make_runs(base, args.runs, args.tasks, args.k)
        print(f"{args.runs} runs × {args.tasks} tasks × k={args.k} = {episodes} episodes")
        samples = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            proc = subprocess.run(
                [args.bat, "eval.plot", "-f", str(base)], capture_output=True, text=True
            )
            samples.append(time.perf_counter() - start)
            if proc.returncode != 0:
                print(proc.stdout + proc.stderr, file=sys.stderr)
                return 1
        sizes = {p.name: p.stat().st_size for p in sorted(base.glob("*.*"))}
    median = statistics.median(samples)
    print("samples: " + ", ".join(f"{s:.2f} s" for s in samples))
    print("files: " + ", ".join(f"{name} {size // 1024} KiB" for name, size in sizes.items()))
    ok = median < TARGET_S
    verdict = "ok" if ok else "MISSED"
    print(f"median bat eval.plot: {median:.2f} s (target < {TARGET_S:.0f} s: {verdict})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
