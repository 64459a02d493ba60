"""Starting and stopping the agent under test.

The agent runs in its own process group with its output in the run directory. It is
ready when its agent card answers over HTTP (an open port is not enough: the server may
still be loading). It is always stopped, on success, error or Ctrl-C: SIGTERM to the
group, SIGKILL after the shutdown timeout. What the agent's own files say (its port,
telemetry, config copy) is ``agent_settings``.

Even a ``kill -9`` of bat does not leave the agent running: a watchdog process
(``agent_watchdog``), started before the agent, stops the group when bat is gone, at
whatever moment (the agent carries bat's mark in its environment, so the watchdog finds
it even when bat died before it could say which group it was). And in case the watchdog
was killed too, the run folder holds a record (``record``), written before the agent
starts: the mark, then also the agent's pid, process group and start time. The next
start in that folder (``--resume``) recognises that agent as its own, stops it and goes
on, while anything else answering on the port is refused.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bat.atomic import json_text, write_text_atomic
from bat.errors import BatError, InputError, OperationError
from bat.evaluation.log.files import read_regular, strict_loads
from bat.evaluation.run import agent_watchdog
from bat.evaluation.run.agent_card import CARD_PATHS, card_answers
from bat.evaluation.run.agent_watchdog import MARK, marked_groups, stop_group
from bat.uv_binary import find_uv


class AgentStartError(OperationError):
    """An agent that exited or did not answer before it was ready. It names its own
    log (a replica's, when there are several): a model that could not be evaluated is
    recorded, and printed, with the end of that log (``model_run.failed``)."""

    def __init__(self, message: str, log: Path) -> None:
        super().__init__(f"{message}; end of {log}:", details=tail(log))
        self.log = log


class StartedAgent:
    """What an agent bat starts does the same way, a process or a container: waiting
    until its card answers, and a restart. The subclass says how it ended (``_ended``:
    the error to raise once it has exited, else None) and what a start too slow is."""

    url: str
    startup_timeout_s: float
    cancelled: bool

    def wait_ready(self) -> float:
        """Block until the agent card answers; return the seconds it took. Fails early on exit."""
        started = time.monotonic()
        deadline = started + self.startup_timeout_s
        while time.monotonic() < deadline:
            ended = self._ended()
            if ended is not None:
                raise ended
            if card_answers(self.url, timeout_s=1):
                return time.monotonic() - started
            if self.cancelled:  # a restart in a worker thread, and bat is stopping
                raise OperationError("the agent's start was cancelled")
            time.sleep(0.05)
        raise self._too_slow()

    def restart(self) -> float:
        """Stop what is left of the agent, start it again, wait until it is ready."""
        self.stop()
        self.start()
        return self.wait_ready()

    def _ended(self) -> OperationError | None:
        raise NotImplementedError

    def _too_slow(self) -> OperationError:
        raise NotImplementedError


class AgentProcess(StartedAgent):
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
        record: Path | None = None,
    ) -> None:
        self.command = command
        self.root = root
        self.env = env
        self.log = log
        self.url = url
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.record = record  # where the running agent's pid is kept (see module docstring)
        self.proc: subprocess.Popen | None = None
        self.stale_stopped: int | None = None  # pid of an earlier bat's agent stopped here
        self.cancelled = False  # set from another thread: a wait in progress gives up
        self._watchdog: subprocess.Popen | None = None
        self._watchdog_pipe = None
        self.token = uuid.uuid4().hex  # the mark of this bat's agent (agent_watchdog)

    def start(self) -> None:
        if self.record is not None:
            self.stale_stopped = stop_stale(self.record, self.shutdown_timeout_s)
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
        argv = with_python(argv)
        if argv[0] == "uv":  # the uv installed with bat, even when it is not on PATH
            argv[0] = find_uv() or "uv"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        # The watchdog first, and told that a start begins: from here on, bat's death
        # at any moment takes the agent down (agent_watchdog's docstring).
        self._tell("starting")
        self._note()
        try:
            self.proc = self._spawn(argv)
        except BatError:
            self._tell("0")  # nothing was started
            self._forget()
            raise
        self._tell(str(self.proc.pid))
        self._note()

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        """The agent's process, in a group of its own, its output in the log, marked."""
        # The agent prints what it likes (its settings, a key in a stack trace): 0600.
        # O_NOFOLLOW: a link planted in the run folder does not lead the log elsewhere.
        fd = _open_log(self.log)
        with os.fdopen(fd, "ab") as out:
            try:
                return subprocess.Popen(
                    argv,
                    cwd=self.root,
                    env={**self.env, MARK: self.token},
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

    def _note(self) -> None:
        """Write the record: the mark and the watchdog before the start, the agent after."""
        if self.record is not None:
            write_text_atomic(self.record, json_text(self._identity(), indent=1))

    def _forget(self) -> None:
        if self.record is not None:
            with contextlib.suppress(FileNotFoundError):
                self.record.unlink()

    def _identity(self) -> dict:
        """What tells this agent from any later process with the same pid."""
        pid = self.proc.pid if self.proc is not None else None
        return {
            "pid": pid,
            "pgid": pid,  # start_new_session: the agent leads a group of its own
            "start_ticks": start_ticks(pid) if pid is not None else None,
            "lifeline": self.token,
            "watchdog_pid": self._watchdog.pid if self._watchdog is not None else None,
        }  # no command or URL: they may hold a secret, and nothing here needs them

    def _tell(self, word: str) -> None:
        """Tell the watchdog (started here the first time) what runs: ``starting``, a
        process group, or ``0`` for nothing."""
        if self._watchdog is None:
            read_end, write_end = os.pipe()  # not inherited by the agent: bat alone holds it
            try:
                # Run by its path, isolated (-I): no folder of the agent's can shadow it.
                script = agent_watchdog.__file__
                grace = str(self.shutdown_timeout_s)
                self._watchdog = subprocess.Popen(
                    [sys.executable, "-I", script, grace, self.token],
                    stdin=read_end,
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except BaseException:
                os.close(write_end)
                raise
            finally:
                os.close(read_end)
            self._watchdog_pipe = os.fdopen(write_end, "wb", buffering=0)
        with contextlib.suppress(OSError):  # a watchdog gone already cannot be told
            self._watchdog_pipe.write(f"{word}\n".encode())

    def _ended(self) -> OperationError | None:
        if self.proc is None or self.proc.poll() is None:
            return None
        return AgentStartError(
            f"the agent exited with status {self.proc.returncode} before it was ready",
            self.log,
        )

    def _too_slow(self) -> OperationError:
        return AgentStartError(
            f"the agent did not answer at {self.url}{CARD_PATHS[0]} within "
            f"{self.startup_timeout_s:g} s (evaluation.agent_startup_timeout_s)",
            self.log,
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

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL what is left after the shutdown timeout."""
        if self.proc is None:
            return
        stop_group(self.proc.pid, self.shutdown_timeout_s, reap=self.proc.poll)
        self.proc.wait()
        if self._watchdog is not None:
            self._tell("0")
        self._forget()

    def close(self) -> None:
        """Stop the agent and let its watchdog go (it exits when its pipe closes)."""
        try:
            self.stop()
        finally:
            if self._watchdog_pipe is not None:
                self._watchdog_pipe.close()
                self._watchdog_pipe = None
            if self._watchdog is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._watchdog.wait(timeout=5)
                self._watchdog = None


PYTHON_WORD = "{python}"


def with_python(argv: list[str]) -> list[str]:
    """``argv`` with the word ``{python}`` made the interpreter running bat: fixture agents
    and agents installed next to bat start without knowing where that environment lives."""
    return [sys.executable if word == PYTHON_WORD else word for word in argv]


def shown_command(command: str) -> str:
    """``evaluation.agent.command`` as it will run, for the start line: ``{python}`` as
    the interpreter's path (the rest as written)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if PYTHON_WORD not in argv:
        return command
    return shlex.join(with_python(argv))


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), or None.

    With the pid, it names one process for good: a pid reused later has a later start.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces and ')'
    try:
        return int(fields[19])  # field 22 of proc(5); fields[0] is field 3
    except (IndexError, ValueError):
        return None


def stop_stale(record: Path, grace_s: float) -> int | None:
    """Stop the agent an earlier bat recorded in ``record`` if it still runs; its pid.

    It is recognised by pid *and* start time, so a process that merely got the same pid
    later is never touched; with no start time to compare (not Linux), nothing is. A
    record without a pid (bat died as it started the agent) still holds the mark the
    agent carries in its environment: the processes marked so are that bat's alone.
    """
    try:
        known = strict_loads(read_regular(record).decode("utf-8"))  # a FIFO: never opened
    except (OSError, ValueError, InputError):
        return None
    if not isinstance(known, dict):
        return None
    stopped = None
    pid, group, ticks = known.get("pid"), known.get("pgid"), known.get("start_ticks")
    ours = all(type(n) is int and n > 1 for n in (pid, group)) and ticks is not None
    if ours and start_ticks(pid) == ticks:
        stop_group(group, grace_s)
        stopped = pid
    # A bat killed before it knew its agent's pid recorded only the mark it gave it.
    token = known.get("lifeline")
    if isinstance(token, str) and len(token) == 32 and token.isalnum():
        for other in sorted(marked_groups(token)):
            stop_group(other, grace_s)
            stopped = stopped or other
    with contextlib.suppress(FileNotFoundError):
        record.unlink()
    return stopped


def _open_log(log: Path) -> int:
    """The agent's log opened for appending: a regular file only. Without blocking, then
    checked: a FIFO put in its place (a resumed run's folder) would block the open until a
    reader came, a device would take the agent's output anywhere."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(log, flags, 0o600)
    except OSError as exc:
        raise InputError(
            f"cannot write the agent's log {log}: {exc.strerror or exc} "
            "(it must be a regular file; remove what is there)"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"the agent's log {log} is not a regular file; remove it")
    os.set_blocking(fd, True)
    return fd


def tail(log: Path, lines: int = 15) -> list[str]:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ["(no log)"]
    return text.splitlines()[-lines:] or ["(the log is empty)"]
