"""``bat build --host`` / ``bat push --host``: a remote Docker host over a real sshd.

The "remote" host is this machine's sshd of .ci/services.sh (127.0.0.1:2222, its own
host key and a generated client key), whose Docker engine is the local dockerd: the
build and the push run there through SSH, the context goes up over SFTP, and the
temporary folder they use on the host is checked to be gone afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BAT
from tests.imagekit import (
    closed_port,
    image_files,
    make_context,
    remove_images,
    require,
    tags,
    unique_repo,
)


@pytest.fixture(scope="module")
def svc():
    facts = {**require("engine", "registry", "sshd"), "_repos": []}
    yield facts
    remove_images(facts, facts["_repos"])


@pytest.fixture
def repo(svc):
    name = unique_repo("remote")
    svc["_repos"].append(name)
    return name


@pytest.fixture
def known(home, svc):
    """~/.ssh/known_hosts of the test's HOME, holding the sshd's host key."""
    path = home / ".ssh" / "known_hosts"
    path.parent.mkdir(mode=0o700)
    shutil.copy(svc["BAT_CI_SSH_KNOWN_HOSTS"], path)
    return path


def remote_args(svc, *more):
    return ["--host", svc["BAT_CI_SSH_HOST"], "--identity", svc["BAT_CI_SSH_KEY"], *more]


def workdirs(output: str) -> list[Path]:
    """The remote temporary folders bat reported ("Working in host:/tmp/bat.XXXX")."""
    return [Path(path) for path in re.findall(r"^Working in \S+?:(/\S+) ", output, re.M)]


def run(args, cwd, env=None, stdin=None):
    full = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [str(BAT), *args],
        cwd=cwd,
        env=full,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_remote_build_and_push(tmp_path, svc, repo, known):
    ctx = make_context(
        tmp_path / "agent",
        card={"version": "1"},
        files={"secret.txt": "TOP SECRET\n", ".dockerignore": "secret.txt\n"},
        dockerfile="FROM scratch\nARG VERSION\nLABEL v=${VERSION}\nCOPY . /ctx/\n",
    )
    registry = svc["BAT_CI_REGISTRY"]
    result = run(
        [
            "push",
            *remote_args(svc, "--docker-registry", registry, "--repo", repo, "--version", "r1"),
        ],
        cwd=ctx,
    )
    assert result.returncode == 0, result.stderr
    assert f"Building {registry}/{repo}:r1 on {svc['BAT_CI_SSH_HOST']}" in result.stdout
    assert "Uploaded the build context" in result.stdout
    assert "Step 3/4 : LABEL v=${VERSION}" in result.stdout
    assert re.search(
        rf"^Pushed {re.escape(registry)}/{repo}:r1 digest sha256:[0-9a-f]{{64}}$",
        result.stdout,
        re.M,
    )
    assert tags(registry, repo) == ["r1"]
    folders = workdirs(result.stdout)
    assert len(folders) == 2  # one for the build, one for the push
    assert not any(folder.exists() for folder in folders)
    # The remote engine is this machine's: the image it built honoured .dockerignore.
    files = image_files(svc, f"{registry}/{repo}:r1")
    assert "ctx/hello.txt" in files and "ctx/secret.txt" not in files
    assert not any(name.startswith("ctx/.bat") for name in files)


def test_remote_failing_build_removes_its_folder(tmp_path, svc, repo, known):
    ctx = make_context(
        tmp_path / "agent",
        dockerfile=f'FROM {svc["BAT_CI_BASE_IMAGE"]}\nRUN ["/bin/tini", "-x"]\n',
    )
    result = run(["build", *remote_args(svc, "--repo", repo, "--version", "1")], cwd=ctx)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        'bat: error: step 2/2 (RUN ["/bin/tini", "-x"]) failed: The command \'/bin/tini -x\' '
        "returned a non-zero code: 1 (full log: "
    )
    folders = workdirs(result.stdout)
    assert len(folders) == 1 and not folders[0].exists()
    log = ctx / result.stderr.split("(full log: ")[1].rstrip(")\n")
    assert "invalid option -- 'x'" in log.read_text()


def test_unknown_host_key_is_refused_then_accepted_with_the_flag(tmp_path, home, svc, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    known_hosts = home / ".ssh" / "known_hosts"
    result = run(["build", *remote_args(svc, "--repo", repo)], cwd=ctx)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    port = svc["BAT_CI_SSH_HOST"].rsplit(":", 1)[1]
    assert result.stderr.startswith(
        f"bat: error: host [127.0.0.1]:{port} is not in {known_hosts}: "
    )
    assert "ssh-ed25519 SHA256:" in result.stderr and "--accept-new-host-key" in result.stderr
    assert not workdirs(result.stdout) and not known_hosts.exists()

    result = run(["build", *remote_args(svc, "--repo", repo, "--accept-new-host-key")], cwd=ctx)
    assert result.returncode == 0, result.stderr
    assert f"Added the host key of [127.0.0.1]:{port} (ssh-ed25519 SHA256:" in result.stdout
    saved = known_hosts.read_text().split()
    expected = Path(svc["BAT_CI_SSH_KNOWN_HOSTS"]).read_text().split()
    assert saved[:3] == expected[:3]
    # Known now: the next run needs no flag.
    result = run(["build", *remote_args(svc, "--repo", repo)], cwd=ctx)
    assert result.returncode == 0, result.stderr
    assert "Added the host key" not in result.stdout


def test_changed_host_key_is_refused_even_with_the_flag(tmp_path, home, svc, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    known_hosts = home / ".ssh" / "known_hosts"
    known_hosts.parent.mkdir()
    port = svc["BAT_CI_SSH_HOST"].rsplit(":", 1)[1]
    impostor = Path(svc["BAT_CI_SSH_KEY"] + ".pub").read_text().split()[:2]  # another key
    known_hosts.write_text(f"[127.0.0.1]:{port} {' '.join(impostor)}\n")
    result = run(["build", *remote_args(svc, "--repo", repo, "--accept-new-host-key")], cwd=ctx)
    assert result.returncode == 1
    assert "is not the one in" in result.stderr and "ssh-keygen -R" in result.stderr


def test_ssh_problems_are_one_line(tmp_path, svc, repo, known):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    result = run(["build", "--host", f"root@127.0.0.1:{closed_port()}", "--repo", repo], cwd=ctx)
    assert result.returncode == 1
    assert result.stderr.startswith("bat: error: cannot reach root@127.0.0.1:")
    result = run(["build", "--host", svc["BAT_CI_SSH_HOST"], "--identity", "nope.pem"], cwd=ctx)
    assert result.returncode == 2
    assert result.stderr == "bat: error: nope.pem: no such identity file (--identity)\n"
    wrong_key = tmp_path / "wrong_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong_key)], check=True
    )
    result = run(
        ["build", "--host", svc["BAT_CI_SSH_HOST"], "--identity", str(wrong_key), "--repo", repo],
        cwd=ctx,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"bat: error: SSH login to {svc['BAT_CI_SSH_HOST']} was refused"
    )


def test_remote_push_with_wrong_credentials(tmp_path, svc, repo, known):
    auth = {**svc, **require("auth_registry")}
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    registry = auth["BAT_CI_AUTH_REGISTRY"]
    wrong = "wrong-password-8812"
    args = ["push", *remote_args(svc, "--docker-registry", registry, "--repo", repo)]
    result = run([*args, "--username", auth["BAT_CI_AUTH_USER"]], cwd=ctx, stdin=wrong + "\n")
    assert result.returncode == 1
    assert result.stderr.startswith(f"bat: error: registry {registry} refused the credentials of ")
    assert all(wrong not in text for text in (result.stdout, result.stderr))
    assert not any(folder.exists() for folder in workdirs(result.stdout))
    result = run(
        [*args, "--username", auth["BAT_CI_AUTH_USER"], "--version", "2"],
        cwd=ctx,
        env={"BAT_DOCKER_PASSWORD": auth["BAT_CI_AUTH_PASSWORD"]},
    )
    assert result.returncode == 0, result.stderr
    assert auth["BAT_CI_AUTH_PASSWORD"] not in result.stdout + result.stderr
    assert not any(folder.exists() for folder in workdirs(result.stdout))
