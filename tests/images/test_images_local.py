"""``bat build`` and ``bat push`` against the real local Docker engine and registries.

Needs the services of .ci/services.sh (a dockerd, a registry on :5000, one with htpasswd
on :5001): skipped without them locally, failed without them in CI.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.request

import pytest

from tests.conftest import BAT
from tests.imagekit import (
    closed_port,
    docker_client,
    image_files,
    make_context,
    remove_images,
    require,
    tags,
    unique_repo,
)

FAILING_DOCKERFILE = """\
FROM {base}
ARG VERSION
RUN ["/bin/tini", "--version"]
RUN ["/bin/tini", "--", "/bin/tini", "-x"]
COPY hello.txt /never.txt
"""


@pytest.fixture(scope="module")
def svc():
    facts = require("engine", "registry")
    repos: list[str] = []
    facts = {**facts, "_repos": repos}
    yield facts
    remove_images(facts, repos)


@pytest.fixture
def repo(svc):
    name = unique_repo("local")
    svc["_repos"].append(name)
    return name


def engine_env(svc, **extra):
    return {"DOCKER_HOST": svc["BAT_CI_DOCKER_HOST"], **extra}


def test_tag_and_version_build_argument_reach_the_image(bat, home, tmp_path, svc, repo):
    ctx = make_context(
        tmp_path / "agent",
        card={"name": "Agent", "version": "0.1.0"},
        dotenv=f"BAT_DOCKER_REGISTRY={svc['BAT_CI_REGISTRY']}\nBAT_DOCKER_REPO={repo}\n",
    )
    result = bat("build", "--version", "1.2.3", cwd=ctx, env=engine_env(svc))
    assert result.code == 0, result.err
    ref = f"{svc['BAT_CI_REGISTRY']}/{repo}:1.2.3"
    assert f"Built {ref} (image " in result.out
    assert "Step 1/5 : FROM scratch" in result.out
    client = docker_client(svc)
    try:
        config = client.images.get(ref).attrs["Config"]
    finally:
        client.close()
    assert config["Labels"]["org.opencontainers.image.version"] == "1.2.3"
    assert "VERSION=1.2.3" in config["Env"]
    logs = list((ctx / ".bat" / "logs").glob("build-*.log"))
    assert len(logs) == 1 and "Successfully tagged" in logs[0].read_text()
    assert (ctx / ".bat" / ".gitignore").read_text().strip().endswith("*")


def test_dockerignore_is_honoured_and_logs_stay_out(bat, home, tmp_path, svc, repo):
    ctx = make_context(
        tmp_path / "agent",
        dockerfile="FROM scratch\nCOPY . /ctx/\n",
        files={
            "secret.txt": "TOP SECRET\n",
            "private/key.pem": "KEY\n",
            "src/app.py": "print('hi')\n",
            ".dockerignore": "# secrets stay home\nsecret.txt\nprivate/\n",
        },
    )
    (ctx / ".bat" / "logs").mkdir(parents=True)
    (ctx / ".bat" / "logs" / "build-old.log").write_text("an old log\n")
    result = bat("build", "--repo", repo, "--version", "1", cwd=ctx, env=engine_env(svc))
    assert result.code == 0, result.err
    files = image_files(svc, f"localhost:5000/{repo}:1")
    assert files["ctx/hello.txt"] == b"hello from a bat test\n"
    assert files["ctx/src/app.py"] == b"print('hi')\n"
    assert "ctx/secret.txt" not in files
    assert not any(name.startswith(("ctx/private", "ctx/.bat")) for name in files)


def test_a_failing_step_is_one_line_naming_it_and_the_log_is_kept(bat, home, tmp_path, svc, repo):
    ctx = make_context(
        tmp_path / "agent", dockerfile=FAILING_DOCKERFILE.format(base=svc["BAT_CI_BASE_IMAGE"])
    )
    result = bat("build", "--repo", repo, "--version", "1", cwd=ctx, env=engine_env(svc))
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith(
        'bat: error: step 4/5 (RUN ["/bin/tini", "--", "/bin/tini", "-x"]) failed: '
        "The command '/bin/tini -- /bin/tini -x' returned a non-zero code: 1 (full log: "
    )
    log = ctx / result.err.split("(full log: ")[1].rstrip(")\n")
    text = log.read_text()
    assert "invalid option -- 'x'" in text and "tini version 0.19.0" in text
    assert "Step 3/5 :" in result.out and "Step 5/5" not in result.out
    assert "invalid option -- 'x'" in result.out  # the step's output was shown


def test_a_dockerfile_error_before_any_step(bat, home, tmp_path, svc, repo):
    ctx = make_context(tmp_path / "agent", dockerfile="FROM scratch\nFROBNICATE now\n")
    result = bat("build", "--repo", repo, "--version", "1", cwd=ctx, env=engine_env(svc))
    assert result.code == 1
    assert result.err.startswith("bat: error: the build failed before its first step: ")
    assert "frobnicate" in result.err.lower() and "(full log: .bat/logs/build-" in result.err


def test_push_then_the_registry_lists_the_tag(bat, home, tmp_path, svc, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "2.0.0"})
    env = engine_env(svc, BAT_DOCKER_REGISTRY=svc["BAT_CI_REGISTRY"], BAT_DOCKER_REPO=repo)
    result = bat("push", cwd=ctx, env=env)
    assert result.code == 0, result.err
    assert tags(svc["BAT_CI_REGISTRY"], repo) == ["2.0.0"]
    digest = next(line for line in result.out.splitlines() if line.startswith("Pushed "))
    assert digest.startswith(f"Pushed {svc['BAT_CI_REGISTRY']}/{repo}:2.0.0 digest sha256:")
    assert result.out.count("Built ") == 1
    assert list((ctx / ".bat" / "logs").glob("push-*.log"))


def test_build_push_builds_once(bat, home, tmp_path, svc, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "3"})
    env = engine_env(svc, BAT_DOCKER_REGISTRY=svc["BAT_CI_REGISTRY"], BAT_DOCKER_REPO=repo)
    result = bat("build", "push", cwd=ctx, env=env)
    assert result.code == 0, result.err
    assert result.out.count("Step 1/5") == 1 and result.out.count("Built ") == 1
    assert tags(svc["BAT_CI_REGISTRY"], repo) == ["3"]
    # Flags given to build apply to the push after it: still one build, of that version.
    result = bat("build", "--version", "4", "push", cwd=ctx, env=env)
    assert result.code == 0, result.err
    assert result.out.count("Built ") == 1 and "is already built in this run" in result.out
    # push's own flags reach the build it makes: one build, of the version pushed.
    result = bat("push", "--version", "5", cwd=ctx, env=env)
    assert result.code == 0, result.err
    assert (
        result.out.count("Built ") == 1
        and f"Built {svc['BAT_CI_REGISTRY']}/{repo}:5 " in result.out
    )
    assert sorted(tags(svc["BAT_CI_REGISTRY"], repo)) == ["3", "4", "5"]


def test_flags_after_push_ask_for_a_second_image(bat, home, tmp_path, svc, repo):
    """`bat build push --version 6`: build builds its own version, push builds and pushes 6."""
    ctx = make_context(tmp_path / "agent", card={"version": "3"})
    env = engine_env(svc, BAT_DOCKER_REGISTRY=svc["BAT_CI_REGISTRY"], BAT_DOCKER_REPO=repo)
    result = bat("build", "push", "--version", "6", cwd=ctx, env=env)
    assert result.code == 0, result.err
    name = f"{svc['BAT_CI_REGISTRY']}/{repo}"
    built = [line.split(" (image ")[0] for line in result.out.splitlines() if "Built " in line]
    assert built == [f"Built {name}:3", f"Built {name}:6"]
    assert "already built" not in result.out
    assert result.out.index(f"Built {name}:6") < result.out.index(f"Pushing {name}:6")
    assert tags(svc["BAT_CI_REGISTRY"], repo) == ["6"]


def test_no_cache_reaches_the_build_push_makes(bat, home, tmp_path, svc, repo):
    """--no-cache given to build, or images.no_cache, is how push builds without the cache."""
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    env = engine_env(svc, BAT_DOCKER_REGISTRY=svc["BAT_CI_REGISTRY"], BAT_DOCKER_REPO=repo)
    logs = ctx / ".bat" / "logs"

    def build_log_of(*args, **extra):
        before = set(logs.glob("build-*.log"))
        result = bat(*args, cwd=ctx, env={**env, **extra})
        assert result.code == 0, result.err
        assert result.out.count("Built ") == 1 and "Pushed " in result.out
        (new,) = set(logs.glob("build-*.log")) - before
        return new.read_text()

    build_log_of("push")  # the layers are in the engine's cache from now on
    assert "Using cache" in build_log_of("build", "push")
    assert "Using cache" not in build_log_of("build", "--no-cache", "push")
    assert "Using cache" not in build_log_of("push", BAT_IMAGES_NO_CACHE="true")


def test_push_to_an_unreachable_registry(bat, home, tmp_path, svc, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    registry = f"127.0.0.1:{closed_port()}"
    result = bat(
        "push", "--docker-registry", registry, "--repo", repo, cwd=ctx, env=engine_env(svc)
    )
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith(f"bat: error: cannot reach registry {registry}: ")
    assert "connection refused" in result.err and "check --docker-registry" in result.err


def test_unreachable_engine_names_docker_host(bat, home, tmp_path, svc):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    host = f"tcp://127.0.0.1:{closed_port()}"
    for command in ("build", "push"):
        result = bat(
            command, "--docker-registry", svc["BAT_CI_REGISTRY"], cwd=ctx, env={"DOCKER_HOST": host}
        )
        assert result.code == 1
        assert result.err == (
            f"bat: error: cannot reach the Docker engine at {host} (DOCKER_HOST): connection "
            "refused; start the engine or point DOCKER_HOST at one that runs\n"
        )


@pytest.fixture(scope="module")
def auth(svc):
    return {**svc, **require("auth_registry")}


def test_push_with_credentials_on_stdin_and_from_the_environment(home, tmp_path, auth, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    registry, password = auth["BAT_CI_AUTH_REGISTRY"], auth["BAT_CI_AUTH_PASSWORD"]
    env = {**os.environ, **engine_env(auth), "NO_COLOR": "1"}
    args = [
        str(BAT),
        "push",
        "--docker-registry",
        registry,
        "--repo",
        repo,
        "--username",
        auth["BAT_CI_AUTH_USER"],
    ]
    proc = subprocess.run(
        args, cwd=ctx, env=env, input=password + "\n", capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert tags_with_auth(registry, repo, auth) == ["1"]
    proc = subprocess.run(
        [*args, "--version", "2"],
        cwd=ctx,
        env={**env, "BAT_DOCKER_PASSWORD": password},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for text in (proc.stdout, proc.stderr, *(p.read_text() for p in (ctx / ".bat").rglob("*.log"))):
        assert password not in text


def test_wrong_credentials_are_one_line_and_never_shown(home, tmp_path, auth, repo):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    registry = auth["BAT_CI_AUTH_REGISTRY"]
    env = {**os.environ, **engine_env(auth), "NO_COLOR": "1"}
    args = [str(BAT), "push", "--docker-registry", registry, "--repo", repo]
    wrong = "not-the-password-0451"
    proc = subprocess.run(
        [*args, "--username", auth["BAT_CI_AUTH_USER"]],
        cwd=ctx,
        env=env,
        input=wrong + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(
        f"bat: error: registry {registry} refused the credentials of '{auth['BAT_CI_AUTH_USER']}': "
    )
    assert "check --username and the password" in proc.stderr
    for text in (proc.stdout, proc.stderr, *(p.read_text() for p in (ctx / ".bat").rglob("*.log"))):
        assert wrong not in text
    # No credentials at all: refused too, with the hint to log in.
    proc = subprocess.run(
        args,
        cwd=ctx,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert f"bat: error: registry {registry} refused the push" in proc.stderr
    assert f"docker login {registry}" in proc.stderr
    # --username without any password: a usage error before anything is pushed.
    proc = subprocess.run(
        [*args, "--username", "someone"],
        cwd=ctx,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("bat: error: no password for --username someone")


def tags_with_auth(registry: str, repo: str, auth: dict) -> list[str]:
    token = base64.b64encode(
        f"{auth['BAT_CI_AUTH_USER']}:{auth['BAT_CI_AUTH_PASSWORD']}".encode()
    ).decode()
    request = urllib.request.Request(
        f"http://{registry}/v2/{repo}/tags/list", headers={"Authorization": f"Basic {token}"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=5) as response:
        return json.loads(response.read())["tags"]
