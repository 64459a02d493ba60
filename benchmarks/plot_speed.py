"""Speed of ``bat eval.plot``, end to end: 10 runs × 50 tasks × k=3 (1,500 episodes).

    python benchmarks/plot_speed.py [--repeat 5] [--runs 10] [--tasks 50] [--k 3] [--bat PATH]

The run folders (metrics.json, summary.json and one file per episode, as bat writes
them, with judge scores in half of the runs) are made once in a temporary folder; then
``bat eval.plot -f FOLDER`` runs ``--repeat`` times as a new process each time, so every
figure includes interpreter start-up, imports, reading the files, building and
rendering all six charts (SVG and PNG) and writing report.html. The median is printed;
the target (issue: charts and report) is under 5 s.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 5.0
DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)


def make_runs(base: Path, runs: int, tasks: int, k: int) -> int:
    """Write ``runs`` model folders of ``tasks`` × ``k`` episodes; return the episode count."""
    rng = random.Random(7)
    written = 0
    for r in range(runs):
        run_id = f"202601{1 + r // 2:02d}-120000-bench"
        model = f"openai:model-{r}"
        model_dir = base / run_id / f"openai_model-{r}"
        (model_dir / "episodes").mkdir(parents=True)
        (base / run_id / "run.json").write_text(json.dumps({"run_id": run_id}))
        judged = r % 2 == 0
        skill = 0.4 + 0.5 * rng.random()
        rows = []
        for t in range(tasks):
            task_id = f"task-{t:03d}-{['weather', 'calc', 'search', 'travel'][t % 4]}"
            difficulty = rng.random()
            for attempt in range(1, k + 1):
                infra = rng.random() < 0.02
                passed = not infra and rng.random() < skill * (1.2 - difficulty)
                wall = round(rng.lognormvariate(0, 0.5), 4)
                prompt, completion = rng.randint(200, 900), rng.randint(20, 200)
                scores = {d: round(rng.random(), 2) for d in DIMENSIONS} if judged else None
                row = {
                    "task_id": task_id,
                    "attempt": attempt,
                    "passed": passed,
                    "status": "completed",
                    "infra_error": "timeout" if infra else None,
                    "wall_time_s": wall,
                    "time_to_first_event_s": round(wall / 3, 4),
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "model_calls": 2,
                    "tool_calls": 1,
                    "scores": scores,
                }
                rows.append(row)
                episode = {
                    "schema": "bat.episode/1",
                    "task_id": task_id,
                    "attempt": attempt,
                    "model": model,
                    "status": "completed",
                    "final_output": "The answer is 42. " * 20,
                    "infra_error": {"kind": "timeout", "message": "no answer"} if infra else None,
                    "verdict": {
                        "passed": passed,
                        "reason": "status: 'completed'; output: missing 'Paris'",
                        "checks": [],
                    },
                    "scores": {
                        "dimensions": {
                            d: {"score": v, "reasoning": "The answer addresses the question."}
                            for d, v in scores.items()
                        }
                    }
                    if scores
                    else None,
                    "trace": {"events": [{"t": 0.1, "preview": "working"}] * 10, "turns": []},
                }
                path = model_dir / "episodes" / f"{task_id}__try{attempt}.json"
                path.write_text(json.dumps(episode))
                written += 1
        count = len(rows)
        passed = sum(row["passed"] for row in rows)
        summary = {
            "episodes": count,
            "passed": passed,
            "pass_rate": passed / count,
            "infra_failures": sum(row["infra_error"] is not None for row in rows),
            "k": k,
            "pass_at_k": None,
            "pass_hat_k": None,
            "tokens": {
                "prompt_total": sum(row["prompt_tokens"] for row in rows),
                "completion_total": sum(row["completion_tokens"] for row in rows),
            },
        }
        metrics = {"model": model, "run_id": run_id, "per_episode": rows, "summary": summary}
        (model_dir / "metrics.json").write_text(json.dumps(metrics))
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
