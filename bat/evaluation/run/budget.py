"""A run's cost budget while its episodes run (``evaluation.max_cost``, ``--max-cost``).

One budget for the whole run, shared by its models (run one after another) and by the
replicas of a model. Before an episode starts, the runner asks :meth:`CostBudget.may_start`:
no, once what was *spent* plus the *estimate* of the episodes in flight reaches the limit.

* Spent: what the run's episodes cost as they ran, their agents' and simulated users'
  parts (``EpisodeCost.agent`` + ``user``) — those already in the run folder (a
  ``--resume``) and each one written since, as it is written. One measure everywhere:
  the judges' part is never in it, so a resumed run compares the same sum.
* In flight: episodes started and not yet written, each estimated at the mean cost of an
  episode of this run so far; before one has ended, the last run's mean (the agent's and
  the user's part: ``pipeline`` finds it), else 0.

The judges score the episodes after they all ran, so their cost is not known while the
episodes run and is never counted; the messages say "spent by the episodes" and that
judging comes on top (docs/eval.md says so).

The runner is one event loop: no lock is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bat.evaluation.log.episode import EpisodeCost
from bat.evaluation.log.run import ModelEntry
from bat.figures import counted, money


@dataclass
class CostBudget:
    limit: float
    currency: str = "USD"
    spent: float = 0.0
    earlier_mean: float | None = None  # the last run's cost per episode (None: no run)
    say: Callable[[str], None] = field(default=lambda line: None)
    in_flight: int = 0
    ended: int = 0  # episodes of this session written with a cost
    ended_cost: float = 0.0
    stopped: bool = False
    not_scheduled: int = 0  # episodes left out once it stopped (all models)

    def mean(self) -> float:
        """The estimate of one episode in flight."""
        if self.ended:
            return self.ended_cost / self.ended
        return self.earlier_mean or 0.0

    def committed(self) -> float:
        """Spent, plus the estimate of the episodes in flight."""
        return self.spent + self.in_flight * self.mean()

    def may_start(self) -> bool:
        """Whether one more episode may start (it is then counted in flight)."""
        if self.closed():
            return False
        self.in_flight += 1
        return True

    def closed(self) -> bool:
        """Whether no episode may start any more (said once, when it first is)."""
        if not self.stopped and self.committed() >= self.limit:
            self.stopped = True
            flying = (
                f" and {counted(self.in_flight, 'episode')} in flight (about "
                f"{self._money(self.in_flight * self.mean())})"
                if self.in_flight
                else ""
            )
            self.say(
                f"budget reached: {self._money(self.spent)} spent by the episodes{flying} "
                f"of max_cost {self._money(self.limit)}; no new episode starts (judging "
                "comes on top)"
            )
        return self.stopped

    def landed(self) -> None:
        """An episode started by :meth:`may_start` is no longer in flight."""
        self.in_flight = max(self.in_flight - 1, 0)

    def written(self, cost: EpisodeCost | None) -> None:
        """An episode was written with ``cost`` (None: no price book)."""
        if cost is None:
            return
        spent = cost.running
        self.spent += spent
        self.ended += 1
        self.ended_cost += spent

    def left_out(self, episodes: int) -> None:
        self.not_scheduled += episodes

    def _money(self, amount: float) -> str:
        return money(amount, self.currency)

    def settle(self, record: ModelEntry, before: int, planned: int) -> None:
        """Fill a model's run.json entry after its ``planned`` episodes: those the budget
        left out since ``before`` (``not_scheduled`` then) make it ``stopped``."""
        left = self.not_scheduled - before
        record.episodes_run += planned - left
        record.status = "stopped" if left else "completed"
        if left:
            record.reason = self.stopped_reason(left)

    def stopped_reason(self, episodes: int) -> str:
        """A model's run.json reason when the budget left ``episodes`` of it unrun."""
        return (
            f"the budget (max_cost {self._money(self.limit)}) was reached with "
            f"{self._money(self.spent)} spent by the episodes (their agents and simulated "
            f"users; judging comes on top): {counted(episodes, 'episode')} not run"
        )
