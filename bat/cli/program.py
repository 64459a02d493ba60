"""The ``bat`` program: Invoke's ``Program`` with bat's namespace, spelling and errors.

This is the one place where failures become exit statuses. Everything a user can get
wrong ends as a single ``bat: error: ...`` line on stderr: exit 2 for bad usage or bad
input, 1 for an operation that failed, 3 for an evaluation whose numbers are incomplete,
130 for Ctrl-C. Nothing heavy is imported here,
so ``bat --help`` stays fast; task bodies import the library when they run.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from invoke import Argument, Collection, Program
from invoke.exceptions import Exit, ParseError, UnexpectedExit

from bat.cli.config import BatConfig, read_settings
from bat.errors import BatError, UsageError, error_line, error_text
from bat.tasks._chain import scrub_of

# Ctrl-C outside a stage that says more: bat writes every file atomically, so each file
# is either as it was or whole.
INTERRUPTED = "interrupted; every file written so far is kept whole"

# The core flags bat keeps; Invoke's others (--pty, --echo, --dry, ...) tune shell commands.
_CORE_FLAGS = {
    "complete",
    "config",
    "debug",
    "help",
    "list",
    "list-depth",
    "list-format",
    "print-completion-script",
    "version",
    "write-pyc",
}

# The core flags ``bat --help`` shows, with bat's wording. The others still parse
# (``--complete`` is what the completion script calls; ``--write-pyc``, ``-D`` and ``-F``
# are Invoke's) but mean nothing to someone evaluating an agent.
_SHOWN_FLAGS = (
    ("-f FILE, --config=FILE", "A settings file (bat.yaml's format) read over every other one."),
    ("-d, --debug", "Print Invoke's debug log."),
    ("-h [COMMAND], --help[=COMMAND]", "Show this help, or one command's options, and exit."),
    ("-l [GROUP], --list[=GROUP]", "List the commands, or those of one group."),
    ("-V, --version", "Print bat's version and exit."),
    ("--print-completion-script=SHELL", "Print the tab-completion script (bash, zsh, fish)."),
)


class BatProgram(Program):
    """``bat``: the command tree of ``bat.tasks`` with bat's config files and error handling."""

    def __init__(self, namespace: Collection | None = None) -> None:
        if namespace is None:
            from bat.tasks import ns as namespace
        super().__init__(namespace=namespace, name="bat", binary="bat", config_class=BatConfig)

    # -- running -------------------------------------------------------------------

    def run(self, argv: list[str] | str | None = None, exit: bool = True) -> int:
        """Run once and exit with :meth:`status_of_run`'s status (``exit=False``: return it).

        Ctrl-C at any moment ends in status 130 and one line, never a traceback: also
        while an error is being reported, and after the work is done.

        With ``exit``, the process ends here, without the interpreter's shutdown: that
        shutdown first gives Ctrl-C back its default action (death by SIGINT, status
        -2), then waits for worker threads and tears down the chart renderer's runtime,
        which takes a moment. Nothing is left to do by then: every file bat wrote is
        closed (written atomically), and the output is flushed here.
        """
        try:
            code = self.status_of_run(argv)
        except KeyboardInterrupt:  # pressed while a failure was being reported
            code = report(INTERRUPTED, 130)
        if not exit:
            return code
        if code == 130:
            exit_now(130)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _interrupted_at_exit)
        exit_now(code)

    def status_of_run(self, argv: list[str] | str | None) -> int:
        """Invoke's run steps, with every user-facing failure turned into a status."""
        try:
            self.create_config()
            self.parse_core(argv)
            self.parse_collection()
            self.parse_tasks()
            self.parse_cleanup()
            self.update_config()
            self.execute()
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            return exc.code
        except ParseError as exc:
            context = getattr(exc, "context", None)
            topic = f" {context.name}" if context is not None and context.name else ""
            return report(f"{_parse_message(exc)} (see 'bat --help{topic}')", 2)
        except UnexpectedExit as exc:
            if exc.result.hide:
                print(exc, file=sys.stderr, end="")
            return exc.result.exited or 1
        except BatError as exc:
            print(error_text(exc, scrub_of(getattr(self, "config", None))), file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            return report(INTERRUPTED, 130)
        except BrokenPipeError:
            # Output piped into `head` and the like: stop quietly, as other tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141
        except OSError as exc:
            # A file bat was told to use cannot be read or written: say which, no traceback.
            where = f"{exc.filename}: " if exc.filename else ""
            return report(f"{where}{exc.strerror or exc}", 1)
        return 0

    # -- Invoke hooks --------------------------------------------------------------

    def core_args(self) -> list[Argument]:
        """Invoke's core flags less those that only tune shell commands (bat runs none)."""
        return [arg for arg in super().core_args() if arg.name in _CORE_FLAGS]

    def parse_core(self, argv: list[str] | str | None) -> None:
        super().parse_core(argv)
        # `bat --help init agent` means `bat --help init.agent`.
        topic = self.args.help.value
        if isinstance(topic, str) and self.core.unparsed:
            joined = self._dotted(topic, self.core.unparsed[0])
            if joined:
                self.args.help.value = joined
                self.core.unparsed.pop(0)

    def parse_tasks(self) -> None:
        words = self.core.unparsed
        if words and words[0] in self.namespace.collections:
            group = words[0]
            following = words[1] if len(words) > 1 else None
            joined = self._dotted(group, following) if following else None
            if joined:
                words[:2] = [joined]
            elif following in (None, "-h", "--help"):
                self._list_group(group)
            elif following.startswith("-"):
                raise UsageError(f"'{group}' is a group of commands; it takes no {following}")
            else:
                tasks = ", ".join(self._task_names(group))
                raise UsageError(f"'{group}' has no command '{following}' (it has: {tasks})")
        self._help_after_task(words)
        self._leading_word(words)
        self._join_variadic(words)
        self._fill_optional_positionals(words)
        super().parse_tasks()

    def parse_cleanup(self) -> None:
        topic = self.args.help.value
        if isinstance(topic, str) and topic in self.namespace.collections:
            self._list_group(topic)
        root = self.args.list.value
        if isinstance(root, str) and root not in self.namespace.collections:
            groups = ", ".join(self.namespace.collections)
            raise UsageError(f"no group of commands named '{root}' (groups: {groups})")
        super().parse_cleanup()

    def update_config(self, merge: bool = True) -> None:
        """bat's settings (the bat.yaml files, ``BAT_*``, the ``-f`` file), read and checked
        by bat, become Invoke's override level (:mod:`bat.cli.config` says why)."""
        settings = read_settings(
            self.namespace, project_dir=Path.cwd(), runtime=self.args.config.value
        )
        self.config.load_overrides(settings, merge=merge)

    def print_task_help(self, name: str) -> None:
        """Invoke's per-task help, with the positional arguments in the usage line."""
        task = self.namespace[name]
        positional = " ".join(arg.upper() for arg in task.positional)
        if positional and getattr(task, "optional_positional", False):
            positional = f"[{positional}]"
        context = self.parser.contexts[name]
        print(f"Usage: bat {name} [--options] {positional}".rstrip())
        print()
        for line in (inspect.getdoc(task) or "").splitlines():
            print(f"{self.leading_indent}{line}" if line.strip() else "")
        print()
        tuples = context.help_tuples()
        print("Options:")
        if tuples:
            self.print_columns(tuples)
        else:
            print(f"{self.leading_indent}none")

    def print_version(self) -> None:
        from bat.version import version_line

        print(version_line())

    def print_help(self) -> None:
        print("Usage: bat [--core-opts] <command> [--command-opts] [<command> ...]")
        print("       bat <group> <command> ...   (same as bat <group>.<command>)")
        print()
        print("Core options:")
        print()
        self.print_columns(list(_SHOWN_FLAGS))
        self.list_tasks()
        print("'bat --help <command>' shows a command's options; docs/ explains each one.")

    def _make_pairs(self, coll: Collection, ancestors: list[str] | None = None) -> list:
        """Invoke's command list, each with its whole summary (:func:`summary_of`):
        Invoke shows the first line of a docstring, which cuts a wrapped sentence."""
        pairs = super()._make_pairs(coll, ancestors)
        prefix = ".".join(ancestors or [])
        shown = []
        for full, text in pairs:
            name = full.split(" (")[0].strip().lstrip(".")
            dotted = f"{prefix}.{name}" if prefix and not name.startswith(prefix) else name
            with contextlib.suppress(KeyError, ValueError):
                text = summary_of(self.namespace[dotted]) or text
            shown.append((full, text))
        return shown

    # -- helpers -------------------------------------------------------------------

    def _task_names(self, group: str) -> list[str]:
        collection = self.namespace.collections[group]
        names = []
        for name, aliases in collection.task_names.items():
            names.append(name)
            names.extend(aliases)
        return names

    def _dotted(self, group: str, word: str) -> str | None:
        """``init``, ``agent`` -> ``init.agent`` when that is a task; else None."""
        if group not in self.namespace.collections:
            return None
        return f"{group}.{word}" if word in self._task_names(group) else None

    def _help_after_task(self, words: list[str]) -> None:
        """``bat init.agent --help``: Invoke would take ``--help`` as the NAME argument."""
        if words and self._is_command(words[0]) and ("-h" in words or "--help" in words):
            self.args.help.value = words[0]
            del words[:]

    def _task_of(self, words: list[str]) -> Any:
        """The task the first word names, or None."""
        if not words:
            return None
        try:
            return self.namespace[words[0]]
        except (KeyError, ValueError):
            return None

    def _join_variadic(self, words: list[str]) -> None:
        """``bat add.client a b c`` -> ``bat add.client a,b,c`` for tasks marked ``variadic``.

        Invoke positionals take one word each; a task flagged ``variadic`` takes the bare
        words after its first one too, up to a flag or the name of another command.
        """
        task = self._task_of(words)
        joiner = getattr(task, "variadic", False)
        if not joiner:
            return
        bare = [i for i, word in enumerate(words[1:], 1) if not word.startswith("-")]
        if not bare:
            return
        first = end = bare[0]
        while end + 1 < len(words) and not words[end + 1].startswith("-"):
            if self._is_command(words[end + 1]):
                break
            end += 1
        words[first : end + 1] = [
            (joiner if isinstance(joiner, str) else ",").join(words[first : end + 1])
        ]

    def _leading_word(self, words: list[str]) -> None:
        """``bat eval.run weather`` -> ``bat eval.run --agent=weather`` for a task marked
        ``leading="agent"``: an optional bare word right after the command (bat-cli's
        spelling), which Invoke, having no optional positionals, would refuse."""
        task = self._task_of(words)
        flag = getattr(task, "leading", None)
        bare = len(words) > 1 and not words[1].startswith("-")
        if flag and bare and not self._is_command(words[1]):
            words[1] = f"--{flag}={words[1]}"

    def _fill_optional_positionals(self, words: list[str]) -> None:
        """``bat eval.schema`` -> ``bat eval.schema --name=`` for a task marked
        ``optional_positional``: Invoke would refuse the missing positional argument."""
        task = self._task_of(words)
        if not getattr(task, "optional_positional", False):
            return
        following = words[1:]
        end = next((i for i, w in enumerate(following) if self._is_command(w)), len(following))
        given = [word for word in following[:end] if not word.startswith("-")]
        for name in task.positional[len(given) :]:
            flag = f"--{name.replace('_', '-')}"
            if not any(word == flag or word.startswith(f"{flag}=") for word in following[:end]):
                words.insert(1, f"{flag}=")

    def _is_command(self, word: str) -> bool:
        if word in self.namespace.collections:
            return True
        try:
            self.namespace[word]
        except (KeyError, ValueError):
            return False
        return True

    def _list_group(self, group: str) -> NoReturn:
        """``bat init`` alone lists the commands ``init`` holds, then exits 0."""
        collection = self.namespace.collections[group]
        rows = []
        for name in sorted(collection.task_names):
            rows.append((f"{group}.{name}", summary_of(collection[name])))
        print(f"Usage: bat {group}.<command> [--options]  (or: bat {group} <command>)")
        print()
        print(f"Commands of '{group}':")
        print()
        self.print_columns(rows)
        print(f"'bat --help {group}.<command>' shows a command's options.")
        raise Exit


def summary_of(task: Any) -> str:
    """A command's summary: the first paragraph of its docstring, on one line."""
    doc = inspect.getdoc(task) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _parse_message(exc: ParseError) -> str:
    message = str(exc)
    if message.startswith("No idea what '"):
        name = message[len("No idea what '") :].split("'")[0]
        return f"unknown command or option '{name}'"
    return message[0].lower() + message[1:] if message else "invalid command line"


def report(message: str, code: int) -> int:
    """Print one ``bat: error:`` line and return ``code``."""
    print(error_line(message), file=sys.stderr)
    return code


def exit_now(code: int) -> NoReturn:
    """Flush the output and end the process with ``code`` at once, waiting for no thread.

    Worker threads (the judge's, waiting on a server or a ``Retry-After``) cannot be
    interrupted, and Python would wait for them; after Ctrl-C or a failure nothing they
    could still do is wanted, and every file is written atomically, so ending them
    mid-way loses nothing that was finished. A Ctrl-C while the output is flushed is
    ignored when the status is already 130.
    """
    if code == 130 and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    for stream in (sys.stdout, sys.stderr):
        # RuntimeError: a Ctrl-C handled inside this very flush flushes again (reentrant).
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            stream.flush()
    os._exit(code)


def _interrupted_at_exit(signum, frame) -> None:
    """Ctrl-C after the work is done, most likely while a full pipe holds the last flush:
    the line goes straight to file descriptor 2, since the buffered stream may be the one
    being flushed (Python runs the handler inside that flush)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.write(2, (error_line(INTERRUPTED) + "\n").encode("utf-8", "replace"))
    exit_now(130)


def main() -> None:
    """Console-script entry point.

    SIGTERM (a cancelled CI job, ``kill``) is taken as Ctrl-C: the run is marked
    interrupted, its agent stopped and what was finished kept, instead of bat vanishing
    with run.json still saying ``running``.
    """
    signal.signal(signal.SIGTERM, _terminated)
    _closed_streams_to_devnull()
    BatProgram().run()


def _closed_streams_to_devnull() -> None:
    """``bat version >&-``: Python starts with ``sys.stdout`` None when descriptor 1 is
    closed, and every write or flush of it raises. What would go there goes nowhere, as
    the user asked; opening the null device takes the lowest free descriptor, the closed
    one, so a file bat opens later (or a child's output) cannot land on it."""
    for name, fd in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
        if getattr(sys, name) is None:
            with contextlib.suppress(OSError):
                stream = open(os.devnull, "r" if fd == 0 else "w")  # noqa: SIM115 (lives on)
                setattr(sys, name, stream)


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt
