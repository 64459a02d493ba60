"""``output_regex``: checked on load by the engine that runs it, run under a time limit.

The echo fixture agent answers ``echo: <text>``, so a turn of many ``a`` and one ``b``
gives a backtracking pattern a long, failing answer to chew on.
"""

from __future__ import annotations

import json
import signal
import time

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bat.evaluation.inputs.dataset import TaskExpected
from bat.evaluation.inputs.output_regex import REGEX_MAX_LENGTH
from bat.evaluation.log.episode import EpisodeResult, EpisodeTrace, TurnRecord
from bat.evaluation.verdict import judge_episode
from tests.evalkit import episodes, make_project, run_dirs, start_bat

SLOW = r"^echo: (a|aa)+$"  # exponential on a long run of a's that cannot match
BRIEF = r"^echo: (a+)+$"  # the pattern (the regex engine answers it at once)
LONG_AS = "a" * 40 + "b"


def task(task_id: str, text: str, pattern: str) -> dict:
    return {"id": task_id, "turns": [text], "expected": {"output_regex": pattern}}


def test_a_backtracking_regex_fails_its_check_with_a_reason_and_the_run_goes_on(
    tmp_path, bat, home
):
    tasks = [
        task("slow", LONG_AS, SLOW),
        task("brief", "a" * 34 + "b", BRIEF),
        task("fine", "hello", r"^echo: hel+o$"),
        task("unicode-class", "Ünïcode", r"^echo: \p{Lu}\p{Ll}+$"),  # regex's syntax, not re's
    ]
    project = make_project(tmp_path / "p", tasks)
    started = time.monotonic()
    result = bat("eval.run", cwd=project, timeout=120)
    assert result.code == 0, result.err
    assert time.monotonic() - started < 60
    assert "Traceback" not in result.err
    found = {e["task_id"]: e for e in episodes(run_dirs(project)[0]).values()}
    assert set(found) == {"slow", "brief", "fine", "unicode-class"}
    slow = found["slow"]["verdict"]
    assert slow["passed"] is False
    assert f"output_regex took over 1 s on this output: /{SLOW}/" in slow["reason"]
    assert found["brief"]["verdict"]["passed"] is False
    assert "no match for" in found["brief"]["verdict"]["reason"]
    assert found["fine"]["verdict"]["passed"] is True
    assert found["unicode-class"]["verdict"]["passed"] is True


def test_ctrl_c_stops_a_run_stuck_in_backtracking_regexes(tmp_path, home):
    tasks = [task(f"slow-{n}", LONG_AS, SLOW) for n in range(40)]
    project = make_project(tmp_path / "p", tasks, concurrency=1)
    proc = start_bat("eval.run", cwd=project, home=home)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        dirs = run_dirs(project)
        if dirs and list((dirs[0] / "agent-default" / "episodes").glob("*.json")):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("no episode was written")
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - interrupted < 20  # 40 slow checks would take over 40 s
    assert "Traceback" not in err
    kept = episodes(run_dirs(project)[0])
    assert 1 <= len(kept) < 40
    assert all("took over 1 s" in e["verdict"]["reason"] for e in kept.values())


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("(", "not a valid regular expression"),
        ("(?:(?:a{65535}){65535})", "unroll to more than 100,000 items"),
        ("x{200000}", "unroll to more than 100,000 items"),
        ("a" * (REGEX_MAX_LENGTH + 1), f"at most {REGEX_MAX_LENGTH} characters"),
        ("(?R)", "recursive patterns are not allowed"),
        ("(?P<n>x(?&n))", "recursive patterns are not allowed"),
    ],
)
def test_a_regex_the_engine_cannot_run_safely_is_refused_on_load(
    tmp_path, bat, home, pattern, says
):
    tasks = [task("ok", "x", "x"), task("bad", "x", pattern)]
    project = make_project(tmp_path / "p", tasks)
    started = time.monotonic()
    result = bat("eval.run", cwd=project)
    assert result.code == 2, result.err
    assert time.monotonic() - started < 30
    lines = result.err.splitlines()
    assert [line for line in lines if line.startswith("bat: error:")] == [lines[0]]
    assert "tasks.json: [1].expected.output_regex (line " in result.err
    assert says in result.err
    assert "Traceback" not in result.err
    assert run_dirs(project) == []


# Pattern text built from the pieces that make regex syntax differ between engines.
PIECES = st.sampled_from(
    [
        "a",
        "b",
        ".",
        "\\",
        "(",
        ")",
        "(?:",
        "(?P<n>",
        "(?P=n)",
        "(?<=a)",
        "(?<=a+)",
        "[",
        "]",
        "[[:alpha:]]",
        "--",
        "{",
        "}",
        "{2}",
        "{2,1}",
        "{,3}",
        "+",
        "*",
        "?",
        "++",
        "|",
        "^",
        "$",
        "\\p{L}",
        "\\d",
        "\\X",
        "\\K",
        "\\z",
        "\\G",
        "(?i)",
        "(?V1)",
        "(?L)",
        "(?|",
        "(?R)",
        "(?&n)",
        "\\N{DIGIT ONE}",
        "\\g<n>",
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=8).map("".join), st.text(max_size=20))
def test_a_regex_accepted_on_load_never_fails_in_the_verdict(pattern, output):
    """The load check and the verdict use one engine: whatever loads can be run, and
    whatever the engine refuses is refused on load, with a message and no traceback."""
    try:
        expected = TaskExpected(output_regex=pattern)
    except ValidationError as exc:
        (problem,) = exc.errors()
        assert problem["loc"] == ("output_regex",)
        if "recursive patterns are not allowed" not in problem["msg"]:
            assert "not a valid regular expression" in problem["msg"]
            with pytest.raises(regex.error):
                regex.compile(pattern)
        return
    episode = EpisodeResult(
        task_id="t",
        attempt=1,
        model="m",
        status="completed",
        final_output=output,
        trace=EpisodeTrace(context_id="c", turns=[TurnRecord(input="q", status="completed")]),
        started_at="2026-01-01T00:00:00Z",
        ended_at="2026-01-01T00:00:01Z",
    )
    verdict = judge_episode(expected, episode)
    (check,) = [c for c in verdict.checks if c.name == "output_regex"]
    assert check.passed == (regex.search(pattern, output) is not None)
    json.dumps(verdict.model_dump())  # the reason can be written into the episode
