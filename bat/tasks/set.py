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
    """Update values in ./.env in place, keeping every other line as it is; PORT, MODEL and
    MODEL_PROVIDER also in the Dockerfile's settings block, so the image agrees."""
    import sys
    from pathlib import Path

    from bat.atomic import write_text_atomic
    from bat.dotenv import update_env_file
    from bat.errors import BatError, InputError
    from bat.scaffold import values
    from bat.scaffold.dockerfile import KEYS, planned_dockerfile

    checks = (
        ("--port", "PORT", port, lambda text: str(values.port(text))),
        ("--model", "MODEL", model, values.model),
        ("--model-provider", "MODEL_PROVIDER", model_provider, lambda t: values.provider(t).name),
        ("--docker-registry", "BAT_DOCKER_REGISTRY", docker_registry, values.docker_registry),
        ("--repo", "BAT_DOCKER_REPO", repo, values.docker_repo),
    )
    updates: dict[str, str] = {}
    for flag, key, given, check in checks:
        if given is None:
            continue
        try:
            updates[key] = check(given)
        except BatError as exc:
            raise InputError(f"{flag}: {exc.message}") from None
    image_updates = {key: value for key, value in updates.items() if key in KEYS}
    dockerfile = Path("Dockerfile")
    # The Dockerfile is read and checked first: one it cannot update stops the command
    # before .env changes, so the two never disagree.
    planned = planned_dockerfile(dockerfile, image_updates) if image_updates else None
    update_env_file(Path(".env"), updates)
    for key, value in updates.items():
        print(f"Set {key}={value} in .env")
    if image_updates and dockerfile.exists():
        changed = None
        if planned is not None:
            old, fresh = planned
            changed = fresh != old
            if changed:
                write_text_atomic(dockerfile, fresh)
        if changed is None:
            print(
                "bat: note: Dockerfile has no bat settings block: set "
                f"{', '.join(image_updates)} there yourself (docs/set.md)",
                file=sys.stderr,
            )
        elif changed:
            print(f"Set {', '.join(image_updates)} in the Dockerfile's settings block")


ns = Collection("set")
ns.add_task(env)

# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["env", "ns"]
