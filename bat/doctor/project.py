"""The checks of the folder doctor runs in: the agent project and the evaluation.

Which apply: the eval checks when ``eval/eval.yaml`` (or ``eval.file``) exists; the
agent checks when the agent's folder (eval.yaml's ``evaluation.agent.root`` of an agent
bat starts, else the current folder) is an agent project, i.e. has an ``agent.json``, a
``config.yaml`` or a ``pyproject.toml`` that depends on bat-adk. A check that does not
apply is printed with ``–`` and never fails.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bat.doctor.check import Check, failed, passed, skipped
from bat.doctor.net import probe
from bat.errors import BatError, OperationError
from bat.figures import counted
from bat.secrets import Scrubber, config_secrets, config_urls

if TYPE_CHECKING:
    from bat.doctor.check import Options
    from bat.evaluation.inputs.config import ResolvedConfig

EVAL_FIX = "correct eval.yaml where named (bat eval.show prints it resolved; docs/eval-formats.md)"


def _words(exc: BatError) -> str:
    return "; ".join([exc.message, *exc.details])


@dataclass
class Project:
    """What doctor found in the folder: eval.yaml (resolved, or why not) and the agent."""

    cwd: Path
    eval_file: Path
    resolved: ResolvedConfig | None = None
    eval_error: BatError | None = None
    root: Path = Path(".")
    is_agent: bool = False
    dotenv: dict[str, str] = field(default_factory=dict)
    dotenv_error: BatError | None = None
    scrubber: Scrubber = field(default_factory=Scrubber)  # the evaluation's secrets
    _dataset: Any = None  # the dataset checked once (DatasetCheck or its BatError)
    _dataset_lock: threading.Lock = field(default_factory=threading.Lock)

    def dataset(self) -> Any:
        """eval.yaml's dataset checked as ``eval.show`` checks it, once for every check
        that needs it (a large one takes seconds; the checks run in threads); its error
        raised each time."""
        from bat.evaluation.inputs.dataset import check_dataset

        with self._dataset_lock:
            if self._dataset is None:
                resolved = self.resolved
                try:
                    self._dataset = check_dataset(
                        resolved.dataset, unknown_keys=resolved.unknown_keys
                    )
                except BatError as exc:
                    self._dataset = exc
        if isinstance(self._dataset, BatError):
            raise self._dataset
        return self._dataset

    @classmethod
    def read(cls, options: Options) -> Project:
        from bat.dotenv import read_dotenv
        from bat.evaluation.inputs.config import load_config

        cwd = options.cwd
        eval_file = options.eval_file
        found = cls(cwd=cwd, eval_file=eval_file, root=cwd)
        if (cwd / eval_file).exists():
            try:
                found.resolved = load_config(cwd / eval_file, base=cwd)
            except BatError as exc:
                found.eval_error = exc
            except OSError as exc:
                found.eval_error = OperationError(f"{eval_file}: {exc.strerror or exc}")
        resolved = found.resolved
        if resolved is not None and resolved.evaluation.agent.start:
            found.root = resolved.root
        found.is_agent = found.root.is_dir() and _looks_like_agent(found.root)
        try:
            found.dotenv = read_dotenv(found.root / ".env")
        except BatError as exc:
            found.dotenv_error = exc
        if resolved is not None:  # whatever a check quotes, no key of it is printed
            env = {**found.dotenv, **os.environ}
            found.scrubber = Scrubber(config_secrets(resolved, env), config_urls(resolved))
        return found

    @property
    def agent_env(self) -> dict[str, str]:
        """The environment the agent is started with (``.env``, the shell, agent.env)."""
        extra = self.resolved.evaluation.agent.env if self.resolved is not None else {}
        return {**self.dotenv, **os.environ, **extra}

    def uv_env(self) -> dict[str, str]:
        """What uv sees when bat starts the agent: the shell, plus the agent's ``.env``
        and ``evaluation.agent.env`` when there is an agent to start."""
        if self.is_agent or self.starts_agent:
            return self.agent_env
        return dict(os.environ)

    def needs_uv_python(self) -> bool:
        """Whether a Python for uv is required here: the agent bat starts runs through
        uv (the default ``uv run .``), or this is an agent project (``uv run .`` is how
        it starts). An evaluation that starts its agent otherwise, or starts none, only
        warns."""
        if self.starts_agent:
            command = self.resolved.evaluation.agent.command.split()  # type: ignore[union-attr]
            return bool(command) and Path(command[0]).name in ("uv", "uvx")
        return self.resolved is None

    def uv_cwd(self) -> Path | None:
        return self.root if self.is_agent else None

    @property
    def starts_agent(self) -> bool:
        return self.resolved is not None and self.resolved.evaluation.agent.start


def _looks_like_agent(root: Path) -> bool:
    from bat.evaluation.inputs.agent_settings import _uses_bat_adk

    return any((root / name).exists() for name in ("agent.json", "config.yaml")) or (
        _uses_bat_adk(root)
    )


def plan(found: Project) -> list[tuple[str, Callable[[], Check | list[Check]]]]:
    """The project's checks, in order, each with the name a crash of it is shown under."""
    return [
        ("eval.yaml", partial(eval_config_check, found)),
        ("agent adapter", partial(adapter_checks, found)),
        ("dataset", partial(dataset_check, found)),
        ("agent.json", partial(agent_card_check, found)),
        (".env", partial(dotenv_check, found)),
        ("config.yaml", partial(agent_config_check, found)),
        ("agent port", partial(port_check, found)),
        ("model", partial(model_checks, found)),
        ("judge", partial(judge_checks, found)),
        ("user model", partial(user_model_checks, found)),
        ("eval checks", partial(eval_checks_check, found)),
    ]


