"""``bat build`` and ``bat push``: the agent's container image, built and pushed.

Thin like the other task modules: each task reads its flags and the configuration
(``docker.*`` and ``images.*`` keys, ``BAT_*`` variables, ``bat.yaml``) and calls the
library: :mod:`bat.images.commandline` decides which image and whether it is built yet,
:mod:`bat.images.operations` builds and pushes.

``push`` builds first, in its own body, unless this command line has already built that
image: ``bat push --version 2`` builds version 2 once, then pushes it, and ``bat build
push`` builds once. There is no ``pre`` task: Invoke gives a pre task none of the flags
of the task it precedes, so a pre-task build could not build the version being pushed.

What the image tasks of one command line share is kept where ``eval.run`` keeps its run
context for the stages after it: in the command line's chain (``bat.tasks._chain``),
typed: the shared flags given to the image tasks so far, so the flags of ``bat build
--version 2 push`` apply to the ``push`` too, and the images built so far (as
:attr:`Target.key <bat.images.commandline.Target.key>` lists).

Mounted in another project's ``tasks.py``, copy the defaults to your root collection
(``ns.configure(images.ns.configuration())``) when ``push`` is a pre/post task there:
Invoke gives a pre/post task the root's configuration only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invoke import Collection, Context

from bat.tasks._chain import chain
from bat.tasks._options import command, setting

if TYPE_CHECKING:
    from bat.images.commandline import Target

DEFAULTS: dict[str, dict[str, Any]] = {
    "docker": {"registry": None, "repo": None},
    "images": {
        "context": ".",
        "version": None,
        "no_cache": False,
        "network": None,
        "host": None,
        "identity": None,
        "known_hosts": "~/.ssh/known_hosts",
        "accept_new_host_key": False,
        "username": None,
    },
}

_SHORT = {"context": "C"}
_HELP = {
    "context": "DIR: the build context, with the Dockerfile (default: .).",
    "docker-registry": "REGISTRY: host[:port][/path] (else BAT_DOCKER_REGISTRY, .env).",
    "repo": "REPO: image repository (else BAT_DOCKER_REPO, .env, agent.json name).",
    "version": "VERSION: tag and VERSION build argument (default: git describe, agent.json).",
    "host": "[USER@]HOST[:PORT]: run it on this host's Docker engine, over SSH.",
    "identity": "FILE: the SSH private key for --host.",
    "accept-new-host-key": "Trust --host's key if it is not in known_hosts yet (and save it).",
}


@command(
    short=_SHORT,
    help={
        **_HELP,
        "no-cache": "Build every step anew, without the engine's layer cache.",
        "network": "NAME: the network of the build's RUN steps (docker build --network: "
        "host, none or a network's name; default: the engine's).",
    },
)
def build(
    c: Context,
    context: str | None = None,
    docker_registry: str | None = None,
    repo: str | None = None,
    version: str | None = None,
    no_cache: bool = False,
    network: str | None = None,
    host: str | None = None,
    identity: str | None = None,
    accept_new_host_key: bool = False,
) -> None:
    """Build the agent's image {registry}/{repo}:{version} (on --host over SSH if given).

    VERSION is both the tag and the VERSION build argument. The context's .dockerignore
    is honoured; the full log is kept in <context>/.bat/logs/.
    """
    flags = {
        "context": context,
        "docker_registry": docker_registry,
        "repo": repo,
        "version": version,
        "host": host,
        "identity": identity,
        "accept_new_host_key": accept_new_host_key,
    }
    target = _target(c, flags, require_registry=False)
    no_cache = no_cache or bool(setting(c, None, "images.no_cache", False))
    _build_once(c, target, no_cache=no_cache, network=_network(c, network))


@command(
    short=_SHORT,
    help={
        **_HELP,
        "username": "USER: log in to the registry as USER (password: stdin, BAT_DOCKER_PASSWORD).",
    },
)
def push(
    c: Context,
    context: str | None = None,
    docker_registry: str | None = None,
    repo: str | None = None,
    version: str | None = None,
    host: str | None = None,
    identity: str | None = None,
    accept_new_host_key: bool = False,
    username: str | None = None,
) -> None:
    """Build (unless built in this run), then push {registry}/{repo}:{version} and print its digest.

    A registry must be named (flag, BAT_DOCKER_REGISTRY, configuration or .env): bat
    never pushes to Docker Hub unasked. Credentials: your Docker login, or --username
    with the password on stdin or in BAT_DOCKER_PASSWORD.
    """
    from bat.images.credentials import read_credentials
    from bat.images.operations import push_image

    flags = {
        "context": context,
        "docker_registry": docker_registry,
        "repo": repo,
        "version": version,
        "host": host,
        "identity": identity,
        "accept_new_host_key": accept_new_host_key,
    }
    target = _target(c, flags, require_registry=True)  # no registry: stop before building
    no_cache = bool(setting(c, None, "images.no_cache", False))
    _build_once(c, target, no_cache=no_cache, network=_network(c, None))
    user = username or setting(c, None, "images.username", None)
    settings = target.settings
    credentials = read_credentials(user, settings.registry_host) if user else None
    push_image(settings, credentials=credentials, host=target.host, ssh=target.ssh)


def _target(c: Context, flags: dict[str, Any], *, require_registry: bool) -> Target:
    """This task's image and host; its flags are remembered for the image tasks after it."""
    from bat.images.commandline import merge_flags, resolve_target

    state = chain(c)
    merged = merge_flags(dict(state.image_flags), flags)
    configured = {
        f"{group}.{key}": setting(c, None, f"{group}.{key}", default)
        for group, keys in DEFAULTS.items()
        for key, default in keys.items()
    }
    target = resolve_target(merged, configured, require_registry=require_registry)
    state.image_flags = merged
    return target


def _network(c: Context, flag: str | None) -> str | None:
    from bat.images.commandline import build_network

    return build_network(flag, setting(c, None, "images.network", None))


def _build_once(c: Context, target: Target, *, no_cache: bool, network: str | None) -> None:
    """Build ``target`` unless this command line has built it already."""
    from bat.images.commandline import is_built
    from bat.images.operations import build_image

    state = chain(c)
    if is_built(target, state.images_built):
        print(f"{target.settings.ref} is already built{target.where} in this run")
        return
    build_image(
        target.settings, no_cache=no_cache, network=network, host=target.host, ssh=target.ssh
    )
    state.images_built.append(target.key)


ns = Collection("images")
ns.add_task(build)
ns.add_task(push)
ns.configure(DEFAULTS)

# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["build", "ns", "push"]
