"""The progress display: a redrawn line on a terminal, plain lines elsewhere."""

import io

from bat.evaluation.run.progress import Progress
from bat.evaluation.run.runner import Outcome


class Terminal(io.StringIO):
    def isatty(self):
        return True


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
