"""``bat eval.view`` as a user runs it: a real server process over run folders that a real
``bat eval.run`` made against the echo agent, asked over HTTP on 127.0.0.1 (proxies of the
environment are never used), and the live run page in headless Chromium.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BAT, run_bat
from tests.evalkit import make_project, run_dirs, start_bat

XSS = "<script>alert(1)</script> <img src=x onerror=alert(2)>"
TASKS = [
    {"id": "plain", "turns": ["hello there"], "expected": {"status": "completed"}},
    {"id": "hostile", "turns": [XSS], "expected": {"status": "completed"}},
    {"id": "refused", "turns": ["FAIL: nope"], "expected": {"status": "completed"}},
    {"id": "question", "turns": ["ASK me"], "expected": {"status": "completed"}},
]
LIVE_TASKS = [{"id": f"slow-{n:02}", "turns": [f"task {n}"]} for n in range(12)]


# --- helpers ---------------------------------------------------------------------------------


class Viewer:
    """``bat eval.view`` in the background; the address it printed."""

    def __init__(self, *args: str, cwd: Path, home: Path) -> None:
        self.proc = subprocess.Popen(
            [str(BAT), "eval.view", "--port", "0", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(home), "NO_COLOR": "1"},
        )
        self.lines: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.startswith("Serving"):
                break
        printed = "".join(self.lines)
        found = re.search(r":(\d+)/(\?token=(\S+))?", printed)
        assert found, f"no address printed: {printed!r} {self.proc.stderr.read()}"
        self.port = int(found[1])
        self.token = found[3]

    def get(self, path: str, headers: dict | None = None) -> tuple[int, dict, str]:
        """One GET, the path sent exactly as given (no client-side normalization)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            body = response.read().decode("utf-8", "replace")
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body
        finally:
            conn.close()

    def stop(self) -> tuple[int, str]:
        """Ctrl-C, as a user stops it: the status and what it wrote on stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"the viewer did not stop on Ctrl-C: {err}") from None
        return self.proc.returncode, err


@contextlib.contextmanager
def viewer(*args: str, cwd: Path, home: Path):
    started = Viewer(*args, cwd=cwd, home=home)
    try:
        yield started
    finally:
        code, err = started.stop()
        assert code == 0, err
        assert "Traceback" not in err, err


class Stream:
    """A Server-Sent Events client on a raw connection (it reads each event as it comes)."""

    def __init__(self, port: int, path: str, headers: dict | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream", **(headers or {})})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}

    def events(self):
        """Each event as (event, id, data); comments (the pings) are skipped."""
        event, ident, data = "message", None, []
        while True:
            raw = self.response.readline()
            if not raw:
                return
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data:
                    yield event, ident, json.loads("\n".join(data))
                event, ident, data = "message", None, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    event = value
                elif name == "id":
                    ident = value
                elif name == "data":
                    data.append(value)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A project with one finished run of TASKS (k=2): the project, the run, a HOME."""
    return finished_run(tmp_path_factory.mktemp("view"), TASKS, k=2)


def finished_run(
    root: Path, tasks: list[dict], codes=(0,), charts=False, **settings
) -> tuple[Path, Path, Path]:
    """A project under ``root`` with one run of ``tasks`` made by a real ``bat eval.run``
    (ending with one of ``codes``; its charts drawn when ``charts``): the project, the run
    and the HOME it ran with."""
    home = root / "home"
    home.mkdir()
    project = make_project(root / "p", tasks, **settings)
    result = run_bat("eval.run", cwd=project, env={"HOME": str(home)}, timeout=180, charts=charts)
    assert result.code in codes, result.err
    (run_dir,) = run_dirs(project)
    return project, run_dir, home


def live_project(root: Path) -> Path:
    """A run that takes a few seconds: twelve tasks, one at a time, 500 ms each."""
    return make_project(root, LIVE_TASKS, concurrency=1, agent_env={"LATENCY_MS": "500"})


