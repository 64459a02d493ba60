"""report.html in a real browser: headless Chromium renders it with no console error.

How: Chromium (the Debian package ``chromium``) is started headless with
``--remote-debugging-pipe``: the DevTools protocol as NUL-terminated JSON over two
pipes (fd 3 in, fd 4 out) — what Puppeteer and Playwright use, with no port, no
websocket library and no timing guesswork. The test opens a page target, enables the
Runtime, Log and Page domains, navigates to the ``file://`` URL, waits for the load
event and then collects

* ``Runtime.exceptionThrown`` (an uncaught error),
* ``Runtime.consoleAPICalled`` of type ``error``/``assert``,
* ``Log.entryAdded`` of level ``error`` (failed loads, Content Security Policy
  violations, anything the browser itself reports),

and any of them fails the test. It also evaluates facts in the page (every chart image
decoded, no ``<script>`` element, a hostile task id shown as text) and takes a
screenshot whose PNG must not be blank. A control page with a console error and a
missing image proves the collector does see errors.

Without Chromium the test is skipped locally with the reason, and fails when ``CI`` is
set (CI installs it: ``apt-get install -y chromium``). ``BAT_TEST_CHROMIUM`` names
another binary.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import run_bat
from tests.evaluation.present.plot.runkit import (
    ALL_CHARTS,
    HOSTILE_ID,
    HOSTILE_OUTPUT,
    TASKS,
    write_run,
)

TIMEOUT_S = 60.0
FLAGS = [
    "--headless",
    "--no-sandbox",  # CI and the dev machines run as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
    "--window-size=1280,1600",
    "--remote-debugging-pipe",
]


def chromium_binary() -> str:
    """The browser to use; a missing one skips locally and fails in CI."""
    for name in (os.environ.get("BAT_TEST_CHROMIUM"), "chromium", "chromium-browser"):
        found = name and shutil.which(name)
        if found:
            return found
    message = "Chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must install it")
    pytest.skip(message)


class Browser:
    """A headless Chromium driven over ``--remote-debugging-pipe``."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Copies at 10 and up, so dup2 onto 3 and 4 in the child cannot clobber them.
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)

        def give_pipes() -> None:  # in the child, before exec: fd 3 and 4, inheritable
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.log = profile / "chromium.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                close_fds=False,
                preexec_fn=give_pipes,
                start_new_session=True,
            )
        for fd in (child_in, child_out):
            os.close(fd)
        self.write_fd = to_browser_w
        self.read_fd = from_browser_r
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """Call a method and wait for its answer; events seen meanwhile are kept."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def open(self, url: str) -> str:
        """A new tab showing ``url``, loaded; returns its session (Page, Runtime and Log
        events enabled, so console errors are seen)."""
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session)
        self.send("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired", session)
        return session

    def wait_for(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._receive(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"Chromium did not answer in {TIMEOUT_S} s{self.tail()}")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise AssertionError(f"Chromium closed the DevTools pipe{self.tail()}")
                self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def tail(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n--- end of chromium's log ---\n" + text[-3000:]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                with contextlib.suppress(AssertionError, OSError):  # it may close first
                    self.send("Browser.close")
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the group this test started
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self.write_fd, self.read_fd):
                os.close(fd)


def laptop_browser(profile: Path, monkeypatch) -> Browser:
    """A Chromium whose window is a laptop screen's, 1366×768 (the pages are looked at
    there), with its own new profile folder ``profile``."""
    flags = [f for f in FLAGS if not f.startswith("--window-size")]
    monkeypatch.setattr(sys.modules[__name__], "FLAGS", [*flags, "--window-size=1366,768"])
    profile.mkdir()
    return Browser(chromium_binary(), profile)


def errors_of(events: list[dict], session: str) -> list[str]:
    """Every console error, uncaught exception and browser error logged in the page."""
    found = []
    for event in events:
        if event.get("sessionId") != session:
            continue
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append(f"uncaught: {details.get('exception', {}).get('description') or details}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description")) for a in params.get("args", [])]
            found.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
    return found


FACTS = """(() => ({
  title: document.title,
  images: document.images.length,
  decoded: [...document.images].filter(i => i.complete && i.naturalWidth > 0).length,
  scripts: document.querySelectorAll('script').length,
  text: document.body.innerText,
  taskRows: document.querySelectorAll('#tasks + p + div table tr').length,
  height: document.documentElement.scrollHeight,
}))()"""


def open_page(browser: Browser, path: Path) -> tuple[dict, bytes, list[str]]:
    """Load ``path``; return facts about the page, a screenshot and the errors seen."""
    session = browser.open(path.resolve().as_uri())
    facts = browser.send("Runtime.evaluate", session, expression=FACTS, returnByValue=True)
    shot = browser.send("Page.captureScreenshot", session, format="png")
    # One more round trip, so messages logged right after the load are in.
    browser.send("Runtime.evaluate", session, expression="1")
    return (
        facts["result"]["value"],
        base64.b64decode(shot["data"]),
        errors_of(browser.events, session),
    )


def png_is_blank(data: bytes) -> bool:
    """Whether a PNG has (nearly) a single colour: few distinct bytes in its pixel rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat = 8, b""
    while position < len(data):
        length = int.from_bytes(data[position : position + 4], "big")
        kind = data[position + 4 : position + 8]
        if kind == b"IDAT":
            idat += data[position + 8 : position + 8 + length]
        position += 12 + length
    pixels = zlib.decompress(idat)
    return len(set(pixels)) < 16


@pytest.fixture
def browser(tmp_path):
    binary = chromium_binary()
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    started = Browser(binary, profile)
    try:
        yield started
    finally:
        started.close()


def test_report_renders_without_console_errors(tmp_path, browser):
    base = tmp_path / "output"
    write_run(base, "20260101-000000-a", "openai:gpt-4.1-mini", TASKS, judge=True)
    write_run(base, "20260102-000000-b", "ollama:qwen2.5", TASKS, old_format=True)
    write_run(
        base,
        "20260102-000000-b",
        "evil:model",
        {HOSTILE_ID: "pf", "plain": "p"},
        output=HOSTILE_OUTPUT,
        reason_fail=HOSTILE_OUTPUT,
    )
    result = run_bat("eval.plot", "-f", str(base), timeout=120)
    assert result.code == 0, result.err

    facts, screenshot, errors = open_page(browser, base / "report.html")

    assert errors == [], errors
    assert facts["title"] == "Evaluation report: output"
    assert facts["images"] == len(ALL_CHARTS)
    assert facts["decoded"] == facts["images"]  # every inline SVG chart decoded
    assert facts["scripts"] == 0
    assert HOSTILE_ID in facts["text"]  # shown as text, not run
    assert HOSTILE_OUTPUT in facts["text"]
    assert facts["taskRows"] == 1 + len(TASKS) + 2  # header + every task id
    assert facts["height"] > 1600
    assert not png_is_blank(screenshot)


def test_the_check_sees_console_errors_and_failed_loads(tmp_path, browser):
    """A control: the same collector reports a page that logs an error and misses a file."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>x</title></head><body>"
        "<p>broken</p><img src='missing.png' alt='missing'>"
        "<script>console.error('boom from the page')</script></body></html>"
    )
    _, _, errors = open_page(browser, page)
    assert any("boom from the page" in error for error in errors), errors
    assert any("missing.png" in error or "ERR_FILE_NOT_FOUND" in error for error in errors), errors
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><head><title>b</title></head><body></body></html>")
    _, screenshot, errors = open_page(browser, blank)
    assert errors == []
    assert png_is_blank(screenshot)
