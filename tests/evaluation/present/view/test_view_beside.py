"""``bat eval.run --view``: the viewer served beside a real run of the echo agent, asked
over HTTP while the run goes, and gone when the run's chain ends."""

from __future__ import annotations

import http.client
import re
import signal
import subprocess
import threading
import time

from tests.evalkit import make_project, run_dirs, start_bat

LIVE_TASKS = [{"id": f"slow-{n:02}", "turns": [f"task {n}"]} for n in range(8)]


def _drain(proc: subprocess.Popen, lines: list[str], seen: threading.Event) -> None:
    for line in proc.stdout:
        lines.append(line)
        if "Watch this run at" in line:
            seen.set()


def _start(project, home, *args: str):
    proc = start_bat("eval.run", "--view", "--view-port", "0", *args, cwd=project, home=home)
    lines: list[str] = []
    seen = threading.Event()
    threading.Thread(target=_drain, args=(proc, lines, seen), daemon=True).start()
    assert seen.wait(60), ("".join(lines), proc.poll())
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", "".join(lines))
    assert found, lines
    return proc, int(found[1]), lines


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _answers(port: int) -> bool:
    try:
        _get(port, "/")
    except OSError:
        return False
    return True


def test_the_viewer_answers_while_the_run_goes_and_stops_with_it(tmp_path, home):
    project = make_project(
        tmp_path / "p", LIVE_TASKS, concurrency=1, agent_env={"LATENCY_MS": "400"}
    )
    proc, port, lines = _start(project, home)
    try:
        answered_live = 0
        run_page = ""
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            found = run_dirs(project)
            try:
                status, page = _get(port, f"/runs/{found[0].name}" if found else "/")
            except OSError:  # refused: the viewer stopped with the chain; bat is exiting
                time.sleep(0.3)
                continue
            if proc.poll() is None:  # still running when the page came back
                assert status == 200, page
                answered_live += 1
                run_page = page if found else run_page
            time.sleep(0.3)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    err = proc.stderr.read()
    assert code == 0, err
    assert "Traceback" not in err
    assert answered_live >= 3
    assert sum("Watch this run at" in line for line in lines) == 1
    assert 'data-page="run"' in run_page and "slow-00" in run_page
    assert not _answers(port)  # stopped when the chain ended


def test_the_run_keeps_its_exit_status_under_view(tmp_path, home):
    tasks = [
        {"id": "ok", "turns": ["hello"], "expected": {"status": "completed"}},
        {"id": "bad", "turns": ["FAIL: nope"], "expected": {"status": "completed"}},
    ]
    project = make_project(tmp_path / "p", tasks)
    proc, port, _ = _start(project, home, "--gate", "pass_rate>=0.99")
    code = proc.wait(timeout=120)
    err = proc.stderr.read()
    assert code == 1, err
    assert "gate" in err and "Traceback" not in err
    assert not _answers(port)


def test_ctrl_c_stops_the_run_and_its_viewer(tmp_path, home):
    project = make_project(
        tmp_path / "p", LIVE_TASKS, concurrency=1, agent_env={"LATENCY_MS": "800"}
    )
    proc, port, _ = _start(project, home)
    try:
        assert _get(port, "/")[0] == 200
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert code == 130, err
    assert "Traceback" not in err
    assert not _answers(port)


def test_a_view_port_in_use_is_refused_before_anything_runs(tmp_path, home):
    import socket

    project = make_project(tmp_path / "p", [{"id": "t", "turns": ["hi"]}])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        proc = start_bat("eval.run", "--view", "--view-port", str(busy), cwd=project, home=home)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert f"port {busy}" in err and "Traceback" not in err
    assert run_dirs(project) == []
