"""Running the episodes of one model concurrently and writing each one as it ends.

Every (task, attempt) is an episode; up to ``concurrency`` run at once on one event
loop. Each result is written to ``episodes/`` atomically the moment it ends, so an
interrupted run keeps everything finished and ``--resume`` only runs what is missing.
A failed episode is recorded with its reason and never stops the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from bat.atomic import write_text_atomic
from bat.evaluation.adapter import A2ASession, Observed
from bat.evaluation.dataset import TaskSpec
from bat.evaluation.records import EpisodeResult, InfraError
from bat.evaluation.rundir import episode_path, now_iso
from bat.evaluation.spans import SpanIndex, merge_span_report
from bat.evaluation.verdict import judge_episode

# How long an episode waits for its spans when the stream did not report everything.
SPANS_WAIT_S = 5.0
# After this many episodes without a single span in the file, stop waiting for spans.
SPANS_SILENT_AFTER = 3


@dataclass
class Work:
    task: TaskSpec
    attempt: int


@dataclass
class Outcome:
    passed: bool
    infra: bool


class EpisodeRunner:
    """Runs a list of episodes against one open A2A session."""

    def __init__(
        self,
        session: A2ASession,
        *,
        model: str,
        model_dir,
        concurrency: int,
        turn_timeout_s: float,
        spans: SpanIndex | None = None,
        agent_alive: Callable[[], bool] | None = None,
        on_done: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.session = session
        self.model = model
        self.model_dir = model_dir
        self.concurrency = concurrency
        self.turn_timeout_s = turn_timeout_s
        self.spans = spans
        self.agent_alive = agent_alive
        self.on_done = on_done
        self._span_waits_unanswered = 0

    async def run(self, work: list[Work]) -> list[Outcome]:
        """Run every item of ``work``; returns their outcomes in completion order."""
        (self.model_dir / "episodes").mkdir(parents=True, exist_ok=True)
        queue: asyncio.Queue[Work] = asyncio.Queue()
        for item in work:
            queue.put_nowait(item)
        outcomes: list[Outcome] = []

        async def worker() -> None:
            while True:
                try:
                    item = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                outcomes.append(await self.episode(item))

        workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(work)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
        return outcomes

    async def episode(self, item: Work) -> Outcome:
        started_at = now_iso()
        observed = await self.session.run_episode(
            item.task.turns, turn_timeout_s=self.turn_timeout_s
        )
        if (
            observed.infra_error is not None
            and self.agent_alive is not None
            and not self.agent_alive()
        ):
            observed.infra_error = InfraError(
                kind="crash", message=f"the agent process is gone ({observed.infra_error.message})"
            )
        if observed.infra_error is None:
            await self._add_spans(observed)
        result = EpisodeResult(
            task_id=item.task.id,
            attempt=item.attempt,
            model=self.model,
            status=observed.status,
            final_output=observed.final_output,
            infra_error=observed.infra_error,
            trace=observed.trace,
            started_at=started_at,
            ended_at=now_iso(),
        )
        result.verdict = judge_episode(item.task.expected, result)
        write_text_atomic(
            episode_path(self.model_dir, item.task.file_stem, item.attempt), result.to_json()
        )
        outcome = Outcome(passed=result.verdict.passed, infra=observed.infra_error is not None)
        if self.on_done is not None:
            self.on_done(outcome)
        return outcome

    async def _add_spans(self, observed: Observed) -> None:
        trace = observed.trace
        if self.spans is None or (trace.tool_source != "none" and trace.usage_source != "none"):
            return
        if self._span_waits_unanswered >= SPANS_SILENT_AFTER and self.spans.total == 0:
            return  # this agent writes no spans: do not make every episode wait for them
        turns = len(trace.turns)
        if await self.spans.wait_for(trace.context_id, turns, SPANS_WAIT_S):
            merge_span_report(trace, self.spans.report(trace.context_id))
        else:
            self._span_waits_unanswered += 1


def plan(tasks: list[TaskSpec], k: int, done: set[tuple[str, int]]) -> list[Work]:
    """Every (task, attempt) not in ``done``; attempts interleaved, so early results span all
    tasks."""
    return [
        Work(task=task, attempt=attempt)
        for attempt in range(1, k + 1)
        for task in tasks
        if (task.file_stem, attempt) not in done
    ]
