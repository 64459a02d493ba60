"""bat's CPU per episode with this checkout's HTTP pool against another checkout's, A/B.

    python benchmarks/pool_ab.py --against PATH [--rounds 10] [--agent fast] [--concurrency 16]

``benchmarks/scale.py`` measures bat's CPU per episode one process at a time; on a machine
whose cores other work shares, two such runs minutes apart differ by more than a change
to the pool costs. This runs both pools in one process against one agent, alternating
(before, after; then after, before; ...), each round 2,000 one-turn episodes through
``scale.engine``, and prints each side's median and the ratio of each round. PATH is a
checkout whose ``bat/evaluation/run/http_pool.py`` is the other side (e.g. a worktree of
an earlier commit); everything else runs from this checkout, so only the pool differs.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale  # noqa: E402  (puts ROOT first on sys.path)

import bat.evaluation.run.http_pool as pool  # noqa: E402

EPISODES = 2000


def other_pool(checkout: Path) -> type:
    path = checkout / "bat" / "evaluation" / "run" / "http_pool.py"
    spec = importlib.util.spec_from_file_location("other_http_pool", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise SystemExit(f"no http_pool.py in {checkout}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PoolTransport


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--agent", choices=("fast", "echo"), default="fast")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    # the adapter imports PoolTransport from the module when a session opens
    pools = {"before": other_pool(args.against), "after": pool.PoolTransport}
    cpu: dict[str, list[float]] = {side: [] for side in pools}
    rate: dict[str, list[float]] = {side: [] for side in pools}
    command = scale.FAST if args.agent == "fast" else scale.ECHO
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        agent = scale.start_agent(0, workdir, command)
        try:
            for side, transport in pools.items():
                pool.PoolTransport = transport
                scale.engine(agent, workdir / f"warm-{side}", 200, args.concurrency)
            for n in range(args.rounds):
                for side in ("before", "after") if n % 2 == 0 else ("after", "before"):
                    pool.PoolTransport = pools[side]
                    out = workdir / f"{side}-{n}"
                    seconds, used = scale.engine(agent, out, EPISODES, args.concurrency)
                    cpu[side].append(used / EPISODES * 1000)
                    rate[side].append(EPISODES / seconds)
        finally:
            agent.stop()
    for side in pools:
        print(
            f"{side} ({args.against if side == 'before' else ROOT}): bat's CPU median "
            f"{statistics.median(cpu[side]):.2f} ms per episode (runs "
            f"{[round(x, 2) for x in cpu[side]]}), episodes per second median "
            f"{statistics.median(rate[side]):.0f}"
        )
    ratios = [a / b for a, b in zip(cpu["after"], cpu["before"], strict=True)]
    print(
        f"after/before, round by round: median {statistics.median(ratios):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
