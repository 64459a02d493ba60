"""Which image bat builds: the precedence table, row by row, and the checks on each value.

The library rows call ``bat.images.settings.resolve`` directly. The command-line rows
run the real ``bat build`` with ``DOCKER_HOST`` on a closed port: bat resolves and
prints the image (``Building <ref>`` and where each part came from) before it contacts
the engine, then stops with the engine error, so these rows need no Docker at all.
"""

from __future__ import annotations

import io
import os
import subprocess

import pytest

from bat.errors import InputError, UsageError
from bat.images.credentials import Credentials, read_credentials
from bat.images.settings import FALLBACK_REGISTRY, host_spec, resolve, tag
from tests.imagekit import closed_port, make_context

CARD = {"name": "Weather Bot", "version": "0.4.0"}
DOTENV = "BAT_DOCKER_REGISTRY=dotenv.example:5000\nBAT_DOCKER_REPO=team/from-dotenv\n"


@pytest.fixture
def ctx(tmp_path):
    return make_context(tmp_path / "weather-bot", card=CARD, dotenv=DOTENV)


# -- the library, row by row ------------------------------------------------------------


def test_registry_flag_beats_everything(ctx):
    settings = resolve(
        ctx,
        registry_flag="flag.example",
        registry_config="config.example",
        environ={"BAT_DOCKER_REGISTRY": "env.example"},
    )
    assert settings.registry.value == "flag.example"
    assert settings.registry.source == "--docker-registry"


def test_registry_shell_beats_configuration_and_dotenv(ctx):
    settings = resolve(
        ctx, registry_config="config.example", environ={"BAT_DOCKER_REGISTRY": "env.example"}
    )
    assert settings.registry.value == "env.example"
    assert settings.registry.source == "BAT_DOCKER_REGISTRY in the environment"


def test_registry_configuration_beats_dotenv(ctx):
    settings = resolve(ctx, registry_config="config.example", environ={})
    assert settings.registry.value == "config.example"
    assert settings.registry.source == "docker.registry in the configuration"


def test_registry_from_the_context_dotenv(ctx):
    settings = resolve(ctx, environ={})
    assert settings.registry.value == "dotenv.example:5000"
    assert settings.registry.source.startswith("BAT_DOCKER_REGISTRY in ")
    assert settings.registry.source.endswith(".env")


def test_registry_fallback_for_a_build_only(tmp_path):
    ctx = make_context(tmp_path / "plain")
    fallback = resolve(ctx, version_flag="1", environ={}).registry
    assert fallback.value == FALLBACK_REGISTRY == "localhost:5000"
    with pytest.raises(UsageError, match=r"no registry to push to.*never pushes to Docker Hub"):
        resolve(ctx, version_flag="1", environ={}, require_registry=True)


def test_empty_values_do_not_count(ctx):
    settings = resolve(ctx, registry_flag="", environ={"BAT_DOCKER_REGISTRY": " "})
    assert settings.registry.value == "dotenv.example:5000"


def test_repo_rows(ctx):
    env = {"BAT_DOCKER_REPO": "team/from-env"}
    assert resolve(ctx, repo_flag="team/flag", environ=env).repo.value == "team/flag"
    assert resolve(ctx, repo_config="team/config", environ=env).repo.value == "team/from-env"
    assert resolve(ctx, repo_config="team/config", environ={}).repo.value == "team/config"
    assert resolve(ctx, environ={}).repo.value == "team/from-dotenv"
    (ctx / ".env").write_text("PORT=9000\n")
    from_card = resolve(ctx, environ={}).repo
    assert from_card.value == "weather-bot"
    assert from_card.source.startswith("the name in ") and from_card.source.endswith("agent.json")
    (ctx / "agent.json").unlink()
    assert resolve(ctx, version_flag="1", environ={}).repo.source == "the context folder's name"


@pytest.mark.parametrize(
    ("name", "repo"),
    [("EchoAgent", "echo-agent"), ("My  Agent!", "my-agent"), ("weather_bot", "weather-bot")],
)
def test_repo_fallback_is_normalised(tmp_path, name, repo):
    ctx = make_context(tmp_path / "x", card={"name": name})
    assert resolve(ctx, version_flag="1", environ={}).repo.value == repo


def test_folder_name_normalised_when_no_card(tmp_path):
    ctx = make_context(tmp_path / "My_Agent.V2")
    assert resolve(ctx, version_flag="1", environ={}).repo.value == "my-agent-v2"


def test_version_rows(ctx):
    assert resolve(ctx, version_flag="2.0", version_config="1.9", environ={}).version.value == "2.0"
    configured = resolve(ctx, version_config="1.9", environ={}).version
    assert (configured.value, configured.source) == ("1.9", "images.version")
    carded = resolve(ctx, environ={}).version
    assert carded.value == "0.4.0"
    assert carded.source.startswith("the version in ") and carded.source.endswith("agent.json")


def test_version_from_git_describe_before_the_card(ctx):
    def git(*args):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
            cwd=ctx,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "first")
    git("tag", "v1.2.3")
    described = resolve(ctx, environ={}).version
    assert described.value == "v1.2.3"
    assert described.source.startswith("git describe")
    (ctx / "hello.txt").write_text("changed\n")
    assert resolve(ctx, environ={}).version.value == "v1.2.3-dirty"


def test_no_version_anywhere_is_a_usage_error(tmp_path):
    ctx = make_context(tmp_path / "plain")
    with pytest.raises(UsageError, match=r"no version for the image.*give --version"):
        resolve(ctx, environ={})


def test_card_version_made_a_valid_tag(tmp_path):
    ctx = make_context(tmp_path / "x", card={"version": "1.0+build.5"})
    assert resolve(ctx, environ={}).version.value == "1.0-build.5"


def test_refused_values_name_their_source(ctx):
    (ctx / ".env").write_text("BAT_DOCKER_REGISTRY=http://registry.example\n")
    with pytest.raises(InputError, match=r"leave out the scheme.*\(from BAT_DOCKER_REGISTRY in "):
        resolve(ctx, environ={})
    with pytest.raises(InputError, match=r"invalid Docker repository 'Team/X': .* \(from --repo\)"):
        resolve(ctx, repo_flag="Team/X", registry_flag="r.example", environ={})
    with pytest.raises(InputError, match=r"invalid version '-1': .*\(from --version\)"):
        resolve(ctx, version_flag="-1", registry_flag="r.example", environ={})


def test_context_must_be_a_folder_with_a_dockerfile(tmp_path):
    with pytest.raises(UsageError, match="no such folder"):
        resolve(tmp_path / "missing", environ={})
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no Dockerfile in"):
        resolve(tmp_path / "empty", environ={})


def test_reference_and_login_server(ctx):
    settings = resolve(ctx, registry_flag="ghcr.io/team", version_flag="1", environ={})
    assert settings.ref == "ghcr.io/team/team/from-dotenv:1"
    assert settings.registry_host == "ghcr.io"


@pytest.mark.parametrize(
    ("text", "user", "host", "port"),
    [
        ("build1", None, "build1", None),
        ("deploy@build1.example.org", "deploy", "build1.example.org", None),
        ("root@127.0.0.1:2222", "root", "127.0.0.1", 2222),
        ("me@[::1]:22", "me", "::1", 22),
    ],
)
def test_host_spec(text, user, host, port):
    spec = host_spec(text)
    assert (spec.user, spec.host, spec.port) == (user, host, port)


@pytest.mark.parametrize("text", ["", "a b", "user@", "ssh://host"])
def test_bad_host_spec(text):
    with pytest.raises(
        UsageError,
        match=r"invalid host .* \(--host, images.host\): expected \[user@\]host\[:port\]",
    ):
        host_spec(text)


