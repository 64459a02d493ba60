"""The chart stage under a small address space (``ulimit -v``), as CI runners set one.

vl-convert's V8 cannot reserve its heap there and ends its process with SIGTRAP. The
renderer runs in a child process, so that death costs the charts only: one warning line,
report.html still written, the exports and gates after it, and the exit status bat gives
without charts. Real ``bat`` processes under ``resource.setrlimit(RLIMIT_AS)``.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

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
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))  # a dying V8 may dump a core


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
    # nothing else written where bat runs: no core file of the dead renderer
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".charts.json",
        "20260101-000000-a",
        "report.html",
    ]


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


def test_one_renderer_serves_the_next_plots_and_a_dead_one_is_replaced(tmp_path):
    """The renderer's JavaScript engine starts once per interpreter (most of a small
    plot's time); one that died while idle (killed, out of memory) is replaced, not
    taken for a renderer that cannot draw."""
    first, second, third = (tmp_path / name for name in ("one", "two", "three"))
    for folder, results in ((first, {"a": "PPF"}), (second, {"a": "PFF"}), (third, {"b": "P"})):
        write_run(folder, "20260101-000000-a", "openai:gpt-4.1-mini", results)
    assert plot_folder(first, scrubber=NO_SECRETS).renderer is None
    kept = render_module._KEPT[sys.executable].proc
    assert plot_folder(second, scrubber=NO_SECRETS).renderer is None
    assert render_module._KEPT[sys.executable].proc is kept and kept.poll() is None
    kept.kill()
    kept.wait()
    result = plot_folder(third, scrubber=NO_SECRETS)
    assert result.renderer is None
    assert any(path.suffix == ".png" for path in result.written)
    assert render_module._KEPT[sys.executable].proc is not kept


@pytest.mark.skipif(sys.platform != "linux", reason="the address-space limit is Linux's")
def test_the_limit_is_what_kills_the_renderer_here(tmp_path):
    """The premise of this module: V8 cannot start under ADDRESS_SPACE (if a vl-convert
    ever can, the tests above no longer test anything)."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import vl_convert as v; v.vegalite_to_svg({'mark': 'point'})",
        ],
        preexec_fn=_small_address_space,
        cwd=tmp_path,  # cores are allowed (see above): the dying V8's lands here
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert probe.returncode < 0, probe.returncode


# -- the renderer's answers, fuzzed ----------------------------------------------------

FUZZ = settings(
    max_examples=max(1, int(100 * float(os.environ.get("FUZZ_SCALE", "1")))),
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
REAL_LINES = [
    json.dumps({"name": "pass_rate", "svg": "<svg/>", "png": base64.b64encode(b"PNG").decode()}),
    json.dumps({"name": "latency", "error": "conversion failed:\nat line 1"}),
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@st.composite
def renderer_output(draw) -> bytes:
    """What the renderer writes, as it writes it, then damaged: a line cut (its death
    mid-write), a key's value of another type, stray bytes, deep nesting."""
    lines = [line.encode() for line in draw(st.lists(st.sampled_from(REAL_LINES), max_size=4))]
    choice = draw(st.integers(0, 3))
    if choice == 0 and lines:
        doc = json.loads(lines[0])
        doc[draw(st.sampled_from(["name", "svg", "png", "error"]))] = draw(json_values)
        lines[0] = json.dumps(doc).encode()
    elif choice == 1:
        lines.append(b"[" * draw(st.integers(1, 3000)))
    elif choice == 2:
        lines.append(draw(st.binary(max_size=40)))
    out = b"\n".join(lines)
    cut = draw(st.integers(0, len(out)))
    return out[:cut] if draw(st.booleans()) else out


def answers_problem(parse, out: bytes) -> str | None:
    """None when ``parse`` read ``out`` into answers of the renderer's shape, else what
    went wrong (an exception, or a value render() could not use)."""
    try:
        answers = parse(out)
    except Exception as exc:  # what this check exists to catch
        return f"{type(exc).__name__}: {exc}"
    for name, answer in answers.items():
        drawn = isinstance(answer, tuple) and [type(part) for part in answer] == [str, bytes]
        if not isinstance(name, str) or not (isinstance(answer, str) or drawn):
            return f"not an answer: {name!r}: {answer!r}"
    return None


@FUZZ
@given(out=renderer_output())
def test_fuzz_the_renderers_answers_are_read_or_left_out(out):
    assert answers_problem(render_module._answers, out) is None


def test_fuzz_check_catches_a_reader_that_trusts_the_renderer():
    """The canary: a reader without the checks (a KeyError on a line lacking "svg")."""

    def trusting(out: bytes) -> dict:
        lines = [json.loads(line) for line in out.splitlines()]
        return {a["name"]: (a["svg"], base64.b64decode(a["png"])) for a in lines}

    assert answers_problem(trusting, REAL_LINES[1].encode()) == "KeyError: 'svg'"
    assert answers_problem(render_module._answers, REAL_LINES[1].encode()) is None
