"""``bat init``: create things from templates (``init.agent``)."""

from __future__ import annotations

from invoke import Collection, Context

from bat.tasks._options import command, setting


@command(
    iterable=["clients"],
    short={"clients": "c", "output_dir": "o", "force": "f"},
    help={
        "name": "Agent name: the folder, the Python project and the class names derive from it.",
        "clients": "ChatModelClient scaffolds to create, comma-separated or repeated "
        "(default: assistant). The first one answers in the generated graph.",
        "output-dir": "Folder to create the agent in (default: the current folder).",
        "force": "Write into an existing non-empty folder: missing files are added, .env "
        "keys merged, clients kept; refused if a file you changed would be overwritten.",
        "port": "PORT written to .env: the agent's A2A port (default 9900).",
        "model": "MODEL written to .env (default: the provider's usual model).",
        "model-provider": "MODEL_PROVIDER written to .env: openai, anthropic, deepseek, "
        "nvidia or ollama (default openai).",
        "tools": "A graph whose model can call tools: an `add` tool and an `ask_user` step "
        "that pauses for the user's answer (input-required).",
        "privacy": "telemetry.privacy in config.yaml: none (default), content, names or full.",
        "reasoning-effort": "model.reasoning_effort in config.yaml (e.g. low; the provider's "
        "words).",
        "service-tier": "model.service_tier in config.yaml (e.g. flex; the provider's words).",
    },
)
def agent(
    c: Context,
    name: str,
    clients: list[str] | None = None,
    output_dir: str | None = None,
    force: bool = False,
    port: str | None = None,
    model: str | None = None,
    model_provider: str | None = None,
    tools: bool = False,
    privacy: str | None = None,
    reasoning_effort: str | None = None,
    service_tier: str | None = None,
) -> None:
    """Create a complete BAT-ADK agent project NAME (agent card, config, src/, Docker files)."""
    from bat.scaffold.agent import AgentRequest, create_agent
    from bat.scaffold.config_yaml import model_settings, write_settings

    # BAT-ADK's ModelConfig and telemetry settings, checked before anything is written.
    settings = model_settings(privacy, reasoning_effort, service_tier)
    keys = ("output_dir", "clients", "port", "model", "model_provider")
    flags = dict(zip(keys, (output_dir, clients, port, model, model_provider), strict=True))
    # A flag wins; without one, an existing agent's .env, then the configuration.
    config = {key: setting(c, None, f"init.agent.{key}", None) for key in keys}
    request = AgentRequest.build(name, flags=flags, config=config, force=force, tools=tools)
    created = create_agent(request)
    if settings:
        write_settings(created.target / "config.yaml", settings)
    verb = "Updated" if created.existed else "Created"
    from bat.figures import counted

    written = counted(len(created.files), "file")
    print(f"{verb} agent '{request.name.raw}' in {created.target}/ ({written} written):")
    for relative in created.files:
        print(f"  {relative}")
    for chosen in settings:
        print(f"Set {chosen.key}={chosen.value} in config.yaml")
    if created.kept:
        print(f"Kept as they were ({counted(len(created.kept), 'file')}):")
        for relative in created.kept:
            print(f"  {relative}")
    from bat.uv_binary import uv_for_humans

    uv = uv_for_humans()
    print(f"Next: cd {created.target} && {uv} run .   (serves A2A on port {request.port})")


ns = Collection("init")
ns.add_task(agent)
ns.configure(
    {
        "init": {
            "agent": {
                "output_dir": ".",
                "clients": "assistant",
                "port": 9900,
                "model": None,
                "model_provider": "openai",
            }
        }
    }
)

# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["agent", "ns"]
