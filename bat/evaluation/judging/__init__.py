"""LLM judges: four qualitative scores per episode, with the judge's reasoning, and the
task's natural-language assertions decided (``assertions.py``; with
``assertions_in_verdict``, the episode's verdict follows them, written with the scores).

``eval.judge`` calls :func:`judge_run` on a finished run directory (when
``evaluation.qualitative`` is on). Every episode file is read, sent to each judge
(concurrently, ``judge.concurrency`` requests at a time per judge), and written back
atomically with its ``scores`` filled in (format: ``scores.py``). A judgement that fails
marks that episode's scores as errored, with the reason, and the run goes on: one flaky
request must not cost the scores of the other episodes. Judges judge answers: an
infrastructure failure, and an agent error that failed its episode, are not sent
(``EpisodeOutcome.not_judged_because``); their scores say why, and the statistics leave
them out of every judge mean.

Modules: ``rubrics`` (the versioned rubrics and the prompt, within a budget), ``client``
(the HTTP protocols, retries, the API key), ``parse`` (reading a judge's reply),
``cache`` (judgements already paid for), ``scores`` (several judges' outcomes combined
into an episode's scores, whose shape is the log's: ``bat.evaluation.log.scores``).
No Invoke here, and httpx is only imported once a request is made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bat import secrets
from bat.errors import InputError, OperationError
from bat.evaluation.cost import PriceBook, with_judges
from bat.evaluation.inputs.config import JudgeSpec, api_key
from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.judging.assertions import Decision, decisions
from bat.evaluation.judging.cache import JudgeCache, cache_key
from bat.evaluation.judging.client import JudgeClient
from bat.evaluation.judging.parse import JudgeError, parse_judgement, verdict_objects
from bat.evaluation.judging.rubrics import RUBRIC_VERSION, build_prompt
from bat.evaluation.judging.scores import Outcome, combine
from bat.evaluation.judging.scripted import scripted_judges
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import EpisodeCost, EpisodeResult
from bat.evaluation.log.outcome import episode_outcome
from bat.evaluation.log.scores import (
    NOT_JUDGED_AGENT_ERROR,
    NOT_JUDGED_INFRA,
    JudgeScores,
    not_judged,
)
from bat.evaluation.verdict import with_assertions
from bat.figures import counted

__all__ = [
    "CACHE_DIR",
    "NOT_JUDGED_AGENT_ERROR",
    "NOT_JUDGED_INFRA",
    "RUBRIC_VERSION",
    "JudgeError",
    "JudgeSummary",
    "judge_run",
]

CACHE_DIR = layout.JUDGE_CACHE_DIR  # under the run directory; no model folder is named so


@dataclass(frozen=True)
class JudgeSummary:
    """What a :func:`judge_run` did, in counts of episodes (and of HTTP requests)."""

    episodes: int = 0  # episode files found
    judged: int = 0  # sent to the judges (every episode with an answer to judge)
    cached: int = 0  # of those, judged by every judge without an HTTP call
    errors: int = 0  # of those, every judge failed: scores.error is set
    skipped: int = 0  # infrastructure failures: not sent, scores.error says so
    skipped_agent_errors: int = 0  # failed with an agent error: not sent, scores.error says so
    judge_failures: int = 0  # (episode, judge) judgements that failed, errors included
    unreadable: int = 0  # episode files that could not be read (left untouched)
    requests_made: int = 0  # HTTP requests sent, retries included
    undecided: int = 0  # natural-language assertions no judge decided (scores.assertions)
    first_error: str | None = None

    def line(self, judges: str) -> str:
        """The one-line result, e.g. ``judged 200 episodes with openai:x (0 from cache, ...)``."""
        parts = [f"{self.cached} from cache", f"{self.errors} errors"]
        if self.judge_failures > self.errors:
            parts.append(f"{self.judge_failures} failed judgements")
        if self.skipped:
            parts.append(f"{self.skipped} not judged: infrastructure failure")
        if self.skipped_agent_errors:
            parts.append(f"{self.skipped_agent_errors} not judged: agent error")
        if self.unreadable:
            parts.append(f"{self.unreadable} unreadable episode files")
        if self.undecided:
            parts.append(f"{counted(self.undecided, 'assertion')} undecided")
        parts.append(f"{self.requests_made} requests")
        text = f"judged {self.judged} episodes with {judges} ({', '.join(parts)})"
        return f"{text}; first error: {self.first_error}" if self.first_error else text


def judge_run(
    run_dir: Path,
    judges: list[JudgeSpec],
    tasks: dict[str, TaskSpec],
    *,
    env: Mapping[str, str],
    say: Callable[[str], None] = print,
    sleep: Callable[[float], Any] | None = None,
    scrubber: secrets.Scrubber,
    base: Path | None = None,
    only: set[str] | None = None,
    prices: PriceBook | None = None,
) -> JudgeSummary:
    """Score every episode under ``<run_dir>/*/episodes/`` with ``judges``; rewrite the files.

    ``tasks`` (by id) give each episode's expected outcome and user turns; ``env`` holds
    the variables API keys are read from (the caller merges the shell over the agent's
    ``.env``); ``sleep`` waits between retries (default: one Ctrl-C ends); ``scrubber``
    takes the configuration's secrets, and the judges' keys, out of what is written; ``base``
    is the folder a judge's ``script`` is relative to (eval.yaml's); ``only``, when
    given, the ids of the tasks whose episodes are judged (the others are left as they
    are: with ``evaluation.qualitative`` off, the tasks with assertions); ``prices``,
    when given, price each judge's tokens into the episode's ``cost.judge``. Judgements
    are cached under ``<run_dir>/judge-cache/``. A missing API key variable is an
    InputError raised before any request; a failed judgement is never raised, it is
    written into the episode. An episode file that cannot be written back is an
    OperationError.
    """
    run_dir = Path(run_dir)
    if not judges:
        raise InputError("no judge to score with: set judge: in eval.yaml")
    # Every key checked before any request; a judge's own env (bat-cli's judge.env) first.
    keys = [api_key(spec, {**env, **spec.env}) for spec in judges]
    for spec, key in zip(judges, keys, strict=True):  # none of them written anywhere
        found = [key, *secrets.url_secrets(spec.base_url), *secrets.env_secrets(spec.env)]
        scrubber = scrubber.adding(found, [spec.base_url])
    labels = _unique_labels(judges)
    names = ", ".join(labels)
    priced = _judge_pricing(prices, dict(zip(labels, judges, strict=True)))

    rundir.refuse_links(run_dir)  # episodes are written back, the cache written: no link
    problems: list[str] = []  # unreadable episode files are left as they are, and counted
    loaded = list(store.run_episodes(run_dir, problems))
    unreadable = len(problems)
    if not loaded:
        say(f"no episodes to judge in {run_dir}")
        return JudgeSummary(unreadable=unreadable)

    with scripted_judges(judges, base, say) as (judges, identities):
        cache = JudgeCache(layout.judge_cache_dir(run_dir))
        clients = [
            JudgeClient(spec, key, sleep=sleep, notice=say)
            for spec, key in zip(judges, keys, strict=True)
        ]
        # Where each judge's answers come from, for the cache: its URL, or its script's content.
        wheres = [
            where or client.base_url for where, client in zip(identities, clients, strict=True)
        ]
        pools = [
            ThreadPoolExecutor(max_workers=spec.concurrency, thread_name_prefix=f"bat-judge-{n}")
            for n, spec in enumerate(judges)
        ]
        counts = dict.fromkeys(
            (
                "judged",
                "cached",
                "errors",
                "skipped",
                "skipped_agent_errors",
                "judge_failures",
                "undecided",
            ),
            0,
        )
        errored: dict[int, str] = {}  # episode index -> its error, to name the first one
        outcomes: dict[int, dict[str, Outcome]] = {}
        pending: dict[Future[Outcome], tuple[int, str]] = {}
        try:
            for index, (path, episode) in enumerate(loaded):
                if only is not None and episode.task_id not in only:
                    continue
                reason = episode_outcome(episode).not_judged_because
                if reason is not None:
                    counts["skipped" if reason == NOT_JUDGED_INFRA else "skipped_agent_errors"] += 1
                    _save(path, episode, not_judged(reason), scrubber, tasks.get(episode.task_id))
                    continue
                outcomes[index] = {}
                task = tasks.get(episode.task_id)
                for label, client, where, pool in zip(labels, clients, wheres, pools, strict=True):
                    future = pool.submit(_judge_one, client, where, cache, episode, task)
                    pending[future] = (index, label)
            for future in as_completed(pending):
                index, label = pending[future]
                outcomes[index][label] = future.result()
                if len(outcomes[index]) < len(labels):
                    continue
                ordered = {name: outcomes[index][name] for name in labels}
                path, episode = loaded[index]
                task = tasks.get(episode.task_id)
                asked = list(task.expected.assertions) if task is not None else []
                scores = combine(RUBRIC_VERSION, ordered, asked)
                _save(path, episode, scores, scrubber, task, priced(episode, scores))
                counts["judged"] += 1
                counts["cached"] += all(o.cached for o in ordered.values())
                counts["judge_failures"] += len(scores.judge_errors)
                counts["undecided"] += sum(entry.passed is None for entry in scores.assertions)
                if scores.error:
                    counts["errors"] += 1
                    errored[index] = f"{episode.task_id} try {episode.attempt}: {scores.error}"
        except BaseException:
            # Ctrl-C: what was written and cached stays; queued judgements are dropped and
            # requests in flight are not waited for.
            for client in clients:
                client.cancel()  # a worker waiting out a Retry-After stops waiting
            for pool in pools:
                pool.shutdown(wait=False, cancel_futures=True)
            raise
        for pool in pools:
            pool.shutdown(wait=True)
        for client in clients:
            client.close()
        summary = JudgeSummary(
            episodes=len(loaded) + unreadable,
            unreadable=unreadable,
            requests_made=sum(client.requests_made for client in clients),
            first_error=errored[min(errored)] if errored else None,
            **counts,
        )
        say(summary.line(names))
        return summary


def _judge_one(
    client: JudgeClient,
    where: str,
    cache: JudgeCache,
    episode: EpisodeResult,
    task: TaskSpec | None,
) -> Outcome:
    """One judge's verdict on one episode, from the cache or over HTTP; never raises.
    ``where`` is where its answers come from, for the cache (its URL, or its script's)."""
    spec = client.spec
    try:
        prompt = build_prompt(episode, task, spec.prompts, spec.budget_chars)
        key = cache_key(spec.label, where, RUBRIC_VERSION, prompt.sha256)
        count = len(task.expected.assertions) if task is not None else 0
        made_for = f"{episode.model}/{episode.task_id}/{episode.attempt}"
        found = cache.entry(key, made_for)
        if found is not None:
            reply, tokens = found
            try:
                return Outcome(
                    parse_judgement(reply),
                    cached=True,
                    assertions=_decided(reply, count),
                    tokens=tokens,
                )
            except JudgeError:
                pass  # a reply the parser no longer accepts: ask again
        answer = client.ask(prompt.system, prompt.user)
        reply, tokens = answer.text, (answer.prompt_tokens, answer.completion_tokens)
        judgement = parse_judgement(reply)
        # The cache only saves money: a full disk must not lose the scores.
        with contextlib.suppress(OSError):
            cache.put(
                key,
                reply,
                tokens,
                episode=made_for,
                judge=spec.label,
                base_url=client.shown_base_url if where == client.base_url else where,
                rubric_version=RUBRIC_VERSION,
                prompt_sha256=prompt.sha256,
                task_id=episode.task_id,
            )
        return Outcome(judgement, assertions=_decided(reply, count), tokens=tokens)
    except JudgeError as exc:
        return Outcome(None, client.scrub(str(exc)))
    except Exception as exc:  # a bug must cost one judgement, not the run
        return Outcome(None, client.scrub(f"internal error: {type(exc).__name__}: {exc}"))


def _decided(reply: str, count: int) -> list[Decision]:
    """The task's ``count`` assertions as the judge's ``reply`` decided them (a reply
    whose scores parsed)."""
    return decisions(verdict_objects(reply), count) if count else []


def _judge_pricing(
    prices: PriceBook | None, specs: dict[str, JudgeSpec]
) -> Callable[[EpisodeResult, JudgeScores], EpisodeCost | None]:
    """What gives a judged episode its cost with the judges' part (None: no prices)."""

    def priced(episode: EpisodeResult, scores: JudgeScores) -> EpisodeCost | None:
        if prices is None:
            return None
        paid = [(specs[label], tokens) for label, tokens in scores.usage.items() if label in specs]
        return with_judges(episode.cost, prices, paid)

    return priced


def _save(
    path: Path,
    episode: EpisodeResult,
    scores: JudgeScores,
    scrubber: secrets.Scrubber,
    task: TaskSpec | None = None,
    cost: EpisodeCost | None = None,
) -> None:
    """Write the episode back with ``scores``, unless they are already there; with its
    verdict's assertion checks made again from them, when the task puts its assertions
    in the verdict, and its ``cost`` (one atomic write for all)."""
    verdict = None
    if task is not None and episode.verdict is not None and task.expected.assertions_in_verdict:
        judged = episode.model_copy(update={"scores": scores})
        verdict = with_assertions(episode.verdict, task.expected, judged, task.turn_expected)
    try:
        store.write_scores(path, episode, scores, scrubber=scrubber, verdict=verdict, cost=cost)
    except OSError as exc:
        raise OperationError(f"cannot write {path}: {exc.strerror or exc}") from None


def _unique_labels(judges: list[JudgeSpec]) -> list[str]:
    """``provider:model`` per judge; a repeated one gets ``#2``, ``#3``...."""
    labels: list[str] = []
    for spec in judges:
        label, n = spec.label, 1
        while label in labels:
            n += 1
            label = f"{spec.label}#{n}"
        labels.append(label)
    return labels
