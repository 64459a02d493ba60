"""What 50 viewers of a live run cost the run: its episode throughput with and without them.

    python benchmarks/view_load.py [--viewers 50] [--tasks 200] [--k 5] [--repeat 3] [--bat PATH]

A real ``bat eval.run`` of ``--tasks`` × ``--k`` episodes against the echo fixture agent
(10 ms a turn, concurrency 8) runs ``--repeat`` times unwatched and ``--repeat`` times,
in turn with those, while ``--viewers`` clients of a ``bat eval.view`` process (serving
the output folder throughout) each load the run page and then follow the run's event
stream to its end, as a browser tab does. The clients run in one process of their own
(raw sockets, no parsing beyond counting events) and each must receive every episode: a viewer that
missed some would make the run look cheap.

Throughput is the episodes divided by the time from the first episode's start to the
last one's end (from the episode files), so the agent's start-up and the charts are
left out. The target (issue 12) is a cost under 5 %: a watched run's throughput at least
95 % of the unwatched one just before it (the median of those ratios). On this 2-core
machine the viewer, the clients, the agent and the run share the cores. The clients
stand for browsers, which run on other machines: they run at the lowest priority
(``nice -n 19``), so that what is measured is what the viewer costs the run; their CPU
time is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "checkpoints: true\nendpoint: {url: http://localhost, port: '${PORT}'}\n"
TARGET = 0.95


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def project(folder: Path, tasks: int, k: int) -> Path:
    items = [
        {"id": f"t{i:04d}", "turns": [f"q{i}"], "expected": {"output_must_contain": [f"q{i}"]}}
        for i in range(tasks)
    ]
    (folder / "eval" / "input").mkdir(parents=True)
    (folder / "eval" / "input" / "tasks.json").write_text(json.dumps(items))
    (folder / "config.yaml").write_text(CONFIG)
    (folder / "eval" / "eval.yaml").write_text(
        "evaluation:\n"
        f"  agent_url: http://127.0.0.1:{free_port()}\n"
        f"  k: {k}\n"
        "  concurrency: 8\n"
        "  agent:\n"
        f"    command: {sys.executable} -m eval_fixtures.echo_agent\n"
        f"    env: {{PYTHONPATH: {ROOT}, LATENCY_MS: '10'}}\n"
    )
    return folder


def throughput(run_dir: Path) -> float:
    """Episodes per second from the first episode's start to the last one's end."""
    starts, ends = [], []
    for path in run_dir.glob("*/episodes/*.json"):
        data = json.loads(path.read_text())
        starts.append(_time(data["started_at"]))
        ends.append(_time(data["ended_at"]))
    return len(starts) / (max(ends) - min(starts)).total_seconds()


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _churn(port: int, run_id: str, count: int) -> None:
    """Viewers that come and go: each opens the run's stream, reads a little, leaves."""
    for _ in range(count // 10):

        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"GET /runs/{run_id}/events?from=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            )
            await writer.drain()
            await reader.read(4096)
            writer.close()

        await asyncio.gather(*(one() for _ in range(10)))


def one_run(bat: str, folder: Path, env: dict) -> Path:
    proc = subprocess.run(
        [bat, "eval.run"], cwd=folder, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"eval.run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return sorted((folder / "eval" / "output").glob("*/run.json"))[-1].parent


# --- the viewers: one process, many raw connections -----------------------------------------


async def _get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


async def _follow(port: int, run_id: str) -> int:
    """Load the run page, then follow its stream to the end; the episode events seen."""
    await _get(port, f"/runs/{run_id}")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET /runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Accept: text/event-stream\r\nConnection: close\r\n\r\n".encode()
    )
    await writer.drain()
    seen = 0
    while line := await reader.readline():
        if line.startswith(b"event: episode"):
            seen += 1
        elif line.startswith(b"event: end"):
            break
    writer.close()
    return seen


async def _viewers(port: int, output: Path, count: int, known: set[str]) -> list[int]:
    while True:  # the run folder this eval.run makes
        fresh = [p.name for p in output.glob("*/run.json") if p.parent.name not in known]
        if fresh:
            break
        await asyncio.sleep(0.01)
    (run_id,) = [p.parent.name for p in output.glob("*/run.json") if p.parent.name not in known]
    return await asyncio.gather(*(_follow(port, run_id) for _ in range(count)))


def viewers_main(port: int, output: Path, count: int, result: Path, known: str) -> None:
    seen = asyncio.run(_viewers(port, output, count, set(known.split(","))))
    result.write_text(json.dumps(seen))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    parser.add_argument("--follow", nargs=5, help=argparse.SUPPRESS)  # the viewers' process
    args = parser.parse_args()
    if args.follow:
        port, output, count, result, known = args.follow
        viewers_main(int(port), Path(output), int(count), Path(result), known)
        return 0
    episodes = args.tasks * args.k
    with tempfile.TemporaryDirectory(prefix="bat-view-load-") as tmp:
        base = Path(tmp)
        folder = project(base / "p", args.tasks, args.k)
        output = folder / "eval" / "output"
        env = {**os.environ, "HOME": tmp, "NO_COLOR": "1"}
        output.mkdir(parents=True)
        port = free_port()
        viewer = subprocess.Popen(
            [args.bat, "eval.view", "-f", str(output), "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        alone, watched, viewer_cpu, clients_cpu = [], [], [], []
        try:
            time.sleep(3)  # the viewer starts
            for n in range(args.repeat):
                # In turn, so that a drift of the machine's speed weighs on both alike.
                alone.append(throughput(one_run(args.bat, folder, env)))
                result = base / f"seen-{n}.json"
                clients = subprocess.Popen(
                    [
                        "nice",
                        "-n",
                        "19",
                        sys.executable,
                        __file__,
                        "--follow",
                        str(port),
                        str(output),
                        str(args.viewers),
                        str(result),
                        ",".join(p.parent.name for p in output.glob("*/run.json")) or "-",
                    ]
                )
                before = cpu_seconds(viewer.pid)
                run_dir = one_run(args.bat, folder, env)
                viewer_cpu.append(cpu_seconds(viewer.pid) - before)
                _, status, usage = os.wait4(clients.pid, 0)
                clients.returncode = os.waitstatus_to_exitcode(status)
                clients_cpu.append(usage.ru_utime + usage.ru_stime)
                seen = json.loads(result.read_text())
                if seen != [episodes] * args.viewers:
                    raise SystemExit(f"viewers saw {sorted(set(seen))} episodes, not {episodes}")
                watched.append(throughput(run_dir))
            # Memory while viewers come and go: 1,000 streams opened and dropped, twice.
            churned = []
            for _ in range(2):
                asyncio.run(_churn(port, run_dir.name, 1000))
                time.sleep(1)
                churned.append(rss_mb(viewer.pid))
        finally:
            viewer.terminate()
            viewer.wait(timeout=30)
    # Each watched run is compared with the unwatched one just before it (the machine's
    # speed drifts from one minute to the next more than the viewers cost).
    ratio = statistics.median(w / a for w, a in zip(watched, alone, strict=True))
    print(f"{episodes} episodes, 10 ms a turn, concurrency 8")
    print("unwatched:    " + ", ".join(f"{t:.0f}" for t in alone) + " episodes/s")
    print(f"{args.viewers} viewers:   " + ", ".join(f"{t:.0f}" for t in watched) + " episodes/s")
    print(
        f"CPU during a watched run: the viewer {statistics.median(viewer_cpu):.2f} s, "
        f"the {args.viewers} clients {statistics.median(clients_cpu):.2f} s"
    )
    print(
        "the viewer's memory after 1,000 viewers came and went, twice: "
        + " MB, ".join(f"{mb:.0f}" for mb in churned)
        + " MB"
    )
    ok = ratio >= TARGET
    print(
        f"with {args.viewers} viewers the run keeps {100 * ratio:.1f} % of its throughput "
        f"(cost {100 * (1 - ratio):.1f} %, target under 5 %: {'ok' if ok else 'MISSED'})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
