"""What a build or a push shows while it runs: live on a terminal, plain lines elsewhere.

The house rule (as for ``bat eval.run``): on a terminal a status line is redrawn in
place; in CI, with ``NO_COLOR``, with ``TERM=dumb`` or when the output is not a
terminal, only plain lines are printed, so logs stay readable.

A build prints each step (``Step 2/5 : COPY . /app``) as it starts. Live, the step's
latest output line is redrawn under it; plain, every output line is printed, indented.
A push shows one redrawn line of layer progress live, and one line per finished layer
plainly. The full output always goes to the log file as well (see ``archive.LogFile``).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TextIO

# Lines of the classic builder that say nothing to a reader (they stay in the log).
_NOISE = ("--->", "Removing intermediate container", "Successfully built", "Successfully tagged")


def is_live(stream: TextIO) -> bool:
    """Whether to redraw lines in place on ``stream``."""
    if os.environ.get("CI") or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


class _Display:
    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = is_live(self.stream) if live is None else live
        self._status = ""  # the redrawn line currently shown (live only)
        self._last_draw = float("-inf")

    def line(self, text: str) -> None:
        """A permanent line (above the status line when live)."""
        if self.live and self._status:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        if self.live and self._status:
            self.stream.write(self._fit(self._status))
        self.stream.flush()

    def status(self, text: str, *, force: bool = False) -> None:
        """Redraw the status line (live only; at most ten times a second unless ``force``)."""
        if not self.live:
            return
        self._status = text
        now = time.monotonic()
        if force or now - self._last_draw >= 0.1:
            self._last_draw = now
            self.stream.write("\r\x1b[2K" + self._fit(text))
            self.stream.flush()

    def close(self) -> None:
        """Clear the status line."""
        if self.live and self._status:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        self._status = ""

    def _fit(self, text: str) -> str:
        width = shutil.get_terminal_size((100, 20)).columns - 1
        return text if len(text) <= width else text[: max(0, width - 1)] + "…"


class BuildDisplay(_Display):
    """The steps of a build."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        super().__init__(stream, live)
        self.recent: list[str] = []  # the current step's last output lines

    def step(self, header: str) -> None:
        self.recent = []
        self.close()
        self.line(header)

    def output(self, text: str) -> None:
        text = text.rstrip()
        if not text or text.lstrip().startswith(_NOISE):
            return
        self.recent = [*self.recent[-9:], text]
        if self.live:
            self.status(f"    {text.strip()}")
        else:
            self.line(f"    {text}")

    def failed(self) -> None:
        """Live: leave the failed step's last output lines on screen."""
        if self.live:
            self.close()
            for text in self.recent:
                self.line(f"    {text}")


class PushDisplay(_Display):
    """The layers of a push."""

    _DONE = ("Pushed", "Layer already exists", "Mounted from")

    def __init__(self, stream: TextIO | None = None, live: bool | None = None) -> None:
        super().__init__(stream, live)
        self.layers: dict[str, tuple[str, int, int]] = {}

    def layer(self, layer_id: str, state: str, current: int = 0, total: int = 0) -> None:
        before = self.layers.get(layer_id, ("", 0, 0))[0]
        self.layers[layer_id] = (state, current, total)
        done = state.startswith(self._DONE)
        if not self.live:
            if done and not before.startswith(self._DONE):
                self.line(f"    {layer_id}: {state}")
            return
        finished = sum(1 for s, _, _ in self.layers.values() if s.startswith(self._DONE))
        sent = sum(c for _, c, _ in self.layers.values())
        size = sum(t for _, _, t in self.layers.values())
        amount = f", {_mb(sent)}/{_mb(size)}" if size else ""
        self.status(f"    layers: {finished}/{len(self.layers)} done{amount}", force=done)


def _mb(count: int) -> str:
    return f"{count / 1e6:.1f} MB"
