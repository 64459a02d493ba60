"""The checks of ``bat build`` and ``bat push``: the image, the Docker engine, the
registry and a login for it, and with ``--host`` the SSH host's key.

They apply when the build context (``images.context``, default ``.``) has a Dockerfile,
or when ``--build`` or ``--host`` asks for them. Their failures are warnings (``!``)
unless ``--build`` is given: most users of ``bat eval`` never build an image, and doctor
must not fail them for a Docker engine they do not need. ``--host`` makes its own SSH
check required, since it was asked for by name. A missing registry login is always a
warning: a registry without authentication (the usual local one) needs none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bat.doctor.check import Check, failed, passed, skipped
from bat.doctor.net import probe
from bat.errors import BatError
from bat.numbers import whole_number

if TYPE_CHECKING:
    from bat.doctor.check import Options
    from bat.images.commandline import Target

ENGINE_TIMEOUT_S = 2.0


def _words(exc: BatError) -> str:
    return "; ".join([exc.message, *exc.details])


def plan(options: Options) -> list[tuple[str, Callable[[], Check | list[Check]]]]:
    """The image checks, each with the name a crash of it is shown under."""
    context = Path(options.configured.get("images.context") or ".")
    context = context if context.is_absolute() else options.cwd / context
    host = options.host or options.configured.get("images.host")
    applies = options.build or bool(host) or (context / "Dockerfile").is_file()
    if not applies:
        reason = "no Dockerfile here (bat build not used; --build checks anyway)"
        names = ("image", "docker engine", "registry")
        return [
            ("image", lambda: [skipped(name, reason) for name in names]),
            ("ssh host", partial(ssh_check, options, None)),
        ]
    try:  # planned outside any check's guard: nothing may escape it
        config, problem = read_docker_config(required=options.build)
    except Exception as exc:
        detail = f"could not be checked: {type(exc).__name__}: {exc}"
        fix = "check the Docker config file (DOCKER_CONFIG, ~/.docker/config.json)"
        config, problem = None, failed("docker config", detail, fix, required=options.build)
    if problem is not None:  # the SDK would hang on it (a FIFO) or fail in its own words
        return [
            ("docker config", lambda: problem),
            ("image", partial(image_checks, options, host, None)),
            ("docker engine", lambda: _not_checked("docker engine", problem)),
            ("ssh host", partial(ssh_check, options, host)),
        ]
    return [
        ("image", partial(image_checks, options, host, config)),
        ("docker engine", partial(engine_check, options, host)),
        ("ssh host", partial(ssh_check, options, host)),
    ]


def read_docker_config(required: bool) -> tuple[DockerConfig | None, Check | None]:
    """The Docker client's configuration file (``$DOCKER_CONFIG/config.json``, else
    ``~/.docker/config.json``, else the legacy ``~/.dockercfg``), read by bat's bounded
    reader before the Docker SDK opens it.

    The SDK reads it with a plain ``open()`` when it connects and when it looks up a
    login: a FIFO there would hang doctor, ``/dev/zero`` would fill its memory, deep
    nesting would raise RecursionError. Such a file is a failed ``docker config`` check
    (required with ``--build``) and the checks that need it are not run. Returns the
    parsed config.json (``None`` for the legacy format, left to the SDK), or the check.
    """
    from docker.utils.config import find_config_file

    from bat.errors import InputError
    from bat.images.engine import read_config

    try:
        path, data = read_config()
    except InputError as exc:
        fix = f"repair or remove {find_config_file()} (docker login writes it anew)"
        return None, failed("docker config", _words(exc), fix, required=required)
    return DockerConfig(path, data), None


class DockerConfig(NamedTuple):
    """The Docker config file found (or None) and its parsed content (None: legacy)."""

    path: Path | None
    data: dict | None


def _not_checked(name: str, cause: Check) -> Check:
    return skipped(name, f"not checked: the Docker config file cannot be read ({cause.name})")


def _target(options: Options, host: str | None) -> Target:
    """The image and host exactly as ``bat build`` resolves them."""
    from bat.images.commandline import resolve_target

    flags = {"host": host} if host else {}
    return resolve_target(flags, options.configured)


def image_checks(options: Options, host: str | None, config: DockerConfig | None) -> list[Check]:
    """The image reference, the registry reachable, and a login known for it."""
    from bat.images.settings import FALLBACK_REGISTRY

    required = options.build
    try:
        target = _target(options, host)
    except BatError as exc:
        return [
            failed("image", _words(exc), "see docs/build.md", required=required),
            skipped("registry", "not known (see the image check)"),
        ]
    settings = target.settings
    checks = [passed("image", settings.describe(), required=required)]
    if settings.registry.value == FALLBACK_REGISTRY and "fallback" in settings.registry.source:
        checks.append(
            skipped(
                "registry",
                "none named (a build tags localhost:5000; bat push needs one: "
                "bat set.env --docker-registry HOST[:PORT])",
            )
        )
        return checks
    checks.append(_registry_check(settings.registry_host, settings.registry.source, required))
    checks.append(_login_check(options, settings.registry_host, host, config))
    return checks


def _registry_check(registry: str, source: str, required: bool) -> Check:
    host, _, port = registry.rpartition(":") if registry.count(":") == 1 else (registry, "", "")
    host = host or registry
    try:
        number = whole_number(port, lowest=1, highest=65535)
    except ValueError:  # none written (or not a port: the probe of 443 then says so)
        number = 443
    problem = probe(host.strip("[]"), number, timeout_s=1.0)
    if problem is not None:
        return failed(
            "registry",
            f"cannot connect to {registry} ({problem}; from {source})",
            "start the registry, or correct the registry named there",
            required=required,
        )
    return passed("registry", f"{registry} accepts connections ({source})", required=required)


def _login_check(
    options: Options, registry: str, host: str | None, config: DockerConfig | None
) -> Check:
    """A login bat push would use: --username with BAT_DOCKER_PASSWORD, else the Docker
    credentials (``~/.docker/config.json`` and its helpers) the push reads."""
    from bat.images.credentials import ENV_PASSWORD

    name = "registry login"
    username = options.configured.get("images.username")
    if username and os.environ.get(ENV_PASSWORD):
        return passed(name, f"images.username {username} with {ENV_PASSWORD}", required=False)
    if host:
        return skipped(name, f"on {host}, the host user's Docker login is used")
    if config is None:
        return _not_checked(name, skipped("docker config", ""))
    try:
        from docker import auth

        if config.data is None:  # the legacy ~/.dockercfg, checked bounded already
            loaded = auth.load_config(config_path=str(config.path))
        elif config.data:  # as bat's bounded reader read it, not read again
            loaded = auth.load_config(config_dict=dict(config.data))
        else:
            loaded = auth.AuthConfig({})
        found = auth.resolve_authconfig(loaded, registry)
    except Exception as exc:  # a damaged config.json, a credential helper that fails
        return failed(
            name,
            f"cannot read the Docker credentials: {type(exc).__name__}",
            "check ~/.docker/config.json (or DOCKER_CONFIG)",
            required=False,
        )
    if not found:
        return failed(
            name,
            f"no Docker login known for {registry} (fine if it needs none)",
            f"docker login {registry}, or bat push --username USER with {ENV_PASSWORD}",
            required=False,
        )
    return passed(name, f"a Docker login for {registry} is known", required=False)


def engine_check(options: Options, host: str | None) -> Check:
    """The local Docker engine answers, reached as ``bat build`` reaches it."""
    from bat.images.engine import connect, engine_address

    name = "docker engine"
    if host:
        return skipped(name, f"bat build uses the engine of {host} (see the ssh check)")
    try:
        client = connect(timeout=ENGINE_TIMEOUT_S)
        try:
            version = client.version().get("Version", "?")
        finally:
            client.close()
    except BatError as exc:
        return failed(
            name,
            _words(exc),
            "start the Docker engine (dockerd), or point DOCKER_HOST at one that runs",
            required=options.build,
        )
    except Exception as exc:  # the SDK's own errors past connect (a timeout mid-call)
        return failed(
            name,
            f"the Docker engine at {engine_address()} did not answer: {type(exc).__name__}",
            "start the Docker engine (dockerd), or point DOCKER_HOST at one that runs",
            required=options.build,
        )
    return passed(name, f"Docker {version} at {engine_address()}", required=options.build)


def ssh_check(options: Options, host: str | None) -> Check:
    """For ``--host``: the host's key is in known_hosts, so bat build would connect (the
    lookup is the one ``RemoteDocker`` makes, on the same files; nothing is sent)."""
    from bat.images.remote import host_key_known
    from bat.images.settings import host_spec

    name = "ssh host"
    if not host:
        return skipped(name, "no --host (the local engine is used)")
    known_hosts = options.configured.get("images.known_hosts") or "~/.ssh/known_hosts"
    try:
        spec = host_spec(host)
        known = host_key_known(spec, known_hosts)
    except BatError as exc:
        return failed(name, _words(exc), "correct --host (or images.host)")
    if not known:
        port = f"-p {spec.port} " if spec.port else ""
        return failed(
            name,
            f"the key of {spec.host} is not in {known_hosts}: bat build --host would refuse "
            "to connect",
            f"compare `ssh-keyscan {port}{spec.host} | ssh-keygen -lf -` with the host's "
            "real fingerprint, then add it (or run bat build --accept-new-host-key once)",
        )
    return passed(name, f"the key of {spec} is known ({known_hosts})")


def configured_keys(getter: Callable[[str, Any], Any], defaults: dict[str, dict]) -> dict:
    """``{"group.key": value}`` of bat's image settings, read with ``getter``."""
    return {
        f"{group}.{key}": getter(f"{group}.{key}", default)
        for group, keys in defaults.items()
        for key, default in keys.items()
    }
