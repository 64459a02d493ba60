"""Task ids: printable and bounded on load, one episode file each, and charts that no id
(of a new dataset, or of an old run folder that never went through today's checks) can
break: the renderer once aborted the whole process on a control character."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bat.atomic import write_text_atomic
from bat.evaluation.context import RunContext
from bat.evaluation.inputs.dataset import ID_MAX_LENGTH, TaskExpected, TaskSpec
from bat.evaluation.log import layout
from bat.evaluation.log import run as rundir
from bat.evaluation.log.episode import EpisodeResult, EpisodeTrace, TurnRecord, Usage
from bat.evaluation.pipeline import summarize_run
from bat.evaluation.verdict import judge_episode
from tests.conftest import run_bat
from tests.evalkit import episodes, make_project, run_dirs, summary
from tests.evaluation.present.plot.runkit import svg_texts
from tests.logkit import NO_SECRETS

CHARTS = ["pass_rate", "task_heatmap", "pass_hat_k", "latency", "tokens"]
# Characters the issue saw abort the renderer, and the other kinds the rule refuses.
REFUSED = {
    "esc": "\x1b[31mred",
    "nul": "nul\x00",
    "soh": "\x01",
    "vt": "v\x0btab",
    "nonchar": "x\ufffe",
    "newline": "two\nlines",
    "rlo": "rtl\u202eevil",  # shows as "rtllive": a format character
    "surrogate": "half \ud800",
    "private": "pua \ue000",
    "leading space": " padded",
    "trailing space": "padded ",
    "too long": "x" * (ID_MAX_LENGTH + 1),
    "empty": "",
}


def task(task_id: str) -> dict:
    return {"id": task_id, "turns": ["hello"], "expected": {"output_must_contain": ["hello"]}}


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("bat: error:")]


def printable_by_rule(text: str) -> bool:
    """The documented rule, spelled out independently of bat's code."""
    refused = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
    return (
        1 <= len(text) <= ID_MAX_LENGTH
        and text == text.strip()
        and all(c == "\u200d" or unicodedata.category(c) not in refused for c in text)
    )


# --- through eval.run ---------------------------------------------------------------------


def test_ids_whose_safe_names_collide_keep_every_episode_and_exotic_ids_chart(tmp_path, bat, home):
    assert hashlib.sha256(b"a/b").hexdigest()[:8] == "c14cddc0"  # the collision
    emoji = "😀" * 60  # once an 867-character JavaScript stack from the renderer
    ids = ["a/b", "a_b-c14cddc0", "a_b", "a b", emoji, "👩‍💻 done", "中文任务", "x" * 200]
    project = make_project(tmp_path / "p", [task(i) for i in ids])
    result = bat("eval.run", cwd=project, timeout=180, charts=True)
    assert result.code == 0, result.err
    assert "could not be rendered" not in result.out
    (run_dir,) = run_dirs(project)
    files = episodes(run_dir)
    assert len(files) == len(ids)  # none overwrote another
    assert sorted(e["task_id"] for e in files.values()) == sorted(ids)
    assert all(e["verdict"]["passed"] for e in files.values())
    assert [t["task_id"] for t in summary(run_dir)["attempts"]] == ids
    output = project / "eval" / "output"
    for name in CHARTS:
        assert (output / f"{name}.png").stat().st_size > 0
    heatmap = svg_texts(output / "task_heatmap.svg")
    # cut by bat, by columns (an emoji is two), never by the renderer, whose own cut split
    # emoji in halves
    assert "😀" * 29 + "…" in heatmap
    assert "x" * 59 + "…" in heatmap
    assert {"a/b", "a_b-c14cddc0", "a_b", "👩‍💻 done", "中文任务"} <= set(heatmap)


@pytest.mark.parametrize("shape", ["list", "object"])
@pytest.mark.parametrize("name", list(REFUSED))
def test_an_unprintable_or_unbounded_id_is_refused_on_load(tmp_path, bat, home, name, shape):
    tasks = [task("fine"), task(REFUSED[name])]
    project = make_project(tmp_path / "p", tasks)
    if shape == "object":
        path = project / "eval" / "input" / "tasks.json"
        path.write_text(json.dumps({"tasks": tasks}, indent=1))
    result = bat("eval.run", cwd=project)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert error_lines(result.err) == [lines[0]]
    key = "tasks[1].id" if shape == "object" else "[1].id"
    (detail,) = [line for line in lines if f"tasks.json: {key} (line " in line]
    assert detail.isprintable()  # the bad character is named, not printed
    assert run_dirs(project) == []  # nothing started


