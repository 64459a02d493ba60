"""Helpers for the image tests: the services of .ci/services.sh, build contexts, registries.

``.ci/services.sh`` starts a Docker engine, two registries and an sshd on 127.0.0.1 and
writes what it started to ``/tmp/bat-ci-services.env`` (``BAT_CI_SERVICES_ENV`` moves
it). :func:`require` checks that the services a test needs answer: when one does not,
the test is skipped locally, and fails when ``CI`` is set (CI must run these tests).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import tarfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

SERVICES_ENV = Path(os.environ.get("BAT_CI_SERVICES_ENV", "/tmp/bat-ci-services.env"))

SCRATCH_DOCKERFILE = """\
FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.version="${VERSION}"
ENV VERSION=${VERSION}
COPY hello.txt /hello.txt
"""


def read_facts() -> dict[str, str]:
    facts: dict[str, str] = {}
    try:
        lines = SERVICES_ENV.read_text().splitlines()
    except OSError:
        return facts
    for line in lines:
        if line.strip() and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            facts[key.strip()] = value.strip()
    return facts


def _http_status(url: str) -> int | None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=3) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _engine_answers(docker_host: str) -> bool:
    try:
        import docker

        client = docker.DockerClient(base_url=docker_host, version="auto", timeout=5)
        client.ping()
        client.close()
        return True
    except Exception:
        return False


def _sshd_answers(host: str) -> bool:
    address, _, port = host.rpartition("@")[2].partition(":")
    try:
        with socket.create_connection((address, int(port or 22)), timeout=3) as sock:
            return sock.recv(7) == b"SSH-2.0"
    except OSError:
        return False


def require(*needs: str) -> dict[str, str]:
    """The facts of .ci/services.sh, once every service in ``needs`` answers.

    ``needs``: ``engine``, ``registry``, ``auth_registry``, ``sshd``.
    """
    facts = read_facts()
    problems = []
    if not facts:
        problems.append(f"{SERVICES_ENV} is missing (run: sudo bash .ci/services.sh)")
    else:
        checks = {
            "engine": lambda: _engine_answers(facts["BAT_CI_DOCKER_HOST"]),
            "registry": lambda: _http_status(f"http://{facts['BAT_CI_REGISTRY']}/v2/") == 200,
            "auth_registry": lambda: (
                _http_status(f"http://{facts['BAT_CI_AUTH_REGISTRY']}/v2/") == 401
            ),
            "sshd": lambda: _sshd_answers(facts["BAT_CI_SSH_HOST"]),
        }
        problems += [f"{need} does not answer" for need in needs if not checks[need]()]
    if problems:
        message = "image test services: " + "; ".join(problems) + " (see .ci/services.sh)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return facts


def unique_repo(label: str) -> str:
    return f"bat-test/{label}-{uuid.uuid4().hex[:8]}"


def make_context(
    root: Path,
    *,
    dockerfile: str = SCRATCH_DOCKERFILE,
    card: dict | None = None,
    dotenv: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """A build context: a Dockerfile, hello.txt, and optionally agent.json, .env, more files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text(dockerfile)
    (root / "hello.txt").write_text("hello from a bat test\n")
    if card is not None:
        (root / "agent.json").write_text(json.dumps(card))
    if dotenv is not None:
        (root / ".env").write_text(dotenv)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def tags(registry: str, repo: str) -> list[str]:
    """The tags the registry holds for ``repo`` (none if it has never seen it)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{registry}/v2/{repo}/tags/list", timeout=5) as response:
            return json.loads(response.read()).get("tags") or []
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise


def docker_client(facts: dict[str, str]):
    import docker

    return docker.DockerClient(base_url=facts["BAT_CI_DOCKER_HOST"], version="auto", timeout=60)


def image_files(facts: dict[str, str], ref: str) -> dict[str, bytes]:
    """Every regular file of image ``ref`` (by path) and its content, via docker export."""
    client = docker_client(facts)
    container = client.containers.create(ref, command=["/none"])
    try:
        data = b"".join(container.export())
    finally:
        container.remove(force=True)
        client.close()
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            if member.isfile():
                files[member.name.lstrip("./")] = archive.extractfile(member).read()
    return files


def remove_images(facts: dict[str, str], repos: list[str]) -> None:
    """Remove every local image of ``repos`` (any registry, any tag)."""
    client = docker_client(facts)
    try:
        for image in client.images.list():
            for ref in image.tags:
                if any(f"/{repo}:" in ref for repo in repos):
                    with contextlib.suppress(Exception):
                        client.images.remove(ref, force=True)
    finally:
        client.close()


def closed_port() -> int:
    """A TCP port on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
