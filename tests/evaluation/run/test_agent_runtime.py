"""What the agent ran with, read from a real environment: a venv made by uv, with a bat-adk
wheel installed in it by uv (a wheel built here: its files are what any installer
writes, its METADATA the version), offline and in well under a second."""

import base64
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest

from bat.evaluation.run.agent_runtime import agent_runtime, environment_of, read_runtime
from bat.uv_binary import find_uv

VERSION = "0.4.2"


def wheel(folder, name="bat_adk", version=VERSION):
    """A minimal, valid wheel of ``name`` (one module, its dist-info, a RECORD)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n\n"
            "Version: 9.9.9 (in the description: not the version)\n"
        ),
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for file, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{file},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(path, "w") as archive:
        for file, text in files.items():
            archive.writestr(file, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A project folder with a uv-made ``.venv`` holding bat-adk 0.4.2: (root, Python)."""
    uv = find_uv()
    if uv is None:
        pytest.skip("needs uv")
    root = tmp_path_factory.mktemp("agent")
    env = {"UV_OFFLINE": "1", "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"}
    run_env = {**os.environ, **env}
    subprocess.run(
        [uv, "venv", "-q", "--python", sys.executable, str(root / ".venv")],
        check=True,
        env=run_env,
        capture_output=True,
    )
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(root / ".venv"), str(wheel(root))],
        check=True,
        env=run_env,
        capture_output=True,
    )
    done = subprocess.run(
        [
            str(root / ".venv" / "bin" / "python"),
            "-c",
            "import platform; print(platform.python_version())",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return root, done.stdout.strip()


def test_uv_run_reads_the_project_venv(venv):
    root, python = venv
    runtime = agent_runtime("uv run .", root, {})
    assert runtime is not None
    assert (runtime.environment, runtime.python, runtime.bat_adk) == (
        str(root / ".venv"),
        python,
        VERSION,
    )


def test_an_interpreter_named_by_path_is_read_from_its_venv(venv, tmp_path):
    root, python = venv
    runtime = agent_runtime(".venv/bin/python -m agent", root, {})
    assert runtime is not None and (runtime.python, runtime.bat_adk) == (python, VERSION)
    # an absolute path, from another folder
    other = agent_runtime(f"{root}/.venv/bin/python -m agent", tmp_path, {})
    assert other is not None and other.environment == str(root / ".venv")


def test_uv_project_environment_wins_over_dot_venv(venv, tmp_path):
    root, _ = venv
    assert environment_of("uv run .", tmp_path, {}) is None  # no .venv there
    moved = environment_of("uv run .", tmp_path, {"UV_PROJECT_ENVIRONMENT": str(root / ".venv")})
    assert moved == root / ".venv"


def test_an_environment_without_bat_adk_says_none(tmp_path):
    (tmp_path / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.7\n")
    runtime = read_runtime(tmp_path)
    assert (runtime.python, runtime.bat_adk) == ("3.12.7", None)
