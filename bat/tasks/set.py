"""``bat set``: change an existing agent's settings in place (``set.env``)."""

from __future__ import annotations

from invoke import Collection, Context

from bat.tasks._options import command


@command(
    help={
        "port": "PORT: the agent's A2A port.",
        "model": "MODEL: the chat model name.",
        "model-provider": "MODEL_PROVIDER: openai, anthropic, deepseek, nvidia or ollama.",
        "docker-registry": "BAT_DOCKER_REGISTRY: registry used by bat build/push.",
        "repo": "BAT_DOCKER_REPO: image repository used by bat build/push.",
    },
)
def env(
    c: Context,
    port: str | None = None,
    model: str | None = None,
    model_provider: str | None = None,
    docker_registry: str | None = None,
    repo: str | None = None,
) -> None:
    """Update values in ./.env in place, keeping every other line as it is."""
    from pathlib import Path

    from bat.scaffold import values
    from bat.scaffold.dotenv import update_env_file

    updates: dict[str, str] = {}
    if port is not None:
        updates["PORT"] = str(values.port(port))
    if model is not None:
        updates["MODEL"] = values.model(model)
    if model_provider is not None:
        updates["MODEL_PROVIDER"] = values.provider(model_provider).name
    if docker_registry is not None:
        updates["BAT_DOCKER_REGISTRY"] = values.docker_registry(docker_registry)
    if repo is not None:
        updates["BAT_DOCKER_REPO"] = values.docker_repo(repo)
    update_env_file(Path(".env"), updates)
    for key, value in updates.items():
        print(f"Set {key}={value} in .env")


ns = Collection("set")
ns.add_task(env)
