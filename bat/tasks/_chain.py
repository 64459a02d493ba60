"""What the tasks of one command line hand each other, typed, in the Invoke configuration.

Invoke runs the tasks of a command line (``bat build eval.run push``, and the ``pre`` and
``post`` tasks of each) one after the other with one configuration object, and keeps a
task's changes to it for the tasks after it. bat keeps one :class:`Chain` there, under
one key, instead of loose keys: the evaluation's run context (``bat.evaluation.context``)
and what the image tasks built. A task run alone starts a chain of its own.

Invoke copies every value of its configuration each time it merges the layers (once per
task), so a :class:`Chain` and the run context answer a copy with themselves: one command
line, one object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from invoke import Config, Context

    from bat.evaluation.context import RunContext

KEY = "bat_chain"


@dataclass(eq=False)
class Chain:
    """One command line's state shared between its tasks."""

    evaluation: RunContext | None = None
    # The image tasks: the flags given to them so far (``bat build --version 2 push``
    # pushes version 2) and the images built so far (push builds only what is not).
    image_flags: dict[str, Any] = field(default_factory=dict)
    images_built: list[Any] = field(default_factory=list)

    def __copy__(self) -> Chain:
        return self

    def __deepcopy__(self, memo: dict) -> Chain:
        return self


def chain(c: Context) -> Chain:
    """The command line's chain, made by the first task that asks."""
    found = chain_of(c.config)
    if found is None:
        found = Chain()
        c.config[KEY] = found
    return found


def chain_of(config: Config) -> Chain | None:
    found = config.get(KEY) if config is not None else None
    return found if isinstance(found, Chain) else None


def run_context(c: Context, config_file: str | Path) -> RunContext:
    """The evaluation's run context: the one an earlier task of this command line made,
    else a new one reading ``config_file``."""
    from bat.evaluation.context import RunContext

    state = chain(c)
    if state.evaluation is None:
        state.evaluation = RunContext(config_file=Path(config_file))
    return state.evaluation


def scrub_of(config: Config | None) -> Callable[[str], str] | None:
    """What a failure's message goes through before it is printed: the secrets of the
    evaluation's configuration, when this command line has read it (None otherwise; the
    message of a configuration that could not be read holds no secret of it)."""
    state = chain_of(config) if config is not None else None
    if state is None or state.evaluation is None:
        return None
    scrubber = state.evaluation.known_scrubber()
    return None if scrubber is None else scrubber.text
