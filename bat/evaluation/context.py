"""One command line's evaluation: what its stages share, made once and handed on.

``bat eval.run`` is a chain of stages (the run, ``eval.judge``, ``eval.summarize``,
``eval.gate``, ``eval.plot``, ``eval.export``, ``conclude``), and each stage is also a
command of its own. Before this object existed the stages passed ten untyped keys of the
Invoke configuration to each other, and the secrets, the summaries made so far and the
infrastructure failures counted so far lived in module globals: every stage parsed
eval.yaml again, read ``.env`` again, and a test running bat twice in one process saw
the first run's secrets in the second.

A :class:`RunContext` is made by the first stage of a command line that needs one (a
stage run alone makes its own) and handed to the stages after it through the Invoke
configuration (``bat.tasks._chain``). It holds:

* the resolved configuration, read once (:attr:`resolved`);
* the environment the judges read, computed once: the shell over the agent's ``.env``
  (:attr:`env`; the agent is started with its ``env`` map on top of it);
* the secret scrubber of that configuration (:attr:`scrubber`), which every file bat
  writes and every line it prints goes through;
* the run folder the stages work on (:attr:`run_dir`, chosen once by the first stage
  that works on a run) and what is known of it (:attr:`summaries`, :attr:`infra`: made
  by one stage, reused by the next while the episode files are unchanged);
* what the stages tell each other: the command line's gates and exports, whether the
  run is a dry run, whether the stages are chained after a run, the numbers' trust
  problems and the gates that failed, the folder to plot, the viewer beside the run.

It is a plain object, free of Invoke, so the pipeline's functions take it as they would
take any argument.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bat.secrets import Scrubber, config_secrets, config_urls

if TYPE_CHECKING:
    from bat.evaluation.inputs.config import ResolvedConfig
    from bat.evaluation.inputs.gate_specs import GateSpec
    from bat.evaluation.log.summary import Summary

Say = Callable[[str], None]


@dataclass(eq=False)
class RunContext:
    """What the stages of one command line share (see the module's docstring)."""

    config_file: Path | None = Path("eval/eval.yaml")  # None: there is none to read
    # What the stages tell each other.
    run_dir: Path | None = None
    dry_run: bool = False
    chained: bool = False  # a stage runs after eval.run, eval.judge or eval.merge
    cli_gates: list[GateSpec] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)  # NAME:PATH, as --export gave them
    untrusted: list[str] = field(default_factory=list)
    gates_failed: list[str] = field(default_factory=list)
    plot_folder: Path | None = None
    viewer: Any = None  # the viewer served beside the run (eval.run --view)
    # What is known of the run folder: model folder -> (what it was made from, result).
    summaries: dict[Path, tuple[tuple, Summary]] = field(default_factory=dict)
    infra: dict[Path, tuple[str, set[tuple[str, int]]]] = field(default_factory=dict)
    image: str | None = None  # eval.run --image: the agent's image, over eval.yaml's
    team_prices: Any = None  # bat.yaml's eval.prices (inputs.prices.Prices), under eval.yaml's
    _extra_secrets: list[str] = field(default_factory=list)
    _given: ResolvedConfig | None = None

    # Invoke copies every value of its configuration when it merges its layers (once
    # per task): a copy of this object would split one command line's state in two.
    def __copy__(self) -> RunContext:
        return self

    def __deepcopy__(self, memo: dict) -> RunContext:
        return self

    @classmethod
    def of(cls, resolved: ResolvedConfig, **values: Any) -> RunContext:
        """A context for a configuration already resolved (a library caller's)."""
        return cls(config_file=resolved.file, _given=resolved, **values)

    # -- the configuration and its environment --------------------------------------

    @cached_property
    def resolved(self) -> ResolvedConfig:
        """eval.yaml, read, validated and resolved once (an error is raised again on each
        look, nothing cached)."""
        if self._given is not None:
            return self._given
        from bat.errors import InputError
        from bat.evaluation.inputs.config import load_config

        if self.config_file is None:
            raise InputError("this needs an evaluation configuration (eval.yaml)")
        return load_config(self.config_file, image=self.image)

    def with_image(self, reference: str) -> None:
        """Evaluate the agent from its container image ``reference`` (eval.run --image):
        eval.yaml is read with it, as if it were its ``evaluation.agent.image``, so the
        settings that need an image (``replicas``) take the one given here."""
        if self._given is not None:
            self.__dict__["resolved"] = self._given.with_image(reference)
        else:
            self.image = reference
            self.__dict__.pop("resolved", None)
        self.__dict__.pop("scrubber", None)

    @cached_property
    def env(self) -> dict[str, str]:
        """The environment the judges read their keys from: the shell over the agent's
        ``.env`` (read once, with eval.yaml; the shell wins, as for any program)."""
        return self.resolved.environment

    @cached_property
    def prices(self) -> Any:
        """The run's :class:`bat.evaluation.cost.PriceBook`: eval.yaml's ``prices:`` over
        bat.yaml's over genai-prices'; an unpriced model is warned of once."""
        from bat.evaluation.cost import PRICES_URL, PriceBook

        config = self.resolved.config
        update = config.evaluation.update_prices
        url = None if update is False else PRICES_URL if update is True else update
        return PriceBook(config.prices, self.team_prices, say=self.warn, update_from=url)

    # -- secrets -------------------------------------------------------------------

    @cached_property
    def scrubber(self) -> Scrubber:
        """Every secret of the configuration (passwords and keys in its URLs, its ``env``
        maps' values, each judge's key) and whatever :meth:`remember` added.

        A stage that needs no configuration (``eval.summarize --run``, ``eval.plot
        --folder``) works without a readable eval.yaml: then there is no secret of it to
        hide (the files it reads were scrubbed when written), and the stage that needs
        the configuration says what is wrong with it."""
        from bat.errors import InputError

        try:
            resolved = self.resolved
        except InputError:
            return Scrubber(self._extra_secrets)
        found = config_secrets(resolved, self.env)
        return Scrubber([*found, *self._extra_secrets], config_urls(resolved))

    def known_scrubber(self) -> Scrubber | None:
        """The scrubber when the configuration has been read already, else None; never
        raises (a failure is being reported when this is asked)."""
        if self._given is None and "resolved" not in self.__dict__:
            return None
        return self.scrubber

    def remember(self, values: Iterable[str | None]) -> None:
        """Hide ``values`` too from everything written or printed from now on."""
        self._extra_secrets.extend(v for v in values if v)
        self.__dict__.pop("scrubber", None)

    def scrub(self, text: str) -> str:
        return self.scrubber.text(text)

    def say(self, out: Say = print) -> Say:
        """``out`` printing through the scrubber (progress lines quote URLs and answers)."""
        return lambda text: out(self.scrub(text))

    def warn(self, text: str) -> None:
        """A warning: on stderr, scrubbed, as every command of bat says them."""
        print(f"warning: {self.scrub(text)}", file=sys.stderr)

    # -- the viewer beside the run ---------------------------------------------------

    def stop_viewer(self) -> None:
        viewer, self.viewer = self.viewer, None
        if viewer is not None:
            viewer.stop()
