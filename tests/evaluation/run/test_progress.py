"""The progress display: a redrawn line on a terminal, plain lines elsewhere."""

import io

import pytest

from bat.evaluation.run.progress import Progress
from bat.evaluation.run.runner import Outcome


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    """The progress line's clock, set by the test: ``clock[0]`` is now, in seconds."""
    monkeypatch.setenv("NO_COLOR", "1")
    now = [100.0]
    monkeypatch.setattr("bat.evaluation.run.progress.time.monotonic", lambda: now[0])
    return now


def test_plain_lines_when_not_a_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()
    progress = Progress("m", 3, stream=out, plain_every_s=3600)
    for passed in (True, False, True):
        progress.update(Outcome(passed, infra=not passed))
    progress.finish()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0].startswith("[m] 1/3 episodes, 1 passed, 00:")  # the first, then the end
    assert lines[-1].startswith("[m] 3/3 episodes, 2 passed, 1 infra")
    assert len(lines) == 2


def test_live_line_on_a_terminal(monkeypatch):
    for name in ("CI", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out = Terminal()
    progress = Progress("m", 2, stream=out)
    progress.update(Outcome(True, infra=False))
    progress.update(Outcome(True, infra=False))
    progress.finish()
    text = out.getvalue()
    assert text.count("\r") >= 2 and text.endswith("\n")
    assert "2/2 episodes, 2 passed" in text and "ETA" in text


def test_ci_or_no_color_means_plain(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = Terminal()
    progress = Progress("m", 1, stream=out)
    progress.update(Outcome(True, infra=False))
    assert "\r" not in out.getvalue()


def test_the_eta_runs_at_the_pace_of_warm_episodes(clock):
    """A cold start of 8 s, then an episode a second: 8 left read 00:08, not 00:36."""
    progress = Progress("m", 10, stream=io.StringIO(), plain_every_s=3600)
    clock[0] = 108.0
    progress.update(Outcome(True, infra=False, cold=True))
    assert progress.line().endswith("00:08 elapsed, ETA --:--")  # no warm pace yet
    clock[0] = 109.0
    progress.update(Outcome(True, infra=False))
    assert progress.line().endswith("00:09 elapsed, ETA 00:08")


def test_without_cold_episodes_the_eta_is_the_pace_since_the_start(clock):
    progress = Progress("m", 4, stream=io.StringIO(), plain_every_s=3600)
    clock[0] = 110.0
    progress.update(Outcome(True, infra=False))
    progress.update(Outcome(False, infra=False))
    assert progress.line().endswith("00:10 elapsed, ETA 00:10")