def wait_for_run(project: Path, proc: subprocess.Popen) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = run_dirs(project)
        if found:
            return found[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run did not start")


# --- pages -----------------------------------------------------------------------------------


def test_pages_of_a_finished_run(finished):
    project, run_dir, home = finished
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    with viewer(cwd=project, home=home) as view:
        status, headers, page = view.get("/")
        assert status == 200
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert run_dir.name in page and "completed" in page
        assert "50.0 %" in page  # plain and hostile pass, refused and question fail

        status, headers, page = view.get(f"/runs/{run_dir.name}")
        assert status == 200 and "content-security-policy" in headers
        for row in range(len(TASKS)):
            for attempt in (1, 2):
                assert f'id="c0-{row}-{attempt}"' in page
        assert page.count('class="cell pass"') == 4
        assert page.count('class="cell error"') == 2  # FAIL: the agent's own error
        assert page.count('class="cell fail"') == 2  # ASK: input-required, not completed
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/view.js" defer>']

        episode = f"/runs/{run_dir.name}/episodes/agent-default/hostile__try1.json"
        status, headers, page = view.get(episode)
        assert status == 200 and "content-security-policy" in headers
        assert "echo: &lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror" in page
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "status" in page and "passed" in page  # the verdict's check
        trace = json.loads(
            (run_dir / "agent-default" / "episodes" / "hostile__try1.json").read_text()
        )["trace"]
        # Durations as every page spells them: two decimals and the unit.
        assert f"</b> · {trace['wall_time_s']:.2f} s" in page
        assert f"after {trace['turns'][0]['wall_time_s']:.2f} s" in page

        status, headers, raw = view.get(
            f"/runs/{run_dir.name}/raw/agent-default/refused__try2.json"
        )
        assert status == 200 and headers["content-type"].startswith("application/json")
        assert json.loads(raw)["agent_error"]["kind"]

        status, headers, script = view.get("/static/view.js")
        assert status == 200 and "EventSource" in script
        assert headers["content-type"].startswith("text/javascript")
    after = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    assert after == before  # the viewer wrote nothing into the run


def test_paths_outside_the_runs_are_not_found(finished, tmp_path):
    project, run_dir, home = finished
    output = run_dir.parent
    if not (output / "linked").is_symlink():
        (output / "linked").symlink_to(run_dir)  # a run reached through a link: refused too
    (tmp_path / "secret.json").write_text('{"secret": "do not show"}')
    run = run_dir.name
    refused = [
        "/runs/..",
        "/runs/../../etc/passwd",
        "/runs/%2e%2e/episodes/agent-default/x__try1.json",
        f"/runs/{run}/raw/agent-default/..%2f..%2frun.json",
        f"/runs/{run}/raw/agent-default/../summary.json",
        f"/runs/{run}/raw/agent-default/summary.json",
        f"/runs/{run}/raw/../../secret.json",
        f"/runs/{run}/raw/nosuchmodel/plain__try1.json",
        f"/runs/{run}/episodes/agent-default/.hidden__try1.json",
        "/runs/linked",
        "/runs/linked/raw/agent-default/plain__try1.json",
        "/static/../app.py",
        "/static/%2e%2e%2fapp.py",
        "/runs/nosuchrun",
    ]
    with viewer(cwd=project, home=home) as view:
        assert view.get(f"/runs/{run}/raw/agent-default/plain__try1.json")[0] == 200
        for path in refused:
            status, _, body = view.get(path)
            assert status == 404, (path, status, body[:200])
            assert "do not show" not in body and "import" not in body


# --- the token -------------------------------------------------------------------------------


def test_beyond_loopback_every_request_needs_the_token(finished):
    project, run_dir, home = finished
    with viewer("--host", "0.0.0.0", cwd=project, home=home) as view:
        assert view.token, view.lines  # made and printed
        assert any("token" in line for line in view.lines)
        run = f"/runs/{run_dir.name}"
        for path in ("/", run, f"{run}/events", "/static/view.js", "/events"):
            status, headers, body = view.get(path)
            assert status == 401, path
            assert run_dir.name not in body
            assert "content-security-policy" in headers
        assert view.get(f"/?token=wrong{view.token}")[0] == 401
        assert view.get("/", {"Authorization": "Bearer nope"})[0] == 401

        status, headers, page = view.get(f"/?token={view.token}")
        assert status == 200 and run_dir.name in page
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"]
        assert view.get(run, {"Authorization": f"Bearer {view.token}"})[0] == 200
        assert view.get(run, {"Cookie": cookie})[0] == 200  # the page's links and stream

        stream = Stream(view.port, f"{run}/events?token={view.token}")
        try:
            assert stream.status == 200
            kinds = [event for event, _, _ in stream.events()]
        finally:
            stream.close()
        assert kinds == ["episode"] * 2 * len(TASKS) + ["end"]
        refused = Stream(view.port, f"{run}/events")
        assert refused.status == 401
        refused.close()


def test_a_given_token_is_required_on_loopback_too(finished):
    project, _, home = finished
    with viewer("--token", "s3cret", cwd=project, home=home) as view:
        assert view.token == "s3cret"
        assert view.get("/")[0] == 401
        assert view.get("/?token=s3cret")[0] == 200


# --- live: the event stream ------------------------------------------------------------------


def test_a_client_reconnecting_mid_run_gets_exactly_the_missed_episodes(tmp_path, home):
    project = live_project(tmp_path / "p")
    run = start_bat("eval.run", cwd=project, home=home)
    try:
        run_dir = wait_for_run(project, run)
        with viewer(cwd=project, home=home) as view:
            path = f"/runs/{run_dir.name}/events"
            first = Stream(view.port, path)
            assert first.status == 200
            assert first.headers["content-type"].startswith("text/event-stream")
            seen = []
            for event, ident, data in first.events():
                assert event == "episode", (event, data)
                seen.append((int(ident), data["episode"]))
                if len(seen) == 3:
                    break
            first.close()
            assert [n for n, _ in seen] == [0, 1, 2]
            time.sleep(1.0)  # episodes land while the client is away
            assert run.poll() is None, "the run ended before the reconnect: make it slower"

            again = Stream(view.port, path, {"Last-Event-ID": str(seen[-1][0])})
            ended = None
            for event, ident, data in again.events():
                if event == "end":
                    ended = data["status"]
                    break
                seen.append((int(ident), data["episode"]))
            again.close()
        assert run.wait(timeout=120) == 0, run.communicate()
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            run.wait(timeout=30)
    files = sorted(p.name for p in (run_dir / "agent-default" / "episodes").glob("*.json"))
    assert ended == "completed"
    assert [n for n, _ in seen] == list(range(len(files)))  # no gap, no repeat
    assert sorted(name for _, name in seen) == files


def test_a_port_in_use_is_one_line_naming_a_free_one(tmp_path, home):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_bat("eval.view", "-f", str(tmp_path), "--port", str(port), cwd=tmp_path)
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    suggested = int(re.search(r"--port (\d+)", lines[0])[1])
    assert f"port {port}" in lines[0] and "in use" in lines[0]
    assert suggested > port


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_one_line_by_the_one_port_rule(tmp_path, home, port):
    result = run_bat("eval.view", "-f", str(tmp_path), "--port", port, cwd=tmp_path)
    assert result.code == 2
    assert result.err.strip() == (
        f"bat: error: --port: '{port}' is not a port number (0-65535, 0: any free port)"
    )


def test_a_folder_that_does_not_exist_is_an_input_error(tmp_path, home):
    result = run_bat("eval.view", "-f", str(tmp_path / "nothing"), "--port", "0", cwd=tmp_path)
    assert result.code == 2
    assert "nothing" in result.err and "Traceback" not in result.err


# --- live: the run page in a real browser ----------------------------------------------------

LIVE_FACTS = """(() => ({
  filled: document.querySelectorAll('a.cell').length,
  pending: document.querySelectorAll('.cell.pending').length,
  status: document.getElementById('run-status').textContent,
  done: document.getElementById('done-0').textContent,
  passed: document.getElementById('n-0-pass').textContent,
  scripts: document.querySelectorAll('script').length,
  text: document.body.innerText,
}))()"""


def test_the_run_page_fills_in_live_in_chromium(tmp_path, home, monkeypatch):
    from tests.evaluation.present.plot import test_report_browser as chromium

    browser = chromium.laptop_browser(tmp_path / "chromium-profile", monkeypatch)
    project = live_project(tmp_path / "p")
    run = start_bat("eval.run", cwd=project, home=home)
    try:
        run_dir = wait_for_run(project, run)
        with viewer(cwd=project, home=home) as view:
            url = f"http://127.0.0.1:{view.port}/runs/{run_dir.name}"
            session = browser.open(url)

            def facts() -> dict:
                got = browser.send(
                    "Runtime.evaluate", session, expression=LIVE_FACTS, returnByValue=True
                )
                return got["result"]["value"]

            at_load = facts()
            assert at_load["status"] == "running", at_load
            assert at_load["filled"] < len(LIVE_TASKS), "the run was over before the page"
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                now = facts()
                if now["status"] != "running":
                    break
                time.sleep(0.2)
            shot = browser.send("Page.captureScreenshot", session, format="png")
            browser.send("Runtime.evaluate", session, expression="1")
            errors = chromium.errors_of(browser.events, session)
        assert run.wait(timeout=120) == 0, run.communicate()
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            run.wait(timeout=30)
        browser.close()
    import base64

    assert errors == [], errors
    assert now["status"] == "completed", now
    assert now["filled"] == len(LIVE_TASKS) and now["pending"] == 0  # filled without reload
    assert now["done"] == str(len(LIVE_TASKS)) and now["passed"] == str(len(LIVE_TASKS))
    assert "The run ended (completed)" in now["text"]
    assert now["scripts"] == 1
    png = base64.b64decode(shot["data"])
    (tmp_path / "live.png").write_bytes(png)  # for a look
    assert not chromium.png_is_blank(png)


@pytest.mark.parametrize("page", ["runs", "run", "episode"])
def test_pages_render_in_chromium_without_errors(finished, tmp_path, page, monkeypatch):
    """Each page at 1366×768 in Chromium: no console error, no CSP violation, hostile
    text shown as text (screenshots kept under the test's tmp folder for a look)."""
    from tests.evaluation.present.plot import test_report_browser as chromium

    project, run_dir, home = finished
    paths = {
        "runs": "/",
        "run": f"/runs/{run_dir.name}",
        "episode": f"/runs/{run_dir.name}/episodes/agent-default/hostile__try1.json",
    }
    browser = chromium.laptop_browser(tmp_path / "chromium-profile", monkeypatch)
    try:
        with viewer(cwd=project, home=home) as view:
            url = f"http://127.0.0.1:{view.port}{paths[page]}"
            session = browser.open(url)
            time.sleep(0.3)
            got = browser.send(
                "Runtime.evaluate",
                session,
                expression="({text: document.body.innerText, "
                "scripts: document.querySelectorAll('script').length, "
                "styled: getComputedStyle(document.body).backgroundColor})",
                returnByValue=True,
            )["result"]["value"]
            shot = browser.send("Page.captureScreenshot", session, format="png")
            browser.send("Runtime.evaluate", session, expression="1")
            errors = chromium.errors_of(browser.events, session)
    finally:
        browser.close()
    import base64

    png = base64.b64decode(shot["data"])
    (tmp_path / f"{page}.png").write_bytes(png)
    assert errors == [], errors
    assert got["scripts"] == 1
    assert got["styled"] == "rgb(246, 247, 249)"  # the style sheet loaded under the CSP
    assert not chromium.png_is_blank(png)
    if page == "episode":
        assert XSS in got["text"]  # the payload is text on the page, not markup


# --- the stream, served in this process (to see its pings without waiting 10 s) -------------


@contextlib.contextmanager
def served(folder: Path, **options):
    """make_app over ``folder`` on a free loopback port, in a thread of this process."""
    import threading

    import uvicorn

    from bat.evaluation.present.view.app import make_app
    from bat.evaluation.present.view.server import listen

    listening = listen("127.0.0.1", 0, None)
    app = make_app(folder, token=None, **options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening.sock]})
    thread.start()
    try:
        yield listening.port
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        listening.sock.close()


