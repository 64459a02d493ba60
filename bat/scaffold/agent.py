"""``bat init.agent``: a complete BAT-ADK agent project from ``templates/agent``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bat.errors import UsageError
from bat.scaffold import values
from bat.scaffold.clients import client_files, exports_block
from bat.scaffold.names import AgentName, ClientName, parse_client_list
from bat.scaffold.render import render_tree, write_files

DEFAULT_CLIENT = "assistant"


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

    @classmethod
    def build(
        cls,
        name: str,
        *,
        output_dir: str | Path = ".",
        clients: list[str] | str = (),
        port: object = 9900,
        model: str | None = None,
        model_provider: str = "openai",
        force: bool = False,
    ) -> AgentRequest:
        """Validate every input before anything is written; raise ``InputError`` if bad."""
        agent = AgentName.parse(name)
        provider = values.provider(model_provider)
        chosen = parse_client_list(clients) or parse_client_list(DEFAULT_CLIENT)
        return cls(
            name=agent,
            target=Path(output_dir) / agent.raw,
            clients=chosen,
            port=values.port(port),
            model=values.model(model) if model else provider.default_model,
            provider=provider,
            force=force,
        )


@dataclass
class CreatedAgent:
    """Where the agent went and which files were written, relative to it."""

    target: Path
    files: list[str] = field(default_factory=list)


def create_agent(request: AgentRequest) -> CreatedAgent:
    """Render the agent project and write it, refusing a non-empty folder without force."""
    target = request.target
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not request.force:
        raise UsageError(f"{target} already exists and is not empty (use --force to overwrite)")
    files = render_tree("agent", _context(request))
    files.update(client_files(request.clients))
    files["src/llm_clients/__init__.py"] = exports_block(request.clients, standalone=True)
    target.mkdir(parents=True, exist_ok=True)
    write_files(target, files)
    return CreatedAgent(target=target, files=sorted(files))


def _context(request: AgentRequest) -> dict:
    from bat.version import installed_version

    return {
        "agent": request.name,
        "clients": request.clients,
        "main_client": request.clients[0],
        "port": request.port,
        "model": request.model,
        "provider": request.provider,
        "bat_version": installed_version() or "source checkout",
    }
