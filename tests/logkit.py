"""Run folders made by bat's own code, for tests that read them.

Episodes are real ``EpisodeResult`` objects with a deterministic verdict; summaries and
metrics come from the real ``summarize`` and are written by the log layer. No test
writes a ``summary.json`` or ``metrics.json`` shape by hand.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from bat.evaluation.log import run as rundir
from bat.evaluation.log import store
from bat.evaluation.log.episode import (
    EpisodeResult,
    EpisodeTrace,
    InfraError,
    SimulatedUserRecord,
    TurnRecord,
    Usage,
    Verdict,
)
from bat.evaluation.stats import row_of, summarize
from bat.secrets import Scrubber

# What the files of a test's run are written with when the test knows no secret.
NO_SECRETS = Scrubber()


@contextlib.contextmanager
def unsynced() -> Iterator[None]:
    """A test's input files written without waiting for the disk: bat's atomic writes
    fsync every file, which is the point for a user's run (tests/test_atomic.py and
    tests/evaluation/test_resume_leftovers.py check it) but not for the thousands of
    episode files a test makes as its input, where each fsync waited milliseconds on a
    shared disk (4,500 of them: seconds). Only the fsync is skipped; the files are
    written, renamed into place and read back as ever."""
    synced = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = synced


def episode(
    task_id: str,
    attempt: int,
    passed: bool,
    *,
    model: str = "m",
    infra: str | None = None,
    wall: float = 1.0,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    output: str = "done",
    reason: str | None = None,
) -> EpisodeResult:
    """One episode as the engine writes it: passed or failed, or an infrastructure failure."""
    return EpisodeResult(
        task_id=task_id,
        attempt=attempt,
        model=model,
        status="failed" if infra else "completed",
        final_output="" if infra else output,
        infra_error=InfraError(kind=infra, message="no answer") if infra else None,
        trace=EpisodeTrace(
            context_id=f"{task_id}-{attempt}",
            wall_time_s=wall,
            time_to_first_event_s=wall / 10,
            usage=Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
                model_calls=1,
            ),
        ),
        verdict=Verdict(
            passed=passed, reason=reason or ("status: completed" if passed else "output: missing")
        ),
        started_at="2026-01-01T00:00:00.000Z",
        ended_at="2026-01-01T00:00:01.000Z",
    )


def outcomes(letters: dict[str, str], **options) -> list[EpisodeResult]:
    """Episodes from one letter per attempt and task: ``p`` passed, ``f`` failed,
    ``i`` an infrastructure failure (``{"t1": "ppf"}``)."""
    found = []
    for task_id, attempts in letters.items():
        for attempt, letter in enumerate(attempts, 1):
            found.append(
                episode(
                    task_id,
                    attempt,
                    letter == "p",
                    infra="timeout" if letter == "i" else None,
                    **options,
                )
            )
    return found


def new_run(output: Path, run_id: str, tasks: list[str], model: str = "m") -> Path:
    """A finished run's folder with its run.json (one model ``model``, in folder
    ``model``), written by bat's own code; its episodes are the caller's."""
    run_dir = output / run_id
    run_dir.mkdir(parents=True)
    record = rundir.RunRecord(
        run_id=run_id, status="completed", started_at="2026-01-01T00:00:00Z", tasks=tasks
    )
    record.models.append(rundir.ModelEntry(label=model, dir=model, status="completed"))
    rundir.write_run(run_dir, record, scrubber=NO_SECRETS)
    return run_dir


def write_model(
    folder: Path,
    episodes: list[EpisodeResult],
    *,
    model: str = "m",
    k: int | None = None,
    run_id: str | None = None,
) -> Path:
    """A model folder: its episode files, summary.json and metrics.json."""
    folder.mkdir(parents=True, exist_ok=True)
    with unsynced():
        for item in episodes:
            store.write_episode(folder, item.task_id, item, scrubber=NO_SECRETS)
    rows = [row_of(item) for item in episodes]
    order = list(dict.fromkeys(item.task_id for item in episodes))
    most = max((sum(e.task_id == t for e in episodes) for t in order), default=1)
    summary, metrics = summarize(
        rows, k=k or most, model=model, task_order=order, run_id=run_id or folder.parent.name
    )
    store.write_results(folder, summary, metrics, scrubber=NO_SECRETS)
    return folder


def conversation(
    task_id: str,
    attempt: int,
    passed: bool,
    *,
    ended: str | None,
    turns: int,
    fixed: int = 1,
    infra: str | None = None,
    user_tokens: int = 30,
    max_turns: int = 10,
    model: str = "m",
) -> EpisodeResult:
    """An episode of a task with a simulated user, as the runtime records one: ``turns``
    user turns (the first ``fixed`` of them the dataset's), each answered by the agent,
    how it ``ended``, and the user model's tokens apart from the agent's."""
    found = episode(task_id, attempt, passed, model=model, infra=infra, output="booked for 4")
    records = []
    for n in range(turns):
        author = "dataset" if n < fixed else "simulated_user"
        records.append(
            TurnRecord(
                input=f"user turn {n + 1}" if n else "I'd like to book a table",
                status="completed" if n == turns - 1 else "input-required",
                output=f"agent reply {n + 1}",
                author=author,
                wall_time_s=0.1,
            )
        )
    found.trace.turns = records
    found.trace.simulated_user = SimulatedUserRecord(
        model="script:user-rules.yaml",
        instructions_sha256="0" * 64,
        ended=None if infra else ended,
        turns=turns,
        simulated_turns=max(0, turns - fixed),
        max_turns=max_turns,
        usage=Usage(
            prompt_tokens=user_tokens - 10,
            completion_tokens=10,
            total_tokens=user_tokens,
            model_calls=max(1, turns - fixed),
        ),
        last_words="thanks, that's all" if ended == "goal_met" else None,
    )
    return found
