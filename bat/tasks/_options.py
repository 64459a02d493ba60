"""What the task modules share: the ``command`` decorator and flag-or-config lookups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invoke import Context, Exit, Task, task

from bat.errors import BatError, error_text
from bat.tasks._chain import chain_of, scrub_of


class BatTask(Task):
    """An Invoke task with explicit short flags, an optional variadic positional, and
    positionals that may be left out.

    Invoke invents a short flag for every option from its letters, which gives the same
    option different letters in different commands. bat's short flags are exactly the
    ones the command tree documents (``short={"clients": "c"}``). ``variadic`` lets the
    program read ``bat add.client a b`` as ``bat add.client a,b``; a text instead of
    True is the joiner (``set.config`` joins with a newline, since values hold commas).

    A :class:`~bat.errors.BatError` from the task body becomes Invoke's ``Exit`` with
    the error's line and status, so the task fails cleanly under any Invoke program
    (``bat``, ``invoke``, ``fab``) that runs it.

    Invoke requires every positional argument; with ``optional_positional`` the ``bat``
    program gives a left-out one as empty text (``bat eval.schema`` alone is
    ``bat eval.schema --name=``), which the task reads as "not given".

    ``leading`` names the option an optional bare word right after the command fills
    (``bat eval.run weather`` is ``bat eval.run --agent=weather``).

    A ``stage`` is one of the stages chained after ``eval.run``: after ``eval.run
    --dry-run`` it does nothing (checked here, once, for every stage).
    """

    def __init__(
        self,
        body: Callable,
        short: dict[str, str] | None = None,
        variadic: bool | str = False,
        optional_positional: bool = False,
        stage: bool = False,
        leading: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("auto_shortflags", False)
        super().__init__(body, **kwargs)
        self.short = dict(short or {})
        self.variadic = variadic
        self.optional_positional = optional_positional
        self.stage = stage
        self.leading = leading
        self._whole_help = dict(self.help)

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Any]:
        """Invoke's arguments of the task, each with its help. Invoke takes the help out of
        the task as it builds them, so a second program run in the same process (a test,
        another tool's) would show options without their help: each build starts whole."""
        self.help = dict(self._whole_help)
        return super().get_arguments(ignore_unknown_help)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        config = getattr(args[0], "config", None) if args else None
        if self.stage and _dry_run(config):
            return None
        try:
            return super().__call__(*args, **kwargs)
        except BatError as exc:
            raise Exit(error_text(exc, scrub_of(config)), code=exc.exit_code) from None

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        if name in self.short:
            opts["names"].append(self.short[name])
        return opts


def _dry_run(config: Any) -> bool:
    """Whether this command line's ``eval.run`` was a dry run."""
    state = chain_of(config) if config is not None else None
    return bool(state and state.evaluation and state.evaluation.dry_run)


def command(**kwargs: Any) -> Callable[[Callable], BatTask]:
    """``@task`` for bat's commands: ``@command(short={...}, help={...})``."""
    return task(klass=BatTask, **kwargs)


_REQUIRED = object()


def setting(c: Context, flag: Any, key: str, default: Any = _REQUIRED) -> Any:
    """The flag's value when given, else the configured ``key`` (e.g. ``init.agent.port``).

    ``default`` covers a key missing from the config: Invoke gives a ``pre``/``post`` task
    the root collection's configuration, which lacks a mounted sub-collection's defaults.
    """
    if flag is not None and flag != []:
        return flag
    node: Any = c.config
    try:
        for part in key.split("."):
            node = node[part]
    except KeyError:
        if default is _REQUIRED:
            raise
        return default
    return node
