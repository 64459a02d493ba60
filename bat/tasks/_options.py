"""What the task modules share: the ``command`` decorator and flag-or-config lookups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from invoke import Context, Task, task


class BatTask(Task):
    """An Invoke task with explicit short flags and an optional variadic positional.

    Invoke invents a short flag for every option from its letters, which gives the same
    option different letters in different commands. bat's short flags are exactly the
    ones the command tree documents (``short={"clients": "c"}``). ``variadic`` lets the
    program read ``bat add.client a b`` as ``bat add.client a,b``.
    """

    def __init__(
        self,
        body: Callable,
        short: dict[str, str] | None = None,
        variadic: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("auto_shortflags", False)
        super().__init__(body, **kwargs)
        self.short = dict(short or {})
        self.variadic = variadic

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        if name in self.short:
            opts["names"].append(self.short[name])
        return opts


def command(**kwargs: Any) -> Callable[[Callable], BatTask]:
    """``@task`` for bat's commands: ``@command(short={...}, help={...})``."""
    return task(klass=BatTask, **kwargs)


def setting(c: Context, flag: Any, key: str) -> Any:
    """The flag's value when given, else the configured ``key`` (e.g. ``init.agent.port``)."""
    if flag is not None and flag != []:
        return flag
    node: Any = c.config
    for part in key.split("."):
        node = node[part]
    return node
