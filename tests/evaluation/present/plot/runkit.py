"""Run folders for the chart and report tests, written by bat's own code.

Episodes are real :class:`EpisodeResult` objects (verdicts, infrastructure failures,
judge scores) written by ``store.write_episode``; ``metrics.json`` and ``summary.json``
come from ``metrics.row_of`` and ``metrics.summarize`` through ``store.write_results``.
Only :func:`write_old_results` writes a shape by hand: the ``bat.metrics/1`` format of
earlier bat versions, which no code of today writes any more.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bat.evaluation import stats as metrics
from bat.evaluation.cost import episode_cost
from bat.evaluation.inputs.dataset import TaskSpec
from bat.evaluation.log import layout, store
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import (
    AgentError,
    EpisodeResult,
    EpisodeTrace,
    InfraError,
    Usage,
    Verdict,
)
from bat.evaluation.log.scores import not_judged
from bat.evaluation.log.summary import EpisodeRow
from tests.logkit import NO_SECRETS, unsynced

ALL_CHARTS = ["pass_rate", "task_heatmap", "pass_hat_k", "latency", "tokens", "judge_scores"]
DIMENSIONS = [
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
]
HOSTILE_ID = "<script>alert('id')</script>"
HOSTILE_OUTPUT = "<img src=x onerror=alert(1)><script>alert('out')</script>"
HOSTILE_REASON = "output: missing '</td></tr><script>alert(\"reason\")</script>'"
HOSTILE_JUDGE = "</details><script>alert('judge')</script>"
TASKS = {
    "weather-rome": "ppf",
    "weather-paris": "ppp",
    "calc-add": "pfi",
    "search-docs": "fff",
}


def model_dir_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", model)


def episode_of(
    task_id: str,
    attempt: int,
    letter: str,
    *,
    model: str,
    position: int = 0,
    judge: bool = False,
    output: str = "done",
    reason_fail: str = "output: missing 'Paris'",
    judge_reasoning: str = "on topic",
    judge_shift: float = 0.0,
) -> EpisodeResult:
    """One episode: ``p`` passed, ``f`` failed, ``a`` an agent error (failed), ``i`` an
    infrastructure failure. ``judge_shift`` moves every judge score (a negative one makes
    the judge doubt what passed)."""
    passed = letter == "p"
    infra = letter == "i"
    wall = round(0.2 + 0.05 * position + 0.1 * attempt, 4)
    prompt, completion = 40 + position, 10 + attempt
    if infra:
        verdict = Verdict(passed=False, reason="infrastructure: timeout: no answer in 30 s")
    else:
        verdict = Verdict(passed=passed, reason="status: 'completed'" if passed else reason_fail)
    scores = None
    if judge and infra:
        scores = not_judged()  # what eval.judge writes for one
    elif judge:
        scores = {
            "rubric_version": "bat.rubric/1",
            "judges": ["openai:judge"],
            "dimensions": {
                d: {
                    "score": round(
                        0.5 + 0.1 * (i % 4) + (0.2 if passed else -0.3) + judge_shift, 2
                    ),
                    "reasoning": f"{judge_reasoning} ({d})",
                }
                for i, d in enumerate(DIMENSIONS)
            },
            "error": None,
            "judge_errors": {},
        }
    return EpisodeResult(
        task_id=task_id,
        attempt=attempt,
        model=model,
        status="unknown" if infra else "failed" if letter == "a" else "completed",
        final_output="" if infra else output,
        infra_error=InfraError(kind="timeout", message="no answer in 30 s") if infra else None,
        agent_error=(
            AgentError(kind="model_error", message="Error code: 500", code=500)
            if letter == "a"
            else None
        ),
        trace=EpisodeTrace(
            context_id=f"c-{position}-{attempt}",
            wall_time_s=wall,
            time_to_first_event_s=0.05,
            usage=Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=prompt + completion,
                model_calls=1,
            ),
        ),
        verdict=verdict,
        scores=scores,
        started_at="2026-01-01T00:00:00.000Z",
        ended_at="2026-01-01T00:00:01.000Z",
    )


def write_run(
    base: Path,
    run_id: str,
    model: str,
    outcomes: dict[str, str],
    *,
    k: int = 3,
    judge: bool = False,
    old_format: bool = False,
    prices: Any = None,
    **episode_options: str,
) -> Path:
    """One model's folder of a run: run.json, episode files, summary.json, metrics.json.

    ``outcomes`` maps a task id to one letter per attempt (see :func:`episode_of`).
    With ``old_format``, the results are written as ``bat.metrics/1`` (see
    :func:`write_old_results`). With ``prices`` (a ``PriceBook``), each episode's cost
    is the real ``episode_cost`` of ``model`` ("provider:model") at its price.
    """
    run_dir = base / run_id
    model_dir = run_dir / model_dir_name(model)
    model_dir.mkdir(parents=True, exist_ok=True)
    if not layout.is_run_folder(run_dir):
        rundir.write_run(
            run_dir,
            rundir.RunRecord(
                run_id=run_id,
                status="completed",
                started_at="2026-01-01T00:00:00.000Z",
                tasks=list(outcomes),
                k=k,
            ),
            scrubber=NO_SECRETS,
        )
    rows = []
    for position, (task_id, letters) in enumerate(outcomes.items()):
        stem = TaskSpec.model_construct(id=task_id, turns=["x"]).file_stem
        for attempt, letter in enumerate(letters, 1):
            episode = episode_of(
                task_id,
                attempt,
                letter,
                model=model,
                position=position,
                judge=judge,
                **episode_options,
            )
            if prices is not None:
                provider, _, name = model.partition(":")
                spec = SimpleNamespace(provider=provider, model=name, script=None)
                episode.cost = episode_cost(prices, episode, spec)
            with unsynced():
                store.write_episode(model_dir, stem, episode, scrubber=NO_SECRETS)
            rows.append(metrics.row_of(episode))
    if old_format:
        write_old_results(model_dir, rows, model=model, run_id=run_id, k=k)
    else:
        summary, metrics_file = metrics.summarize(
            rows, k=k, model=model, task_order=list(outcomes), run_id=run_id
        )
        store.write_results(model_dir, summary, metrics_file, scrubber=NO_SECRETS)
    return model_dir


def write_old_results(
    model_dir: Path, rows: list[EpisodeRow], *, model: str, run_id: str, k: int
) -> None:
    """``metrics.json`` and ``summary.json`` as bat wrote them before bat.metrics/2.

    The old format (bat.metrics/1, bat.summary/1): per-episode rows with ``passed`` and
    flat token counts, a ``summary`` of run totals with ``k``, ``latency_s`` (nearest-rank
    percentiles) and ``tokens`` totals; summary.json listed ``tasks``. Made from today's
    rows, so an old folder holds the same episodes as a new one.
    """
    old_rows = [
        {
            "task_id": row.task_id,
            "attempt": row.attempt,
            "passed": row.success,
            "status": row.status,
            "infra_error": row.infra_error,
            "agent_error": row.agent_error,
            "vacuous": row.vacuous,
            "wall_time_s": row.wall_time_s,
            "time_to_first_event_s": row.time_to_first_event_s,
            "prompt_tokens": row.tokens.prompt_tokens,
            "completion_tokens": row.tokens.completion_tokens,
            "total_tokens": row.tokens.total_tokens,
            "model_calls": row.model_calls,
            "tool_calls": row.tool_calls,
            "scores": row.scores,
            "judge_error": row.judge_error,
        }
        for row in rows
    ]
    passed = sum(row.success for row in rows)
    old_metrics = {
        "schema": "bat.metrics/1",
        "model": model,
        "run_id": run_id,
        "per_episode": old_rows,
        "summary": {
            "episodes": len(rows),
            "passed": passed,
            "pass_rate": passed / len(rows) if rows else None,
            "k": k,
            "tokens": {
                "prompt_total": sum(row.tokens.prompt_tokens for row in rows),
                "completion_total": sum(row.tokens.completion_tokens for row in rows),
            },
        },
    }
    tasks = list(dict.fromkeys(row.task_id for row in rows))
    old_summary = {
        "schema": "bat.summary/1",
        "model": model,
        "k": k,
        "run_id": run_id,
        "tasks": [{"task_id": task_id} for task_id in tasks],
    }
    (model_dir / layout.METRICS_FILE).write_text(json.dumps(old_metrics))
    (model_dir / layout.SUMMARY_FILE).write_text(json.dumps(old_summary))


def svg_texts(path: Path) -> list[str]:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return ["".join(el.itertext()) for el in root.iter("{http://www.w3.org/2000/svg}text")]


class Tags(HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags
