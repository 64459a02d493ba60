"""What build and push show: redrawn lines on a terminal, plain lines elsewhere (no Docker)."""

from __future__ import annotations

import io

import pytest

from bat.images.archive import LogFile
from bat.images.display import BuildDisplay, PushDisplay, is_live
from bat.images.stream import BuildTracker, PushTracker, registry_error


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def log(tmp_path):
    with LogFile(tmp_path, "build") as handle:
        yield handle


def test_live_only_on_a_terminal_without_ci_or_no_color(monkeypatch):
    for name in ("CI", "NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    assert is_live(Tty()) and not is_live(io.StringIO())
    monkeypatch.setenv("CI", "1")
    assert not is_live(Tty())
    monkeypatch.delenv("CI")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not is_live(Tty())


def feed_build(tracker):
    for line in [
        "Step 1/2 : FROM base",
        " ---> 1234567890ab",
        "Step 2/2 : RUN make",
        " ---> Running in abc",
        "\x1b[91mcompiling\x1b[0m",
        "",
        "make: *** error 2",
    ]:
        tracker.feed(line)
    return tracker.failure("The command '/bin/sh -c make' returned a non-zero code: 2")


def test_plain_build_prints_steps_and_output_and_logs_everything(log):
    out = io.StringIO()
    error = feed_build(BuildTracker(BuildDisplay(out, live=False), log))
    assert out.getvalue().splitlines() == [
        "Step 1/2 : FROM base",
        "Step 2/2 : RUN make",
        "    compiling",
        "    make: *** error 2",
    ]
    assert str(error) == (
        "step 2/2 (RUN make) failed: The command '/bin/sh -c make' returned a non-zero code: 2 "
        f"(full log: {log.shown()})"
    )
    text = log.path.read_text()
    assert " ---> Running in abc" in text and "compiling" in text and "\x1b" not in text
    assert text.endswith("ERROR: The command '/bin/sh -c make' returned a non-zero code: 2\n")


def test_live_build_redraws_then_keeps_the_failed_steps_output(log):
    out = Tty()
    feed_build(BuildTracker(BuildDisplay(out, live=True), log))
    screen = out.getvalue()
    assert "\r\x1b[2K" in screen
    tail = screen.rsplit("Step 2/2 : RUN make\n", 1)[1]
    assert tail.endswith("    compiling\n    make: *** error 2\n")


def test_plain_push_prints_finished_layers_once_and_finds_the_digest(tmp_path):
    out = io.StringIO()
    with LogFile(tmp_path, "push") as log:
        tracker = PushTracker(PushDisplay(out, live=False), log)
        tracker.event("aaa", "Preparing")
        tracker.event("aaa", "Pushing", 10, 100)
        tracker.event("aaa", "Pushed")
        tracker.event("bbb", "Layer already exists")
        tracker.event(None, "1.0: digest: sha256:" + "ab" * 32 + " size: 528")
    assert out.getvalue().splitlines() == ["    aaa: Pushed", "    bbb: Layer already exists"]
    assert tracker.digest == "sha256:" + "ab" * 32


def test_remote_push_lines_are_parsed_too(tmp_path):
    with LogFile(tmp_path, "push") as log:
        tracker = PushTracker(PushDisplay(io.StringIO(), live=False), log)
        tracker.text("5f70bf18a086: Pushed\n")
        tracker.text("r1: digest: sha256:" + "cd" * 32 + " size: 524")
    assert tracker.digest == "sha256:" + "cd" * 32


@pytest.mark.parametrize(
    ("message", "start"),
    [
        ("unauthorized: authentication required", "registry r:1 refused the credentials of 'me'"),
        ("Get http://r:1/v2/: dial tcp r:1: connect: connection refused", "cannot reach registry"),
        # A port that contains "401" is no authentication failure.
        (
            "Get https://127.0.0.1:50401/v2/: dial tcp 127.0.0.1:50401: connection refused",
            "cannot reach registry",
        ),
        ("received unexpected HTTP status: 401 Unauthorized", "registry r:1 refused"),
        ("http: server gave HTTP response to HTTPS client", "registry r:1 answers plain HTTP"),
        ("x509: certificate signed by unknown authority", "registry r:1: its TLS certificate"),
        ("manifest invalid", "push of r:1/x:1 failed: manifest invalid"),
    ],
)
def test_registry_errors_are_sorted(message, start):
    error = registry_error(message, registry="r:1", ref="r:1/x:1", username="me")
    assert str(error).startswith(start)
    assert "\n" not in str(error)
