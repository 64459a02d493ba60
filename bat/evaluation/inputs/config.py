"""``eval/eval.yaml``: what to evaluate, against which models, how hard to push.

The keys bat-cli 2026.10 users have keep their names and meaning (``evaluation.dataset``,
``output_dir``, ``agent_url``, ``agent_startup_timeout_s``, ``agent_shutdown_timeout_s``,
``k``, ``qualitative``, ``run_name``, ``extra_spans``, ``models``, ``judge`` with
``mode``, ``max_trajectory_chars``, ``env`` and its prompt names); ours sit beside them
(``concurrency``, ``turn_timeout_s``, the ``agent`` block). A bat-cli key with no meaning
here is accepted with a warning naming it, never silently. Unknown keys are errors, so a
typo cannot silently fall back to a default. Every problem of a file is reported at
once, each with its key path and line, in the words of the file (never a class name).

Values mean what they say, so nothing is coerced where a YAML user could be surprised:
a count is a whole number (``k: true`` is not 1, ``k: 2.0`` is not 2), a flag is
``true`` or ``false`` (not the text ``"yes"``), a timeout is a finite number of seconds
above 0 and at most a day (not ``.inf``), a port is 1-65535 (:mod:`bat.ports`), and
text handed to a process (env maps, the command, the model names) holds no NUL
character, which no process environment or argument can carry.

``${VAR}`` and ``${VAR:-default}`` in ``agent_url``, ``base_url``, the ``env`` maps and a
command-line agent's ``options`` and ``workspace.source`` are replaced from the shell,
then the agent's ``.env`` (``variables``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bat.errors import InputError, UsageError
from bat.evaluation.inputs.budget import MaxCost
from bat.evaluation.inputs.compat import COMPAT_HINT, COMPAT_LINE, UnknownKeys
from bat.evaluation.inputs.gate_specs import GateSpec
from bat.evaluation.inputs.prices import Prices
from bat.evaluation.inputs.variables import UnsetVariable, expand
from bat.evaluation.log import layout
from bat.figures import counted
from bat.locate import dotted, line_index, line_of, validation_problems
from bat.ports import port_problem, url_port_problem

DEFAULT_FILE = Path("eval/eval.yaml")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# Names a model's folder cannot have: the run's own folders beside the models'.
RESERVED_DIRS = layout.RESERVED_DIRS
# The longest wait a timeout may ask for. Longer is a typo, and timers refuse huge values.
MAX_SECONDS = 86_400


def _shown(value: Any) -> str:
    """How a YAML value is named in a message: ``true``, ``the text 'yes'``, ``a list``."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "nothing"}[value]
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return {dict: "a mapping", list: "a list"}.get(type(value), type(value).__name__)


def _number_hint(value: Any, example: str) -> str:
    """A hint for text that reads as a number: quoted, or ``1e3`` (text to YAML 1.1,
    which wants a dot and a signed exponent in a float: ``1.0e+3``)."""
    try:
        float(value) if isinstance(value, str) else None
    except ValueError:
        return ""
    return f" (write a plain number without quotes, such as {example})" if value else ""


def _whole_number(value: Any) -> Any:
    """A count is an integer as written: YAML's ``true`` is not 1, nor ``2.0`` or ``"2"`` 2."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {_shown(value)}{_number_hint(value, '3')}")
    return value


def _seconds(value: Any) -> Any:
    """A timeout is a finite number (``.inf`` and ``.nan`` are YAML floats too)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        hint = _number_hint(value, "60 or 1000.0")
        raise ValueError(f"expected a number of seconds, got {_shown(value)}{hint}")
    return value


def _true_or_false(value: Any) -> Any:
    """A flag is YAML's true or false; the quoted text ``"yes"`` or ``"false"`` is not one
    (the text ``"false"`` would read as true in most languages)."""
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_shown(value)}")
    return value


def _text(value: Any) -> Any:
    """Text that a process will get (an argument, an environment value): no NUL in it."""
    if isinstance(value, str) and "\0" in value:
        raise ValueError("contains a NUL character, which no process can be given")
    return value


def _path(value: Any) -> Any:
    """A file or folder name: text, not empty, no NUL (``Path("")`` would mean ``.``)."""
    if not isinstance(value, str):
        raise ValueError(f"expected a file or folder name, got {_shown(value)}")
    if not value.strip():
        raise ValueError("expected a file or folder name, got an empty text")
    if "\0" in value:
        raise ValueError("contains a NUL character, which no file name can")
    return value