# --- old run folders ----------------------------------------------------------------------


def write_old_run(run_dir: Path, ids: list[str], label: str = "old model") -> None:
    """A finished run as an older bat wrote it, by bat's own writers, with ids that
    today's load refuses (the episode stems by the same code that names them now)."""
    (run_dir / "m" / "episodes").mkdir(parents=True)
    rundir.write_run(
        run_dir,
        rundir.RunRecord(
            run_id=run_dir.name,
            status="completed",
            started_at="2026-01-01T00:00:00.000Z",
            k=1,
            tasks=ids,
            models=[rundir.ModelEntry(label=label, dir="m", status="completed")],
        ),
        scrubber=NO_SECRETS,
    )
    expected = TaskExpected(output_must_contain=["hello"])
    for n, task_id in enumerate(ids):
        output = "echo: hello" if n % 2 == 0 else "echo: bye"
        episode = EpisodeResult(
            task_id=task_id,
            attempt=1,
            model=label,
            status="completed",
            final_output=output,
            trace=EpisodeTrace(
                context_id=f"c{n}",
                turns=[TurnRecord(input="hello", status="completed", output=output)],
                wall_time_s=0.1 + n / 100,
                usage=Usage(prompt_tokens=10, completion_tokens=n, total_tokens=10 + n),
            ),
            started_at="2026-01-01T00:00:00.000Z",
            ended_at="2026-01-01T00:00:01.000Z",
        )
        episode.verdict = judge_episode(expected, episode)
        stem = TaskSpec.model_construct(id=task_id, turns=["hello"]).file_stem
        write_text_atomic(layout.episode_path(run_dir / "m", stem, 1), episode.to_json(NO_SECRETS))


def test_an_old_run_folder_with_control_characters_in_ids_still_plots(tmp_path, bat, home):
    project = make_project(tmp_path / "p", [task("today")])
    old = project / "eval" / "output" / "20260101-000000-old"
    ids = ["a\x1bb", "nul\x00", "\x01", "v\x0bt", "x\ufffe", "😀" * 60, "a\x02b"]
    ids += ["if", "toString"]  # words Vega's expression parser takes for its own names
    write_old_run(old, ids, label="model\x1b[31m")
    summarized = bat("eval.summarize", "--run", old.name, cwd=project)
    assert summarized.code == 0, summarized.err

    plotted = bat("eval.plot", cwd=project, timeout=120)
    assert plotted.code == 0, plotted.err
    assert "Traceback" not in plotted.err and "could not be rendered" not in plotted.out
    output = project / "eval" / "output"
    heatmap = svg_texts(output / "task_heatmap.svg")
    # drawn as escapes, each task its own row: "a\x01b" and "a\x02b" do not merge
    assert {"a\\x1bb", "nul\\x00", "\\x01", "v\\x0bt", "x\\ufffe", "a\\x02b"} <= set(heatmap)
    assert "model\\x1b[31m @ 20260101-000000-old" in " ".join(heatmap)
    assert len([t for t in heatmap if t in ("0/1", "1/1")]) == len(ids)  # a row each
    assert (output / "report.html").is_file()

    # and a new run in the same folder (which plots every run there) is not held up by it
    result = bat("eval.run", cwd=project, timeout=180, charts=True)
    assert result.code == 0, result.err
    assert "could not be rendered" not in result.out
    assert {"today", "a\\x1bb"} <= set(svg_texts(output / "task_heatmap.svg"))


def test_a_lone_surrogate_in_old_results_still_plots(tmp_path, bat, home):
    """JSON can spell half a UTF-16 pair ("\\ud800"), which no writer of bat could: the
    label is drawn with a replacement character instead of failing the whole plot."""
    base = tmp_path / "runs"
    write_old_run(base / "r1", ["plain", "other"])
    summarize_run(RunContext(config_file=None), base / "r1", say=lambda _: None)
    for name in ("metrics.json", "summary.json"):  # the task id is in both
        path = base / "r1" / "m" / name
        path.write_text(path.read_text().replace('"plain"', '"half \\ud800"'))
    result = bat("eval.plot", "--folder", str(base), timeout=120)
    assert result.code == 0, result.err
    assert "half \ufffd" in " ".join(svg_texts(base / "task_heatmap.svg"))


