"""``bat init.agent``: a complete BAT-ADK agent project from ``templates/agent``.

``--force`` writes into an existing folder, which may be an agent the user has worked
on for weeks, so it never destroys what the user wrote:

* ``.env`` is merged: every existing line, key and value is kept (an API key, a
  registry); only keys the template has and the file lacks are added;
* client modules that exist are kept, and ``src/llm_clients/__init__.py`` imports every
  client present (its code around bat's marker lines is kept);
* any other file that exists and differs from what bat would write is not overwritten:
  the whole command is refused, naming each such file, and nothing is written;
* a flag that contradicts the existing ``.env`` (``--port 9200`` where ``PORT=9900``) is
  refused the same way; ``bat set.env`` changes a value.

Values not given as flags come from the existing ``.env`` before the configuration, so
re-running ``init.agent NAME -f`` renders the same ``Dockerfile`` and ``config.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bat.atomic import PRIVATE, check_writable
from bat.dotenv import key_lines, merge_missing, parse_env, read_env_text
from bat.errors import BatError, InputError, UsageError
from bat.scaffold import values
from bat.scaffold.clients import CLIENTS_DIR, EXPORTS, client_files, clients_in, updated_exports
from bat.scaffold.names import AgentName, ClientName, parse_client_list
from bat.scaffold.render import existing_text, render_tree, require_file_slots, write_files

DEFAULT_CLIENT = "assistant"
ENV_FILE = ".env"
# The .env key each setting is written to, for reading them back from an existing agent.
ENV_KEYS = {"port": "PORT", "model": "MODEL", "model_provider": "MODEL_PROVIDER"}
# Files that can hold a secret: created 0600.
PRIVATE_FILES = {ENV_FILE}


@dataclass(frozen=True)
class AgentRequest:
    """What ``init.agent`` was asked for, already validated (see :meth:`build`)."""

    name: AgentName
    target: Path
    clients: list[ClientName]
    port: int
    model: str
    provider: values.Provider
    force: bool = False
    # Values given as flags, by .env key, in the words to use if the .env disagrees.
    flagged: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The client the generated graph asks (the first given, or the existing agent's).
    main_client: ClientName | None = None
    # The graph with tools (templates/agent_tools): an `add` tool and an `ask_user`
    # human-input step, so tool-call and input-required checks have something to check.
    tools: bool = False

    @classmethod
    def build(
        cls,
        name: str,
        *,
        flags: Mapping[str, object] | None = None,
        config: Mapping[str, object] | None = None,
        force: bool = False,
        tools: bool = False,
    ) -> AgentRequest:
        """Validate every input before anything is written; raise ``InputError`` if bad.

        ``flags`` are the command-line values (None: not given), ``config`` the configured
        ones (``init.agent.*``); keys ``output_dir``, ``clients``, ``port``, ``model``,
        ``model_provider``. A message names where a bad value came from.
        """
        sources = _Sources(flags or {}, config or {})
        agent = AgentName.parse(name)
        output_dir = sources.path("output_dir")
        target = output_dir / agent.raw
        if target.exists() and not target.is_dir():
            raise UsageError(f"{target}: exists and is not a directory")
        if force and (target / ENV_FILE).exists():
            sources.read_env(target / ENV_FILE)
        provider = sources.check("model_provider", values.provider, "openai")
        model = sources.check("model", values.model, None) or provider.default_model
        port = sources.check("port", values.port, 9900)
        chosen, main = sources.clients(target)
        flagged = {
            ENV_KEYS[key]: (f"--{key.replace('_', '-')}", normal)
            for key, normal in (
                ("port", str(port)),
                ("model", model),
                ("model_provider", provider.name),
            )
            if sources.given(key)
        }
        return cls(
            name=agent,
            target=target,
            clients=chosen,
            port=port,
            model=model,
            provider=provider,
            force=force,
            flagged=flagged,
            main_client=main,
            # an agent made with --tools keeps its graph under --force without the flag
            tools=tools or (force and has_scaffolded_tools(target)),
        )


class _Sources:
    """Where each setting comes from: a flag, else the existing .env, else the config."""

    def __init__(self, flags: Mapping[str, object], config: Mapping[str, object]) -> None:
        self.flags = flags
        self.config = config
        self.env: dict[str, str] = {}
        self.env_where: dict[str, str] = {}

    def given(self, key: str) -> bool:
        return self.flags.get(key) not in (None, [], ())

    def read_env(self, path: Path) -> None:
        text = read_env_text(path)
        self.env = parse_env(text)
        self.env_where = {k: f"{path}: {k} (line {n})" for k, n in key_lines(text).items()}

    def raw(self, key: str, fallback: object) -> tuple[object, str]:
        """The value for ``key`` and the words naming its source."""
        if self.given(key):
            return self.flags[key], f"--{key.replace('_', '-')}"
        env_key = ENV_KEYS.get(key)
        if env_key and self.env.get(env_key):
            return self.env[env_key], self.env_where[env_key]
        value = self.config.get(key)
        variable = f"BAT_INIT_AGENT_{key.upper()}"
        return (
            fallback if value is None else value,
            f"init.agent.{key} (configuration: bat.yaml, -f file or {variable})",
        )

    def check(self, key: str, check, fallback: object):
        value, where = self.raw(key, fallback)
        if value is None:
            return None
        try:
            return check(value)
        except BatError as exc:
            raise InputError(f"{where}: {exc.message}") from None

    def path(self, key: str) -> Path:
        value, where = self.raw(key, ".")
        if not isinstance(value, (str, Path)) or "\x00" in str(value):
            raise InputError(f"{where}: invalid folder {value!r}")
        path = Path(value or ".").expanduser()
        for folder in (path, *path.parents):
            if folder.exists() and not folder.is_dir():
                raise UsageError(f"{where}: {folder} is a file, not a folder")
        return path

    def clients(self, target: Path) -> tuple[list[ClientName], ClientName]:
        """The clients to create and the one the graph asks.

        Without ``--clients``, an existing agent keeps its clients and its graph's client;
        a new one gets the configured clients.
        """
        existing = clients_in(target / CLIENTS_DIR) if target.is_dir() else []
        if not self.given("clients") and existing:
            return existing, _graph_client(target, existing) or existing[0]
        value, where = self.raw("clients", DEFAULT_CLIENT)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise InputError(f"{where}: expected client names, comma-separated, not {value!r}")
        try:
            chosen = parse_client_list(value) or parse_client_list(DEFAULT_CLIENT)
        except BatError as exc:
            raise InputError(f"{where}: {exc.message}") from None
        return chosen, chosen[0]


def has_scaffolded_tools(root: Path) -> bool:
    """Whether ``root`` is an agent made with ``init.agent --tools`` (its src/tools.py
    has the ask_user step)."""
    try:
        return "def ask_user(" in (root / "src" / "tools.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def _graph_client(target: Path, clients: list[ClientName]) -> ClientName | None:
    """The client an existing ``src/graph.py`` imports, if it is one of ``clients``."""
    try:
        text = (target / "src/graph.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = re.search(r"^from \.llm_clients import (\w+)$", text, re.M)
    return next((c for c in clients if match and c.class_name == match[1]), None)


@dataclass
class CreatedAgent:
    """Where the agent went, which files were written and which existing ones were kept."""

    target: Path
    files: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    existed: bool = False


def create_agent(request: AgentRequest) -> CreatedAgent:
    """Render the agent project and write it; see the module doc for ``--force``."""
    target = request.target
    existed = target.is_dir() and any(target.iterdir())
    if existed and not request.force:
        raise UsageError(f"{target} already exists and is not empty (use --force to overwrite)")
    rendered = render_tree("agent", _context(request))
    if request.tools:  # an overlay: its graph and state replace the plain ones
        rendered.update(render_tree("agent_tools", _context(request)))
    rendered.update(client_files(request.clients))
    exports = EXPORTS.as_posix()
    rendered[exports] = ""  # decided below, from the clients present
    require_file_slots(target, rendered)
    writes, kept, changed, conflicts = _plan(request, rendered)
    if changed or conflicts:
        problems = []
        if changed:
            problems.append(
                f"--force would overwrite {', '.join(changed)}, which differ from what bat "
                "writes (your changes would be lost; move them away to have them generated "
                "again)"
            )
        problems += conflicts
        raise UsageError(
            f"{target}: {'; '.join(problems)}. Nothing was written (bat add.client adds "
            "clients and bat set.env changes .env in an existing agent)"
        )
    for relative in writes:
        check_writable(target / relative)
    target.mkdir(parents=True, exist_ok=True)
    write_files(target, writes, modes={name: PRIVATE for name in PRIVATE_FILES})
    return CreatedAgent(target=target, files=sorted(writes), kept=sorted(kept), existed=existed)


def _plan(request: AgentRequest, rendered: dict[str, str]) -> tuple[dict, list, list, list]:
    """What to do with ``rendered``: ``(writes, kept, changed, conflicts)``.

    ``writes`` maps files to their new text; ``kept`` are client modules left alone;
    ``changed`` are files the user changed, which bat would overwrite; ``conflicts`` are
    flags the existing ``.env`` contradicts.
    """
    target = request.target
    writes: dict[str, str] = {}
    kept: list[str] = []
    changed: list[str] = []
    conflicts: list[str] = []
    for relative, fresh in rendered.items():
        path = target / relative
        if relative == EXPORTS.as_posix():
            present = (clients_in(path.parent) if path.parent.is_dir() else []) + request.clients
            old = existing_text(path)
            fresh = updated_exports(old, present, path)
        elif relative == ENV_FILE and path.exists():
            old = read_env_text(path)
            fresh = merge_missing(old, fresh, path=path)
            conflicts += _env_conflicts(request, old, path)
        elif not path.exists():
            writes[relative] = fresh
            continue
        elif relative.startswith(f"{CLIENTS_DIR.as_posix()}/"):
            kept.append(relative)  # the user's client code; add.client -f replaces one
            continue
        else:
            old = path.read_bytes()
            if old != fresh.encode("utf-8"):
                changed.append(relative)
            continue
        if old != fresh:
            writes[relative] = fresh
    return writes, kept, changed, conflicts


def _env_conflicts(request: AgentRequest, text: str, path: Path) -> list[str]:
    """One phrase per flag that contradicts a value the user has in ``.env``."""
    env = parse_env(text)
    return [
        f"{path} has {key}={env[key]} but {flag} {value} was given "
        f"(change it with bat set.env {flag} {value})"
        for key, (flag, value) in request.flagged.items()
        if env.get(key) and env[key] != value
    ]


def _context(request: AgentRequest) -> dict:
    from bat.scaffold.dockerfile import settings_block
    from bat.version import installed_version

    settings = {"PORT": str(request.port), "MODEL": request.model}
    settings["MODEL_PROVIDER"] = request.provider.name
    return {
        "settings_block": settings_block(settings),
        "agent": request.name,
        "clients": request.clients,
        "main_client": request.main_client or request.clients[0],
        "port": request.port,
        "model": request.model,
        "provider": request.provider,
        "tools": request.tools,
        "bat_version": installed_version() or "source checkout",
    }