Count = Annotated[int, BeforeValidator(_whole_number)]
Seconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0, le=MAX_SECONDS)]
Flag = Annotated[bool, BeforeValidator(_true_or_false)]
Text = Annotated[str, BeforeValidator(_text)]
FilePath = Annotated[Path, BeforeValidator(_path)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _defaults(value: Any) -> Any:
    """A block written with every key commented out (``evaluation:`` alone) is YAML's
    null: it means the defaults, as an empty ``models:`` means no models."""
    return {} if value is None else value


Block = BeforeValidator(_defaults)


def _split_model(value: Any) -> Any:
    """``"openai:gpt-4.1-mini"`` -> ``{"provider": "openai", "model": "gpt-4.1-mini"}``."""
    if isinstance(value, str):
        provider, sep, model = value.partition(":")
        if not sep or not provider.strip() or not model.strip():
            raise ValueError(f"expected 'provider:model', got {value!r}")
        return {"provider": provider.strip(), "model": model.strip()}
    return value


def env_map(value: Any) -> Any:
    """An ``env:`` mapping with every value as text, as a process environment holds it.

    bat-cli accepted ``PORT: 9431`` and ``DEBUG: true``; they mean ``"9431"`` and
    ``"true"``, and ``null`` means the empty string. ``load_config`` has already put back
    the text written for values YAML reinterprets (``010``, ``on``); what is left here
    is data built in code. Names must be valid variable names, and no value may
    hold a NUL character (a process environment cannot: it ends the value there).
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        return value  # pydantic says what is wrong
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise ValueError(f"{key!r} is not a variable name (letters, digits, _)")
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif item is None:
            item = ""
        elif isinstance(item, int | float):
            item = str(item)
        if isinstance(item, str) and "\0" in item:
            raise ValueError(f"the value of {key} contains a NUL character")
        out[key] = item
    return out


EnvMap = Annotated[dict[str, str], BeforeValidator(env_map)]


# The wire protocols the scripted model speaks (a model's ``script:``).
SCRIPTED_PROVIDERS = ("openai", "ollama")
# A models: entry's script may also speak Anthropic's Messages API, for command-line
# agents such as Claude Code (a judge, and a BAT-ADK agent, speak the two above).
MODEL_SCRIPTED_PROVIDERS = (*SCRIPTED_PROVIDERS, "anthropic")


class _ProviderModel(_Strict):
    """A model at a provider, written as a mapping or as ``"provider:model"``."""

    provider: Text = Field(min_length=1)
    model: Text = Field(min_length=1)
    base_url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return _split_model(value)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value, "http://127.0.0.1:8000/v1")

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


def _scripted_provider(
    provider: str, base_url: str | None, speaks: tuple[str, ...] = SCRIPTED_PROVIDERS
) -> None:
    """A ``script:`` entry (a model's or a judge's) speaks a protocol the scripted model
    speaks for it, and has no ``base_url`` of its own: bat serves the script."""
    if provider not in speaks:
        words = f"{', '.join(speaks[:-1])} and {speaks[-1]}"
        raise ValueError(f"script: the scripted model speaks {words}, not {provider!r}")
    if base_url is not None:
        raise ValueError("give script or base_url, not both: bat serves the script")


class ModelSpec(_ProviderModel):
    """One model to evaluate the agent with: the agent is started with it in its env.

    ``name`` names the model's folder in a run (and its label); without it the folder is
    a slug of ``provider_model``, made unique among the entries by ``load_config``.
    """

    name: str | None = None
    env: EnvMap = Field(default_factory=dict)
    # A rule file of the scripted model (bat.evaluation.run.scripted_model): bat serves it on
    # 127.0.0.1 for this model's run and points the agent at it, so an evaluation runs
    # offline, without a key (a new agent's first run, a CI smoke test of the wiring).
    script: str | None = None

    @model_validator(mode="after")
    def _script_speaks_the_provider(self) -> ModelSpec:
        if self.script is not None:
            _scripted_provider(self.provider, self.base_url, MODEL_SCRIPTED_PROVIDERS)
        return self

    @field_validator("env")
    @classmethod
    def _no_port(cls, value: dict[str, str]) -> dict[str, str]:
        """bat starts the agent with PORT where it waits for it, so PORT here would be
        silently replaced."""
        if "PORT" in value:
            raise ValueError(
                "PORT cannot be set per model: bat starts the agent on the port of "
                "evaluation.agent_url (or PORT in evaluation.agent.env)"
            )
        return value

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str | None) -> str | None:
        if value is not None and not _FOLDER_NAME.fullmatch(value):
            raise ValueError(
                "use up to 100 letters, digits, '.', '_' or '-', starting with a letter or "
                "digit (a folder name)"
            )
        return value

    @property
    def slug(self) -> str:
        """``provider_model`` with every character unsafe in a folder name replaced."""
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.provider}_{self.model}").lstrip(".")

    @property
    def identity(self) -> str:
        """What makes two entries the same model run: everything but the name."""
        return json.dumps(
            [self.provider, self.model, self.base_url, sorted(self.env.items())], sort_keys=True
        )


JUDGE_DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)
MAX_PROMPT_CHARS = 2000


def _prompt(*names: str) -> Any:
    """A judge prompt of one dimension, read under our name or bat-cli's."""
    return Field(default=None, max_length=MAX_PROMPT_CHARS, validation_alias=AliasChoices(*names))


_PROMPT_NAMES = (
    ("response_relevance", "relevance"),
    ("task_completion_quality", "task_completion"),
    ("hallucination_score", "hallucination"),
    ("tool_call_appropriateness", "tool_call"),
)


class JudgePrompts(_Strict):
    """Agent-specific instructions added to the rubric of each dimension.

    bat-cli's names of the dimensions (``relevance``, ``task_completion``,
    ``hallucination``, ``tool_call``) are read as ours.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _one_name_each(cls, value: Any) -> Any:
        if isinstance(value, dict):
            pairs = [
                (ours, theirs) for ours, theirs in _PROMPT_NAMES if {ours, theirs} <= value.keys()
            ]
            if pairs:
                both = ", ".join(f"{ours} or {theirs}" for ours, theirs in pairs)
                raise ValueError(f"set {both} (the same prompt), not both")
        return value

    response_relevance: str | None = _prompt("response_relevance", "relevance")
    task_completion_quality: str | None = _prompt("task_completion_quality", "task_completion")
    hallucination_score: str | None = _prompt("hallucination_score", "hallucination")
    tool_call_appropriateness: str | None = _prompt("tool_call_appropriateness", "tool_call")


class JudgeSpec(_ProviderModel):
    """One LLM judge of ``qualitative`` scoring (used by ``eval.judge``).

    ``provider: ollama`` speaks Ollama's native ``/api/chat``; any other provider speaks
    OpenAI-compatible chat completions at ``base_url`` (OpenAI, vLLM, llama.cpp server,
    LM Studio, Ollama's ``/v1``). ``budget_chars`` is also read under bat-cli's name
    ``max_trajectory_chars``; ``env`` holds variables the judge reads its API key from,
    over the shell and the agent's ``.env``. bat-cli's ``mode: outcome`` (one lenient score)
    has no counterpart here: it is accepted with a warning (see ``config_warnings``).
    ``script`` is a rule file of bat's scripted model, served on 127.0.0.1 while the run is
    judged (as a model's ``script:``): a demo or a CI check of the judging wiring runs
    offline, with no judge process of its own to start, hold a port for, or leave behind.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    provider: Text = Field(default="openai", min_length=1)
    api_key_env: str | None = None
    prompts: Annotated[JudgePrompts, Block] = Field(default_factory=JudgePrompts)
    concurrency: Count = Field(default=16, ge=1, le=256)
    timeout_s: Seconds = 60
    max_retries: Count = Field(default=4, ge=0, le=20)
    # A longer Retry-After is cut to this, and said: a run must not stall for minutes.
    max_retry_after_s: Seconds = Field(default=60, le=3600)
    budget_chars: Count = Field(
        default=12000,
        ge=500,
        le=1_000_000,
        validation_alias=AliasChoices("budget_chars", "max_trajectory_chars"),
    )
    mode: Literal["full", "outcome"] = "full"
    env: EnvMap = Field(default_factory=dict)
    script: str | None = None

    @model_validator(mode="after")
    def _script_speaks_the_provider(self) -> JudgeSpec:
        if self.script is not None:
            _scripted_provider(self.provider, self.base_url)
        return self

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"{value[:40]!r} is not a variable name (letters, digits, _)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _one_budget(cls, value: Any) -> Any:
        if isinstance(value, dict) and {"budget_chars", "max_trajectory_chars"} <= value.keys():
            raise ValueError("set budget_chars or max_trajectory_chars (the same thing), not both")
        return value


class UserModelSpec(_ProviderModel):
    """The model that plays the simulated users of the dataset's tasks with ``user``
    (eval.yaml's ``user:``; :mod:`bat.evaluation.run.simulated_user`).

    Configured like a judge: ``provider: ollama`` speaks Ollama's ``/api/chat``, any other
    provider OpenAI-compatible chat completions at ``base_url``; ``api_key_env`` and
    ``env`` as for a judge. ``temperature`` and ``seed`` are sent with every request (a
    user model that varies from attempt to attempt is what pass^k measures; ``seed``
    makes a provider that honours it repeat itself). ``concurrency`` bounds the requests
    in flight. ``script`` is a rule file of bat's scripted model, served on 127.0.0.1
    for the run: its rules are matched against the agent's last message (the user
    model sees the conversation from the user's side), so a test, the demo and a first
    run need no key.
    """

    provider: Text = Field(default="openai", min_length=1)
    model: Text = Field(default="scripted", min_length=1)
    api_key_env: str | None = None
    env: EnvMap = Field(default_factory=dict)
    temperature: float = Field(default=0.0, ge=0, le=2, allow_inf_nan=False)
    seed: Count | None = Field(default=None, ge=0, le=2**63 - 1)
    concurrency: Count = Field(default=8, ge=1, le=256)
    timeout_s: Seconds = 60
    max_retries: Count = Field(default=2, ge=0, le=20)
    max_retry_after_s: Seconds = Field(default=60, le=3600)
    script: str | None = None

    _variable_name = field_validator("api_key_env")(JudgeSpec._variable_name.__func__)

    @model_validator(mode="after")
    def _script_speaks_the_provider(self) -> UserModelSpec:
        if self.script is not None:
            _scripted_provider(self.provider, self.base_url)
        return self

    @property
    def shown(self) -> str:
        """How the user model is named in episodes, the card and messages."""
        return f"script:{self.script}" if self.script is not None else self.label


def api_key(spec: JudgeSpec | UserModelSpec, env: Mapping[str, str]) -> str | None:
    """The judge's API key from ``env`` (shell over ``.env``, merged by the caller).

    None when the judge needs none (no ``api_key_env``). A variable that is named but
    missing or empty is an InputError naming the variable, never a value.
    """
    name = spec.api_key_env
    if not name:
        return None
    who = "user" if isinstance(spec, UserModelSpec) else "judge"
    value = env.get(name)
    if value is None:
        raise InputError(
            f"{who} {spec.label}: the API key variable {name} ({who}.api_key_env) is not "
            "set in the shell or in the agent's .env"
        )
    if not value.strip():
        raise InputError(f"{who} {spec.label}: the API key variable {name} is empty")
    return value.strip()


class ResourceSpec(_Strict):
    """A file or folder copied into every workspace (belt's ``resources``)."""

    kind: Literal["file", "dir", "directory"] | None = None  # belt writes it; bat looks
    source: FilePath  # relative to eval.yaml's folder
    dest: Text = Field(min_length=1, max_length=1000)
    version: Text | None = None


class WorkspaceSpec(_Strict):
    """Where a command-line agent's episodes run (bat.agents.workspace): a working copy
    of ``source`` per episode, never the folder itself."""

    source: Text = Field(default=".", min_length=1)  # a folder, or a git repository (URL)
    ref: Text | None = Field(default=None, min_length=1)  # git: what to check out (HEAD)
    keep: Literal["failed", "always", "never"] = "failed"
    resources: list[ResourceSpec] = Field(default_factory=list, max_length=1000)


class AgentSpec(_Strict):
    """How the agent under test is started, or that it is already running; or, with an
    ``adapter`` other than ``a2a``, which command-line agent runs each turn (bat.agents)."""

    adapter: Text = Field(default="a2a", min_length=1, max_length=100)
    options: dict[str, Any] = Field(default_factory=dict)  # the adapter's (bat agents info)
    workspace: Annotated[WorkspaceSpec, Block] = Field(default_factory=WorkspaceSpec)

    start: Flag = True
    command: Text = Field(default="uv run .", min_length=1)
    root: FilePath = Path(".")
    env: EnvMap = Field(default_factory=dict)
    spans_file: FilePath | None = None  # spans of an agent already running (start: false)
    max_restarts: Count = Field(default=20, ge=0, le=1000)  # per model, when the agent dies
    # Start the agent from this container image (on the Docker engine DOCKER_HOST names)
    # instead of running ``command``; ``replicas`` containers share the episodes.
    image: Text | None = Field(default=None, min_length=1)
    replicas: Count = Field(default=1, ge=1, le=64)

    @field_validator("env")
    @classmethod
    def _port(cls, value: dict[str, str]) -> dict[str, str]:
        """``PORT`` here is where bat waits for the agent: it must be a port (or empty)."""
        port = value.get("PORT", "")
        problem = port_problem(port) if port.strip() else None
        if problem:
            raise ValueError(f"PORT: {problem}")
        return value

    @model_validator(mode="after")
    def _replicas_of_an_image(self) -> AgentSpec:
        if self.image is not None and not self.start:
            raise ValueError("image is for an agent bat starts (start: true)")
        if self.replicas > 1 and self.image is None:
            raise ValueError(
                "replicas are containers of an image: set image (or --image), or remove replicas"
            )
        return self

    @model_validator(mode="after")
    def _known_adapter(self) -> AgentSpec:
        """An adapter name and its options are checked when the file is read: a typo
        shows before any episode runs."""
        if self.adapter == "a2a":
            # Without an adapter named, a belt group dataset may name it (_with_belt_agent).
            if self.options and "adapter" in self.model_fields_set:
                raise ValueError("options are a command-line adapter's; adapter is a2a")
            return self
        from bat.agents.registry import options_problem

        problem = options_problem(self.adapter, self.options)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _spans_of_a_running_agent(self) -> AgentSpec:
        if self.start and self.spans_file is not None:
            raise ValueError(
                "spans_file is for an agent bat does not start (start: false); an agent "
                "bat starts writes its spans into the run folder"
            )
        return self


class EvaluationSection(_Strict):
    """The ``evaluation:`` block."""

    run_name: str | None = Field(default=None, min_length=1, max_length=100)
    dataset: FilePath = Path("eval/input/tasks.json")
    output_dir: FilePath = Path("eval/output")
    agent_url: str | None = None
    agent_startup_timeout_s: Seconds = 60
    agent_shutdown_timeout_s: Seconds = 10
    k: Count = Field(default=1, ge=1, le=1000)
    qualitative: Flag = False
    concurrency: Count = Field(default=8, ge=1, le=1024)
    turn_timeout_s: Seconds = 60
    # Infrastructure failures a run may have and still be trusted (exit 0 rather than 3).
    max_infra_failures: Count = Field(default=0, ge=0)
    # The most the run may spend, in the prices' currency (inputs.budget): no new episode
    # starts once the cost spent and the estimate of those in flight reach it.
    max_cost: MaxCost | None = None
    # Leave each agent start's cold episodes out of the latency figures and the ETA
    # (runner.py says which episodes are cold); false: every episode counts, as before.
    warm_latency: Flag = True
    extra_spans: list[FilePath] = Field(default_factory=list)  # span files of agents it calls
    agent: Annotated[AgentSpec, Block] = Field(default_factory=AgentSpec)
    # genai-prices' newer table, fetched once before the run (bat.evaluation.cost): false
    # (its installed table), true (genai-prices' URL) or the URL of a table of yours.
    update_prices: bool | str = False

    @field_validator("agent_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value, "http://127.0.0.1:9900").rstrip("/")

    @field_validator("update_prices", mode="before")
    @classmethod
    def _update_from(cls, value: Any) -> Any:
        """true, false, or an http(s) URL: the text "true" is no URL and no flag."""
        if isinstance(value, bool):
            return value
        if not isinstance(value, str):
            raise ValueError(f"expected true, false or a URL, got {_shown(value)}")
        return http_url(value, "https://example.com/genai-prices/data.json")

    @model_validator(mode="after")
    def _one_port(self) -> EvaluationSection:
        """An agent bat starts gets PORT from agent_url; a different PORT in its env would
        silently be replaced."""
        port = self.agent.env.get("PORT", "").strip()
        if self.agent_url and self.agent.start and port:
            parts = urlsplit(self.agent_url)
            url_port = parts.port or (443 if parts.scheme == "https" else 80)
            if int(port) != url_port:
                raise ValueError(
                    f"agent_url has port {url_port} but agent.env has PORT {port}; bat starts "
                    "the agent with agent_url's port: set one of them"
                )
        return self

    @model_validator(mode="after")
    def _a_slot_per_replica(self) -> EvaluationSection:
        """Each replica gets a share of ``concurrency``: one with no share would idle."""
        if self.agent.replicas > self.concurrency:
            raise ValueError(
                f"agent.replicas ({self.agent.replicas}) is more than concurrency "
                f"({self.concurrency}): each replica needs an episode at a time at least"
            )
        return self

    @field_validator("run_name")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not value.isprintable()):
            raise ValueError("a run name needs a visible character and no control characters")
        return value

    @field_validator("extra_spans", mode="before")
    @classmethod
    def _no_spans(cls, value: Any) -> Any:
        return [] if value is None else value


class CompatSection(_Strict):
    """``compat:``: switches for moving a bat-cli project over step by step.

    ``unknown_keys: warn`` turns keys bat does not read (bat-cli ignored them, e.g. a
    task's ``description``, ``evaluation.timeout_s``, ``models[].temperature``) from
    errors into warnings naming each, in eval.yaml and in the dataset; the default,
    ``refuse``, keeps a typo from falling back to a default silently."""

    unknown_keys: UnknownKeys = "refuse"


class EvalConfig(_Strict):
    """The whole of ``eval/eval.yaml``."""

    evaluation: Annotated[EvaluationSection, Block] = Field(default_factory=EvaluationSection)
    compat: Annotated[CompatSection, Block] = Field(default_factory=CompatSection)
    models: list[ModelSpec] = Field(default_factory=list)
    judge: list[JudgeSpec] = Field(default_factory=list)  # ``judge:`` holds one or several
    user: Annotated[UserModelSpec, Block] | None = None  # plays the tasks' simulated users
    gates: list[GateSpec] = Field(default_factory=list)  # what a release must meet
    prices: Prices = Field(default_factory=Prices)  # model -> price (bat.evaluation.cost)

    @property
    def judges(self) -> list[JudgeSpec]:
        return list(self.judge)

    @field_validator("models", mode="before")
    @classmethod
    def _no_models(cls, value: Any) -> Any:
        return [] if value is None else value  # `models:` with every entry commented out

    @field_validator("gates", mode="before")
    @classmethod
    def _no_gates(cls, value: Any) -> Any:
        return [] if value is None else value  # `gates:` with every entry commented out

    @field_validator("judge", mode="before")
    @classmethod
    def _judge_list(cls, value: Any) -> Any:
        if value is None:
            return []  # `judge:` with every line commented out
        if value == []:
            raise ValueError("an empty list: give a judge (or a list of them), or remove the key")
        return value if isinstance(value, list) else [value]


def http_url(value: str, example: str) -> str:
    """``value`` if it is an http(s) URL with a host and, if written, a port in 1-65535."""
    problem = None
    try:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = f"expected an http(s) URL such as {example}"
        else:
            problem = url_port_problem(value)
    except ValueError as exc:  # a broken [IPv6]
        problem = f"not a URL: {exc}"
    if problem is None and any(ord(c) < 32 or ord(c) == 127 for c in value):
        problem = "contains a control character"
    if problem:
        raise ValueError(f"{problem}, got {_shown_url(value)!r}")
    return value


def _shown_url(value: str) -> str:
    """``value`` for an error message: credentials out, even when it cannot be parsed."""
    from bat.secrets import REDACTED, display_url

    shown = display_url(value)
    if shown == REDACTED:
        shown = re.sub(r"//[^/?#]*@", "//", value)
    return shown


class ResolvedConfig(BaseModel):
    """An EvalConfig with every relative path and default made concrete."""

    model_config = ConfigDict(frozen=True)

    file: Path
    config: EvalConfig
    base: Path = Path(".")  # what relative paths are taken from (the current folder)
    root: Path
    dataset: Path
    output_dir: Path
    agent_url: str
    agent_url_source: str  # where agent_url came from, for eval.show and messages
    model_dirs: tuple[str, ...] = ()  # the folder of each models: entry, in order
    extra_spans: tuple[Path, ...] = ()
    warnings: tuple[str, ...] = ()
    dotenv: dict[str, str] = {}  # the agent's .env, read once with eval.yaml

    @property
    def evaluation(self) -> EvaluationSection:
        return self.config.evaluation

    @property
    def unknown_keys(self) -> UnknownKeys:
        """``compat.unknown_keys``: what the dataset's keys bat does not read do."""
        return self.config.compat.unknown_keys

    @property
    def environment(self) -> dict[str, str]:
        """The shell over the agent's ``.env`` (the shell wins, as for any program): where
        the judges read their keys, and ``${VAR}`` of eval.yaml its values."""
        return {**self.dotenv, **os.environ}

    @property
    def agent_environment(self) -> dict[str, str]:
        """What bat starts the agent with: :attr:`environment` and, on top,
        ``evaluation.agent.env`` (set for this agent on purpose)."""
        return {**self.environment, **self.evaluation.agent.env}

    @property
    def models(self) -> list[ModelSpec | None]:
        """The models to run; ``[None]`` means the agent's own settings, once."""
        return list(self.config.models) or [None]

    def model_dir(self, model: ModelSpec | None) -> str:
        """The folder of ``model`` in a run directory."""
        if model is None:
            return "agent-default"
        return self.model_dirs[self.config.models.index(model)]

    def model_label(self, model: ModelSpec | None) -> str:
        """How ``model`` is named in messages, summaries and charts (unique in a run)."""
        if model is None:
            return "agent-default"
        if model.name:
            return model.name
        labels = [m.label for m in self.config.models]
        if labels.count(model.label) > 1:
            return f"{model.label} [{self.model_dir(model)}]"
        return model.label

    def with_image(self, ref: str) -> ResolvedConfig:
        """This configuration with the agent started from image ``ref`` (``--image``)."""
        agent = self.evaluation.agent
        if not agent.start:
            raise UsageError(
                "--image starts the agent from its image, but evaluation.agent.start is false"
            )
        try:
            agent = AgentSpec.model_validate({**agent.model_dump(mode="json"), "image": ref})
        except ValidationError as exc:
            raise UsageError(f"--image {ref!r}: {exc.errors()[0]['msg']}") from None
        evaluation = self.evaluation.model_copy(update={"agent": agent})
        config = self.config.model_copy(update={"evaluation": evaluation})
        return self.model_copy(update={"config": config})

    @property
    def agent_port(self) -> int:
        parts = urlsplit(self.agent_url)
        return parts.port or (443 if parts.scheme == "https" else 80)


# Where ``${VAR}`` is replaced: key paths with ``*`` for any list index or mapping key.
EXPANDED = (
    ("evaluation", "agent_url"),
    ("evaluation", "agent", "env", "*"),
    # A command-line agent's options (a program's path, its argv, its env) and workspace.
    ("evaluation", "agent", "options", "*"),
    ("evaluation", "agent", "options", "*", "*"),
    ("evaluation", "agent", "workspace", "source"),
    ("models", "*", "base_url"),
    ("models", "*", "env", "*"),
    ("judge", "base_url"),
    ("judge", "env", "*"),
    ("judge", "*", "base_url"),
    ("judge", "*", "env", "*"),
    ("user", "base_url"),
    ("user", "env", "*"),
)


def _env_maps(data: dict) -> Iterator[tuple[tuple, dict]]:
    """Every ``env:`` map of an eval.yaml's data, with its key path."""
    evaluation = data.get("evaluation")
    agent = evaluation.get("agent") if isinstance(evaluation, dict) else None
    if isinstance(agent, dict):
        yield ("evaluation", "agent", "env"), agent.get("env")
    for section in ("models", "judge"):
        items = data.get(section)
        if isinstance(items, dict):
            yield (section, "env"), items.get("env")
        elif isinstance(items, list):
            for index, item in enumerate(items):
                if isinstance(item, dict):
                    yield (section, index, "env"), item.get("env")
    user = data.get("user")
    if isinstance(user, dict):
        yield ("user", "env"), user.get("env")


def _env_values_as_written(data: dict, text: str) -> None:
    """``env:`` values YAML read as numbers, booleans or dates become the text the user
    wrote (``010`` stays ``010``, ``on`` stays ``on``): the agent's environment is text,
    and YAML 1.1's readings (octal, sexagesimal, yes/no) are not what anybody meant."""
    paths = {
        (*where, key): env
        for where, env in _env_maps(data)
        if isinstance(env, dict)
        for key, value in env.items()
        if isinstance(key, str) and value is not None and not isinstance(value, str | dict | list)
    }
    from bat.locate import scalar_texts

    for path, written in scalar_texts(text, paths).items():
        paths[path][path[-1]] = written


def _give_image(data: dict[str, Any], image: str) -> None:
    """Put ``--image``'s reference in ``data`` as ``evaluation.agent.image`` (a section
    that is not a mapping is left as it is, for validation to report)."""
    from pydantic import TypeAdapter

    try:
        TypeAdapter(Text).validate_python(image)
    except ValidationError as exc:
        raise UsageError(f"--image {image!r}: {exc.errors()[0]['msg']}") from None
    evaluation = data.setdefault("evaluation", {})
    if evaluation is None:
        evaluation = data["evaluation"] = {}
    agent = evaluation.setdefault("agent", {}) if isinstance(evaluation, dict) else None
    if agent is None and isinstance(evaluation, dict):
        agent = evaluation["agent"] = {}
    if not isinstance(agent, dict):
        return
    try:
        start = TypeAdapter(Flag).validate_python(agent.get("start", True))
    except ValidationError:
        start = True  # not a yes or no: validation says so
    if not start:
        raise UsageError(
            "--image starts the agent from its image, but evaluation.agent.start is false"
        )
    agent["image"] = image


def load_config(
    file: Path = DEFAULT_FILE, *, base: Path | None = None, image: str | None = None
) -> ResolvedConfig:
    """Read, validate and resolve an eval.yaml; relative paths are taken from ``base`` (cwd).

    The file is read by bat's bounded reader (size, UTF-8, aliases, duplicate keys);
    lines are worked out only for a file that has problems. ``image`` (``eval.run
    --image``) is the agent's image, as if ``evaluation.agent.image`` said it: given
    before the file is validated, so what needs an image (``replicas``) accepts it.
    """
    from bat.dotenv import read_dotenv
    from bat.evaluation.inputs.agent_settings import AgentSettings, agent_address
    from bat.input_files import CONFIG_LIMIT, parse_yaml, read_text

    base = Path.cwd() if base is None else base
    try:
        text = read_text(file, limit=CONFIG_LIMIT, kind="an eval.yaml file")
    except FileNotFoundError:
        raise InputError(f"{file} not found (bat eval.init writes one)") from None
    data = parse_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{file}: the top level must be a mapping of keys")
    _env_values_as_written(data, text)
    root = (base / _raw_root(data)).resolve()
    dotenv = read_dotenv(root / ".env")
    unset: dict[tuple, str] = {}  # key path -> its problem: an unset ${VAR}
    _expand_variables(data, {**dotenv, **os.environ}, file, text, unset)
    if image is not None:
        _give_image(data, image)
    problems = list(unset.values())
    single_judge = data.get("judge") is not None and not isinstance(data.get("judge"), list)
    fix_path = _single_judge_path if single_judge else None
    ignored: list[str] = []
    hint: list[str] = []  # the compat switch, after the problems (not one of them)
    try:
        config = EvalConfig.model_validate(data)
    except ValidationError as exc:
        error: ValidationError | None = exc
        if _compat_warns(data):
            config, error, ignored = _without_unknown_keys(data, exc, file, text, fix_path)
        if error is not None:
            # A value whose ${VAR} is unset is reported once, as such, not again as invalid.
            problems += validation_problems(file, text, error, fix_path=fix_path, skip=set(unset))
            if not _compat_warns(data) and _unknown_keys(error):
                hint = [COMPAT_HINT]
    if problems:
        message = f"{file} has {counted(len(problems), 'problem')}"
        raise InputError(message, details=[*problems, *hint])
    model_dirs = _model_dirs(config.models, file, text)
    _check_scripts(config.models, config.judges, base, file, config.user)
    config = _with_belt_agent(config, base / config.evaluation.dataset, file)
    evaluation = config.evaluation
    extra_warnings: list[str] = []
    if evaluation.agent_url:
        agent_url, source = evaluation.agent_url, f"{file}: evaluation.agent_url"
    else:
        env = {**dotenv, **os.environ, **evaluation.agent.env}
        settings = AgentSettings.read(root, env) if root.is_dir() else None
        names = (f"{file}: evaluation.agent.env", str(root / ".env"))
        host, port, source = agent_address(settings, dotenv, evaluation.agent.env, names=names)
        if settings is not None and settings.endpoint_problem:
            extra_warnings.append(f"{settings.endpoint_problem}: bat waits on port {port}")
        agent_url = f"http://{host}:{port}"
    return ResolvedConfig(
        file=file,
        config=config,
        base=base,
        root=root,
        dataset=base / evaluation.dataset,
        output_dir=base / evaluation.output_dir,
        agent_url=agent_url,
        agent_url_source=source,
        model_dirs=tuple(model_dirs),
        extra_spans=tuple(base / path for path in evaluation.extra_spans),
        warnings=tuple(ignored + config_warnings(config, file) + extra_warnings),
        dotenv=dotenv,
    )


def _with_belt_agent(config: EvalConfig, dataset: Path, file: Path) -> EvalConfig:
    """A belt scenario group as the dataset names its agent (``_config.json``'s
    ``agent``): that is the run's adapter, unless eval.yaml names one. Groups naming
    different agents are run apart (or eval.yaml says which adapter runs them all)."""
    from bat.evaluation.inputs.belt_groups import group_agents, is_belt_folder

    agent = config.evaluation.agent
    if "adapter" in agent.model_fields_set:
        return config
    agents = group_agents(dataset) if is_belt_folder(dataset) else {}
    if not agents:
        if agent.options:
            raise InputError(
                f"{file}: evaluation.agent.options are a command-line adapter's: name it "
                "in evaluation.agent.adapter (bat agents lists them)"
            )
        return config
    if len(agents) > 1:
        named = "; ".join(f"{name} ({', '.join(groups[:3])})" for name, groups in agents.items())
        raise InputError(
            f"{dataset}: the groups name different agents: {named}: run them apart, or "
            f"set evaluation.agent.adapter in {file}"
        )
    (name,) = agents
    from bat.agents.registry import options_problem

    problem = options_problem(name, dict(agent.options))
    if problem:
        raise InputError(f"{dataset}: _config.json: agent {name!r}: {problem}")
    chosen = agent.model_copy(update={"adapter": name})
    evaluation = config.evaluation.model_copy(update={"agent": chosen})
    return config.model_copy(update={"evaluation": evaluation})


def _check_scripts(
    models: list[ModelSpec],
    judges: list[JudgeSpec],
    base: Path,
    file: Path,
    user: UserModelSpec | None = None,
) -> None:
    """Every model's, judge's and the user model's ``script`` is a readable rule file: a
    typo fails before any agent starts, naming the entry."""
    entries = [(f"models[{index}]", model.script) for index, model in enumerate(models)]
    several = len(judges) > 1
    entries += [
        (f"judge[{index}]" if several else "judge", judge.script)
        for index, judge in enumerate(judges)
    ]
    if user is not None:
        entries.append(("user", user.script))
    problems = []
    for where, script in entries:
        if script is None:
            continue
        from bat.evaluation.inputs.model_script import Rules

        try:
            Rules.load(base / script)
        except (OSError, UnicodeDecodeError, ValueError, re.error) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{file}: {where}.script: {script}: {reason}")
    if problems:
        raise InputError(f"{file} has {counted(len(problems), 'problem')}", details=problems)


def _compat_warns(data: dict[str, Any]) -> bool:
    """Whether the file (as written, before validation) says ``compat: {unknown_keys: warn}``."""
    compat = data.get("compat")
    return isinstance(compat, dict) and compat.get("unknown_keys") == "warn"


def _unknown_keys(error: ValidationError) -> list[tuple]:
    return [tuple(item["loc"]) for item in error.errors() if item["type"] == "extra_forbidden"]


def _without_unknown_keys(
    data: dict[str, Any],
    error: ValidationError,
    file: Path,
    text: str,
    fix_path: Any,
) -> tuple[EvalConfig | None, ValidationError | None, list[str]]:
    """eval.yaml validated again without the keys bat does not read (``compat:
    {unknown_keys: warn}``): the config (or the error of its other problems) and one
    warning per key left out, with its line."""
    import copy

    unknown = [fix_path(loc) if fix_path else loc for loc in _unknown_keys(error)]
    if not unknown:
        return None, error, []
    trimmed = copy.deepcopy(data)
    for loc in unknown:
        holder: Any = trimmed
        try:
            for part in loc[:-1]:
                holder = holder[part]
            del holder[loc[-1]]
        except (LookupError, TypeError):  # a path a validator reshaped: left as an error
            return None, error, []
    lines = line_index(text)
    warnings = [
        f"{file}: {dotted(loc)}"
        + (f" (line {lines[loc]})" if loc in lines else "")
        + f": a key bat does not read, ignored ({COMPAT_LINE})"
        for loc in unknown
    ]
    try:
        return EvalConfig.model_validate(trimmed), None, warnings
    except ValidationError as again:
        return None, again, warnings


def config_warnings(config: EvalConfig, file: Path) -> list[str]:
    """bat-cli keys accepted without a meaning here, each named."""
    warnings = []
    for index, judge in enumerate(config.judges):
        if judge.mode == "outcome":
            where = "judge" if len(config.judges) == 1 else f"judge[{index}]"
            warnings.append(
                f"{file}: {where}.mode: 'outcome' (bat-cli's one lenient score) is not "
                "supported; bat scores its four dimensions from the whole episode"
            )
    return warnings


def _raw_root(data: dict[str, Any]) -> str:
    """``evaluation.agent.root`` as written (the agent's .env is read before validation)."""
    evaluation = data.get("evaluation")
    agent = evaluation.get("agent") if isinstance(evaluation, dict) else None
    root = agent.get("root") if isinstance(agent, dict) else None
    return root if isinstance(root, str) and root else "."


def _expand_variables(
    data: Any, env: dict[str, str], file: Path, text: str, unset: dict[tuple, str]
) -> None:
    """Replace ``${VAR}`` in place at the ``EXPANDED`` paths; each unset one is put in
    ``unset`` (key path -> the problem's line)."""
    lines: dict | None = None

    def visit(node: Any, pattern: tuple[str, ...], path: tuple) -> None:
        nonlocal lines
        if not pattern:
            return
        head, rest = pattern[0], pattern[1:]
        if isinstance(node, dict):
            keys = list(node) if head == "*" else [head] if head in node else []
        elif isinstance(node, list) and head == "*":
            keys = list(range(len(node)))
        else:
            return
        for key in keys:
            value = node[key]
            if rest:
                visit(value, rest, (*path, key))
            elif isinstance(value, str) and "${" in value:
                try:
                    node[key] = expand(value, env)
                except UnsetVariable as exc:
                    lines = line_index(text) if lines is None else lines
                    line = lines.get((*path, key))
                    where = f" (line {line})" if line else ""
                    unset[(*path, key)] = (
                        f"{file}: {dotted((*path, key))}{where}: ${{{exc.name}}} is not set in "
                        f"the shell or the agent's .env (or write ${{{exc.name}:-default}})"
                    )

    for pattern in EXPANDED:
        visit(data, pattern, ())


def _single_judge_path(path: tuple) -> tuple:
    """``judge[0].mode`` -> ``judge.mode`` when the file has one judge, not a list."""
    if len(path) >= 2 and path[0] == "judge" and path[1] == 0:
        return ("judge", *path[2:])
    return path


def _model_dirs(models: list[ModelSpec], file: Path, text: str) -> list[str]:
    """A distinct folder per ``models:`` entry; real duplicates are refused.

    ``name:`` is the folder when given. Otherwise the slug ``provider_model``; when
    several entries share a slug (the same model with other settings, or ``a:b/c`` and
    ``a:b_c``), each gets a short hash of its settings added, which stays the same from
    one run to the next so runs can be compared model by model.
    """
    problems = []
    seen: dict[str, int] = {}
    for index, model in enumerate(models):
        first = seen.setdefault(model.identity, index)
        if first != index:
            line = line_of(text, ("models", index))
            where = f" (line {line})" if line else ""
            problems.append(
                f"{file}: models[{index}]{where}: the same model as models[{first}] "
                "(provider, model, base_url and env alike); remove one"
            )
    duplicates = {index for index, model in enumerate(models) if seen[model.identity] != index}
    slugs = [model.slug for model in models]
    dirs = []
    for model in models:
        if model.name:
            dirs.append(model.name)
        elif slugs.count(model.slug) > 1:
            digest = hashlib.sha256(model.identity.encode()).hexdigest()[:8]
            dirs.append(f"{model.slug}-{digest}")
        else:
            dirs.append(model.slug)
    for index, name in enumerate(dirs):
        if index in duplicates:
            continue  # said above
        if name in RESERVED_DIRS or dirs.index(name) != index:
            line = line_of(text, ("models", index))
            where = f" (line {line})" if line else ""
            other = "is reserved" if name in RESERVED_DIRS else "is taken by another model"
            problems.append(f"{file}: models[{index}]{where}: the folder name {name!r} {other}")
    if problems:
        raise InputError(f"{file} has {counted(len(problems), 'problem')}", details=problems)
    return dirs
