"""Running the episodes of one model concurrently, writing each as it ends, surviving crashes.

Every (task, attempt) is an episode; up to ``concurrency`` run at once on one event
loop. Each result is written to ``episodes/`` atomically the moment it ends, so an
interrupted run keeps everything finished and ``--resume`` only runs what is missing.

**When the agent process dies** (bat started it), one crash must not spoil the rest of
the run. No new episode starts; the episodes in flight end (their connections break);
the agent is restarted; then each of those episodes is run once more, *alone*, on the
restarted agent. An episode that takes the agent down again, on its own, is the cause:
it is recorded as the agent's outcome (status ``error``, agent error ``crashed``) and
counted in pass@k. The others get their real result, and the episodes not yet started
run as if nothing had happened. Restarts are bounded (``evaluation.agent.max_restarts``
per model); when the budget is spent, or the agent cannot be started again, what is left
is recorded as infrastructure failures (``not_run``) with the reason, which
``eval.run --resume --retry-infra`` runs again.

**Cold episodes** (``evaluation.warm_latency``, on by default). An agent's first requests
after it starts pay for its imports, connections and caches: seconds that say nothing of
its steady latency. An episode is *cold* when it starts before any episode has ended on
the agent since bat last (re)started it; an episode ending in an infrastructure failure
does not warm the agent. With ``concurrency`` N, that is the first wave of up to N
episodes after each start (of each replica, after each restart); the episode that takes
a freed slot is warm. Cold episodes are marked ``cold: true``, count for every verdict,
and are left out of the latency figures and of the ETA. An agent bat did not start
(``agent.start: false``) has no start bat saw: nothing is marked.

**When the run's cost budget is reached** (``evaluation.max_cost``, ``--max-cost``: see
``run.budget``), no new episode starts: the workers stop taking from ``pending``, the
episodes in flight end and are written, and the rest are not written at all (missing,
so ``--resume`` runs them), unlike the ``not_run`` records below.

**When the model's key is missing** (its first ``CREDENTIAL_STOP_AFTER`` episodes all end
``authentication_failed``), the rest are recorded ``not_run`` in the same way rather than
each failing alike (:class:`CredentialWatch`).
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat.errors import BatError
from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.log import layout, store
from bat.evaluation.log.batch_writer import BatchWriter
from bat.evaluation.log.episode import (
    AgentError,
    Aux,
    EpisodeCost,
    EpisodeResult,
    EpisodeTrace,
    InfraError,
)
from bat.evaluation.log.outcome import episode_outcome
from bat.evaluation.log.run import now_iso
from bat.evaluation.run.adapter import A2ASession, Observed
from bat.evaluation.run.agent_card import card_answers
from bat.evaluation.run.budget import CostBudget
from bat.evaluation.run.spans import SpanIndex, merge_span_report
from bat.evaluation.verdict import judge_episode
from bat.figures import counted
from bat.secrets import Scrubber

DEATH_GRACE_S = 1.0  # how long a broken connection may take to show as a dead process
WATCH_EVERY_S = 0.05


@dataclass
class Work:
    task: TaskSpec
    attempt: int


@dataclass
class RestartBudget:
    """``evaluation.agent.max_restarts`` of one model, shared by all its replicas."""

    limit: int
    spent: int = 0


# How many of a model's first episodes must all fail on its credentials to stop it early.
CREDENTIAL_STOP_AFTER = 3


@dataclass
class CredentialWatch:
    """Whether a model's first episodes all failed ``authentication_failed`` (its key is
    missing or refused): then every later one would too, and the rest of the model's
    episodes are not run (recorded ``not_run``, for ``--retry-infra`` once the key is
    set) rather than spending the whole run. Shared by the replicas of one model. A
    rate limit may pass, so it never stops a model."""

    limit: int = CREDENTIAL_STOP_AFTER
    seen: int = 0
    failed: int = 0
    stopped: str | None = None  # why, once stopped

    def note(self, agent_error: AgentError | None, passed: bool, key_env: str | None) -> None:
        """Count one finished episode (only the first ``limit`` are looked at)."""
        if self.seen >= self.limit:
            return
        self.seen += 1
        if passed or agent_error is None or agent_error.kind != "authentication_failed":
            self.seen = self.limit  # one that did not fail so: never stop
            return
        self.failed += 1
        if self.failed == self.limit:
            variable = key_env or "the model's API key"
            self.stopped = (
                f"its first {self.limit} episodes failed authentication_failed "
                f"({agent_error.message[:120]}): is {variable} set and valid?"
            )


@dataclass
class Outcome:
    passed: bool
    infra: bool
    agent_error: str | None = None
    cold: bool = False


class EpisodeRunner:
    """Runs a list of episodes against one agent, restarting it when it dies."""

    def __init__(
        self,
        url: str,
        *,
        model: str,
        model_dir: Path,
        shown_url: str | None = None,
        concurrency: int,
        turn_timeout_s: float,
        spans: SpanIndex | None = None,
        agent=None,  # an AgentProcess bat started (alive, restart, describe_exit), or None
        max_restarts: int = 20,
        budget: RestartBudget | None = None,  # shared by the replicas of one model
        credentials: CredentialWatch | None = None,  # shared by the replicas of one model
        key_env: str | None = None,  # the model's key variable, named when it stops early
        on_done: Callable[[Outcome], None] | None = None,
        notice: Callable[[str], None] | None = None,
        scrubber: Scrubber,
        warm_latency: bool = True,
        connect: Callable[[], Any] | None = None,  # a CLI agent's session (bat.agents)
        user_model: Any = None,  # plays the tasks' simulated users (simulated_user.UserModel)
        # An episode's cost, from its tokens (bat.evaluation.cost); None: written without
        pricing: Callable[[EpisodeResult], EpisodeCost] | None = None,
        # The run's cost budget (run.budget), shared by every model and replica; None: none
        cost_budget: CostBudget | None = None,
    ) -> None:
        self.pricing = pricing
        self.cost_budget = cost_budget
        self.user_model = user_model
        self.url = url
        self.make_session = connect
        self.scrubber = scrubber  # every secret of the configuration: kept out of episodes
        self.model = model
        self.model_dir = model_dir
        self.shown_url = shown_url  # the agent's URL without credentials, for episode files
        self.concurrency = concurrency
        self.turn_timeout_s = turn_timeout_s
        self.spans = spans
        self.agent = agent
        self.budget = budget or RestartBudget(max_restarts)
        self.credentials = credentials or CredentialWatch()
        self.key_env = key_env
        self.on_done = on_done
        self.notice = notice or (lambda text: None)
        self.restarts = 0
        self.requests_resent = 0
        self.binding: str | None = None
        self.agent_card: dict | None = None  # the card's JSON as first served (card.json)
        self._session: A2ASession | None = None
        self._writer = BatchWriter()  # episode files, durable in batches off the loop
        self._earlier: set[tuple[str, int]] | None = None  # episode files there at the start
        self.name = "the agent"  # "replica 2" when several share the episodes
        # Whether an episode has ended on the agent since its last start (module's doc):
        # an agent bat did not start, or with warm_latency off, is taken as warm.
        self.warm_latency = warm_latency
        self._warm = agent is None or not warm_latency

    async def run(self, work: list[Work]) -> None:
        """Run every item of ``work``, each written to ``episodes/`` as it ends."""
        pending = deque(work)
        lost = await self.drain(pending)
        if lost is not None:
            reason, unfinished = lost
            self._give_up([*unfinished, *pending], reason)
        elif pending and self.cost_budget is not None:  # stopped by the budget: not written
            self.cost_budget.left_out(len(pending))

    def out_of_budget(self) -> bool:
        """Whether the run's cost budget stopped new episodes (run.budget)."""
        return self.cost_budget is not None and self.cost_budget.stopped

    async def drain(self, pending: deque[Work]) -> tuple[str, list[Work]] | None:
        """Take episodes from ``pending`` (maybe shared with other replicas' runners) until
        it is empty. When the agent is lost for good (its restarts spent, or it does not
        start again), stop and return why, with the episodes it had not finished."""
        layout.episodes_dir(self.model_dir).mkdir(parents=True, exist_ok=True)
        if self._earlier is None:
            self._earlier = store.episodes_done(self.model_dir)
        suspects: deque[Work] = deque()
        try:
            while pending or suspects:
                if not suspects and self.out_of_budget():
                    break  # what is left stays pending: missing, for --resume
                if self.credentials.stopped is not None:
                    return self.credentials.stopped, list(suspects)
                if self.agent is not None and not self.agent.alive():
                    reason = await self._restart()
                    if reason is not None:
                        return reason, list(suspects)
                if suspects:
                    await self._alone(suspects.popleft())
                else:
                    suspects.extend(await self._wave(pending))
        finally:
            try:
                self._writer.flush()  # every episode that ended is on disk (Ctrl-C too)
            finally:
                await self._disconnect()
        return None

    async def _wave(self, pending: deque[Work]) -> list[Work]:
        """Run ``pending`` concurrently until it is empty or the agent dies; returns the
        episodes that were in flight when it died (not written: they run again)."""
        session = await self._connect()
        died = asyncio.Event()
        suspects: list[Work] = []

        async def worker() -> None:
            while pending and not died.is_set() and self.credentials.stopped is None:
                budget = self.cost_budget
                if budget is not None and not budget.may_start():
                    return
                item = pending.popleft()
                try:
                    observed = await self._observe(session, item)
                    if await self._died_under(observed):
                        died.set()
                        suspects.append(item)
                    else:
                        await self._finish(item, observed)
                finally:
                    if budget is not None:
                        budget.landed()

        async def watch() -> None:
            while not died.is_set():
                if not self.agent.alive():
                    died.set()
                await asyncio.sleep(WATCH_EVERY_S)

        tasks = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(pending)))]
        watcher = asyncio.create_task(watch()) if self.agent is not None else None
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in [*tasks, *([watcher] if watcher else [])]:
                task.cancel()
        order = {id(item): n for n, item in enumerate(suspects)}
        return sorted(suspects, key=lambda item: (item.attempt, order[id(item)]))

    async def _alone(self, item: Work) -> None:
        """Run a suspect on its own: if the agent dies again, this episode killed it."""
        session = await self._connect()
        observed = await self._observe(session, item)
        if await self._died_under(observed):
            status = self.agent.describe_exit()
            observed.infra_error = None
            observed.status = "error"
            observed.agent_error = AgentError(
                kind="crashed",
                message=(
                    f"the agent process died during this episode ({status}), and again "
                    "when the episode was run alone on the restarted agent"
                ),
            )
            self.notice(f"[{self.model}] {item.task.id} try {item.attempt} crashes the agent")
        await self._finish(item, observed)

    async def _observe(self, session: A2ASession, item: Work) -> Observed:
        started_at = now_iso()
        cold = not self._warm
        # A simulated user talks to A2A agents only (the checks before a run say so).
        simulated = {"user": item.task.user, "user_model": self.user_model}
        observed = await session.run_episode(
            item.task.turns,
            turn_timeout_s=self.turn_timeout_s,
            templates=item.task.turn_templates,
            work=item,
            **(simulated if item.task.user is not None else {}),
        )
        observed.started_at = started_at
        observed.cold = cold
        if observed.infra_error is None:
            self._warm = True
        return observed

    async def _died_under(self, observed: Observed) -> bool:
        """Whether the agent process died under this episode (its failure says so).

        A connection that broke while the agent lives on is not the harness's failure:
        the agent broke off its own reply (an executor exception does that to a stream),
        which is its outcome. Without a process of ours, a card that still answers says
        the agent lives.
        """
        infra = observed.infra_error
        if infra is None:
            return False
        if self.agent is None:
            if self.make_session is not None:
                return False  # a command-line agent: each turn is a process of its own
            if infra.kind == "crash" and await asyncio.to_thread(card_answers, self.url, 2):
                _broke_off(observed)
            return False
        if infra.kind not in ("crash", "unreachable"):
            return not self.agent.alive()
        deadline = time.monotonic() + DEATH_GRACE_S
        while self.agent.alive():
            if time.monotonic() >= deadline:
                if infra.kind == "crash":
                    _broke_off(observed)
                return False
            await asyncio.sleep(WATCH_EVERY_S)
        return True

    async def _restart(self) -> str | None:
        """Start the dead agent again; the reason it cannot be, or None."""
        await self._disconnect()
        status = self.agent.describe_exit()
        if self.budget.spent >= self.budget.limit:
            return (
                f"{self.name} died ({status}) and its restarts are spent: {self.budget.spent} "
                f"of evaluation.agent.max_restarts = {self.budget.limit}"
            )
        self.restarts += 1
        self.budget.spent += 1
        self._warm = not self.warm_latency  # a fresh start is cold again
        self.notice(
            f"[{self.model}] {self.name} died ({status}); restarting it "
            f"({self.budget.spent} of at most {self.budget.limit})"
        )
        try:
            await asyncio.to_thread(self.agent.restart)
        except asyncio.CancelledError:  # Ctrl-C: the thread must not wait out the start-up
            self.agent.cancelled = True
            raise
        except BatError as exc:
            return f"{self.name} died ({status}) and could not be started again: {exc.message}"
        return None

    def _give_up(self, items: list[Work], reason: str) -> None:
        self.notice(f"[{self.model}] {counted(len(items), 'episode')} not run: {reason}")
        for item in items:
            observed = Observed(
                status="working",
                final_output="",
                trace=EpisodeTrace(context_id=""),
                infra_error=InfraError(kind="not_run", message=reason),
                started_at=now_iso(),
            )
            self._write(item, observed)
        self._writer.flush()

    async def _connect(self) -> A2ASession:
        if self._session is None:
            session = (
                self.make_session()
                if self.make_session is not None
                else A2ASession(self.url, concurrency=self.concurrency)
            )
            await session.__aenter__()
            self._session = session
            self.binding = session.binding
            self.agent_card = self.agent_card or session.card_document
        return self._session

    async def _disconnect(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            self.requests_resent += session.requests_resent
            await session.__aexit__(None, None, None)

    async def _finish(self, item: Work, observed: Observed) -> None:
        if observed.infra_error is None:
            await self._add_spans(observed)
        self._write(item, observed)

    def _write(self, item: Work, observed: Observed) -> None:
        result = EpisodeResult(
            task_id=item.task.id,
            attempt=item.attempt,
            model=self.model,
            status=observed.status,
            expected_outcome=item.task.expected.expected_outcome,
            aux=Aux(agent_url=self.shown_url, attempt_index=item.attempt - 1),
            final_output=observed.final_output,
            infra_error=observed.infra_error,
            agent_error=observed.agent_error,
            trace=observed.trace,
            started_at=observed.started_at,
            ended_at=now_iso(),
            cold=observed.cold,
        )
        result.verdict = judge_episode(item.task.expected, result, item.task.turn_expected)
        if self.pricing is not None:
            result.cost = self.pricing(result)
        if self.cost_budget is not None:
            self.cost_budget.written(result.cost)
        if observed.after_verdict is not None:
            kept = observed.after_verdict(result.verdict.passed)
            if kept is not None and result.trace.workspace is not None:
                result.trace.workspace.kept = kept
        # --retry-infra: an earlier record is kept in retried/, never lost
        stem = item.task.file_stem
        earlier = (stem, item.attempt) in (self._earlier or ())
        store.queue_episode(
            self._writer, self.model_dir, stem, result, earlier=earlier, scrubber=self.scrubber
        )
        self.credentials.note(result.agent_error, result.verdict.passed, self.key_env)
        if self.on_done is not None:
            outcome = episode_outcome(result)
            self.on_done(
                Outcome(outcome.passed, outcome.word == "infra", outcome.agent_error, result.cold)
            )

    async def _add_spans(self, observed: Observed) -> None:
        trace = observed.trace
        if self.spans is None or (trace.tool_source != "none" and trace.usage_source != "none"):
            return
        if await self.spans.wait_for(trace.context_id, len(trace.turns)):
            merge_span_report(trace, self.spans.report(trace.context_id))


def run_on_a_loop(make: Callable[[], Coroutine]) -> None:
    """``asyncio.run(make())``, safe from a Ctrl-C at any moment.

    A Ctrl-C that landed while asyncio made the event loop left a loop half made: its
    ``__del__`` later printed "Exception ignored ... no attribute '_ssock'" with a
    traceback, and the coroutine never awaited a warning, after bat's one line. The loop
    is made with the signals held back (``held_signals``); a coroutine that never started
    is closed, so it warns of nothing.
    """
    runner = None
    coroutine = None
    try:
        with held_signals():
            runner = asyncio.Runner()
            runner.get_loop()  # the loop is made here
        coroutine = make()
        runner.run(coroutine)
    finally:
        try:
            if runner is not None:
                runner.close()  # ends the episodes' task (SIGTERM left it suspended)
        finally:
            if coroutine is not None and inspect.getcoroutinestate(coroutine) == "CORO_CREATED":
                coroutine.close()  # never started: now it warns of nothing


@contextmanager
def held_signals() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back for the block, then deliver them as they came.

    Only the main thread handles signals; elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    # Read first, set inside the try: however the block ends, every handler is put back.
    # (None: a handler set outside Python, which could not be put back; left alone.)
    earlier = {
        kind: handler
        for kind in (signal.SIGINT, signal.SIGTERM)
        if (handler := signal.getsignal(kind)) is not None
    }
    try:
        for kind in earlier:
            signal.signal(kind, lambda signum, frame: caught.append(signum))
        yield
    finally:
        for kind, handler in earlier.items():
            signal.signal(kind, handler)
        for kind in dict.fromkeys(caught):
            signal.raise_signal(kind)  # now handled as bat handles it (KeyboardInterrupt)


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """An OSError raised while ``path`` is written names ``path``.

    The atomic writer fails on its temporary file (``.x.json.1234.tmp``), or names no
    file at all when a write finds the disk full; the user needs to hear which of bat's
    files could not be written.
    """
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def _broke_off(observed: Observed) -> None:
    """Record a reply the living agent broke off as the agent's own error."""
    observed.agent_error = AgentError(
        kind="agent_exception",
        message=f"the agent broke off its reply and lives on ({observed.infra_error.message})",
    )
    observed.infra_error = None
    observed.status = "error"


async def spread(runners: list[EpisodeRunner], work: list[Work]) -> None:
    """Run ``work`` on several replicas, each runner with an agent of its own.

    One queue for all: a runner takes the next episode whenever one of its slots is free,
    so episodes go to the replicas with room (a slow or restarting one takes fewer). Each
    runner handles its own agent's deaths as ``run`` does. A replica lost for good hands
    back the episodes it had not finished, and the others run them; only when every
    replica is lost are the rest recorded as not run.
    """
    pending = deque(work)
    lost: dict[int, str] = {}
    while True:
        live = [runner for runner in runners if id(runner) not in lost]
        if not live:
            reasons = "; ".join(dict.fromkeys(lost.values()))
            runners[0]._give_up(list(pending), f"every replica is lost: {reasons}")
            return
        ended = await asyncio.gather(*(runner.drain(pending) for runner in live))
        for runner, result in zip(live, ended, strict=True):
            if result is not None:
                lost[id(runner)] = result[0]
                runner.notice(f"[{runner.model}] {runner.name} is lost: {result[0]}")
                pending.extendleft(reversed(result[1]))
        if not pending:
            return
        if runners[0].out_of_budget():  # the rest stays missing, for --resume
            runners[0].cost_budget.left_out(len(pending))
            return


def plan(
    tasks: list[TaskSpec],
    k: int,
    done: set[tuple[str, int]],
    retry: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset(),
) -> list[Work]:
    """Every (task, attempt) not in ``done``, or in ``retry``; attempts interleaved, so early
    results span all tasks."""
    return [
        Work(task=task, attempt=attempt)
        for attempt in range(1, k + 1)
        for task in tasks
        if (task.file_stem, attempt) not in done or (task.file_stem, attempt) in retry
    ]
