"""One command line's image tasks: which flags apply, and whether an image is built yet.

``bat build --version 2 push`` pushes version 2 and builds it once: the flags given to an
earlier image task of the same command line apply to the later ones, and ``push`` builds
only an image this command line has not built yet. The command-line layer
(:mod:`bat.tasks.images`) keeps both facts between its tasks; what they *mean* is decided
here, in plain functions of plain values, so it can be tested without a command line
and read without knowing Invoke:

* :func:`merge_flags`: this task's flags over the earlier tasks' flags (a flag left at
  its default was not given, so it does not hide an earlier one);
* :func:`resolve_target`: the image, the host and the SSH options from those flags and
  the configured values (the precedence itself is :func:`bat.images.settings.resolve`'s);
* :attr:`Target.key`: what "already built" compares, the host, the context and the
  image reference, as a list of texts that any configuration store can hold.

``--no-cache`` and ``--network`` are not shared flags: they belong to the one build
they were given to (:func:`build_network` checks the latter).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bat.errors import InputError
from bat.images.remote import SshOptions
from bat.images.settings import HostSpec, ImageSettings, host_spec, resolve

# The flags ``build`` and ``push`` share, by parameter name; each applies to the image
# tasks after the one it was given to.
SHARED_FLAGS = (
    "context",
    "docker_registry",
    "repo",
    "version",
    "host",
    "identity",
    "accept_new_host_key",
)

# Each shared flag's configuration key (``None``: the flag is passed to ``resolve`` as a
# flag, and the configured value separately, because the shell's variable sits between).
CONFIG_KEYS = {
    "context": "images.context",
    "docker_registry": None,
    "repo": None,
    "version": None,
    "host": "images.host",
    "identity": "images.identity",
    "accept_new_host_key": "images.accept_new_host_key",
}

DEFAULT_CONTEXT = "."
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


def given(value: Any) -> bool:
    """Whether a flag's value was given: ``None``, ``False`` and ``""`` are its defaults."""
    return value is not None and value is not False and value != ""


def merge_flags(earlier: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """The shared flags that apply to this task: ``earlier``'s, overridden by ``flags``.

    ``earlier`` is what :func:`merge_flags` returned for the image task before this one
    (empty for the first); ``flags`` are this task's parameters. Only given shared flags
    are kept, so the result is also what the next task receives as ``earlier``.
    """
    merged = {}
    for name in SHARED_FLAGS:
        for source in (flags, earlier):
            if given(source.get(name)):
                merged[name] = source[name]
                break
    return merged


@dataclass(frozen=True)
class Target:
    """An image to build or push: what, on which engine, and how to reach that engine."""

    settings: ImageSettings
    host: HostSpec | None
    ssh: SshOptions

    @property
    def key(self) -> list[str]:
        """What "already built" compares: the host ("" for the local engine), the
        context folder and the image reference."""
        return [str(self.host or ""), str(self.settings.context), self.settings.ref]

    @property
    def where(self) -> str:
        return f" on {self.host}" if self.host else ""


def resolve_target(
    flags: Mapping[str, Any],
    config: Mapping[str, Any],
    *,
    require_registry: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Target:
    """The image and host for ``flags`` (from :func:`merge_flags`) and ``config``.

    ``config`` maps dotted configuration keys (``images.context``, ``docker.registry``,
    ...) to their configured values; a missing key counts as unset. ``require_registry``
    (a push) refuses the registry fallback, before anything is built.
    """

    def pick(name: str) -> Any:
        if given(flags.get(name)):
            return flags[name]
        key = CONFIG_KEYS[name]
        return config.get(key) if key else None

    settings = resolve(
        pick("context") or DEFAULT_CONTEXT,
        registry_flag=pick("docker_registry"),
        registry_config=config.get("docker.registry"),
        repo_flag=pick("repo"),
        repo_config=config.get("docker.repo"),
        version_flag=pick("version"),
        version_config=config.get("images.version"),
        require_registry=require_registry,
        environ=environ,
    )
    host = pick("host")
    ssh = SshOptions(
        identity=pick("identity"),
        known_hosts=config.get("images.known_hosts") or DEFAULT_KNOWN_HOSTS,
        accept_new_host_key=bool(pick("accept_new_host_key")),
    )
    return Target(settings, host_spec(host) if host else None, ssh)


def is_built(target: Target, built: Iterable[Iterable[str]]) -> bool:
    """Whether ``target`` is among the ``built`` keys (lists or tuples alike)."""
    key = target.key
    return any(list(entry) == key for entry in built)


_NETWORK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def build_network(flag: str | None, configured: Any) -> str | None:
    """The network of a build's RUN steps: ``--network``, else ``images.network``; a
    network's name (``host``, ``none``, ``my-net``), nothing an engine would misread."""
    value = flag or configured
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _NETWORK.fullmatch(value):
        where = "--network" if flag else "images.network (BAT_IMAGES_NETWORK)"
        raise InputError(f"{where}: {value!r} is not a network name (host, none, my-net)")
    return value
