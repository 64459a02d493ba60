"""``eval/eval.yaml``: what to evaluate, against which models, how hard to push.

The keys bat-cli users know keep their names (``evaluation.dataset``, ``output_dir``,
``agent_url``, ``agent_startup_timeout_s``, ``agent_shutdown_timeout_s``, ``k``,
``qualitative``, ``run_name``, ``models``, ``judge``); ours sit beside them
(``concurrency``, ``turn_timeout_s``, the ``agent`` block). Unknown keys are errors, so
a typo cannot silently fall back to a default. Every problem of a file is reported at
once, each with its key path and line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bat.errors import InputError
from bat.evaluation.locate import validation_problems

DEFAULT_FILE = Path("eval/eval.yaml")
DEFAULT_PORT = 9900


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _split_model(value: Any) -> Any:
    """``"openai:gpt-4.1-mini"`` -> ``{"provider": "openai", "model": "gpt-4.1-mini"}``."""
    if isinstance(value, str):
        provider, sep, model = value.partition(":")
        if not sep or not provider.strip() or not model.strip():
            raise ValueError(f"expected 'provider:model', got {value!r}")
        return {"provider": provider.strip(), "model": model.strip()}
    return value


class _ProviderModel(_Strict):
    """A model at a provider, written as a mapping or as ``"provider:model"``."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    base_url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return _split_model(value)

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


class ModelSpec(_ProviderModel):
    """One model to evaluate the agent with: the agent is started with it in its env."""

    env: dict[str, str] = Field(default_factory=dict)

    @property
    def dir_name(self) -> str:
        """The model's folder in a run directory (safe on every file system)."""
        return re.sub(r"[^A-Za-z0-9._-]", "_", f"{self.provider}_{self.model}").lstrip(".")


JUDGE_DIMENSIONS = (
    "response_relevance",
    "task_completion_quality",
    "hallucination_score",
    "tool_call_appropriateness",
)
MAX_PROMPT_CHARS = 2000


class JudgePrompts(_Strict):
    """Agent-specific instructions added to the rubric of each dimension."""

    response_relevance: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    task_completion_quality: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    hallucination_score: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    tool_call_appropriateness: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)


class JudgeSpec(_ProviderModel):
    """One LLM judge of ``qualitative`` scoring (used by ``eval.judge``).

    ``provider: ollama`` speaks Ollama's native ``/api/chat``; any other provider speaks
    OpenAI-compatible chat completions at ``base_url`` (OpenAI, vLLM, llama.cpp server,
    LM Studio, Ollama's ``/v1``).
    """

    provider: str = Field(default="openai", min_length=1)
    api_key_env: str | None = None
    prompts: JudgePrompts = Field(default_factory=JudgePrompts)
    concurrency: int = Field(default=16, ge=1, le=256)
    timeout_s: float = Field(default=60, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    budget_chars: int = Field(default=12000, ge=500, le=1_000_000)


class AgentSpec(_Strict):
    """How the agent under test is started, or that it is already running."""

    start: bool = True
    command: str = Field(default="uv run .", min_length=1)
    root: Path = Path(".")
    env: dict[str, str] = Field(default_factory=dict)
    spans_file: Path | None = None  # spans of an agent that is already running (start: false)


class EvaluationSection(_Strict):
    """The ``evaluation:`` block."""

    run_name: str | None = None
    dataset: Path = Path("eval/input/tasks.json")
    output_dir: Path = Path("eval/output")
    agent_url: str | None = None
    agent_startup_timeout_s: float = Field(default=60, gt=0)
    agent_shutdown_timeout_s: float = Field(default=10, gt=0)
    k: int = Field(default=1, ge=1, le=1000)
    qualitative: bool = False
    concurrency: int = Field(default=8, ge=1, le=1024)
    turn_timeout_s: float = Field(default=60, gt=0)
    agent: AgentSpec = Field(default_factory=AgentSpec)

    @field_validator("agent_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"expected an http(s) URL such as http://127.0.0.1:9900, got {value!r}"
            )
        return value.rstrip("/")

    @field_validator("run_name")
    @classmethod
    def _safe_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
            raise ValueError("use up to 64 letters, digits, '.', '_' or '-'")
        return value


class EvalConfig(_Strict):
    """The whole of ``eval/eval.yaml``."""

    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    models: list[ModelSpec] = Field(default_factory=list)
    judge: JudgeSpec | list[JudgeSpec] | None = None

    @property
    def judges(self) -> list[JudgeSpec]:
        """The judges, as a list (``judge:`` may hold one or several)."""
        if self.judge is None:
            return []
        return list(self.judge) if isinstance(self.judge, list) else [self.judge]

    @field_validator("models", mode="before")
    @classmethod
    def _no_models(cls, value: Any) -> Any:
        return [] if value is None else value  # `models:` with every entry commented out


class ResolvedConfig(BaseModel):
    """An EvalConfig with every relative path and default made concrete."""

    model_config = ConfigDict(frozen=True)

    file: Path
    config: EvalConfig
    root: Path
    dataset: Path
    output_dir: Path
    agent_url: str

    @property
    def evaluation(self) -> EvaluationSection:
        return self.config.evaluation

    @property
    def models(self) -> list[ModelSpec | None]:
        """The models to run; ``[None]`` means the agent's own settings, once."""
        return list(self.config.models) or [None]

    @property
    def agent_port(self) -> int:
        parts = urlsplit(self.agent_url)
        return parts.port or (443 if parts.scheme == "https" else 80)


def load_config(file: Path = DEFAULT_FILE, *, base: Path | None = None) -> ResolvedConfig:
    """Read, validate and resolve an eval.yaml; relative paths are taken from ``base`` (cwd)."""
    import yaml

    base = Path.cwd() if base is None else base
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{file} not found (bat eval.init writes one)") from None
    except IsADirectoryError:
        raise InputError(f"{file} is a directory, not a YAML file") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{file}: invalid YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{file}: the top level must be a mapping of keys")
    try:
        config = EvalConfig.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(file, text, exc)
        raise InputError(f"{file} has {len(problems)} problem(s)", details=problems) from None
    evaluation = config.evaluation
    root = (base / evaluation.agent.root).resolve()
    return ResolvedConfig(
        file=file,
        config=config,
        root=root,
        dataset=base / evaluation.dataset,
        output_dir=base / evaluation.output_dir,
        agent_url=evaluation.agent_url or f"http://127.0.0.1:{_dotenv_port(root)}",
    )


def _dotenv_port(root: Path) -> int:
    """The PORT of the agent's .env (where a started agent will listen), else 9900."""
    try:
        lines = (root / ".env").read_text(encoding="utf-8").splitlines()
    except OSError:
        return DEFAULT_PORT
    for line in lines:
        key, sep, value = line.strip().removeprefix("export ").partition("=")
        if sep and key.strip() == "PORT":
            value = value.split("#", 1)[0].strip().strip("'\"")
            if value.isdigit():
                return int(value)
    return DEFAULT_PORT