@pytest.mark.parametrize("port", ["0", "99999"])
def test_a_host_spec_port_follows_the_one_port_rule(port):
    with pytest.raises(UsageError) as refused:
        host_spec(f"user@host:{port}")
    assert refused.value.message == (
        f"invalid host 'user@host:{port}' (--host, images.host): "
        f"'{port}' is not a port number (1-65535)"
    )


@pytest.mark.parametrize("text", ["1.0", "v1.2.3-4-gabc", "latest", "A_b.c-d"])
def test_tags(text):
    assert tag(text) == text


@pytest.mark.parametrize("text", [".1", "-x", "a/b", "a:b", "x" * 129])
def test_bad_tags(text):
    with pytest.raises(InputError):
        tag(text)


# -- credentials ------------------------------------------------------------------------


def test_password_from_the_environment_first():
    creds = read_credentials(
        "me", "r", stdin=io.StringIO("piped\n"), environ={"BAT_DOCKER_PASSWORD": "s3"}
    )
    assert creds == Credentials("me", "s3")
    assert "s3" not in repr(creds)


def test_password_from_a_pipe():
    creds = read_credentials("me", "r", stdin=io.StringIO("p4ss word\nrest\n"), environ={})
    assert creds.password == "p4ss word"


def test_no_password_is_a_usage_error():
    with pytest.raises(UsageError, match="no password for --username me"):
        read_credentials("me", "r", stdin=io.StringIO(""), environ={})
    with pytest.raises(UsageError, match="invalid --username"):
        read_credentials(" ", "r", stdin=io.StringIO("x\n"), environ={})


# -- the command line, row by row (resolution happens before the engine is contacted) ---


@pytest.fixture
def no_engine():
    return {"DOCKER_HOST": f"tcp://127.0.0.1:{closed_port()}"}


def building(result) -> str:
    lines = [line for line in result.out.splitlines() if line.startswith("Building ")]
    assert lines, (result.out, result.err)
    return lines[0].removeprefix("Building ")


def test_cli_flag_row(bat, home, ctx, no_engine):
    env = {**no_engine, "BAT_DOCKER_REGISTRY": "env.example", "BAT_DOCKER_REPO": "team/env"}
    (ctx / "bat.yaml").write_text("docker: {registry: yaml.example, repo: team/yaml}\n")
    result = bat(
        "build",
        "--docker-registry",
        "flag.example",
        "--repo",
        "team/flag",
        "--version",
        "7",
        cwd=ctx,
        env=env,
    )
    assert building(result) == "flag.example/team/flag:7"
    assert (
        "registry from --docker-registry; repository from --repo; version 7 from --version"
        in result.out
    )


def test_cli_shell_row(bat, home, ctx, no_engine):
    env = {**no_engine, "BAT_DOCKER_REGISTRY": "env.example", "BAT_DOCKER_REPO": "team/env"}
    (ctx / "bat.yaml").write_text("docker: {registry: yaml.example, repo: team/yaml}\n")
    result = bat("build", cwd=ctx, env=env)
    assert building(result) == "env.example/team/env:0.4.0"
    assert "registry from BAT_DOCKER_REGISTRY in the environment" in result.out


def test_cli_configuration_row(bat, home, ctx, no_engine):
    (ctx / "bat.yaml").write_text("docker: {registry: yaml.example, repo: team/yaml}\n")
    result = bat("build", cwd=ctx, env=no_engine)
    assert building(result) == "yaml.example/team/yaml:0.4.0"
    assert "registry from docker.registry in the configuration" in result.out


def test_cli_user_file_and_dash_f_are_configuration_too(bat, home, ctx, no_engine, tmp_path):
    (home / ".bat.yaml").write_text("docker: {registry: user.example}\n")
    assert building(bat("build", cwd=ctx, env=no_engine)).startswith("user.example/")
    extra = tmp_path / "release.yaml"
    extra.write_text("docker: {registry: dashf.example}\nimages: {version: '9.9'}\n")
    result = bat("-f", str(extra), "build", cwd=ctx, env=no_engine)
    assert building(result) == "dashf.example/team/from-dotenv:9.9"
    # The shell's variable still wins over any file, -f included.
    result = bat(
        "-f", str(extra), "build", cwd=ctx, env={**no_engine, "BAT_DOCKER_REGISTRY": "env.example"}
    )
    assert building(result).startswith("env.example/")


