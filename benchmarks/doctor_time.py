"""How long ``bat doctor`` takes in a freshly scaffolded agent project: median wall time.

    python benchmarks/doctor_time.py [--runs 7] [--bat PATH]

The project is made with ``bat init.agent`` and ``bat eval.init`` (the real scaffold and
starter files), so every check of doctor applies: Python and bat, uv and a Python it can
use without downloading, agent.json, ``.env``, config.yaml, the port, eval.yaml, the
dataset, the model endpoint (a TCP connect to the scaffold's default, which nothing
answers here), the judge, Docker and the registry. Each run is a new ``bat doctor``
process. The target (issue 11) is "in two seconds".
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([args.bat, "init.agent", "demo"], cwd=root, capture_output=True, check=True)
        project = root / "demo"
        subprocess.run([args.bat, "eval.init"], cwd=project, capture_output=True, check=True)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.run([args.bat, "doctor"], cwd=project, capture_output=True)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        print(f"bat doctor (exit {proc.returncode}) in a scaffolded project, {args.runs} runs:")
        print(f"  median {median:.2f} s, min {min(times):.2f} s, max {max(times):.2f} s")
        print(f"  target: under {TARGET_S:g} s -> {'met' if median < TARGET_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