# -- the evaluation -----------------------------------------------------------------


def eval_config_check(found: Project) -> Check:
    """eval.yaml read and validated by ``load_config``, as every eval command reads it."""
    name = "eval.yaml"
    shown = found.eval_file
    if found.eval_error is not None:
        return failed(name, _words(found.eval_error), EVAL_FIX)
    resolved = found.resolved
    if resolved is None:
        return skipped(name, f"no {shown} here (bat eval.init writes one)")
    try:
        from bat.evaluation.inputs.preflight import check_output_dir

        check_output_dir(resolved.output_dir)
    except BatError as exc:
        return failed(name, _words(exc), EVAL_FIX)
    count = len(resolved.config.models)
    models = counted(count, "model") if count else "the agent's own model"
    adapter = resolved.evaluation.agent.adapter
    agent = f"agent at {_url(resolved)}" if adapter == "a2a" else f"agent {adapter} (command line)"
    detail = f"{shown}: {models}, k={resolved.evaluation.k}, {agent}"
    if resolved.warnings:  # keys of bat-cli's without a meaning here: as eval.show says
        return failed(name, f"{detail}; {'; '.join(resolved.warnings)}", EVAL_FIX, required=False)
    return passed(name, detail)


def adapter_checks(found: Project) -> list[Check]:
    """A command-line agent (``evaluation.agent.adapter``): its program is installed, and
    a key it reads is set unless every model is bat's scripted one (bat.agents)."""
    resolved = found.resolved
    if resolved is None or resolved.evaluation.agent.adapter == "a2a":
        return [skipped("agent adapter", "a2a (an A2A server)")]
    from bat.agents import registry
    from bat.agents.registry import program_of

    name = resolved.evaluation.agent.adapter
    try:
        adapter = registry.load(name, resolved.evaluation.agent.options)
    except BatError as exc:
        return [failed("agent adapter", _words(exc), EVAL_FIX)]
    import shutil

    program = program_of(adapter)
    where = shutil.which(program) if program else None
    checks = [
        passed("agent adapter", f"{name}: {program} at {where}")
        if where or not program
        else failed(
            "agent adapter",
            f"{name}: the program {program!r} is not on PATH",
            adapter.install or "install it, or set evaluation.agent.options.executable",
        )
    ]
    models = resolved.config.models
    if adapter.key_variables and not (models and all(m.script for m in models)):
        given = {key for m in models for key in m.env} | {
            key for key in adapter.key_variables if os.environ.get(key, "").strip()
        }
        if not given & set(adapter.key_variables):
            keys = " or ".join(adapter.key_variables)
            checks.append(
                failed(
                    "agent key",
                    f"{name}: {keys} is not set (unless its own login holds a key)",
                    f"set {keys} in the shell or in a models: entry's env",
                    required=False,
                )
            )
    return checks


def dataset_check(found: Project) -> Check:
    """The dataset validated by ``check_dataset`` (what ``eval.show`` and ``eval.run`` do)."""
    name = "dataset"
    if found.resolved is None:
        return skipped(name, "no evaluation to check (eval.yaml)")
    path = found.resolved.dataset
    try:
        checked = found.dataset()
    except BatError as exc:
        return failed(
            name,
            _words(exc),
            "correct the tasks file where named (bat eval.schema tasks.json; docs/eval-formats.md)",
        )
    return passed(name, f"{_rel(path, found.cwd)}: {counted(checked.count, 'task')}")


