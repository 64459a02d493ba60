"""Shards: one run's plan of episodes cut into N slices that run on N machines at once.

Why: the agent under test, not bat, limits how fast a run goes, and a CI job has a wall
clock. Teams already have a way to run N jobs at once (a CI matrix, GitLab's
``parallel:``, a Kubernetes Indexed Job); ``bat eval.run --shard I/N`` makes each job
run its slice, and ``bat eval.merge`` puts the slices back together into the run an
unsharded ``eval.run`` would have written.

The plan is every (model, attempt, task) of the run, in the order ``eval.run`` goes
through it: models in eval.yaml's order, then attempts, then the dataset's tasks. Item
``n`` of that plan (from 0) belongs to slice ``n mod N + 1``: deterministic (the same
dataset and eval.yaml give the same slices on every machine), balanced (slice sizes
differ by one at most, for every model), and independent of what is already done (a
resumed shard runs the same slice).

``I/N`` comes from the command line, or from the engine's own variables:

* ``--shard 2/4``: slice 2 of 4 (GitHub Actions: ``--shard ${{ matrix.shard }}/4``);
* ``--shard auto``: GitLab's ``CI_NODE_INDEX`` and ``CI_NODE_TOTAL`` (``parallel: N``,
  counted from 1);
* ``--shard auto/N``: the index of ``JOB_COMPLETION_INDEX`` (a Kubernetes Indexed Job,
  counted from 0), else ``CI_NODE_INDEX``, of N slices.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bat.errors import UsageError
from bat.evaluation.log.run import SHARDS_MOST
from bat.figures import integer
from bat.numbers import whole_number

_FORM = re.compile(r"^\s*([0-9]+|auto)\s*(?:/\s*([0-9]+)\s*)?$", re.ASCII)
MOST = SHARDS_MOST  # slices: more would be one machine per episode of any real run


@dataclass(frozen=True)
class Shard:
    """Slice ``index`` (from 1) of ``total``."""

    index: int
    total: int

    @classmethod
    def parse(cls, text: str, env: Mapping[str, str] | None = None) -> Shard:
        """``I/N``, ``auto`` or ``auto/N`` (see the module); a UsageError names what is
        wrong with it."""
        env = os.environ if env is None else env
        found = _FORM.match(text or "")
        if not found:
            raise UsageError(f"--shard {_shown(text)}: expected I/N (e.g. 2/4), auto or auto/N")
        index_text, total_text = found[1], found[2]
        if index_text == "auto":
            index, total = _from_engine(env, total_text)
        elif total_text is None:
            raise UsageError(f"--shard {_shown(text)}: give the number of slices too, as I/N")
        else:
            index, total = _number(index_text, text), _number(total_text, text)
        if not 1 <= total <= MOST:
            most = integer(MOST)
            raise UsageError(f"--shard {_shown(text)}: the number of slices is 1 to {most}")
        if not 1 <= index <= total:
            raise UsageError(f"--shard {_shown(text)}: the slice is 1 to {total} (counted from 1)")
        return cls(index, total)

    @classmethod
    def from_record(cls, data: Mapping[str, Any] | None) -> Shard | None:
        """The shard run.json records (``{"index", "total"}``), or None. The log's model
        (:class:`~bat.evaluation.log.run.RunRecord`) has checked it when run.json was
        read: whole numbers, 1 <= index <= total <= :data:`MOST`."""
        if data is None:
            return None
        return cls(data["index"], data["total"])

    def record(self) -> dict[str, Any]:
        return {"index": self.index, "total": self.total, "of": PLAN}

    def slicer(self, model: int, tasks: list[Any], k: int) -> Any:
        """For model ``model`` (from 0) of a run of ``tasks`` × ``k``: a function telling
        whether a planned (task, attempt) is in this slice."""
        position = {id(task): n for n, task in enumerate(tasks)}
        count = len(tasks)
        return lambda task, attempt: self.keeps(model, attempt, position[id(task)], count, k)

    def keeps(self, model: int, attempt: int, task: int, tasks: int, k: int) -> bool:
        """Whether (model, attempt, task) is in this slice (indices from 0, attempts
        from 1; ``tasks`` and ``k``: the run's dataset size and attempts)."""
        item = (model * k + attempt - 1) * tasks + task
        return item % self.total == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


PLAN = "item n of (model, attempt, task) in eval.run's order, from 0, is slice n mod total + 1"


def _from_engine(env: Mapping[str, str], total_text: str | None) -> tuple[int, int]:
    """(index from 1, total) of the CI engine's variables."""
    if total_text is None:
        index, total = env.get("CI_NODE_INDEX"), env.get("CI_NODE_TOTAL")
        if not (index and total):
            raise UsageError(
                "--shard auto: CI_NODE_INDEX and CI_NODE_TOTAL are not set (GitLab sets them "
                "for a job with parallel: N); elsewhere give --shard I/N, or auto/N in a "
                "Kubernetes Indexed Job"
            )
        return _count(index, "CI_NODE_INDEX"), _count(total, "CI_NODE_TOTAL")
    completion = env.get("JOB_COMPLETION_INDEX")
    if completion:
        total = _number(total_text, f"auto/{total_text}")
        return _count(completion, "JOB_COMPLETION_INDEX", zero=True) + 1, total
    node = env.get("CI_NODE_INDEX")
    if node:
        return _count(node, "CI_NODE_INDEX"), _number(total_text, f"auto/{total_text}")
    raise UsageError(
        f"--shard auto/{total_text}: neither JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) "
        "nor CI_NODE_INDEX (GitLab) is set; give --shard I/N"
    )


def _number(digits: str, text: str) -> int:
    """A number of ``--shard``; one too long to be a count is refused by its length."""
    try:
        return whole_number(digits)
    except ValueError as error:
        raise UsageError(f"--shard {_shown(text)}: {error}") from None


def _count(text: str, name: str, zero: bool = False) -> int:
    """A CI engine's variable: ASCII digits (``bat.numbers``), from 0 or from 1."""
    try:
        return whole_number(text, lowest=0 if zero else 1)
    except ValueError as error:
        raise UsageError(f"{name}={_shown(text)}: {error}") from None


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:39] + "…")
