"""The ``bat`` program: help at every level, spellings, config layers, errors, version."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from bat.cli.program import INTERRUPTED
from bat.errors import error_line
from tests.conftest import REPO

COMMANDS = ["init.agent", "add.client", "set.env", "version"]


def project_version():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_help_lists_every_command(bat, home):
    result = bat("--help")
    assert result.code == 0
    for name in COMMANDS:
        assert name in result.out


def test_list(bat, home):
    result = bat("--list")
    assert result.code == 0 and all(name in result.out for name in COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_per_command_in_every_spelling(bat, home, name):
    dotted = bat("--help", name)
    assert dotted.code == 0 and f"Usage: bat {name}" in dotted.out
    assert bat(name, "--help").out == dotted.out
    if "." in name:
        assert bat("--help", *name.split(".")).out == dotted.out
        assert bat(*name.split("."), "-h").out == dotted.out


@pytest.mark.parametrize("group", ["init", "add", "set"])
def test_a_group_alone_lists_its_commands(bat, home, group):
    for args in ([group], [group, "--help"], ["--help", group]):
        result = bat(*args)
        assert result.code == 0, args
        assert f"{group}." in result.out and "Traceback" not in result.err


def test_unknown_command_in_group(bat, home):
    result = bat("init", "nope")
    assert result.code == 2
    assert result.err == "bat: error: 'init' has no command 'nope' (it has: agent)\n"


@pytest.mark.parametrize(
    "args",
    [
        ["frobnicate"],
        ["init.agent"],
        ["set.env", "--bogus"],
        ["--bogus"],
        ["init.agent", "x", "--port"],
    ],
)
def test_usage_errors_are_one_line_exit_2(bat, home, tmp_path, args):
    result = bat(*args, cwd=tmp_path)
    assert result.code == 2
    assert result.err.startswith("bat: error: ") and result.err.count("\n") == 1


def test_version_prints_the_installed_version(bat, home):
    result = bat("version")
    assert result.code == 0 and result.out == f"bat-cli {project_version()}\n"
    assert bat("--version").out == result.out


def test_version_from_an_uninstalled_checkout_is_unavailable(tmp_path):
    """A venv with Invoke but without bat-cli, running bat from the source tree."""
    uv = shutil.which("uv") or str(os.path.join(os.path.dirname(sys.executable), "uv"))
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), "invoke>=2.2,<3"], check=True
    )
    answers = []
    for spelling in ("version", "--version"):  # one answer, however it is asked
        proc = subprocess.run(
            [str(python), "-m", "bat.cli", spelling],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.returncode == 1, spelling
        assert proc.stderr.startswith("bat: error: bat-cli version unavailable"), spelling
        assert proc.stderr.count("\n") == 1
        answers.append((proc.returncode, proc.stdout, proc.stderr))
    assert answers[0] == answers[1]


# -- configuration layers -------------------------------------------------------------


def generated_port(directory):
    for line in (directory / ".env").read_text().splitlines():
        if line.startswith("PORT="):
            return int(line.split("=", 1)[1])
    raise AssertionError("no PORT")


def test_configuration_layers_in_order(bat, home, tmp_path):
    """~/.bat.yaml < ./bat.yaml < BAT_* < -f FILE < flag, each checked by the port it sets."""
    work = tmp_path / "work"
    work.mkdir()
    layer = "init:\n  agent:\n    port: {}\n"
    (home / ".bat.yaml").write_text(layer.format(9001))
    assert bat("init.agent", "a1", cwd=work).code == 0
    assert generated_port(work / "a1") == 9001
    (work / "bat.yaml").write_text(layer.format(9002))
    assert bat("init.agent", "a2", cwd=work).code == 0
    assert generated_port(work / "a2") == 9002
    env = {"BAT_INIT_AGENT_PORT": "9003"}
    assert bat("init.agent", "a3", cwd=work, env=env).code == 0
    assert generated_port(work / "a3") == 9003
    runtime = tmp_path / "runtime.yaml"
    runtime.write_text(layer.format(9004))
    assert bat("-f", str(runtime), "init.agent", "a4", cwd=work, env=env).code == 0
    assert generated_port(work / "a4") == 9004
    flagged = bat("-f", str(runtime), "init.agent", "a5", "--port", "9005", cwd=work, env=env)
    assert flagged.code == 0
    assert generated_port(work / "a5") == 9005


def test_other_defaults_come_from_configuration(bat, home, tmp_path):
    (tmp_path / "bat.yaml").write_text(
        "init:\n  agent:\n    model_provider: ollama\n    clients: planner,critic\n"
    )
    assert bat("init.agent", "cfg", cwd=tmp_path).code == 0
    assert "MODEL_PROVIDER=ollama" in (tmp_path / "cfg/.env").read_text()
    assert (tmp_path / "cfg/src/llm_clients/critic_client.py").is_file()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("init: [unclosed\n", "invalid YAML"),
        ("- a list\n", "(top level) (line 1): expected a mapping of keys, got a list"),
    ],
)
def test_malformed_project_config_is_one_line_exit_2(bat, home, tmp_path, content, words):
    (tmp_path / "bat.yaml").write_text(content)
    result = bat("init.agent", "x", cwd=tmp_path)
    assert result.code == 2 and words in result.err and "bat.yaml" in result.err
    assert result.err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_missing_runtime_config_file(bat, home, tmp_path):
    result = bat("-f", str(tmp_path / "nope.yaml"), "version")
    assert result.code == 2 and "nope.yaml" in result.err


def test_runtime_config_of_unknown_type(bat, home, tmp_path):
    (tmp_path / "conf.toml").write_text("x = 1\n")
    result = bat("-f", str(tmp_path / "conf.toml"), "version")
    assert result.code == 2 and "unsupported configuration file type" in result.err


def test_uncastable_environment_variable(bat, home, tmp_path):
    result = bat("init.agent", "x", cwd=tmp_path, env={"BAT_INIT_AGENT_PORT": "lots"})
    assert result.code == 2 and result.err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_unwritable_output_is_an_operation_error(bat, home, tmp_path):
    if os.geteuid() == 0:
        # Root may write anywhere; a folder name the file system cannot hold still fails.
        # (A file in the way is bad input, exit 2: tests/scaffold/test_init_agent.py.)
        result = bat("init.agent", "x", "-o", str(tmp_path / ("a" * 300)))
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        result = bat("init.agent", "x", "-o", str(locked))
    assert result.code == 1 and result.err.startswith("bat: error: ")
    assert "Traceback" not in result.err and result.err.count("\n") == 1


def test_list_of_an_unknown_group(bat, home):
    result = bat("--list", "nope")
    assert result.code == 2 and "no group of commands named 'nope'" in result.err


def test_group_with_an_unknown_option(bat, home):
    result = bat("init", "--bogus")
    assert result.code == 2 and result.err.count("\n") == 1


def test_python_config_file_that_fails(bat, home, tmp_path):
    (tmp_path / "bat.py").write_text("raise RuntimeError('boom')\n")
    result = bat("version", cwd=tmp_path)
    assert result.code == 2 and "bat.py" in result.err and "boom" in result.err
    assert "Traceback" not in result.err


def test_python_config_file_sets_settings(bat, home, tmp_path):
    """``.py`` settings files work as Invoke's did: their names are the settings."""
    (tmp_path / "bat.py").write_text("init = {'agent': {'port': 9000 + 77}}\n")
    assert bat("init.agent", "py", cwd=tmp_path).code == 0
    assert generated_port(tmp_path / "py") == 9077


