"""The chart stage under a small address space (``ulimit -v``), as CI runners set one.

vl-convert's V8 cannot reserve its heap there and ends its process with SIGTRAP. The
renderer runs in a child process, so that death costs the charts only: one warning line,
report.html still written, the exports and gates after it, and the exit status bat gives
without charts. Real ``bat`` processes under ``resource.setrlimit(RLIMIT_AS)``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bat.evaluation.present.plot import render as render_module
from bat.evaluation.present.plot.render import plot_folder
from tests.conftest import BAT
from tests.evalkit import make_project
from tests.evaluation.present.plot.runkit import write_run
from tests.logkit import NO_SECRETS

# Enough for bat, its agent and Python's threads; far too little for V8's reservation.
ADDRESS_SPACE = 2 * 2**30
SKIPPED = "warning: charts skipped: the chart renderer (vl-convert) was killed by SIGTRAP"
TASKS = [
    {"id": "hello", "turns": ["hi"], "expected": {"output_must_contain": ["echo: hi"]}},
    {"id": "pay", "turns": ["pay"], "expected": {"output_must_contain": ["echo: pay"]}},
    {"id": "fail", "turns": ["FAIL: no"], "expected": {"output_must_contain": ["paid"]}},
]


def _small_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def bat_limited(*args: str, cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    """The real console script under ``ulimit -v`` of :data:`ADDRESS_SPACE`."""
    return subprocess.run(
        [str(BAT), *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        preexec_fn=_small_address_space,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_plot_under_a_small_address_space_skips_the_charts_and_writes_the_report(tmp_path):
    write_run(tmp_path, "20260101-000000-a", "openai:gpt-4.1-mini", {"a": "PPF", "b": "FFF"})
    result = bat_limited("eval.plot", "--folder", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        SKIPPED + " (too little memory? `ulimit -v` leaves its JavaScript engine no room)"
    ]
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "pass_rate" in report and "not drawn" in report  # each chart named as skipped
    assert not list(tmp_path.glob("*.svg")) and not list(tmp_path.glob("*.png"))
    assert f"Wrote {tmp_path / 'report.html'}" in result.stdout


def test_eval_run_under_a_small_address_space_finishes_its_chain(tmp_path):
    """Report, export and gate after the charts' loss; exit 1 for the failed gate, as
    without charts."""
    project = make_project(tmp_path / "p", TASKS, k=1)
    result = bat_limited(
        "eval.run",
        "--gate",
        "pass_rate >= 0.9",
        "--export",
        "junit:out/junit.xml",
        cwd=project,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert SKIPPED in result.stderr
    assert result.stderr.splitlines()[-2:] == [
        "bat: error: 1 gate failed",
        "  - pass_rate >= 0.9 [agent-default]: 0.6667 is not >= 0.9",
    ]
    assert (project / "eval/output/report.html").is_file()
    assert "Wrote out/junit.xml" in result.stdout and (project / "out/junit.xml").is_file()


def test_a_renderer_that_exits_with_an_error_skips_the_charts_with_its_reason(
    tmp_path, monkeypatch
):
    """Not only a signal: a renderer that cannot even import (here: a Python that only
    fails) is named with its exit status and last line, and the report is written."""
    write_run(tmp_path, "20260101-000000-a", "openai:gpt-4.1-mini", {"a": "PPF"})
    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'ImportError: no vl_convert' >&2\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setattr(render_module.sys, "executable", str(failing))
    result = plot_folder(tmp_path, scrubber=NO_SECRETS)
    assert result.renderer == (
        "the chart renderer (vl-convert) stopped with exit status 3: ImportError: no vl_convert"
    )
    assert (tmp_path / "report.html").is_file()
    assert not any(path.suffix in (".svg", ".png") for path in result.written)


@pytest.mark.skipif(sys.platform != "linux", reason="the address-space limit is Linux's")
def test_the_limit_is_what_kills_the_renderer_here():
    """The premise of this module: V8 cannot start under ADDRESS_SPACE (if a vl-convert
    ever can, the tests above no longer test anything)."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import vl_convert as v; v.vegalite_to_svg({'mark': 'point'})",
        ],
        preexec_fn=_small_address_space,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode < 0, probe.returncode
