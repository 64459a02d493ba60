"""Starting and stopping the agent under test.

The agent runs in its own process group with its output in the run directory. It is
ready when its agent card answers over HTTP (an open port is not enough: the server may
still be loading). It is always stopped, on success, error or Ctrl-C: SIGTERM to the
group, SIGKILL after the shutdown timeout. What the agent's own files say (its port,
telemetry, config copy) is ``agent_settings``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from bat.errors import InputError, OperationError
from bat.evaluation.agent_card import CARD_PATHS, card_answers
from bat.uv_binary import find_uv


class AgentProcess:
    """One started agent: ``start``, ``wait_ready``, ``alive``, ``stop``, ``restart``."""

    def __init__(
        self,
        command: str,
        *,
        root: Path,
        env: dict[str, str],
        log: Path,
        url: str,
        startup_timeout_s: float,
        shutdown_timeout_s: float,
    ) -> None:
        self.command = command
        self.root = root
        self.env = env
        self.log = log
        self.url = url
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if card_answers(self.url, timeout_s=1):
            raise OperationError(
                f"something already answers at {self.url}: stop it, or set "
                "evaluation.agent.start: false to evaluate the running agent"
            )
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise InputError(f"evaluation.agent.command cannot be parsed: {exc}") from None
        if not argv:
            raise InputError("evaluation.agent.command is empty")
        # `{python}` is the interpreter running bat: fixture agents and agents installed
        # next to bat start without knowing where that environment lives.
        argv = [sys.executable if word == "{python}" else word for word in argv]
        if argv[0] == "uv":  # the uv installed with bat, even when it is not on PATH
            argv[0] = find_uv() or "uv"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            try:
                self.proc = subprocess.Popen(
                    argv,
                    cwd=self.root,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise OperationError(
                    f"cannot start the agent: {argv[0]!r} not found (evaluation.agent.command)"
                ) from None
            except NotADirectoryError:
                raise InputError(f"agent root {self.root} is not a directory") from None

    def wait_ready(self) -> float:
        """Block until the agent card answers; return the seconds it took. Fails early on exit."""
        started = time.monotonic()
        deadline = started + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise OperationError(
                    f"the agent exited with status {self.proc.returncode} before it was ready; "
                    f"end of {self.log}:",
                    details=tail(self.log),
                )
            if card_answers(self.url, timeout_s=1):
                return time.monotonic() - started
            time.sleep(0.05)
        raise OperationError(
            f"the agent did not answer at {self.url}{CARD_PATHS[0]} within "
            f"{self.startup_timeout_s:g} s (evaluation.agent_startup_timeout_s); "
            f"end of {self.log}:",
            details=tail(self.log),
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe_exit(self) -> str:
        """How the process ended, for messages: ``exit status 3``, ``killed by SIGKILL``."""
        code = self.proc.poll() if self.proc is not None else None
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def restart(self) -> float:
        """Stop what is left of the process group, start again, wait until ready."""
        self.stop()
        self.start()
        return self.wait_ready()

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left after the shutdown timeout."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            self.proc.wait()
            return
        deadline = time.monotonic() + self.shutdown_timeout_s
        while time.monotonic() < deadline:
            self.proc.poll()
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def tail(log: Path, lines: int = 15) -> list[str]:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ["(no log)"]
    return text.splitlines()[-lines:] or ["(the log is empty)"]
