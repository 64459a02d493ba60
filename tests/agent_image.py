"""A container image of the fixture agents, for evaluating an agent from its image.

Nothing can be pulled here, so the Python base is made the way ``.ci/services.sh`` makes
``bat-ci-base``: ``docker import`` of a root file system. It holds the interpreter running
the tests (at its own path, so it finds its standard library), the shared libraries it
and its extension modules load (``ldd``), and the installed distributions an a2a-sdk
server needs (a2a-sdk, starlette, sse-starlette, uvicorn, PyYAML and what they require),
copied file by file from this environment. Its tag is a hash of those distributions'
names and versions and of the interpreter, so it is made once per machine.

The agent's image is then built from a context with a Dockerfile ``FROM`` that base, the
``eval_fixtures`` package and an ``agent.json``, by ``bat build`` itself in the tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from tests.conftest import REPO

ROOTS = ("a2a-sdk[http-server]", "uvicorn", "pyyaml")
BASE_REPO = "bat-ci-python"
_SKIPPED_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}


def distributions(roots=ROOTS) -> list[metadata.Distribution]:
    """The installed distributions ``roots`` need, their requirements followed."""
    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(root) for root in roots]
    while todo:
        requirement = todo.pop()
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in found:
            continue
        try:
            dist = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this environment does not have
        found[key] = dist
        for text in dist.requires or []:
            needed = Requirement(text)
            extras = requirement.extras or {""}
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras
            ):
                todo.append(needed)
    return sorted(found.values(), key=lambda d: d.metadata["Name"].lower())


def base_tag(dists) -> str:
    digest = hashlib.sha256(f"{sys.version} {sys.executable} beside-stdlib".encode())
    for dist in dists:
        digest.update(f"{dist.metadata['Name']}=={dist.version}\n".encode())
    return f"{BASE_REPO}:{digest.hexdigest()[:12]}"


def _libraries(binaries: list[Path]) -> set[Path]:
    """The shared libraries ``binaries`` load, by ``ldd`` (the loader among them)."""
    found: set[Path] = set()
    for chunk in range(0, len(binaries), 200):
        out = subprocess.run(
            ["ldd", *map(str, binaries[chunk : chunk + 200])],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        for line in out.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:
                found.add(Path(match.group(1)))
    return found


def python_rootfs(dists) -> bytes:
    """A tar archive of the interpreter, its standard library and ``dists``."""
    prefix = Path(sys.base_prefix)
    stdlib = Path(sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"])
    # Beside the standard library, which every interpreter has on sys.path: Debian's does
    # not look in <stdlib>/site-packages, and PYTHONPATH may be set by a test's agent env.
    site = stdlib
    executable = Path(sys.executable).resolve()
    files: dict[str, Path] = {str(executable): executable}
    for path in stdlib.rglob("*"):
        relative = path.relative_to(stdlib)
        if relative.parts[0] in _SKIPPED_STDLIB | {"site-packages"} or not path.is_file():
            continue
        files[str(path)] = path
    for library in prefix.glob("lib/libpython*.so*"):
        files[str(library)] = library
    for dist in dists:
        for entry in dist.files or []:
            source = Path(dist.locate_file(entry))
            if source.is_file() and not str(entry).startswith(".."):
                files[str(site / entry)] = source
    binaries = [p for p in files.values() if p.suffix == ".so" or ".so." in p.name]
    for library in _libraries([executable, *binaries]):
        files[str(library)] = library.resolve()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, source in sorted(files.items()):
            tar.add(source, arcname=name.lstrip("/"), recursive=False)
        for folder in ("tmp", "agent"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777
            tar.addfile(info)
        link = tarfile.TarInfo("usr/local/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, str(executable)
        tar.addfile(link)
    return buffer.getvalue()


def python_base(client) -> str:
    """The tag of the Python base image on the engine ``client`` talks to; made if missing."""
    import docker.errors

    dists = distributions()
    tag = base_tag(dists)
    try:
        client.inspect_image(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    repository, _, version = tag.partition(":")
    client.import_image_from_data(
        python_rootfs(dists),
        repository=repository,
        tag=version,
        changes=[
            "ENV PATH=/usr/local/bin:/usr/bin:/bin",
            "WORKDIR /agent",
        ],
    )
    return tag


def agent_context(root: Path, base: str, *, name: str, version: str, agent="echo_agent") -> Path:
    """A build context of fixture agent ``agent``: ``bat build`` makes its image."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        REPO / "eval_fixtures",
        root / "eval_fixtures",
        ignore=shutil.ignore_patterns("__pycache__", "datasets", "demo"),
        dirs_exist_ok=True,
    )
    (root / "Dockerfile").write_text(
        f"FROM {base}\n"
        "ARG VERSION=dev\n"
        'LABEL org.opencontainers.image.version="${VERSION}"\n'
        "COPY eval_fixtures /agent/eval_fixtures\n"
        "ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1\n"
        f'CMD ["python3", "-m", "eval_fixtures.{agent}"]\n'
    )
    (root / "agent.json").write_text(json.dumps({"name": name, "version": version}))
    return root