# -- the agent project ----------------------------------------------------------------


def agent_card_check(found: Project) -> Check:
    """The agent card file bat-adk serves (config.yaml's ``agent_card``, else agent.json),
    read by the strict reader ``bat build`` uses."""
    from bat.scaffold.agent_json import read_card_file

    name = "agent.json"
    if not found.is_agent:
        return skipped(name, "not an agent project here (no agent.json, config.yaml)")
    path = found.root / "agent.json"
    if not path.exists():  # a FIFO or device exists: the reader refuses it by name
        return failed(
            name,
            f"no {_rel(path, found.cwd)}: bat-adk serves it as the agent card, and bat build "
            "names the image after it",
            "restore agent.json (from version control; its fields: docs/agent-project.md)",
        )
    try:
        card = read_card_file(path)
    except BatError as exc:
        return failed(name, _words(exc), "correct the agent card where named")
    if not str(card.get("name") or "").strip():
        return failed(name, f"{path}: the card has no name", 'add "name": "..." to it')
    version = f" {card['version']}" if card.get("version") else ""
    return passed(name, f"{card['name']}{version}")


def dotenv_check(found: Project) -> Check:
    """The agent's ``.env``, read by both readers bat has: ``set.env``'s (which must be
    able to rewrite it) and the one ``eval.run`` starts the agent with."""
    from bat.dotenv import read_env_text

    name = ".env"
    path = found.root / ".env"
    if not (found.is_agent or found.starts_agent):
        return skipped(name, "not an agent project here")
    if not path.exists():
        return skipped(name, f"no {_rel(path, found.cwd)} (the agent reads the shell only)")
    fix = "correct the line named (one KEY=value per line; bat set.env rewrites values)"
    if found.dotenv_error is not None:
        return failed(name, _words(found.dotenv_error), fix)
    try:
        read_env_text(path)
    except BatError as exc:
        return failed(name, _words(exc), fix)
    return passed(name, counted(len(found.dotenv), "variable"))


def agent_config_check(found: Project) -> Check:
    """config.yaml (or ``CONFIG_PATH``) read as bat-adk reads it; with an eval.yaml, the
    very check ``eval.run`` makes before starting the agent (``check_agent_files``)."""
    from bat.evaluation.inputs.agent_settings import AgentSettings

    name = "config.yaml"
    if not (found.is_agent or found.starts_agent):
        return skipped(name, "not an agent project here")
    if found.dotenv_error is not None:
        return skipped(name, "not read: the .env it is expanded with is invalid")
    fix = "correct the agent's config file where named (docs/agent-project.md)"
    try:
        if found.starts_agent and found.resolved is not None:
            from bat.evaluation.inputs.preflight import check_agent_files

            try:
                dataset = found.dataset()
            except BatError:
                dataset = None  # the dataset check says why
            if dataset is not None:
                settings, _ = check_agent_files(found.resolved, dataset)
            else:
                settings = AgentSettings.read(found.root, found.agent_env)
        else:
            settings = AgentSettings.read(found.root, found.agent_env)
    except BatError as exc:
        return failed(name, _words(exc), fix)
    if settings.missing_config is not None:
        return failed(
            name,
            f"CONFIG_PATH names {settings.missing_config}, which does not exist",
            "correct CONFIG_PATH (in .env or the shell) or create the file",
        )
    if settings.endpoint_problem:
        return failed(name, settings.endpoint_problem, "write a port number there (or ${PORT})")
    if settings.config_path is None:
        if settings.uses_bat_adk:
            return failed(
                name,
                f"no config.yaml in {found.root}: a bat-adk agent needs it to start",
                "restore config.yaml (bat init.agent --force writes missing files)",
            )
        return skipped(name, "no config.yaml (not a bat-adk agent)")
    return passed(name, f"{_rel(settings.config_path, found.cwd)}, telemetry {settings.privacy}")


def eval_checks_check(found: Project) -> Check:
    """The one set of checks ``eval.run``, ``--dry-run`` and ``eval.show`` make
    (``project_checks``): its refusal fails, its warnings are said as eval.show says them
    (eval.yaml's own, on the eval.yaml line above)."""
    from bat.evaluation.inputs.preflight import project_checks

    name = "eval checks"
    resolved = found.resolved
    if resolved is None:
        return skipped(name, "no evaluation to check (eval.yaml)")
    if found.dotenv_error is not None:
        return skipped(name, "not made: the agent's .env is invalid")
    try:
        dataset = found.dataset()
    except BatError:
        return skipped(name, "not made: the dataset is invalid (see above)")
    fix = "as named (bat eval.show says the same; docs/eval.md)"
    try:
        warnings = project_checks(resolved, dataset).warnings
    except BatError as exc:
        return failed(name, _words(exc), fix)
    warnings = [w for w in warnings if w not in resolved.warnings]  # said by eval.yaml's line
    if warnings:
        return failed(name, "; ".join(warnings), fix, required=False)
    return passed(name, "what eval.run checks before it starts: nothing to say")


