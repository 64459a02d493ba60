"""``card.json``: the benchmark card of a run, what exactly was measured.

A run's numbers mean something only together with what produced them: the dataset (its
bytes, hashed and snapshotted beside the card as ``tasks.json``), the agent (its name,
version and A2A card, its project's git commit), the versions of bat and a2a-sdk, every
model and judge, ``k``, the concurrency, the timeouts and retries, the command line and
the host. Two runs with the same card are comparable; ``eval.compare`` says in plain
words what differs (:func:`bat.evaluation.card.comparable`).

No secret is written: URLs are shown without their credentials
(:func:`bat.evaluation.secrets.display_url`), ``env`` values are not recorded, and the
whole file goes through the scrubber of every secret the command knows of.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bat.evaluation import secrets
from bat.evaluation.log import layout
from bat.evaluation.log.run import read_versioned

CARD_SCHEMA = "bat.card/1"


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class CardDataset(_Part):
    """The dataset as the run read it; its bytes are in the run folder as ``snapshot``."""

    path: str
    sha256: str
    tasks: int = Field(description="the number of tasks in the dataset")
    snapshot: str | None = Field(
        default=layout.TASKS_SNAPSHOT,
        description="the copy of the dataset's bytes, relative to the run folder",
    )


class CardGit(_Part):
    """The agent project's git state when the run started."""

    commit: str
    dirty: bool = Field(description="uncommitted changes (the run's output folder aside)")


class CardAgent(_Part):
    """The agent evaluated: what it says it is, where it answered, how it was started."""

    name: str | None = None
    version: str | None = None
    url: str | None = Field(default=None, description="without credentials")
    start: bool = True
    command: str | None = None
    root: str | None = None
    git: CardGit | None = Field(default=None, description="null: no git, or not a repository")
    card: dict[str, Any] | None = Field(
        default=None,
        description="the A2A agent card as fetched (the first model's); null: none fetched",
    )


class CardVersions(_Part):
    bat: str | None = Field(default=None, description="bat-cli's version")
    a2a_sdk: str | None = None
    bat_adk: str | None = Field(
        default=None, description="the agent's bat-adk: uv.lock's version or pyproject's pin"
    )
    bat_adk_source: str | None = Field(default=None, description="uv.lock or pyproject.toml")
    python: str | None = None


class CardModel(_Part):
    """One model the agent was evaluated with."""

    label: str
    provider: str | None = None
    model: str | None = None
    base_url: str | None = Field(default=None, description="without credentials")


class CardJudge(_Part):
    """One LLM judge, and the rubric it scores with."""

    label: str
    provider: str
    model: str
    base_url: str | None = Field(default=None, description="without credentials")
    rubric_version: str
    prompt_sha256: str = Field(
        description="sha256 of the judge's system prompt: the rubrics and judge.prompts"
    )
    timeout_s: float
    max_retries: int


class CardTimeouts(_Part):
    turn_s: float
    agent_startup_s: float
    agent_shutdown_s: float


class CardRetries(_Part):
    agent_max_restarts: int = Field(description="restarts of a dead agent allowed per model")


class CardHost(_Part):
    os: str
    platform: str
    python: str
    implementation: str
    machine: str
    cpu_count: int | None = None


class Card(BaseModel):
    """``card.json``: what a run measured, for reproducing it and comparing it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_: str = Field(default=CARD_SCHEMA, alias="schema")
    run_id: str
    run_name: str | None = None
    started_at: str
    ended_at: str | None = None
    dataset: CardDataset
    agent: CardAgent
    versions: CardVersions
    models: list[CardModel] = Field(default_factory=list)
    judges: list[CardJudge] = Field(default_factory=list)
    qualitative: bool = False
    k: int
    concurrency: int
    timeouts: CardTimeouts
    retries: CardRetries
    command: list[str] = Field(default_factory=list, description="sys.argv, scrubbed")
    host: CardHost
    selection: dict[str, Any] | None = Field(
        default=None, description="run.json's selection: the tasks chosen; null: all"
    )
    shard: dict[str, Any] | None = Field(
        default=None, description="run.json's shard: the slice of the plan run; null: all"
    )
    merged_from: list[dict[str, Any]] | None = Field(
        default=None, description="run.json's merged_from: the shards of a merged run"
    )


def read_card(run_dir: Path) -> Card | None:
    """``card.json`` of ``run_dir``; None when there is none (an older run, bat-cli's);
    an InputError when it cannot be read."""
    path = layout.card_file(run_dir)
    if not path.is_file():
        return None
    return read_versioned(path, Card, CARD_SCHEMA, "a card")


def write_card_file(run_dir: Path, card: Card) -> Path:
    """Write ``card.json`` atomically, private to its owner, every known secret
    scrubbed out."""
    data = secrets.scrub_data(card.model_dump(mode="json", by_alias=True))
    path = layout.card_file(run_dir)
    try:
        secrets.write_private(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return path
