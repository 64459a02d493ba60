"""How ``bat eval.show`` scales with the dataset: median wall time and peak memory.

    python benchmarks/dataset_scale.py [--tasks 1000000] [--runs 3] [--bat PATH]

A project is made with ``bat eval.init`` (the real example files); its tasks.json is
then replaced by ``--tasks`` tasks cycled from the example's own tasks, each with a
unique id, written with the same ``json.dumps(indent=2)`` shape. Each run is a new
``bat eval.show`` process, which reads, decodes and validates every task; its peak
resident memory comes from ``wait4``. The target (issue 9) is 1,000,000 tasks in under
15 s and 1.5 GB peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 15.0
TARGET_MB = 1536.0


def make_project(root: Path, bat: str, tasks: int) -> Path:
    """``bat eval.init`` in ``root``, then a dataset of ``tasks`` tasks in its format.

    The file is written one task at a time, exactly as ``json.dumps(tasks, indent=2)``
    would write the whole list: this process must stay small, because a child forked
    from it would count this process's memory in its own peak RSS.
    """
    subprocess.run([bat, "eval.init"], cwd=root, capture_output=True, check=True)
    dataset = root / "eval" / "input" / "tasks.json"
    examples = json.loads(dataset.read_text(encoding="utf-8"))
    with dataset.open("w", encoding="utf-8") as out:
        out.write("[")
        for index in range(tasks):
            task = {**examples[index % len(examples)]}
            task["id"] = f"{task['id']}-{index}"
            item = json.dumps(task, indent=2).replace("\n", "\n  ")
            out.write(("," if index else "") + "\n  " + item)
        out.write("\n]")
    return dataset


def one_run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one process, which must succeed.

    CPU time is printed beside wall time because on a shared machine the wall time
    mostly measures the other processes."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.read()}")
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    args = parser.parse_args()
    env = {**os.environ, "NO_COLOR": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("BAT_")}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        env["HOME"] = str(root)  # no ~/.bat.yaml of the developer
        dataset = make_project(root, args.bat, args.tasks)
        size = dataset.stat().st_size / 2**20
        print(f"bat eval.show on {args.tasks:,} tasks ({size:.0f} MiB), {args.runs} runs")
        samples = [one_run([args.bat, "eval.show"], root, env) for _ in range(args.runs)]
    seconds = statistics.median(s for s, _, _ in samples)
    cpu = statistics.median(c for _, c, _ in samples)
    peak = max(mb for _, _, mb in samples)
    ok = seconds < TARGET_S and peak < TARGET_MB
    print(f"  median time  {seconds:7.1f} s   (target < {TARGET_S:.0f} s)")
    print(f"  median CPU   {cpu:7.1f} s   (user + system)")
    print(f"  peak RSS     {peak:7.0f} MiB (target < {TARGET_MB:.0f} MiB)")
    print("  target:", "ok" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
