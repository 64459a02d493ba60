"""docs/tutorial.md, run as written: every command of its ``sh`` blocks, in order.

Each command runs in a shell in the folder the page's ``cd`` lines lead to, with this
test's bat first on PATH, an empty HOME (but the machine's uv cache, as the user's own
HOME would have: the agent's packages are not fetched and unpacked again) and a Python
3.12 for uv (which may not download one here). It must end with exit status 0, or the
status its ``# exits N`` comment names; ``bat eval.view``, which serves until Ctrl-C,
must serve the run and stop on SIGINT (on a free port instead of the page's fixed one,
which something else may hold). The block that follows a command without a language
is what the page says it prints: every piece of each line (between the ``…`` that stand
for paths) must be in the command's output, spaces aside. The first block, bat's own
installation, is the start of the README's set-up command, which CI runs itself.
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import BAT, REPO
from tests.evalkit import free_port, run_dirs
from tests.pythons import find_python, python_version

pytestmark = pytest.mark.slow

TUTORIAL = REPO / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    """The page's code blocks in order: (language, text)."""
    return BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))


def squeeze(text: str) -> str:
    return " ".join(text.split())


def printed_as_the_page_says(expected: str, output: str) -> list[str]:
    """The pieces of ``expected`` missing from ``output`` (spaces aside)."""
    missing = []
    for line in expected.splitlines():
        for piece in line.split("…"):
            if squeeze(piece) and squeeze(piece) not in squeeze(output):
                missing.append(piece.strip())
    return missing


def test_the_install_command_is_the_readmes():
    (language, install), *_ = blocks()
    assert language == "sh"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"{install.strip()} && .venv/bin/python -m pytest" in readme


def test_every_command_of_the_tutorial_runs_as_it_says(tmp_path, home, uv_cache):
    env = {
        **os.environ,
        "HOME": str(home),
        "UV_CACHE_DIR": uv_cache,  # the machine's, as a user's own HOME would have it
        "PATH": f"{BAT.parent}{os.pathsep}{os.environ['PATH']}",
        "UV_PYTHON": find_python(),
        "UV_PYTHON_DOWNLOADS": "never",
        "NO_COLOR": "1",
    }
    for name in ("VIRTUAL_ENV", "PORT", "MODEL", "BASE_URL", "OPENAI_API_KEY"):
        env.pop(name, None)
    cwd = tmp_path
    ran: list[str] = []
    output = ""
    for language, text in blocks()[1:]:
        if language == "":  # what the command before printed
            missing = printed_as_the_page_says(text, output)
            assert not missing, (ran[-1], missing, output)
            continue
        if language != "sh":
            continue
        for line in text.splitlines():
            command = line.split("  #")[0].strip()
            if not command:
                continue
            ran.append(command)
            if command.startswith("cd "):
                cwd = cwd / command[3:]
                assert cwd.is_dir(), command
                continue
            if command.startswith("bat eval.view"):
                output = serve_and_stop(command, cwd, env)
                continue
            wanted = re.search(r"# exits (\d+)", line)
            proc = subprocess.run(
                command,
                shell=True,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            output = proc.stdout + proc.stderr
            expected = int(wanted[1]) if wanted else 0
            assert proc.returncode == expected, (command, output)
            assert "Traceback" not in output, (command, output)
    assert ran[:2] == ["bat init.agent my-agent --tools", "cd my-agent"]
    # what the page says is there at the end
    agent = tmp_path / "my-agent"
    (run_dir,) = run_dirs(agent)
    output_dir = agent / "eval" / "output"
    assert (output_dir / "report.html").is_file()
    assert (output_dir / "junit.xml").read_text().startswith("<?xml")
    assert run_dir.name in (output_dir / "summary.md").read_text()
    assert "MODEL=gpt-4.1-mini" in (agent / ".env").read_text().splitlines()


def serve_and_stop(command: str, cwd, env) -> str:
    """Start the viewer, see the run on its first page, stop it with Ctrl-C (SIGINT)."""
    port = free_port()
    command = re.sub(r"--port \d+", f"--port {port}", command)
    viewer = subprocess.Popen(
        command.split("  #")[0],
        shell=True,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        page = None
        while time.monotonic() < deadline and page is None:
            try:
                page = requests.get(f"http://127.0.0.1:{port}/", timeout=5)
            except requests.ConnectionError:
                time.sleep(0.2)
        assert page is not None and page.status_code == 200, command
        (run_dir,) = run_dirs(cwd)
        assert run_dir.name in page.text
    finally:
        os.killpg(viewer.pid, signal.SIGINT)
        out, _ = viewer.communicate(timeout=20)
    assert viewer.returncode in (0, 130, -signal.SIGINT), out
    assert "Traceback" not in out, out
    return out


SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def test_the_first_run_finds_the_agents_python_where_uv_does_not(tmp_path, home, uv_cache):
    """The issue's machine: the default Python is too old for the agent, a newer one
    sits under pyenv (here the one this machine has, linked into HOME's ~/.pyenv as pyenv
    installs it), PATH holds the system folders and bat, UV_PYTHON is unset and no Python
    can be downloaded (uv's download mirror is a closed port). The tutorial's first run
    passes, on that Python, and says so in one line."""
    newer = find_python()
    major, minor = python_version(newer)
    versions = home / ".pyenv" / "versions"
    versions.mkdir(parents=True)
    prefix = Path(newer).resolve().parent.parent
    (versions / f"{major}.{minor}").symlink_to(prefix, target_is_directory=True)
    only_bat = tmp_path / "only-bat"
    only_bat.mkdir()
    (only_bat / "bat").symlink_to(BAT)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("UV_PYTHON", "PYENV_ROOT", "PYENV_VERSION", "UV_PYTHON_DOWNLOADS")
        and key not in ("VIRTUAL_ENV", "PORT", "MODEL", "BASE_URL", "OPENAI_API_KEY")
    }
    env.update(
        HOME=str(home),
        PATH=f"{only_bat}{os.pathsep}{SYSTEM_PATH}",
        UV_CACHE_DIR=uv_cache,
        UV_PYTHON_INSTALL_MIRROR=f"http://127.0.0.1:{free_port()}/nothing",
        NO_COLOR="1",
        BAT_EVAL_CHARTS="false",
    )
    port = free_port()  # the scaffold's own port (9900) may be taken on this machine
    script = f"bat init.agent x --tools --port {port} && cd x && bat eval.init && bat eval.run"
    proc = subprocess.run(
        script, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Traceback" not in output
    (line,) = [line for line in proc.stdout.splitlines() if "the agent's Python" in line]
    assert line.startswith(f"the agent's Python: {major}.{minor}."), line
    assert "x/pyproject.toml requires-python >=3.12" in line
    agent = tmp_path / "x"
    # uv made the agent's environment with that Python, and downloaded none
    config = (agent / ".venv" / "pyvenv.cfg").read_text()
    assert re.search(rf"^version_info = {major}\.{minor}\.", config, re.M), config
    assert not (home / ".local" / "share" / "uv" / "python").exists()
    assert len(run_dirs(agent)) == 1
    assert "27/27 episodes passed" in proc.stdout