def test_a_lone_surrogate_in_an_old_episode_still_makes_the_report(tmp_path, bat, home):
    """The same "\\ud800" in an episode file: report.html is written, with U+FFFD."""
    base = tmp_path / "runs"
    write_old_run(base / "r1", ["plain", "other"])
    summarize_run(RunContext(config_file=None), base / "r1", say=lambda _: None)
    episode = next((base / "r1" / "m" / "episodes").glob("plain*.json"))
    episode.write_text(episode.read_text().replace('"echo: hello"', '"half \\ud800"'))
    result = bat("eval.plot", "--folder", str(base), timeout=120)
    assert result.code == 0, result.err
    assert "half \ufffd" in (base / "report.html").read_text(encoding="utf-8")


# --- properties ---------------------------------------------------------------------------

ANY_ID = st.text(
    st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", "\x1b", "\u200d", " "])),
    max_size=ID_MAX_LENGTH + 10,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(task_id=ANY_ID)
def test_any_id_is_accepted_or_refused_with_one_error_line(home, task_id):
    with tempfile.TemporaryDirectory() as scratch:
        project = make_project(Path(scratch), [task("fine"), task(task_id)])
        read_back = json.loads(json.dumps(task_id))  # a JSON file joins split UTF-16 pairs
        result = run_bat("eval.show", cwd=project)
        assert "Traceback" not in result.err
        if printable_by_rule(read_back) and read_back != "fine":
            assert result.code == 0, result.err
        else:
            assert result.code == 2, result.err
            assert error_lines(result.err) == [result.err.splitlines()[0]]
            assert "tasks.json: [1].id (line " in result.err


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ids=st.lists(
        st.text(st.characters(exclude_categories=["Cs"]), max_size=80),
        min_size=1,
        max_size=5,
        unique=True,
    )
)
def test_any_ids_in_a_run_folder_plot_every_chart_one_row_each(home, ids):
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        write_old_run(base / "r1", ids)
        summarize_run(RunContext(config_file=None), base / "r1", say=lambda _: None)
        result = run_bat("eval.plot", "--folder", str(base), timeout=120)
        assert result.code == 0, result.err
        assert "could not be rendered" not in result.out
        for name in CHARTS:
            assert (base / f"{name}.png").stat().st_size > 0
        cells = [t for t in svg_texts(base / "task_heatmap.svg") if t in ("0/1", "1/1")]
        assert len(cells) == len(ids)  # no two ids merged into one row


@settings(max_examples=500, deadline=None)
@given(st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=ID_MAX_LENGTH))
def test_a_file_stem_is_safe_and_parses_back(task_id):
    stem = TaskSpec.model_construct(id=task_id, turns=["x"]).file_stem
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,88}", stem)
    path = layout.episode_path(Path("m"), stem, 3)
    assert path.parent == Path("m/episodes")
    match = layout.EPISODE_NAME.match(path.name)  # the parser --resume reads them back with
    assert match and (match["stem"], int(match["attempt"])) == (stem, 3)


@given(st.text(max_size=40), st.text(max_size=40))
def test_two_ids_take_two_stems(first, second):
    """Plain ids are their own stems, and a plain id never has the hashed form."""
    if first != second:
        stems = {TaskSpec.model_construct(id=i, turns=["x"]).file_stem for i in (first, second)}
        assert len(stems) == 2


def test_two_ids_whose_hashes_collide_are_refused_on_load(tmp_path, bat, home):
    """Stems differ unless 8 hex digits of sha256 agree: found here by brute force
    among ids that all sanitize to the same text."""
    seen: dict[str, str] = {}
    for chars in itertools.product("!#$%&()*+,:;=?@~", repeat=6):
        task_id = "".join(chars)
        digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
        if digest in seen:
            pair = [seen[digest], task_id]
            break
        seen[digest] = task_id
    project = make_project(tmp_path / "p", [task(pair[0]), task("ok"), task(pair[1])])
    result = bat("eval.run", cwd=project)
    assert result.code == 2, result.err
    assert error_lines(result.err) == [result.err.splitlines()[0]]
    assert "tasks[2].id" in result.err and "tasks[0].id" in result.err
    assert "would share the episode file name" in result.err
    assert run_dirs(project) == []
