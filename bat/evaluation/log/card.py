"""``card.json``: the benchmark card of a run, what exactly was measured.

A run's numbers mean something only together with what produced them: the dataset (its
bytes, hashed and snapshotted beside the card as ``tasks.json``), the agent (its name,
version and A2A card, its project's git commit), the versions of bat and a2a-sdk, every
model and judge, ``k``, the concurrency, the timeouts and retries, the command line and
the host; in a run with simulated users, the user model and a sha256 of each task's
instructions (left out of other runs' cards, which keep their bytes); the prices the run's
cost was figured at and where each came from (``prices``: genai-prices' version, eval.yaml,
bat.yaml). Two runs with the
same card are comparable; ``eval.compare`` says in plain words what differs
(:func:`bat.evaluation.card.comparable`).

No secret is written: URLs are shown without their credentials
(:func:`bat.secrets.display_url`), ``env`` values are not recorded, and the
whole file goes through the scrubber of every secret the command knows of.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bat.atomic import json_text, write_private
from bat.errors import InputError
from bat.evaluation.log import layout
from bat.evaluation.log.run import read_versioned
from bat.figures import counted
from bat.secrets import Scrubber

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


class CardRuntime(_Part):
    """What the agent really ran with, read from its environment once it had started
    (:mod:`bat.evaluation.run.agent_runtime`)."""

    environment: str = Field(description="the folder of the agent's Python environment")
    python: str | None = Field(default=None, description="the agent's Python version")
    bat_adk: str | None = Field(
        default=None, description="the bat-adk installed there; null: none is"
    )


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
    runtime: CardRuntime | None = Field(
        default=None,
        description="the Python and bat-adk the agent ran with (the first model's agent); "
        "null: not known (in a container, not started by bat, no environment found)",
    )
    adapter: str = Field(
        default="a2a",
        description="how bat talked to it: a2a, command, or a coding CLI's preset (its "
        "program's version is in run.json's models[].binding)",
    )
    workspace: dict[str, Any] | None = Field(
        default=None,
        description="a command-line agent's workspace settings (source, ref, keep, "
        "resources); null: an A2A agent",
    )


class CardVersions(_Part):
    bat: str | None = Field(default=None, description="bat-cli's version")
    a2a_sdk: str | None = Field(default=None, description="bat's a2a-sdk")
    bat_adk_requirement: str | None = Field(
        default=None,
        description="the bat-adk the agent's project asks for: uv.lock's version, else "
        "pyproject.toml's requirement (bat-adk>=0.3); what ran is agent.runtime.bat_adk",
    )
    bat_adk_source: str | None = Field(default=None, description="uv.lock or pyproject.toml")
    python: str | None = Field(
        default=None, description="bat's own Python; the agent's is agent.runtime.python"
    )


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


class CardUserModel(_Part):
    """The model that played the simulated users (eval.yaml's ``user:``) and the settings
    that change what it writes: another user model is another benchmark."""

    label: str = Field(description="as episodes name it: provider:model, or script:FILE")
    provider: str
    model: str
    base_url: str | None = Field(
        default=None, description="without credentials; null: the provider's, or bat's script"
    )
    temperature: float
    seed: int | None = None
    concurrency: int
    timeout_s: float
    max_retries: int
    script_sha256: str | None = Field(
        default=None, description="sha256 of the script: rule file; null: not scripted"
    )


def _none(value: Any) -> bool:
    return value is None


class CardPrice(_Part):
    """One model's prices per million tokens, as the run used them."""

    input: float
    output: float
    cached_input: float
    currency: str
    source: str = Field(description="eval.yaml, bat.yaml, or genai-prices and its version")
    note: str | None = Field(default=None, exclude_if=_none, description="the entry's note")


class CardPrices(_Part):
    """Where the run's prices came from (:class:`bat.evaluation.cost.PriceBook`): a cost
    means something only with the prices it was figured at."""

    library: str = Field(description="the price database asked after prices: (genai-prices)")
    version: str = Field(description="its installed version; empty: not installed")
    auto_update: bool = Field(description="evaluation.update_prices: a newer table fetched")
    updated_from: str | None = Field(
        default=None, exclude_if=_none, description="where it was fetched from (auto_update)"
    )
    updated: bool | None = Field(
        default=None, exclude_if=_none, description="whether that fetch worked (auto_update)"
    )
    currency: str = Field(description="the currency of every cost of the run")
    models: dict[str, CardPrice | None] = Field(
        default_factory=dict,
        description="provider:model -> its prices, for each model, judge and user model the "
        "run pays for; null: unpriced (its cost is unknown)",
    )


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
    warm_latency: bool | None = Field(
        default=None,
        description="evaluation.warm_latency: cold-start episodes left out of the latency "
        "figures; null: a card written before the switch existed",
    )
    timeouts: CardTimeouts
    retries: CardRetries
    # Written only by a run with simulated users: a run without keeps its card as it was.
    user_model: CardUserModel | None = Field(
        default=None,
        exclude_if=_none,
        description="the user model of the tasks with a simulated user; absent: no such task",
    )
    user_instructions: dict[str, str] | None = Field(
        default=None,
        exclude_if=_none,
        description="task id -> sha256 of its user.instructions, for each task with a "
        "simulated user; absent: no such task",
    )
    # Written by runs since prices existed: an older card keeps its bytes.
    prices: CardPrices | None = Field(
        default=None,
        exclude_if=_none,
        description="the prices the run's cost was figured at; absent: a run from before",
    )
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


def write_card_file(run_dir: Path, card: Card, *, scrubber: Scrubber) -> Path:
    """Write ``card.json`` atomically, private to its owner, every secret of ``scrubber``
    taken out."""
    data = scrubber.data(card.model_dump(mode="json", by_alias=True))
    path = layout.card_file(run_dir)
    try:
        write_private(path, json_text(data, what=str(path), indent=1, ensure_ascii=False))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
    return path


def _card_to_note(run_dir: Path) -> Card | None:
    """The run's card to add a note to; None without one, or with one edited into
    nonsense (not worth failing the run for)."""
    try:
        return read_card(run_dir)
    except InputError:
        return None


def note_agent_runtime(run_dir: Path, runtime: CardRuntime, *, scrubber: Scrubber) -> None:
    """Record what the agent ran with, once (the first model's agent); a run without a
    card.json is left alone."""
    card = _card_to_note(run_dir)
    if card is None or card.agent.runtime is not None:
        return
    card.agent.runtime = runtime
    write_card_file(run_dir, card, scrubber=scrubber)


def note_agent_card(run_dir: Path, document: dict[str, Any] | None, *, scrubber: Scrubber) -> None:
    """Record the A2A card an agent served, once (the first model's), with the name and
    version it gives; a run without a card.json is left alone."""
    if not isinstance(document, dict):
        return
    card = _card_to_note(run_dir)
    if card is None or card.agent.card is not None:
        return
    card.agent.card = document
    for key in ("name", "version"):
        if isinstance(document.get(key), str) and document[key]:
            setattr(card.agent, key, document[key])
    write_card_file(run_dir, card, scrubber=scrubber)


# --- comparing two cards --------------------------------------------------------------------


def comparable(a: Card, b: Card, note_dirty: bool = True) -> list[str]:
    """What differs between two runs' cards that makes their numbers not comparable,
    each in plain words (empty: comparable); with ``note_dirty``, also a run whose agent
    had uncommitted changes."""
    found: list[str] = []

    def differs(what: str, left: Any, right: Any) -> None:
        if left != right:
            found.append(f"{what}: {_shown(left)} in {a.run_id}, {_shown(right)} in {b.run_id}")

    if a.dataset.sha256 != b.dataset.sha256:
        found.append(
            f"the datasets differ (sha256 {a.dataset.sha256[:12]} in {a.run_id}, "
            f"{b.dataset.sha256[:12]} in {b.run_id})"
        )
    differs("the selection of tasks differs", a.selection, b.selection)
    differs("k differs", a.k, b.k)
    differs("the models differ", _models(a), _models(b))
    differs("the judges differ", _judges(a), _judges(b))
    differs("the timeouts differ", _timeouts(a), _timeouts(b))
    differs("the user models differ", _user_model(a), _user_model(b))
    rewritten = _instructions_changed(a, b)
    if rewritten:
        shown = ", ".join(rewritten[:5]) + (" ..." if len(rewritten) > 5 else "")
        found.append(
            f"the simulated users' instructions differ between {a.run_id} and {b.run_id} "
            f"({counted(len(rewritten), 'task')}: {shown})"
        )
    if a.warm_latency is not None and b.warm_latency is not None:
        differs(
            "warm_latency differs (cold starts in the latency figures or not)",
            a.warm_latency,
            b.warm_latency,
        )
    found += _price_changes(a, b)
    differs("the bat version differs", a.versions.bat, b.versions.bat)
    differs("the agent version differs", a.agent.version, b.agent.version)
    if a.agent.runtime is not None and b.agent.runtime is not None:
        differs("the agent's Python differs", a.agent.runtime.python, b.agent.runtime.python)
        differs("the agent's bat-adk differs", a.agent.runtime.bat_adk, b.agent.runtime.bat_adk)
    commit_a = a.agent.git.commit[:12] if a.agent.git else None
    commit_b = b.agent.git.commit[:12] if b.agent.git else None
    differs("the agent's git commit differs", commit_a, commit_b)
    for card in (a, b) if note_dirty else ():
        if card.agent.git is not None and card.agent.git.dirty:
            found.append(
                f"the agent of {card.run_id} had uncommitted changes: what ran is not "
                "what its commit holds"
            )
    return found


def _models(card: Card) -> list[str]:
    return [
        "/".join(str(part) for part in (m.provider, m.model) if part) + _at(m.base_url) or m.label
        for m in card.models
    ]


def _judges(card: Card) -> list[str]:
    return (
        [
            f"{j.provider}/{j.model}{_at(j.base_url)} (rubric {j.rubric_version}, "
            f"prompt {j.prompt_sha256[:12]})"
            for j in card.judges
        ]
        if card.qualitative
        else []
    )


def _user_model(card: Card) -> str | None:
    """The user model as far as it changes what the simulated users write."""
    user = card.user_model
    if user is None:
        return None
    settings = [f"temperature {user.temperature:g}", f"seed {user.seed}"]
    if user.script_sha256:
        settings.append(f"script {user.script_sha256[:12]}")
    return f"{user.label}{_at(user.base_url)} ({', '.join(settings)})"


def _instructions_changed(a: Card, b: Card) -> list[str]:
    """The tasks with a simulated user on both sides whose instructions differ."""
    left, right = a.user_instructions or {}, b.user_instructions or {}
    return [task for task, digest in left.items() if task in right and right[task] != digest]


def _price_changes(a: Card, b: Card) -> list[str]:
    """What differs in the prices two runs' costs were figured at: genai-prices' version,
    the currency, a model's price (a model on one side only is a difference of models,
    said above). Nothing when a side is from before prices were recorded."""
    if a.prices is None or b.prices is None:
        return []
    found: list[str] = []
    left, right = a.prices, b.prices
    if left.version != right.version:
        found.append(
            f"the {left.library} version differs: {left.version or 'none'} in {a.run_id}, "
            f"{right.version or 'none'} in {b.run_id} (its prices may have changed)"
        )
    if left.currency != right.currency:
        found.append(
            f"the currency differs: {left.currency} in {a.run_id}, {right.currency} in "
            f"{b.run_id} (the costs cannot be compared)"
        )
    changed = [
        f"{label} ({_price(price)} in {a.run_id}, {_price(right.models[label])} in {b.run_id})"
        for label, price in sorted(left.models.items())
        if label in right.models and _rates(price) != _rates(right.models[label])
    ]
    if changed:
        shown = "; ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
        found.append(f"the prices differ for {counted(len(changed), 'model')}: {shown}")
    return found


def _rates(price: CardPrice | None) -> tuple | None:
    """What a price is, its source aside (the same rate from bat.yaml or eval.yaml)."""
    if price is None:
        return None
    return (price.input, price.output, price.cached_input, price.currency)


def _price(price: CardPrice | None) -> str:
    if price is None:
        return "unpriced"
    return f"{price.input:g}/{price.output:g} {price.currency} per million tokens in/out"


def _timeouts(card: Card) -> str:
    t = card.timeouts
    return (
        f"turn {t.turn_s:g} s, startup {t.agent_startup_s:g} s, shutdown {t.agent_shutdown_s:g} s"
    )


def _at(url: str | None) -> str:
    return f" at {url}" if url else ""


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return str(value)
