"""bat and bat-adk share the ``bat`` import package: installed together, both must work.

bat-cli's wheel ships ``bat/tasks``, ``bat/cli``, ``bat/scaffold`` ... but no
``bat/__init__.py``: bat-adk owns that file, so neither distribution overwrites the
other's files. This test builds the real wheel, installs it with bat-adk from PyPI into a
fresh virtual environment (Python >= 3.12, as bat-adk needs) and uses both from there.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests import adk_bytecode
from tests.pythons import find_python, uv_binary

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 600  # a cold uv cache downloads bat-adk and its dependencies
# Run inside the fresh environment, in one interpreter: both halves of ``bat`` import, from
# that environment (not from this checkout), and no file belongs to both distributions.
IMPORT_CHECK = """
import json, sys
from importlib.metadata import files
import bat.agent
import bat.tasks, bat.cli.program, bat.scaffold.agent
cli = {str(f) for f in files("bat-cli") if not str(f.parent).endswith(".dist-info")}
adk = {str(f) for f in files("bat-adk") if not str(f.parent).endswith(".dist-info")}
print(json.dumps({
    "modules": [m.__file__ for m in (bat.agent, bat.tasks, bat.cli.program, bat.scaffold.agent)],
    "bat_path": list(bat.__path__),
    "prefix": sys.prefix,
    "shared_files": sorted(cli & adk),
}))
"""


def project_version() -> str:
    with (REPO / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["project"]["version"]


def run(command: list[str | Path], *, cwd: Path, env: dict[str, str]) -> str:
    """Run ``command``; fail the test with its output if it fails. Returns its stdout."""
    proc = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"{command} exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def test_wheel_and_bat_adk_share_the_bat_package(tmp_path):
    python = find_python()
    uv = uv_binary()
    # No virtual environment, PYTHONPATH or bat settings of the developer may leak in.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME") and not key.startswith("BAT_")
    }
    env.update(UV_PYTHON_DOWNLOADS="never", NO_COLOR="1")
    work = tmp_path / "work"
    work.mkdir()

    dist = tmp_path / "dist"
    run([uv, "build", "--wheel", "--out-dir", dist, REPO], cwd=work, env=env)
    wheels = list(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    assert wheel.name.startswith(f"bat_cli-{project_version()}-"), wheel.name
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "bat/__init__.py" not in names, "bat/__init__.py belongs to bat-adk, not to bat-cli"
    assert "bat/scaffold/templates/agent/agent.json.j2" in names, sorted(names)

    venv = tmp_path / "venv"
    run([uv, "venv", "--python", python, venv], cwd=work, env=env)
    venv_python = venv / "bin" / "python"
    run([uv, "pip", "install", "--python", venv_python, wheel, "bat-adk"], cwd=work, env=env)
    # the bytecode of both halves' dependencies, compiled once and kept (see there)
    adk_bytecode.seed(venv, ("bat.agent", "bat.tasks", "bat.cli.program", "bat.scaffold.agent"))

    found = json.loads(run([venv_python, "-I", "-c", IMPORT_CHECK], cwd=work, env=env))
    for module in found["modules"]:
        assert Path(module).is_relative_to(venv), f"{module} is not from {venv}: {found}"
    assert not any(Path(p).is_relative_to(REPO) for p in found["bat_path"]), found
    assert found["shared_files"] == [], "files installed by both bat-cli and bat-adk"

    # The console script of the wheel, with an empty HOME: no ~/.bat.yaml of the developer.
    home = tmp_path / "home"
    home.mkdir()
    bat_env = {**env, "HOME": str(home)}
    bat = venv / "bin" / "bat"
    version = run([bat, "version"], cwd=work, env=bat_env)
    assert version.strip() == f"bat-cli {project_version()}", version

    run([bat, "init.agent", "x", "-o", work], cwd=work, env=bat_env)
    card = json.loads((work / "x" / "agent.json").read_text(encoding="utf-8"))
    assert card["name"] == "X", card
    for generated in ("__main__.py", "config.yaml", ".env", "pyproject.toml", "src/graph.py"):
        assert (work / "x" / generated).is_file(), generated