def port_check(found: Project) -> Check:
    """The agent's port: free for bat to start the agent there, or answered by an agent
    when bat is to evaluate one already running (``evaluation.agent.start: false``)."""
    from bat.evaluation.run.agent_card import card_answers

    if found.resolved is not None and found.resolved.evaluation.agent.adapter != "a2a":
        return skipped("agent port", "a command-line agent listens on no port")

    name = "agent port"
    resolved = found.resolved
    if resolved is None and not found.is_agent:
        return skipped(name, "no agent project or evaluation here")
    if resolved is None and found.dotenv_error is not None:
        return skipped(name, "not known: .env is invalid")
    try:
        url, source = _agent_url(found)
    except BatError as exc:
        return failed(name, _words(exc), "write a port number there (bat set.env --port N)")
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    starts = resolved is None or resolved.evaluation.agent.start
    connected = probe(host, port, timeout_s=0.5)
    if connected is not None:  # nothing listens
        if starts:
            return passed(name, f"{port} is free ({source})")
        return failed(
            name,
            f"no agent answers at {url} ({connected}) and evaluation.agent.start is false",
            "start the agent first (uv run .), or set evaluation.agent.start: true",
        )
    if card_answers(url, timeout_s=1):
        if resolved is not None and starts:
            return failed(
                name,
                f"an agent already answers at {url}: eval.run would refuse to start another",
                "stop it, or set evaluation.agent.start: false to evaluate the running agent",
            )
        return passed(name, f"an agent already answers at {url}")
    return failed(
        name,
        f"port {port} is held by something that is not an A2A agent (no agent card at {url})",
        f"stop what listens there (ss -ltnp 'sport = :{port}'), or move the agent: "
        "bat set.env --port N",
    )


def _agent_url(found: Project) -> tuple[str, str]:
    from bat.evaluation.inputs.agent_settings import AgentSettings, agent_address

    if found.resolved is not None:
        return found.resolved.agent_url, found.resolved.agent_url_source
    settings = None
    with contextlib.suppress(BatError):  # an unreadable config.yaml: its own check says so
        settings = AgentSettings.read(found.root, found.agent_env)
    host, port, source = agent_address(
        settings, found.dotenv, names=("evaluation.agent.env", str(found.root / ".env"))
    )
    return f"http://{host}:{port}", source


# -- models and judges ----------------------------------------------------------------


def model_checks(found: Project) -> list[Check]:
    """Each model the agent runs with: its endpoint reachable, its key variable set (the
    variable from bat's one table, :mod:`bat.provider_keys`, as eval.run warns)."""
    from bat.provider_keys import key_variable

    resolved = found.resolved
    scripted: list[Check] = []
    if resolved is not None and resolved.config.models:
        # A script is served by bat (load_config has read its rules): no endpoint, no key.
        scripted = [
            passed(
                f"model {resolved.model_label(model)}",
                f"scripted by bat from {model.script} (offline, no key): a stand-in, not a model",
            )
            for model in resolved.config.models
            if model.script is not None
        ]
        entries = [
            (
                resolved.model_label(model),
                model.provider,
                model.base_url,
                {**found.agent_env, **model.env},
                "models[].env",
            )
            for model in resolved.config.models
            if model.script is None
        ]
    elif found.is_agent or found.starts_agent:
        if found.dotenv_error is not None:
            return [skipped("model", "not known: .env is invalid")]
        env = found.agent_env
        provider, base_url = _agent_model(found, env)
        if not provider:
            return [skipped("model", "the agent names no MODEL_PROVIDER")]
        label = f"{provider}:{env.get('MODEL') or 'default'}"
        entries = [(label, provider, base_url, env, None)]
    else:
        return [skipped("model", "no agent project or evaluation here")]
    from bat.evaluation.judging.client import OLLAMA_BASE_URL

    checks: list[Check] = scripted
    for label, provider, base_url, env, where in entries:
        if not base_url and provider.strip().lower() == "ollama":
            base_url = OLLAMA_BASE_URL  # Ollama's own default: a local server
        key = key_variable(provider)
        checks.append(_endpoint_check(f"model {label}: endpoint", base_url, "base_url / BASE_URL"))
        checks.append(_key_check(f"model {label}: key", key, env, where, provider))
    return checks


