"""``bat set``: change an existing agent's settings in place (``set.env``, ``set.config``)."""

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
    MODEL_PROVIDER also in the Dockerfile's settings block, so the image agrees (and PORT
    in config.yaml where it holds a literal endpoint.port)."""
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
    # The Dockerfile and config.yaml are read and checked first: one bat cannot update
    # stops the command before .env changes, so the files never disagree.
    planned = planned_dockerfile(dockerfile, image_updates) if image_updates else None
    config_port = _port_in_config(updates["PORT"]) if "PORT" in updates else None
    update_env_file(Path(".env"), updates)
    for key, value in updates.items():
        print(f"Set {key}={value} in .env")
    if config_port is not None:
        path, old_port, fresh = config_port
        write_text_atomic(path, fresh, follow_links=True)
        print(
            f"Set endpoint.port={updates['PORT']} in {path} too: it held the literal port "
            f"{old_port}, which bat-adk reads instead of PORT"
        )
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


@command(
    variadic="\n",  # `bat set.config a=1 b=2`: values may hold commas, so one per line
    help={"settings": "KEY=VALUE pairs, e.g. model.reasoning_effort=low telemetry.privacy=content"},
)
def config(c: Context, settings: str) -> None:
    """Set values in the agent's config.yaml in place, keeping its comments and every other
    line: model (provider, name, base_url, reasoning_effort, service_tier),
    telemetry.privacy, endpoint (port, url), checkpoints."""
    from bat.scaffold.config_yaml import parse_settings, write_settings

    chosen = parse_settings([line for line in settings.split("\n") if line.strip()])
    path = _config_path()
    write_settings(path, chosen)
    for setting in chosen:
        shown = str(setting.value).lower() if isinstance(setting.value, bool) else setting.value
        print(f"Set {setting.key}={shown} in {path}")


def _port_in_config(port: str):
    """``(path, old port, new text)`` when the agent's config.yaml writes ``endpoint.port``
    as a literal number: bat-adk reads it before ``PORT``, so ``set.env --port`` changes it
    too (docs/set.md). None for ``${PORT}``, no port there, or no config.yaml."""
    from bat.input_files import CONFIG_LIMIT, read_text
    from bat.scaffold.config_yaml import Setting, edited, raw_value

    path = _config_path(strict=False)
    try:
        text = read_text(path, limit=CONFIG_LIMIT, kind="an agent's config.yaml")
    except FileNotFoundError:
        return None
    old = raw_value(text, "endpoint.port", path)
    if isinstance(old, bool) or not isinstance(old, int) or str(old) == port:
        return None
    return path, old, edited(text, [Setting("endpoint.port", int(port))], path)


def _config_path(strict: bool = True):
    """The file bat-adk reads: CONFIG_PATH (the shell's, then .env's), else config.yaml.

    Not ``strict`` (set.env): a .env bat cannot read is left for the .env update to
    report in its own words."""
    import os
    from pathlib import Path

    from bat.dotenv import read_dotenv
    from bat.errors import BatError

    named = os.environ.get("CONFIG_PATH")
    if not named and os.path.lexists(".env"):
        try:
            named = read_dotenv(Path(".env")).get("CONFIG_PATH")
        except (BatError, OSError):
            if strict:
                raise
    return Path(named) if named else Path("config.yaml")


ns = Collection("set")
ns.add_task(env)
ns.add_task(config)

# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["config", "env", "ns"]