def test_help_and_lists_read_no_settings(bat, home, tmp_path):
    """Settings are read when a command runs: a broken bat.yaml does not hide the help."""
    (tmp_path / "bat.yaml").write_text("init: [unclosed\n")
    for args in (["--help"], ["--help", "init.agent"], ["--list"], ["init"]):
        result = bat(*args, cwd=tmp_path, env={"BAT_INIT_AGENT_PORT": "nine"})
        assert result.code == 0 and result.err == "", args
    assert bat("version", cwd=tmp_path).code == 2


LOADED = """
import json, sys
from bat.cli.program import BatProgram
code = BatProgram().run(["bat", "version"], exit=False)
print(json.dumps({"code": code, "pydantic": "pydantic" in sys.modules}))
"""


@pytest.mark.parametrize(
    ("file", "env", "read"),
    [
        (None, {}, False),
        (None, {"BAT_DOCKER_PASSWORD": "x", "BAT_CI_STATE": "y"}, False),  # no settings
        (None, {"BAT_INIT_AGENT_PORT": "9100"}, True),
        ("bat.yaml", {}, True),
        ("bat.json", {}, True),
    ],
)
def test_pydantic_is_imported_only_when_there_are_settings(home, tmp_path, file, env, read):
    """``bat version`` stays light unless a settings file or a BAT_* setting exists."""
    if file is not None:
        (tmp_path / file).write_text("{}\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BAT_")}
    proc = subprocess.run(
        [sys.executable, "-c", LOADED],
        cwd=tmp_path,
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout.splitlines()[-1]) == {"code": 0, "pydantic": read}


