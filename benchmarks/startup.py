"""Start-up time of the ``bat`` program: median wall time of cold processes.

    python benchmarks/startup.py [--runs 30] [--bat PATH]

Each run is a new process (``bat --help``, ``bat version``, and the bare interpreter
for reference), so the figures include interpreter start-up and every import. The
target (issue 2) is a median of at most 150 ms for ``--help`` and ``version``.
PYTHONDONTWRITEBYTECODE is dropped from the child environment: a user's install has
byte-code caches, and compiling bat's modules on every run would measure the compiler.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_MS = 150.0


def median_ms(command: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(command, env=env, capture_output=True, check=True)  # warm the page cache
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, capture_output=True, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rows = [
        ("python -c pass (reference)", [sys.executable, "-c", "pass"], None),
        ("bat --help", [args.bat, "--help"], TARGET_MS),
        ("bat version", [args.bat, "version"], TARGET_MS),
    ]
    failed = False
    print(f"median of {args.runs} cold runs each")
    for label, command, target in rows:
        ms = median_ms(command, args.runs, env)
        verdict = ""
        if target is not None:
            ok = ms <= target
            failed |= not ok
            verdict = f"  (target <= {target:.0f} ms: {'ok' if ok else 'MISSED'})"
        print(f"  {label:<28} {ms:7.1f} ms{verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
