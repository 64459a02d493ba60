"""Build and push on the local Docker engine, through the docker SDK.

The engine is the one ``DOCKER_HOST`` names (else the default socket), found the way the
``docker`` command finds it (``DOCKER_HOST``, ``DOCKER_TLS_VERIFY``, ``DOCKER_CERT_PATH``).
An engine that does not answer is one error line naming ``DOCKER_HOST``.

The build sends the context archive of :mod:`bat.images.archive` to the engine's build
API (the classic builder: ``VERSION`` as a build argument, intermediate containers
removed even on failure) and follows its output with :class:`~bat.images.stream.BuildTracker`.
A push uses the user's Docker credentials (``~/.docker/config.json`` and its credential
helpers), or the :class:`~bat.images.credentials.Credentials` given, which are checked
with a login first so that refused credentials are told apart from other failures.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from bat.errors import InputError, OperationError
from bat.images.credentials import Credentials
from bat.images.settings import ImageSettings
from bat.images.stream import BuildTracker, PushTracker, one_line, redact, registry_error

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
API_TIMEOUT_S = 300


def engine_address() -> str:
    """Where the engine is expected, worded for an error message."""
    host = os.environ.get("DOCKER_HOST")
    if host:
        return f"{host} (DOCKER_HOST)"
    return f"{DEFAULT_SOCKET} (the default; DOCKER_HOST is not set)"


def read_config() -> tuple[Path | None, dict | None]:
    """The Docker client's configuration file (``$DOCKER_CONFIG/config.json``, else
    ``~/.docker/config.json``, else the legacy ``~/.dockercfg``) and its parsed content
    (``{}`` when there is none; ``None`` for the legacy format, left to the SDK).

    Read by bat's bounded reader before the Docker SDK opens it: the SDK reads it with a
    plain ``open()`` when it connects and when it looks up a login, so a FIFO there would
    hang ``bat build``, ``/dev/zero`` would fill its memory and deep nesting would raise
    RecursionError. Such a file is an InputError naming it."""
    from docker.utils.config import find_config_file

    from bat.input_files import CONFIG_LIMIT, parse_json, read_text

    found = find_config_file()
    if found is None:
        return None, {}
    path = Path(found)
    text = read_text(path, limit=CONFIG_LIMIT, kind="a Docker config file")
    if path.name != "config.json":  # ~/.dockercfg: not JSON; bounded, then the SDK's
        return path, None
    data = parse_json(text, path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a Docker config file (a JSON object)")
    return path, data


def connect(timeout: float = API_TIMEOUT_S) -> Any:
    """A docker SDK ``APIClient`` that has already talked to the engine.

    ``timeout`` bounds each API call (``bat doctor`` asks with a short one). The
    client's config file is checked first (:func:`read_config`): the SDK reads it as it
    is made."""
    import docker
    from docker.errors import DockerException

    read_config()

    try:
        params = docker.utils.kwargs_from_env()
    except DockerException as exc:
        raise InputError(f"the Docker settings of the environment are invalid: {exc}") from None
    try:
        return docker.APIClient(version="auto", timeout=timeout, **params)
    except DockerException as exc:
        text = str(exc)
        if "Invalid bind address" in text:
            raise InputError(f"DOCKER_HOST is not a Docker address: {one_line(text)}") from None
        raise OperationError(
            f"cannot reach the Docker engine at {engine_address()}: {_reason(text)}; "
            "start the engine or point DOCKER_HOST at one that runs"
        ) from None


def build(
    client: Any,
    settings: ImageSettings,
    archive: IO[bytes],
    tracker: BuildTracker,
    *,
    no_cache: bool = False,
    network: str | None = None,
) -> str:
    """Build ``settings.ref`` from ``archive``; returns the image id."""
    from docker.errors import APIError, DockerException

    image_id = None
    try:
        stream = client.build(
            fileobj=archive,
            custom_context=True,
            tag=settings.ref,
            dockerfile=settings.dockerfile,
            buildargs={"VERSION": settings.version.value},
            nocache=no_cache,
            network_mode=network,
            rm=True,
            forcerm=True,
            decode=True,
            timeout=None,
        )
        for event in stream:
            if "stream" in event:
                for line in str(event["stream"]).splitlines():
                    tracker.feed(line)
            if "aux" in event and isinstance(event["aux"], dict):
                image_id = event["aux"].get("ID") or image_id
            if "error" in event or "errorDetail" in event:
                detail = event.get("errorDetail") or {}
                raise tracker.failure(str(detail.get("message") or event.get("error")))
    except APIError as exc:
        raise tracker.failure(str(exc.explanation or exc)) from None
    except DockerException as exc:
        raise OperationError(
            f"lost the Docker engine at {engine_address()} during the build: {_reason(str(exc))}"
        ) from None
    except OSError as exc:
        raise OperationError(
            f"lost the Docker engine at {engine_address()} during the build: {exc}"
        ) from None
    if image_id is None:
        image_id = client.inspect_image(settings.ref)["Id"]
    return image_id


def push(
    client: Any,
    settings: ImageSettings,
    tracker: PushTracker,
    credentials: Credentials | None = None,
) -> str:
    """Push ``settings.ref``; returns its digest."""
    from docker.errors import APIError, DockerException

    registry = settings.registry_host
    secret = credentials.password if credentials else None
    username = credentials.username if credentials else None

    def refused(message: str) -> OperationError:
        return registry_error(
            redact(message, [secret]),
            registry=registry,
            ref=settings.ref,
            username=username,
            log=tracker.log,
        )

    auth = None
    if credentials is not None:
        auth = {
            "username": credentials.username,
            "password": credentials.password,
            "serveraddress": registry,
        }
        try:
            client.login(
                username=credentials.username,
                password=credentials.password,
                registry=registry,
                reauth=True,
            )
        except APIError as exc:
            raise refused(str(exc.explanation or exc)) from None
        tracker.log.write(f"logged in to {registry} as {credentials.username}")
    try:
        stream = client.push(
            settings.repository,
            tag=settings.version.value,
            stream=True,
            decode=True,
            auth_config=auth,
        )
        for event in stream:
            if "error" in event or "errorDetail" in event:
                detail = event.get("errorDetail") or {}
                message = str(detail.get("message") or event.get("error"))
                tracker.log.write(f"ERROR: {redact(message, [secret])}")
                raise refused(message)
            aux = event.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                tracker.digest = str(aux["Digest"])
            progress = event.get("progressDetail") or {}
            tracker.event(
                event.get("id"),
                str(event.get("status", "")),
                int(progress.get("current") or 0),
                int(progress.get("total") or 0),
            )
    except APIError as exc:
        raise refused(str(exc.explanation or exc)) from None
    except DockerException as exc:
        raise OperationError(
            f"lost the Docker engine at {engine_address()} during the push: {_reason(str(exc))}"
        ) from None
    if not tracker.digest:
        raise OperationError(
            f"push of {settings.ref} ended without a digest (log: {tracker.log.shown()})"
        )
    return tracker.digest


def _reason(text: str) -> str:
    """The useful part of a connection error from requests/urllib3."""
    low = text.lower()
    if "connection refused" in low:
        return "connection refused"
    if "no such file or directory" in low or "filenotfounderror" in low:
        return "no socket there"
    if "permission denied" in low:
        return "permission denied (is your user allowed to use Docker?)"
    if "timed out" in low or "timeout" in low:
        return "timed out"
    if "name or service not known" in low or "nodename nor servname" in low:
        return "unknown host name"
    return one_line(text, 200)
