"""bat.images.commandline: which flags apply to an image task, and what "already built" is.

Plain functions on real build contexts (tests/imagekit.py), with ``environ`` given, so
no Docker, no Invoke and no shell variable is involved. The command line that uses
them (``bat build --version 2 push`` building once) is tests/images/test_images_local.py.
"""

from __future__ import annotations

import pytest

from bat.errors import UsageError
from bat.images.commandline import (
    SHARED_FLAGS,
    Target,
    is_built,
    merge_flags,
    resolve_target,
)
from tests.imagekit import make_context

UNSET = {name: None for name in SHARED_FLAGS} | {"accept_new_host_key": False}


def test_the_first_task_keeps_only_the_flags_it_was_given():
    flags = {**UNSET, "version": "2", "no_cache": True, "username": "ci"}
    assert merge_flags({}, flags) == {"version": "2"}


def test_earlier_flags_apply_unless_this_task_gives_its_own():
    earlier = {"version": "2", "repo": "team/a", "accept_new_host_key": True}
    flags = {**UNSET, "repo": "team/b", "host": "build1"}
    assert merge_flags(earlier, flags) == {
        "version": "2",
        "repo": "team/b",
        "host": "build1",
        "accept_new_host_key": True,
    }


@pytest.mark.parametrize("unset", [None, False, ""])
def test_a_flag_at_its_default_does_not_hide_an_earlier_one(unset):
    assert merge_flags({"version": "2"}, {**UNSET, "version": unset}) == {"version": "2"}


def test_no_cache_and_username_are_never_passed_on():
    earlier = merge_flags({}, {**UNSET, "no_cache": True, "username": "ci", "version": "1"})
    assert merge_flags(earlier, UNSET) == {"version": "1"}


def test_flags_beat_configuration_and_configuration_fills_the_rest(tmp_path):
    ctx = make_context(tmp_path / "agent", card={"name": "Agent", "version": "0.3.0"})
    config = {
        "images.context": "/nowhere",
        "docker.registry": "config.example",
        "docker.repo": "team/config",
        "images.version": "9",
        "images.host": "deploy@build1:2222",
        "images.identity": "~/.ssh/id_build",
        "images.known_hosts": "/etc/bat/known_hosts",
        "images.accept_new_host_key": True,
    }
    target = resolve_target({"context": str(ctx), "version": "2"}, config, environ={})
    settings = target.settings
    assert settings.context == ctx
    assert settings.ref == "config.example/team/config:2"
    assert settings.version.source == "--version"
    assert settings.registry.source == "docker.registry in the configuration"
    assert str(target.host) == "deploy@build1:2222" and target.where == " on deploy@build1:2222"
    assert target.ssh.identity == "~/.ssh/id_build"
    assert target.ssh.known_hosts == "/etc/bat/known_hosts"
    assert target.ssh.accept_new_host_key is True


def test_an_empty_configuration_means_the_defaults(tmp_path, monkeypatch):
    ctx = make_context(tmp_path / "Echo_Agent", card={"version": "3"})
    monkeypatch.chdir(ctx)
    target = resolve_target({}, {}, environ={})
    assert target.settings.ref == "localhost:5000/echo-agent:3"
    assert target.host is None and target.where == ""
    assert target.ssh.known_hosts == "~/.ssh/known_hosts"
    assert target.ssh.accept_new_host_key is False


def test_a_push_needs_a_registry_before_anything_else(tmp_path):
    ctx = make_context(tmp_path / "agent", card={"version": "1"})
    flags = {"context": str(ctx)}
    assert resolve_target(flags, {}, environ={}).settings.registry.value == "localhost:5000"
    with pytest.raises(UsageError, match="no registry to push to"):
        resolve_target(flags, {}, require_registry=True, environ={})
    shell = {"BAT_DOCKER_REGISTRY": "env.example"}
    pushed = resolve_target(flags, {}, require_registry=True, environ=shell)
    assert pushed.settings.registry.value == "env.example"


def test_the_built_key_tells_images_hosts_and_contexts_apart(tmp_path):
    first = make_context(tmp_path / "one", card={"name": "agent", "version": "1"})
    second = make_context(tmp_path / "two", card={"name": "agent", "version": "1"})

    def target(ctx, **flags) -> Target:
        return resolve_target({"context": str(ctx), **flags}, {}, environ={})

    local = target(first)
    assert local.key == ["", str(first), "localhost:5000/agent:1"]
    built = [local.key]
    assert is_built(target(first), built)
    assert is_built(target(first), [tuple(local.key)])  # a stored tuple compares alike
    assert not is_built(target(first, version="2"), built)
    assert not is_built(target(second), built)
    assert not is_built(target(first, host="build1"), built)
    assert is_built(target(first, host="build1"), [*built, target(first, host="build1").key])
    assert not is_built(local, [])


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--network", "my net"], {}, "--network: 'my net' is not a network name"),
        ([], {"BAT_IMAGES_NETWORK": "-x"}, "images.network (BAT_IMAGES_NETWORK): '-x' is not"),
    ],
)
def test_a_bad_network_is_one_line_exit_2_before_the_engine_is_asked(
    tmp_path, bat, home, args, env, words
):
    ctx = make_context(tmp_path / "agent", card={"name": "Agent", "version": "1"})
    # an engine that does not exist: the network is refused before any call to it
    result = bat("build", *args, cwd=ctx, env={"DOCKER_HOST": "tcp://127.0.0.1:9", **env})
    assert result.code == 2, result.out + result.err
    (line,) = result.err.strip().splitlines()
    assert line.startswith(f"bat: error: {words}"), line
