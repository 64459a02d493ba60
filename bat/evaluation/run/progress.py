"""Progress of a long run: a live line on a terminal, plain periodic lines elsewhere.

On a terminal the line is redrawn at most ten times a second; in CI, with ``NO_COLOR``,
or when stderr is not a terminal, a plain line is printed every few seconds and at the
end, so logs stay readable.

The ETA is the episodes left at the pace of the warm ones: cold episodes (the first wave
after the agent starts, runner.py) would make a one-minute run read several minutes
early on. The pace is counted from the moment the first cold episode ended; until a warm
episode has ended, the ETA reads ``--:--``. Without cold episodes it is the pace since
the start.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from bat.figures import counted
from bat.terminal import safe


class Progress:
    """Counts finished episodes of one model and shows them."""

    def __init__(
        self, label: str, total: int, *, stream: TextIO | None = None, plain_every_s: float = 5.0
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.live = _is_live(self.stream)
        self.plain_every_s = plain_every_s
        self.done = self.passed = self.infra = self.agent_errors = 0
        self.started = time.monotonic()
        self.warm_since = self.started  # where the warm pace is counted from
        self.warm_done = 0  # warm episodes ended since then
        self._last_draw = float("-inf")
        self._drawn = -1  # the count shown last, so the end is not printed twice

    def update(self, outcome) -> None:
        """Count one finished episode (a ``runner.Outcome``)."""
        self.done += 1
        self.passed += outcome.passed
        self.infra += outcome.infra
        self.agent_errors += outcome.agent_error is not None
        now = time.monotonic()
        if outcome.cold:
            if not self.warm_done:
                self.warm_since = now  # the pace is counted once the agent is warm
        else:
            self.warm_done += 1
        interval = 0.1 if self.live else self.plain_every_s
        if now - self._last_draw >= interval or self.done == self.total:
            self._last_draw = now
            self._draw(final=False)

    def notice(self, say: Callable[[str], None]) -> Callable[[str], None]:
        """A ``say`` that prints a message on a line of its own, above the live line."""

        def tell(text: str) -> None:
            if self.live and self._drawn >= 0:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
            say(text)
            if self.live and self._drawn >= 0:
                self._draw(final=False)

        return tell

    def abandon(self) -> None:
        """The run stops early (Ctrl-C, an error): end the live line, so the message that
        follows is not written over it."""
        if self.live and self._drawn >= 0:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = -1

    def finish(self) -> None:
        if self.live or self._drawn != self.done:
            self._draw(final=True)

    def line(self) -> str:
        now = time.monotonic()
        elapsed = now - self.started
        warm = now - self.warm_since
        rate = self.warm_done / warm if warm > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else None
        if self.done == self.total:
            left = 0.0
        eta = _clock(left) if left is not None else "--:--"
        infra = f", {self.infra} infra" if self.infra else ""
        errors = f", {counted(self.agent_errors, 'agent error')}" if self.agent_errors else ""
        return (
            f"[{safe(self.label)}] {self.done}/{self.total} episodes, {self.passed} passed"
            f"{errors}{infra}, {_clock(elapsed)} elapsed, ETA {eta}"
        )

    def _draw(self, *, final: bool) -> None:
        self._drawn = self.done
        text = self.line()
        if self.live:
            self.stream.write("\r\x1b[2K" + text + ("\n" if final else ""))
        elif final or self.done:
            self.stream.write(text + "\n")
        self.stream.flush()


def _is_live(stream: TextIO) -> bool:
    if os.environ.get("CI") or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return (
        f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
        if hours
        else f"{rest // 60:02d}:{rest % 60:02d}"
    )
