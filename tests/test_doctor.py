"""``bat doctor``: each check in its failing state, set up for real, and a healthy project.

Every test runs the real ``bat`` program in a real folder: a project made by
``bat init.agent`` and ``bat eval.init``, or by ``evalkit.make_project``; real sockets
hold ports; a real scripted model server answers; real interpreters are found by uv.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
import yaml

from tests.evalkit import free_port, make_project, start_fixture, start_model_server
from tests.pythons import find_python

SECRET = "sk-doctor-very-secret-value-4242"
FIELDS = {"name", "ok", "required", "status", "detail", "fix"}


@pytest.fixture(scope="module")
def python312() -> str:
    return find_python()


@pytest.fixture
def env(home, python312) -> dict[str, str]:
    """An environment in which a healthy project passes: uv finds a Python >= 3.12
    without downloading, the model key is set."""
    return {"HOME": str(home), "UV_PYTHON": python312, "OPENAI_API_KEY": SECRET}


@pytest.fixture
def agent(tmp_path, bat, env) -> Path:
    """A project made by ``bat init.agent`` (on a free port) and ``bat eval.init``."""
    port = str(free_port())
    made = bat("init.agent", "myagent", "--port", port, cwd=tmp_path, env=env)
    assert made.code == 0, made.err
    root = tmp_path / "myagent"
    made = bat("eval.init", cwd=root, env=env)
    assert made.code == 0, made.err
    return root


def doctor(bat, cwd: Path, env: dict[str, str], *args: str):
    """``bat doctor --json``: (exit status, {name: check}, the result)."""
    result = bat("doctor", "--json", *args, cwd=cwd, env=env)
    checks = json.loads(result.out)
    return result.code, {check["name"]: check for check in checks}, result


def assert_fails(checks: dict, name: str, *words: str) -> dict:
    check = checks[name]
    assert check["status"] == "fail" and check["ok"] is False and check["required"], check
    assert check["fix"], check
    for word in words:
        assert word in check["detail"], check
    return check


def test_healthy_scaffolded_project_passes_every_check(agent, bat, env):
    # as eval.init wrote it: the stand-in model, served by bat, needs no endpoint or key
    stand_in = bat("doctor", cwd=agent, env={**env, "OPENAI_API_KEY": ""})
    assert stand_in.code == 0, stand_in.out + stand_in.err
    assert "✓ model openai:scripted: scripted by bat from eval/scripted-model.yaml" in stand_in.out
    # the stand-in replaced by the agent's own model (what the user does next)
    config = yaml.safe_load((agent / "eval/eval.yaml").read_text())
    config["models"] = []
    (agent / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    server, base_url = start_model_server(None)
    try:
        started = time.monotonic()
        result = bat("doctor", cwd=agent, env={**env, "BASE_URL": base_url})
        elapsed = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(10)
    assert result.code == 0, result.out + result.err
    lines = result.out.splitlines()
    assert "✗" not in result.out, result.out
    for name in ("python", "bat", "uv", "uv python", "eval.yaml", "dataset", "agent.json"):
        assert any(line.startswith(f"✓ {name}:") for line in lines), (name, result.out)
    for name in (".env", "config.yaml", "agent port", "image"):
        assert any(line.startswith(f"✓ {name}:") for line in lines), (name, result.out)
    assert f"✓ model openai:gpt-4.1-mini: endpoint: {base_url}" in result.out
    assert "✓ model openai:gpt-4.1-mini: key: OPENAI_API_KEY is set" in result.out
    assert "– judge: not used" in result.out
    assert lines[-1].startswith("every required check passed")
    assert SECRET not in result.out + result.err
    assert elapsed < 15, f"bat doctor took {elapsed:.1f} s"


def test_json_is_a_list_of_checks_of_one_shape(agent, bat, env):
    code, checks, result = doctor(bat, agent, env)
    assert code == 0, result.out + result.err
    listed = json.loads(result.out)
    assert isinstance(listed, list) and len(listed) == len(checks) > 10
    for check in listed:
        assert set(check) == FIELDS, check
        assert isinstance(check["ok"], bool) and isinstance(check["required"], bool)
        assert check["status"] in ("ok", "fail", "warn", "skip", "info")
        assert check["ok"] == (check["status"] in ("ok", "skip", "info"))
        assert isinstance(check["detail"], str) and isinstance(check["fix"], str)
    assert checks["python"]["ok"] and checks["python"]["required"]
    assert SECRET not in result.out + result.err


def test_missing_agent_json_fails(agent, bat, env):
    (agent / "agent.json").unlink()
    code, checks, result = doctor(bat, agent, env)
    assert code == 1
    assert_fails(checks, "agent.json", "no agent.json")
    assert "agent.json" in result.err  # the closing line names what failed


def test_agent_json_that_is_not_json_fails(agent, bat, env):
    (agent / "agent.json").write_text('{"name": "x",}')
    code, checks, _ = doctor(bat, agent, env)
    assert code == 1
    assert_fails(checks, "agent.json", "invalid JSON")


def test_bad_env_file_fails_with_its_line(agent, bat, env):
    with (agent / ".env").open("a") as handle:
        handle.write('GREETING="hello\n')
    code, checks, _ = doctor(bat, agent, env)
    assert code == 1
    assert_fails(checks, ".env", "GREETING", "line")


def test_invalid_eval_yaml_fails_with_the_key(agent, bat, env):
    config = yaml.safe_load((agent / "eval/eval.yaml").read_text())
    config["evaluation"]["k"] = 0
    config["evaluation"]["colour"] = "blue"
    (agent / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    code, checks, _ = doctor(bat, agent, env)
    assert code == 1
    check = assert_fails(checks, "eval.yaml", "evaluation.k", "colour")
    assert "2 problems" in check["detail"]
    assert checks["dataset"]["status"] == "skip"


def test_dataset_error_fails(agent, bat, env):
    tasks = json.loads((agent / "eval/input/tasks.json").read_text())
    tasks[1].pop("turns")
    (agent / "eval/input/tasks.json").write_text(json.dumps(tasks, indent=1))
    code, checks, _ = doctor(bat, agent, env)
    assert code == 1
    assert_fails(checks, "dataset", "turns")


def test_port_held_by_something_that_is_not_an_agent_fails(agent, bat, env):
    port = int(yaml.safe_load((agent / ".env").read_text().replace("=", ": "))["PORT"])
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen(8)
        code, checks, _ = doctor(bat, agent, env)
    assert code == 1
    assert_fails(checks, "agent port", f"port {port}", "not an A2A agent")


def test_agent_already_answering(tmp_path, bat, env):
    """start: false with the agent running: fine; start: true: eval.run would refuse."""
    make_project(tmp_path, "echo_tasks.json", start=False)
    url = yaml.safe_load((tmp_path / "eval/eval.yaml").read_text())["evaluation"]["agent_url"]
    code, checks, _ = doctor(bat, tmp_path, env)
    assert code == 1  # nothing answers, and bat is not to start it
    assert_fails(checks, "agent port", "no agent answers")
    proc = start_fixture("echo_agent", int(url.rsplit(":", 1)[1]))
    try:
        code, checks, result = doctor(bat, tmp_path, env)
        assert code == 0, result.out
        assert checks["agent port"]["status"] == "ok"
        config = yaml.safe_load((tmp_path / "eval/eval.yaml").read_text())
        config["evaluation"]["agent"]["start"] = True
        (tmp_path / "eval/eval.yaml").write_text(yaml.safe_dump(config))
        code, checks, _ = doctor(bat, tmp_path, env)
        assert code == 1
        assert_fails(checks, "agent port", "already answers")
    finally:
        proc.terminate()
        proc.wait(10)


def test_model_endpoint_on_a_closed_port_fails(tmp_path, bat, env):
    closed = free_port()
    model = {"provider": "openai", "model": "m1", "base_url": f"http://127.0.0.1:{closed}/v1"}
    make_project(tmp_path, "echo_tasks.json", models=[model])
    code, checks, _ = doctor(bat, tmp_path, env)
    assert code == 1
    assert_fails(checks, "model openai:m1: endpoint", f"127.0.0.1:{closed}", "refused")
    assert checks["model openai:m1: key"]["status"] == "ok"


def test_judge_key_unset_fails_and_a_set_one_is_never_printed(tmp_path, bat, env):
    server, base_url = start_model_server(None)
    try:
        make_project(tmp_path, "echo_tasks.json", qualitative=True)
        config = yaml.safe_load((tmp_path / "eval/eval.yaml").read_text())
        config["judge"] = {
            "provider": "openai",
            "model": "judge-1",
            "base_url": base_url,
            "api_key_env": "DOCTOR_JUDGE_KEY",
        }
        (tmp_path / "eval/eval.yaml").write_text(yaml.safe_dump(config))
        plain = {k: v for k, v in env.items() if k != "DOCTOR_JUDGE_KEY"}
        os.environ.pop("DOCTOR_JUDGE_KEY", None)
        code, checks, _ = doctor(bat, tmp_path, plain)
        assert code == 1
        assert_fails(checks, "judge openai:judge-1: key", "DOCTOR_JUDGE_KEY", "not set")
        assert checks["judge openai:judge-1: endpoint"]["status"] == "ok"
        code, checks, result = doctor(bat, tmp_path, {**plain, "DOCTOR_JUDGE_KEY": SECRET})
        text = bat("doctor", cwd=tmp_path, env={**plain, "DOCTOR_JUDGE_KEY": SECRET})
    finally:
        server.terminate()
        server.wait(10)
    assert code == 0, result.out
    assert checks["judge openai:judge-1: key"]["detail"] == "DOCTOR_JUDGE_KEY is set"
    for output in (result.out, result.err, text.out, text.err):
        assert SECRET not in output


def test_the_user_models_key_is_checked_as_a_judges(tmp_path, bat, env):
    """eval.yaml's user: with api_key_env: unset fails, set passes (never printed)."""
    make_project(tmp_path, "echo_tasks.json")
    config = yaml.safe_load((tmp_path / "eval/eval.yaml").read_text())
    config["user"] = {"provider": "openai", "model": "u-1", "api_key_env": "DOCTOR_USER_KEY"}
    (tmp_path / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    plain = {k: v for k, v in env.items() if k != "DOCTOR_USER_KEY"}
    os.environ.pop("DOCTOR_USER_KEY", None)
    code, checks, _ = doctor(bat, tmp_path, plain)
    assert code == 1
    assert_fails(checks, "user openai:u-1: key", "DOCTOR_USER_KEY", "user.api_key_env")
    assert checks["user openai:u-1: endpoint"]["status"] == "skip"  # the provider's own
    code, checks, result = doctor(bat, tmp_path, {**plain, "DOCTOR_USER_KEY": SECRET})
    assert checks["user openai:u-1: key"]["detail"] == "DOCTOR_USER_KEY is set"
    assert SECRET not in result.out + result.err


def test_uv_python_pointing_at_a_missing_interpreter_fails(tmp_path, bat, env):
    missing = tmp_path / "nowhere" / "python3.12"
    code, checks, _ = doctor(bat, tmp_path, {**env, "UV_PYTHON": str(missing)})
    assert code == 1
    check = assert_fails(checks, "uv python", "UV_PYTHON=")
    assert "UV_PYTHON" in check["fix"]


def test_uv_python_too_old_fails(tmp_path, bat, env):
    import sys

    if sys.version_info >= (3, 12):
        pytest.skip("the test's own Python is not older than 3.12")
    code, checks, _ = doctor(bat, tmp_path, {**env, "UV_PYTHON": sys.executable})
    assert code == 1
    assert_fails(checks, "uv python", "UV_PYTHON=", "requires-python >=3.12")


def test_no_python_312_anywhere_uv_looks(tmp_path, bat, env, monkeypatch):
    """PATH holds only an old Python, no managed interpreters, no pyenv, nothing in
    /usr/local or /opt (replaced by an empty folder here): uv must not download."""
    from bat import agent_python

    monkeypatch.setattr(agent_python, "SYSTEM_PLACES", ((str(tmp_path / "none"), "/opt"),))
    import sys

    if sys.version_info >= (3, 12):
        pytest.skip("the test's own Python is not older than 3.12")
    only_old = tmp_path / "bin"
    only_old.mkdir()
    (only_old / "python3").symlink_to(sys.executable)
    plain = {k: v for k, v in env.items() if k != "UV_PYTHON"}
    bare = {
        **plain,
        "PATH": str(only_old),
        "UV_PYTHON": "",
        "UV_PYTHON_INSTALL_DIR": str(tmp_path / "uv-pythons"),
        "VIRTUAL_ENV": "",
        "PYENV_VERSION": "",
        "PYENV_ROOT": "",
    }
    code, checks, _ = doctor(bat, tmp_path, bare)
    assert code == 1
    check = assert_fails(checks, "uv python", "bat-adk requires-python >=3.12", "may not download")
    assert "found only 3.11" in check["detail"] and "uv python install 3.12" in check["fix"]
    assert not (tmp_path / "uv-pythons").exists() or not any((tmp_path / "uv-pythons").iterdir())


def test_docker_engine_unreachable_is_a_warning_unless_build(agent, bat, env, tmp_path):
    closed = tmp_path / "no-docker.sock"
    registry = f"127.0.0.1:{free_port()}"
    docker = {**env, "DOCKER_HOST": f"unix://{closed}", "BAT_DOCKER_REGISTRY": registry}
    code, checks, result = doctor(bat, agent, docker)
    assert code == 0, result.out
    engine = checks["docker engine"]
    assert engine["status"] == "warn" and not engine["required"] and not engine["ok"]
    assert "DOCKER_HOST" in engine["detail"] and engine["fix"]
    assert checks["registry"]["status"] == "warn"
    code, checks, result = doctor(bat, agent, docker, "--build")
    assert code == 1
    assert_fails(checks, "docker engine", str(closed))
    assert_fails(checks, "registry", registry, "refused")
    lines = bat("doctor", cwd=agent, env=docker).out
    assert "! docker engine:" in lines


def test_unknown_ssh_host_fails_and_a_known_one_passes(tmp_path, bat, env, home):
    import paramiko

    port = free_port()
    code, checks, _ = doctor(bat, tmp_path, env, "--host", f"deploy@127.0.0.1:{port}")
    assert code == 1
    check = assert_fails(checks, "ssh host", "127.0.0.1", "known_hosts")
    assert "ssh-keyscan -p" in check["fix"]
    key = paramiko.ECDSAKey.generate()
    ssh = home / ".ssh"
    ssh.mkdir()
    (ssh / "known_hosts").write_text(f"[127.0.0.1]:{port} {key.get_name()} {key.get_base64()}\n")
    code, checks, result = doctor(bat, tmp_path, env, "--host", f"deploy@127.0.0.1:{port}")
    assert code == 0, result.out
    assert checks["ssh host"]["status"] == "ok"


def test_folder_without_a_project_checks_only_the_machine(tmp_path, bat, env):
    code, checks, result = doctor(bat, tmp_path, env)
    assert code == 0, result.out
    for name in ("eval.yaml", "dataset", "agent.json", ".env", "agent port", "judge"):
        assert checks[name]["status"] == "skip", checks[name]
    for name in ("python", "bat", "uv", "uv python"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["docker engine"]["status"] == "skip"
    assert any(c["status"] == "info" for c in checks.values())  # the exporters line
