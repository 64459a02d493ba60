"""``bat --help`` and ``bat version`` must not load the heavy libraries.

Measured by what is in ``sys.modules`` after the program ran, not by time: the time
target lives in benchmarks/startup.py.
"""

import json
import subprocess
import sys

import pytest

HEAVY = [
    "jinja2",
    "pydantic",
    "a2a",
    "docker",
    "fabric",
    "paramiko",
    "altair",
    "vl_convert",
    "requests",
    "httpx",
    "starlette",
    "google.protobuf",
    "genai_prices",
]

PROBE = """
import json, sys
from bat.cli.program import BatProgram
code = BatProgram().run(["bat", *sys.argv[1:]], exit=False)
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize(
    "args", [["--help"], ["version"], ["--list"], ["--help", "init.agent"], ["init"]]
)
def test_help_and_version_stay_light(args):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["code"] == 0
    loaded = [
        name
        for name in HEAVY
        if any(m == name or m.startswith(name + ".") for m in report["modules"])
    ]
    assert loaded == []
    assert "invoke" in report["modules"]  # the probe really ran the program


def test_scaffolding_does_load_jinja2():
    """The probe can see a heavy import when one happens (so the test above can fail)."""
    code = PROBE.replace(
        "print(json.dumps",
        "import bat.scaffold.render as r; r._environment(r.templates_root())\nprint(json.dumps",
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "version"], capture_output=True, text=True, check=True
    )
    assert "jinja2" in json.loads(proc.stdout.splitlines()[-1])["modules"]
