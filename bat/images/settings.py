"""Which image to build or push: ``{registry}/{repo}:{version}``, and where each part came from.

Registry and repository, first match wins:

1. the flag (``--docker-registry`` / ``--repo``);
2. ``BAT_DOCKER_REGISTRY`` / ``BAT_DOCKER_REPO`` in the shell's environment;
3. ``docker.registry`` / ``docker.repo`` in bat's configuration (``-f`` file, ``./bat.yaml``,
   ``~/.bat.yaml``, ``/etc/bat.yaml``, or ``Collection.configure`` in a ``tasks.py``);
4. ``BAT_DOCKER_REGISTRY`` / ``BAT_DOCKER_REPO`` in the ``.env`` of the context folder;
5. a fallback: the registry ``localhost:5000`` for a build (a push refuses instead: it
   never goes to a registry nobody named), the repository from the name in the
   context's ``agent.json``, else the context folder's name, made a valid repository.

The version (tag and ``VERSION`` build argument): ``--version``, else ``images.version`` in
the configuration, else ``git describe --tags --always --dirty`` of the context, else the
``version`` of the context's ``agent.json``.

Every value is checked (the same checks as ``bat set.env``) and a refused one names its
source, so a bad line in a ``.env`` is found at once.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bat.errors import InputError, UsageError
from bat.ports import port_problem

FALLBACK_REGISTRY = "localhost:5000"
ENV_REGISTRY = "BAT_DOCKER_REGISTRY"
ENV_REPO = "BAT_DOCKER_REPO"
DOCKERFILE = "Dockerfile"

_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_HOST = re.compile(
    r"(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@)?"
    r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


@dataclass(frozen=True)
class Sourced:
    """A resolved value and the place it came from (shown to the user)."""

    value: str
    source: str


@dataclass(frozen=True)
class HostSpec:
    """``[user@]host[:port]`` of a remote Docker host."""

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


@dataclass(frozen=True)
class ImageSettings:
    """Everything a build or a push needs to know about the image."""

    context: Path
    registry: Sourced
    repo: Sourced
    version: Sourced
    dockerfile: str = DOCKERFILE

    @property
    def repository(self) -> str:
        return f"{self.registry.value}/{self.repo.value}"

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.version.value}"

    @property
    def registry_host(self) -> str:
        """The registry's server (``ghcr.io`` of ``ghcr.io/team``): what a login names."""
        return self.registry.value.split("/", 1)[0]

    def describe(self) -> str:
        """One line: the reference, then where registry, repository and version came from."""
        return (
            f"image {self.ref} (registry: {self.registry.source}; repository: "
            f"{self.repo.source}; version: {self.version.source})"
        )


def resolve(
    context: str | os.PathLike[str],
    *,
    registry_flag: str | None = None,
    registry_config: str | None = None,
    repo_flag: str | None = None,
    repo_config: str | None = None,
    version_flag: str | None = None,
    version_config: str | None = None,
    require_registry: bool = False,
    environ: Mapping[str, str] | None = None,
) -> ImageSettings:
    """The image for ``context`` by the precedence of this module's docstring.

    ``*_flag`` values come from the command line, ``*_config`` ones from bat's
    configuration; the shell's variables are read from ``environ`` (default: os.environ).
    ``require_registry`` (a push) refuses the registry fallback.
    """
    from bat.scaffold import values

    environ = os.environ if environ is None else environ
    folder = context_folder(context)
    dotenv = _read_dotenv(folder / ".env")
    card = _read_card(folder / "agent.json")
    env_file = _shown(folder / ".env")

    registry = _first(
        [
            (registry_flag, "--docker-registry"),
            (environ.get(ENV_REGISTRY), f"{ENV_REGISTRY} in the environment"),
            (registry_config, "docker.registry in the configuration"),
            (dotenv.get(ENV_REGISTRY), f"{ENV_REGISTRY} in {env_file}"),
        ],
        values.docker_registry,
    )
    if registry is None:
        if require_registry:
            raise UsageError(
                "no registry to push to: give --docker-registry, set BAT_DOCKER_REGISTRY, "
                f"or add it to {env_file} (bat set.env --docker-registry HOST[:PORT]); "
                "bat never pushes to Docker Hub unasked"
            )
        registry = Sourced(FALLBACK_REGISTRY, "the fallback for builds")

    repo_fallbacks = []
    card_name = _repo_name(card.get("name"))
    if card_name:
        repo_fallbacks.append((card_name, f"the name in {_shown(folder / 'agent.json')}"))
    folder_name = _repo_name(folder.name)
    if folder_name:
        repo_fallbacks.append((folder_name, "the context folder's name"))
    repo = _first(
        [
            (repo_flag, "--repo"),
            (environ.get(ENV_REPO), f"{ENV_REPO} in the environment"),
            (repo_config, "docker.repo in the configuration"),
            (dotenv.get(ENV_REPO), f"{ENV_REPO} in {env_file}"),
            *repo_fallbacks,
        ],
        values.docker_repo,
    )
    if repo is None:
        raise UsageError(
            f"cannot name the image repository of {folder}: give --repo or set BAT_DOCKER_REPO"
        )

    version = _first([(version_flag, "--version"), (version_config, "images.version")], tag)
    if version is None:
        version = _derived_version(folder, card)
    return ImageSettings(context=folder, registry=registry, repo=repo, version=version)