def test_the_stream_sends_heartbeats_while_a_run_is_quiet(tmp_path, home):
    project = make_project(tmp_path / "p", [{"id": "stuck", "turns": ["HANG"]}], turn_timeout_s=4)
    run = start_bat("eval.run", cwd=project, home=home)
    try:
        run_dir = wait_for_run(project, run)
        with served(run_dir.parent, ping_s=0.3, poll_s=0.1) as port:
            stream = Stream(port, f"/runs/{run_dir.name}/events")
            pings, started = 0, time.monotonic()
            while time.monotonic() - started < 10:
                line = stream.response.readline().decode()
                if line.startswith(":"):
                    pings += 1
                    if pings == 3:
                        break
                assert not line.startswith("event: end"), "the run ended before three pings"
            stream.close()
        assert pings == 3
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        run.communicate(timeout=60)


def test_an_id_from_another_viewer_process_makes_the_page_start_again(finished):
    """The numbering is this process's: a page drawn by another one reloads (its cells
    and counts cannot be continued), it is not sent episodes it may have counted."""
    _, run_dir, _ = finished
    with served(run_dir.parent) as port:
        stream = Stream(port, f"/runs/{run_dir.name}/events", {"Last-Event-ID": "999"})
        got = [(event, ident) for event, ident, _ in stream.events()]
        stream.close()
        resumed = Stream(port, f"/runs/{run_dir.name}/events", {"Last-Event-ID": "5"})
        tail = [ident for event, ident, _ in resumed.events() if event == "episode"]
        resumed.close()
    episodes = 2 * len(TASKS)
    assert got == [("reset", None)]
    assert tail == [str(n) for n in range(6, episodes)]
