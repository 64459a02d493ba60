"""The one exception family for failures a user should see as a message, not a traceback.

Library code raises these. They become a one-line message on stderr (always worded by
:func:`error_line`) and an exit status: in the ``bat`` program (``bat.cli.program``),
and in any other Invoke program that mounts bat's collections (``BatTask`` turns them
into Invoke's ``Exit``), so every command fails the same way wherever it runs.
Exit status 2 means the user asked for something wrong (bad usage, bad input, a file
in the wrong state); 1 means a sound request whose operation failed; 3 means an
evaluation ran but its numbers are incomplete (``IncompleteRun``).
"""

from __future__ import annotations

from collections.abc import Callable


class BatError(Exception):
    """A failure to report to the user as one line; ``exit_code`` says which kind."""

    exit_code = 1

    def __init__(self, message: str, details: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        # Several problems found at once (e.g. every invalid key of a file): one per line
        # under the headline, so a user fixes them all in one go.
        self.details = tuple(details)

    def __str__(self) -> str:
        return self.message


class UsageError(BatError):
    """The command was called wrongly: a bad flag value, or run from the wrong place."""

    exit_code = 2


class InputError(BatError):
    """An input file or value is invalid (a malformed config, a bad name)."""

    exit_code = 2


class ConfigError(InputError):
    """A bat configuration file or ``BAT_*`` variable could not be used."""


class OperationError(BatError):
    """A well-formed request failed while it ran (I/O, a subprocess, a network peer)."""

    exit_code = 1


class GateFailed(BatError):
    """The evaluation ran and its numbers stand, but a gate the user set did not hold
    (a pass rate under its threshold, a regression against the baseline)."""

    exit_code = 1


class IncompleteRun(BatError):
    """An evaluation ran to its end, but its numbers are incomplete: infrastructure
    failures remain, or a model could not be evaluated. Everything is written; a CI job
    must not read the numbers as the agent's."""

    exit_code = 3


class Interrupted(BatError):
    """The user pressed Ctrl-C; what was finished is kept (the message says where)."""

    exit_code = 130


Scrub = Callable[[str], str]


def error_line(message: str, scrub: Scrub | None = None) -> str:
    """The one line a user sees for a failure: ``bat: error: ...``, whitespace folded,
    control characters escaped, and free of every secret ``scrub`` knows of (a URL's
    password, a judge's key: the command line's run context holds them, see
    ``bat.evaluation.context``), whichever part of bat worded the message."""
    return f"bat: error: {_printable(message, scrub)}"


def error_text(error: BatError, scrub: Scrub | None = None) -> str:
    """The headline line, then one indented line per detail (if any)."""
    lines = [error_line(error.message, scrub)]
    lines += [f"  - {_printable(detail, scrub)}" for detail in error.details]
    return "\n".join(lines)


def _printable(text: str, scrub: Scrub | None) -> str:
    """``text`` scrubbed of secrets, folded onto one line, control characters escaped:
    messages quote user input, and an ESC from a file must not drive the terminal."""
    from bat.terminal import safe

    text = str(text) if scrub is None else scrub(str(text))
    return safe(" ".join(text.split()))