def context_folder(context: str | os.PathLike[str]) -> Path:
    """The build context: an existing folder holding a Dockerfile."""
    folder = Path(os.path.expanduser(os.fspath(context)))
    if not folder.is_dir():
        raise UsageError(f"{context}: no such folder (the build context, --context/-C)")
    if not (folder / DOCKERFILE).is_file():
        raise UsageError(
            f"no {DOCKERFILE} in {_shown(folder)}: run bat from the agent's folder "
            "or give its path with --context/-C"
        )
    return folder.resolve()


def tag(value: str) -> str:
    """An image tag: letters, digits, ``_ . -``, at most 128, not starting with ``.`` or ``-``."""
    text = str(value).strip()
    if not _TAG.fullmatch(text):
        raise InputError(
            f"invalid version {value!r}: an image tag uses letters, digits, '_', '.' and '-' "
            "(at most 128, not starting with '.' or '-')"
        )
    return text


def host_spec(value: str) -> HostSpec:
    """``[user@]host[:port]`` (a bracketed IPv6 address works too)."""
    text = str(value).strip()
    match = _HOST.fullmatch(text)
    if not match:
        raise UsageError(
            f"invalid host {value!r} (--host, images.host): expected [user@]host[:port], "
            "e.g. deploy@build1"
        )
    port = match["port"]
    problem = port and port_problem(port)
    if problem:
        raise UsageError(f"invalid host {value!r} (--host, images.host): {problem}")
    return HostSpec(
        host=match["host"].strip("[]"), user=match["user"], port=int(port) if port else None
    )


def _first(candidates, check) -> Sourced | None:
    """The first non-empty candidate, checked; a refused value names where it came from."""
    for value, source in candidates:
        if value is None or not str(value).strip():
            continue
        try:
            return Sourced(check(str(value)), source)
        except InputError as exc:
            raise InputError(f"{exc.message} (from {source})") from None
    return None


def _derived_version(folder: Path, card: dict) -> Sourced:
    described = _git_describe(folder)
    if described:
        return Sourced(_as_tag(described), f"git describe of {_shown(folder)}")
    card_version = card.get("version")
    if isinstance(card_version, str) and _as_tag(card_version):
        return Sourced(_as_tag(card_version), f"the version in {_shown(folder / 'agent.json')}")
    raise UsageError(
        f"no version for the image: {_shown(folder)} is not a git checkout with a commit and "
        "has no agent.json with a version; give --version"
    )


def _git_describe(folder: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(folder), "describe", "--tags", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = proc.stdout.strip()
    return text if proc.returncode == 0 and text else None


def _as_tag(text: str) -> str:
    """A derived version made a valid tag (``1.0+build`` -> ``1.0-build``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text.strip()).lstrip(".-")[:128]
    return cleaned


def _repo_name(name: object) -> str | None:
    """A repository name from a name: ``My Agent``/``EchoAgent`` -> ``my-agent``/``echo-agent``."""
    if not isinstance(name, str):
        return None
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name.strip())
    words = re.sub(r"[^a-z0-9]+", "-", spaced.lower()).strip("-")
    return words or None


def _read_card(path: Path) -> dict:
    """The agent card, or an empty dict when there is none; a broken one is an error
    (read strictly, once for bat, by ``bat.scaffold.agent_json``)."""
    from bat.scaffold.agent_json import read_card_file

    return read_card_file(path)


def _read_dotenv(path: Path) -> dict[str, str]:
    from bat.dotenv import read_dotenv

    return read_dotenv(path)


def _shown(path: Path) -> str:
    """A path as the user would write it: relative to the current folder when inside it."""
    try:
        relative = path.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        return str(path)
    return str(relative) if str(relative) != "." else "."
