"""``bat eval.view`` on a run of 10,000 episodes: the run page's time and first paint.

    python benchmarks/view_scale.py [--tasks 2000] [--k 5] [--repeat 5] [--bat PATH]

A run of ``--tasks`` × ``--k`` episodes (written by bat's own code, as
``plot_speed.make_runs`` writes them) is served by a real ``bat eval.view`` process.
Three figures, medians of ``--repeat``:

1. **the first look**: the run page requested the moment the viewer answers (the viewer
   is still reading the run as it starts: its warm-up);
2. **the page**: the run page once the viewer has read the run (seconds, and its size);
3. **first paint** in headless Chromium: from the start of the navigation to the first
   contentful paint (``performance.getEntriesByType('paint')``), and to the load event.

The target (issue 12) is a first paint under 1 s on this machine.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from plot_speed import make_runs  # noqa: E402

from tests.evaluation.present.plot.test_report_browser import Browser, chromium_binary  # noqa: E402

TARGET_S = 1.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        size = len(response.read())
    return time.perf_counter() - start, size


def wait_for(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/static/view.css", timeout=2):
                return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"the viewer did not answer at {url}")


def viewer(bat: str, folder: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [bat, "eval.view", "-f", str(folder), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def paint_times(browser: Browser, url: str) -> tuple[float, float]:
    """Seconds from the navigation's start to the first contentful paint and to load."""
    session = browser.open(url)
    browser.send("Page.captureScreenshot", session)  # headless paints a frame when asked
    got = browser.send(
        "Runtime.evaluate",
        session,
        returnByValue=True,
        expression="JSON.stringify({paint: performance.getEntriesByType('paint')"
        ".map(e => [e.name, e.startTime]), load: performance.getEntriesByType('navigation')"
        "[0].loadEventEnd})",
    )
    facts = json.loads(got["result"]["value"])
    paints = dict(facts["paint"])
    return paints["first-contentful-paint"] / 1000, facts["load"] / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--bat", default=str(Path(sys.executable).with_name("bat")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bat-view-bench-") as tmp:
        base = Path(tmp)
        episodes = make_runs(base / "runs", 1, args.tasks, args.k)
        (run_dir,) = (base / "runs").iterdir()
        print(f"1 run of {args.tasks} tasks × k={args.k} = {episodes} episodes")
        first_looks = []
        for _ in range(args.repeat):
            port = free_port()
            proc = viewer(args.bat, base / "runs", port)
            try:
                url = f"http://127.0.0.1:{port}"
                wait_for(url)
                first_looks.append(fetch(f"{url}/runs/{run_dir.name}")[0])
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        port = free_port()
        proc = viewer(args.bat, base / "runs", port)
        (base / "profile").mkdir()
        browser = Browser(chromium_binary(), base / "profile")
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(url)
            fetch(f"{url}/runs/{run_dir.name}")  # the viewer has read the run
            pages = [fetch(f"{url}/runs/{run_dir.name}") for _ in range(args.repeat)]
            page_url = f"{url}/runs/{run_dir.name}"
            paints = [paint_times(browser, page_url) for _ in range(args.repeat)]
        finally:
            browser.close()
            proc.terminate()
            proc.wait(timeout=30)
    first = statistics.median(first_looks)
    page = statistics.median(t for t, _ in pages)
    paint = statistics.median(p for p, _ in paints)
    load = statistics.median(lo for _, lo in paints)
    print(f"first look at the run page (the viewer just started): median {first:.2f} s")
    print(f"the run page: median {page:.3f} s, {pages[0][1] // 1024} KiB")
    ok = paint < TARGET_S
    print(
        f"first contentful paint: median {paint:.3f} s, load {load:.3f} s "
        f"(target < {TARGET_S:.0f} s: {'ok' if ok else 'MISSED'})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