def _agent_model(found: Project, env: dict[str, str]) -> tuple[str | None, str | None]:
    """The provider and base URL the agent's own settings give (env over config.yaml)."""
    from bat.evaluation.inputs.agent_settings import AgentSettings

    config: dict[str, Any] = {}
    with contextlib.suppress(BatError):  # the config.yaml check says why
        config = AgentSettings.read(found.root, env).config
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    provider = env.get("MODEL_PROVIDER") or model.get("provider")
    base_url = env.get("BASE_URL") or model.get("base_url")
    provider = provider if isinstance(provider, str) and "$" not in provider else None
    base_url = base_url if isinstance(base_url, str) and "$" not in base_url else None
    return provider, base_url


def judge_checks(found: Project) -> list[Check]:
    """Each judge of a qualitative evaluation: endpoint reachable, key variable set (the
    key lookup is the judge client's own, ``judging.client.api_key``)."""
    resolved = found.resolved
    if resolved is None:
        return [skipped("judge", "no evaluation here")]
    if not resolved.evaluation.qualitative:
        return [skipped("judge", "not used (evaluation.qualitative: false)")]
    if not resolved.config.judges:
        return [
            failed(
                "judge",
                "evaluation.qualitative is true but eval.yaml has no judge:",
                "add a judge: section, or set evaluation.qualitative: false",
            )
        ]
    env = {**found.dotenv, **os.environ}
    checks: list[Check] = []
    for spec in resolved.config.judges:
        checks += _served_model_checks("judge", spec, env)
    return checks


def user_model_checks(found: Project) -> list[Check]:
    """eval.yaml's ``user:`` (the model of the simulated users), checked as a judge is;
    nothing without one."""
    resolved = found.resolved
    spec = resolved.config.user if resolved is not None else None
    if spec is None:
        return []
    return _served_model_checks("user", spec, {**found.dotenv, **os.environ})


def _served_model_checks(who: str, spec: Any, env: dict[str, str]) -> list[Check]:
    """A judge's or the user model's endpoint reachable and key variable set (``who``:
    its eval.yaml section); a script is bat's to serve: offline, no key."""
    from bat.evaluation.inputs.config import api_key
    from bat.evaluation.judging.client import endpoint

    label = spec.label
    if spec.script is not None:  # checked with eval.yaml; bat serves it, offline
        what = f"scripted by bat from {spec.script} (offline, no key): a stand-in"
        return [passed(f"{who} {label}", what)]
    protocol, base, _ = endpoint(spec)
    configured = spec.base_url or protocol == "ollama"
    checks = [
        _endpoint_check(f"{who} {label}: endpoint", base if configured else None, f"{who}.base_url")
    ]
    name = f"{who} {label}: key"
    try:
        key = api_key(spec, {**env, **spec.env})
    except BatError as exc:
        checks.append(
            failed(
                name,
                _words(exc),
                f"set {spec.api_key_env} in the shell or the agent's .env (its value "
                "is never printed)",
            )
        )
        return checks
    checks.append(
        passed(name, f"{spec.api_key_env} is set" if key else "no key needed (no api_key_env)")
    )
    return checks


def _endpoint_check(name: str, url: str | None, where: str) -> Check:
    """A TCP connect to the configured address only (≤ 1 s); no address: not probed."""
    from bat.secrets import display_url

    if not url:
        return skipped(name, "the provider's own service (not probed)")
    shown = display_url(url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        host = None
    if not host:
        return failed(name, f"{shown} is not a URL with a host", f"correct {where}")
    problem = probe(host, port, timeout_s=1.0)
    if problem is not None:
        return failed(
            name,
            f"cannot connect to {shown} ({problem})",
            f"start the model server there, or correct {where}",
        )
    return passed(name, f"{shown} accepts connections")


def _key_check(
    name: str, key: str | None, env: dict[str, str], where: str | None, provider: str
) -> Check:
    if key is None:
        return passed(name, f"no key variable known for provider {provider}")
    value = env.get(key)
    if value is None or not value.strip():
        state = "is not set" if value is None else "is empty"
        return failed(
            name,
            f"{key} {state} (read from the shell, the agent's .env"
            + (f" and {where})" if where else ")"),
            f"set {key} in the shell or the agent's .env (its value is never printed)",
        )
    return passed(name, f"{key} is set")


def _url(resolved: ResolvedConfig) -> str:
    from bat.secrets import display_url

    return display_url(resolved.agent_url) or resolved.agent_url


def _rel(path: Path, base: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)
