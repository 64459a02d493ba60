"""A stand-in for the ``python:3.12-slim`` base of a generated agent's Dockerfile.

Nothing can be pulled here, so the scaffold's Dockerfile (``FROM python:3.12-slim``,
``pip install uv``, ``uv sync``, ``useradd``, a ``sh -c`` command using ``hostname``)
is given a base made with ``docker import`` of what it uses, copied from this machine:
a Python 3.12 interpreter with pip (at its own prefix, so it finds its standard
library, first on PATH), ``sh`` (dash), ``useradd`` and ``hostname``, the shared
libraries all of them and uv load (``ldd``), the account files ``useradd`` edits and the CA
bundle (the build reaches PyPI through this machine's network, whose proxy presents
its own CA).

The tag is the real one, so the Dockerfile builds as generated. It is imported only
when the engine has no ``python:3.12-slim`` (a machine that can pull keeps its real
one, and the build uses that), and removed again by :func:`python_slim` when imported.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

from tests.pythons import uv_binary

TAG = "python:3.12-slim"
SKIPPED = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "__pycache__"}
TOOLS = ("/usr/bin/dash", "/usr/sbin/useradd", "/usr/bin/hostname")
ETC = ("login.defs", "default/useradd", "nsswitch.conf", "ssl/certs/ca-certificates.crt")
ACCOUNTS = {
    "passwd": "root:x:0:0:root:/root:/bin/sh\n",
    "group": "root:x:0:\n",
    "shadow": "root:*:19000:0:99999:7:::\n",
    "gshadow": "root:*::\n",
}


def _libraries(binaries: list[Path]) -> set[Path]:
    found: set[Path] = set()
    out = subprocess.run(
        ["ldd", *map(str, binaries)], capture_output=True, text=True, check=False
    ).stdout
    for line in out.splitlines():
        match = re.search(r"(/\S+) \(0x", line)
        if match:
            found.add(Path(match[1]))
    return found


def rootfs(python: Path) -> bytes:
    """The tar archive of the base's root file system, for ``python`` (3.12)."""
    prefix = python.resolve().parents[1]
    stdlib = prefix / "lib" / "python3.12"
    files: dict[str, Path] = {}
    for path in [*prefix.glob("bin/*"), *prefix.glob("lib/libpython3*")]:
        files[str(path)] = path
    for path in stdlib.rglob("*"):
        parts = path.relative_to(stdlib).parts
        if SKIPPED & set(parts) or not path.is_file():
            continue
        if parts[0] == "site-packages" and not parts[1].startswith("pip"):
            continue  # pip alone, as the official image has it
        files[str(path)] = path
    # and what the uv that `pip install uv` brings loads (as the uv of this machine)
    binaries = [Path(tool) for tool in TOOLS] + [python.resolve(), Path(uv_binary())]
    binaries += [p for p in files.values() if p.suffix == ".so"]
    for library in _libraries(binaries):
        files[str(library)] = library.resolve()
    for tool in TOOLS:
        files[tool] = Path(tool)
    for name in ETC:
        files[f"/etc/{name}"] = Path("/etc") / name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for top in ("bin", "sbin", "lib", "lib64"):  # merged /usr, as Debian has it
            _link(tar, top, f"usr/{top}")
        for folder, mode in (
            ("tmp", 0o1777),
            ("root", 0o755),
            ("home", 0o755),
            ("etc/skel", 0o755),
        ):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for name, source in sorted(files.items()):
            # /lib/x86_64-linux-gnu/libc.so.6 is /usr/lib/...: /lib is a link in the image
            arcname = Path(name).parent.resolve() / Path(name).name
            tar.add(source, arcname=str(arcname).lstrip("/"), recursive=False)
        _link(tar, "usr/bin/sh", "dash")
        for name, text in ACCOUNTS.items():
            data = text.encode()
            info = tarfile.TarInfo(f"etc/{name}")
            info.size, info.mode = len(data), 0o600 if "shadow" in name else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    tar.addfile(info)


@contextlib.contextmanager
def python_slim(client, python: str) -> Iterator[str]:
    """``python:3.12-slim`` on the engine of ``client`` for the block (see the module)."""
    import docker.errors

    try:
        client.inspect_image(TAG)
        yield TAG
        return
    except docker.errors.ImageNotFound:
        pass
    bin_dir = Path(python).resolve().parent
    certs = "/etc/ssl/certs/ca-certificates.crt"
    repository, _, tag = TAG.partition(":")
    client.import_image_from_data(
        rootfs(Path(python)),
        repository=repository,
        tag=tag,
        changes=[
            f"ENV PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            f"ENV SSL_CERT_FILE={certs} PIP_CERT={certs}",
            'CMD ["python3"]',
        ],
    )
    try:
        yield TAG
    finally:
        with contextlib.suppress(docker.errors.APIError):
            client.remove_image(TAG, force=True)