def test_cli_dotenv_row(bat, home, ctx, no_engine):
    result = bat("build", cwd=ctx, env=no_engine)
    assert building(result) == "dotenv.example:5000/team/from-dotenv:0.4.0"
    assert "registry from BAT_DOCKER_REGISTRY in .env" in result.out


def test_cli_fallback_row(bat, home, tmp_path, no_engine):
    ctx = make_context(tmp_path / "Echo_Agent", card={"version": "3"})
    result = bat("build", cwd=ctx, env=no_engine)
    assert building(result) == "localhost:5000/echo-agent:3"
    assert (
        "registry from the fallback for builds; repository from the context folder's name"
        in result.out
    )


def test_cli_context_flag_reads_that_folders_dotenv(bat, home, ctx, no_engine, tmp_path):
    result = bat("build", "-C", str(ctx), cwd=tmp_path, env=no_engine)
    assert building(result) == "dotenv.example:5000/team/from-dotenv:0.4.0"
    result = bat("build", cwd=tmp_path, env={**no_engine, "BAT_IMAGES_CONTEXT": str(ctx)})
    assert building(result) == "dotenv.example:5000/team/from-dotenv:0.4.0"


def test_cli_version_from_the_environment(bat, home, ctx, no_engine):
    result = bat("build", cwd=ctx, env={**no_engine, "BAT_IMAGES_VERSION": "5.1"})
    assert building(result).endswith(":5.1")
    assert "version 5.1 from images.version" in result.out


def test_cli_engine_unreachable_names_docker_host(bat, home, ctx, no_engine):
    result = bat("build", cwd=ctx, env=no_engine)
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith(
        f"bat: error: cannot reach the Docker engine at {no_engine['DOCKER_HOST']} (DOCKER_HOST): "
        "connection refused"
    )


def test_cli_push_refuses_without_a_registry_before_building(bat, home, tmp_path, no_engine):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    result = bat("push", cwd=ctx, env=no_engine)
    assert result.code == 2
    assert "Building" not in result.out
    assert result.err.startswith("bat: error: no registry to push to:")
    assert result.err.count("\n") == 1


def test_cli_bad_values_are_usage_errors(bat, home, ctx, no_engine):
    for args, words in [
        (
            ["--docker-registry", "https://x"],
            "leave out the scheme (no http://) (from --docker-registry)",
        ),
        (["--version", "a/b"], "invalid version 'a/b'"),
        (["--host", "user@"], "invalid host 'user@' (--host, images.host)"),
        (["-C", "nowhere"], "nowhere: no such folder"),
    ]:
        result = bat("build", *args, cwd=ctx, env=no_engine)
        assert result.code == 2, (args, result.err)
        assert words in result.err, result.err
        assert result.err.count("\n") == 1


@pytest.mark.parametrize("craft", ["fifo", "huge number"])
def test_an_agent_json_bat_cannot_read_is_one_line_fast(tmp_path, bat, home, craft):
    """The card is read before anything is built: a FIFO once hung `bat build`, and a
    number of 5,000 digits (past Python's limit) was a traceback."""
    context = make_context(tmp_path / "agent", card={"version": "1"})
    card = context / "agent.json"
    card.unlink()
    if craft == "fifo":
        os.mkfifo(card)
    else:
        card.write_text('{"name": "a", "version": ' + "1" * 5000 + "}")
    result = bat("build", "--context", str(context), "--host", "127.0.0.1:1", timeout=30)
    assert result.code == 2, result.err
    assert result.err.startswith(f"bat: error: {card}") and "Traceback" not in result.err
    assert len(result.err.splitlines()) == 1