def test_invokes_own_loaders_read_nothing(home, tmp_path, monkeypatch):
    """BatConfig's configuration holds only what bat hands it: Invoke's readers of files
    and variables (called by Config(), clone() and before every task) read nothing."""
    from bat.cli.config import BatConfig

    (home / ".bat.yaml").write_text("init: {agent: {port: 1}}\n")
    (tmp_path / "bat.yaml").write_text("init: {agent: {port: 2}}\n")
    runtime = tmp_path / "runtime.yaml"
    runtime.write_text("init: {agent: {port: 3}}\n")
    monkeypatch.setenv("BAT_RUN_ECHO", "1")
    monkeypatch.chdir(tmp_path)
    config = BatConfig()
    config.set_project_location(str(tmp_path))
    config.load_project()
    config.set_runtime_path(str(runtime))
    config.load_runtime()
    config.load_collection({"init": {"agent": {"port": 9900}}})
    config.load_shell_env()
    for seen in (config, config.clone()):
        assert seen.init.agent.port == 9900
        assert seen.run.echo is False
    config.load_overrides({"init": {"agent": {"port": 4}}})
    assert config.clone().init.agent.port == 4


EXIT_WITH_A_FULL_PIPE = """
import sys
from bat.cli import program
sys.stdout = open(1, "w", buffering=2_000_000, closefd=False)  # held until the last flush
sys.stdout.write("x" * 1_000_000)
print("ready", file=sys.stderr, flush=True)
program.BatProgram.status_of_run = lambda self, argv: 0
program.BatProgram().run(["bat"])
"""


def test_ctrl_c_inside_the_last_flush_is_130_and_one_line():
    """Ctrl-C while the final flush waits on a full stdout pipe: Python runs the handler
    inside that flush, whose own print and flush were once a reentrant-call traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-c", EXIT_WITH_A_FULL_PIPE],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr.readline() == "ready\n"
    time.sleep(0.3)  # the flush of 1 MB into a 64 KB pipe nobody reads is blocked by now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [error_line(INTERRUPTED)]
    assert 0 < len(out) <= 1_000_000


@pytest.mark.parametrize("args", [("version",), ("eval.gate", "--run", "nothing")])
def test_a_closed_standard_output_is_no_traceback(tmp_path, args):
    """``bat version >&-``: Python gives bat no ``sys.stdout`` at all; an outside probe
    found the last flush raising AttributeError. Now the output goes nowhere, as asked,
    and the exit status is the command's own."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("bat")), *args],
        cwd=tmp_path,
        preexec_fn=lambda: os.close(1),
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if args == ("version",):
        assert (proc.returncode, proc.stderr) == (0, "")
    else:
        assert proc.returncode == 2 and proc.stderr.startswith("bat: error: ")


def test_version_sorts_after_the_bat_cli_releases_users_have():
    """A calendar version: `pip install -U bat-cli` must not trade bat for bat-cli 2026.10."""
    from packaging.version import Version

    ours = Version(project_version())
    assert ours > Version("2026.10") and ours > Version("2026.10.99")
    year, month, _ = ours.release
    assert year >= 2026 and 1 <= month <= 12


def test_help_shows_whole_summaries_and_only_bat_core_options(bat, home):
    """Each command's whole first paragraph, not its first line; no Invoke-only flags."""
    from bat.cli.program import _CORE_FLAGS, _SHOWN_FLAGS, summary_of
    from bat.tasks import ns

    out = " ".join(bat("--help").out.split())
    for name in ns.task_names:
        summary = summary_of(ns[name])
        assert summary and summary in out, name
    for hidden in ("--write-pyc", "--complete", "--list-depth", "--list-format", "-D"):
        assert hidden not in out.replace("--print-completion-script", "")
    for spelled, _ in _SHOWN_FLAGS:  # every flag shown is one bat really takes
        long = spelled.split("--")[-1].split("=")[0].split("[")[0]
        assert long in _CORE_FLAGS, spelled
    group = " ".join(bat("eval").out.split())
    assert summary_of(ns["eval.run"]) in group
