"""Paths read from a run's files stay inside the run folder.

A run folder may come from elsewhere (a colleague's archive, a CI artifact), so its
files are input like any other: a ``models[].dir`` in run.json that is absolute, climbs
out with ``..``, or is a symbolic link out of the run, must not make any command read
or write outside the run. Each command is refused with exit 2 and one line naming
run.json and the key, and no file anywhere (the run folder included) is created or
changed. The run is a real one (the echo fixture agent), its run.json then edited.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs
from tests.evaluation.inputs.test_batcli_inputs import MODEL as BATCLI_MODEL
from tests.evaluation.inputs.test_batcli_inputs import verdict_project
from tests.evaluation.log.test_batcli_runs import copy_run

TASKS = [
    {"id": "a", "turns": ["hello"], "expected": {"output_must_contain": ["hello"]}},
    {
        "id": "b",
        "turns": ["FAIL"],
        "expected": {"status": "failed", "output_must_contain": ["fail"]},
    },
]
CRAFTS = ["absolute", "dotdot", "symlink", "not-a-name"]
COMMANDS = {
    "summarize": lambda run: ["eval.summarize", "--run", str(run)],
    "verdict": lambda run: ["eval.verdict", "--run", str(run)],
    "judge": lambda run: ["eval.judge", "--run", str(run)],
    "compare": lambda run: ["eval.compare", str(run), str(run)],
    "resume": lambda run: ["eval.run", "--resume", run.name],
}


@pytest.fixture(scope="module")
def finished_project(tmp_path_factory) -> Path:
    """A project with one finished run of the echo agent (made once for the module)."""
    base = tmp_path_factory.mktemp("finished")
    (base / "home").mkdir()
    project = make_project(base / "p", TASKS)
    result = run_bat(
        "eval.run", cwd=project, env={"HOME": str(base / "home")}, timeout=120, charts=True
    )
    assert result.code == 0, result.err
    config = yaml.safe_load((project / "eval/eval.yaml").read_text())
    config["evaluation"]["qualitative"] = True  # eval.judge gets as far as the run folder
    config["judge"] = {"model": "j", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    (project / "eval/eval.yaml").write_text(yaml.safe_dump(config))
    return project


@pytest.fixture
def project(finished_project, tmp_path, home) -> Path:
    copy = tmp_path / "p"
    shutil.copytree(finished_project, copy, symlinks=True)
    return copy


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file and link under ``folder``: its content's hash, or where it points."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if path.is_symlink():
                found[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def craft(run_dir: Path, outside: Path, how: str) -> None:
    """Point run.json's ``models[0].dir`` outside the run, at a copy of the model folder."""
    record = json.loads((run_dir / "run.json").read_text())
    shutil.copytree(run_dir / "agent-default", outside / "m")
    if how == "absolute":
        record["models"][0]["dir"] = str(outside / "m")
    elif how == "dotdot":
        record["models"][0]["dir"] = os.path.relpath(outside / "m", run_dir)
    elif how == "symlink":
        (run_dir / "link").symlink_to(outside / "m", target_is_directory=True)
        record["models"][0]["dir"] = "link"
    else:
        record["models"][0]["dir"] = 7
    (run_dir / "run.json").write_text(json.dumps(record, indent=1))


@pytest.mark.parametrize("how", CRAFTS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_crafted_model_dir_is_refused_and_nothing_changes(project, tmp_path, bat, how, command):
    (run_dir,) = run_dirs(project)
    outside = tmp_path / "outside"
    craft(run_dir, outside, how)
    (project / ".env").write_text("OPENAI_API_KEY=sk-unused-here\n")
    before = fingerprint(tmp_path)
    result = bat(*COMMANDS[command](run_dir), cwd=project)
    assert result.code == 2, (result.out, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bat: error: "), result.err
    assert "Traceback" not in result.err
    if how == "symlink":  # found by the run's own check: it holds no link at all
        assert f"{run_dir / 'link'} is a symbolic link" in lines[0]
    else:
        assert f"{run_dir / 'run.json'}: models[0].dir" in lines[0]
    assert fingerprint(tmp_path) == before


def test_an_episode_folder_linked_out_of_the_run_is_refused(project, tmp_path, bat):
    """Episodes are read (judge, verdict, report) and written back: never through a link."""
    (run_dir,) = run_dirs(project)
    outside = tmp_path / "outside"
    episodes = run_dir / "agent-default" / "episodes"
    shutil.move(episodes, outside)
    episodes.symlink_to(outside, target_is_directory=True)
    (project / "eval/input/tasks.json").write_text(
        json.dumps([{**TASKS[0], "expected": {"output_must_contain": ["other"]}}, TASKS[1]])
    )
    (project / ".env").write_text("OPENAI_API_KEY=sk-unused-here\n")
    report = project / "eval" / "output" / "report.html"
    shown = report.read_text()
    for args in (
        ["eval.verdict", "--run", str(run_dir)],
        ["eval.judge", "--run", str(run_dir)],
        ["eval.plot"],
    ):
        before = fingerprint(outside)
        result = bat(*args, cwd=project, charts=True)
        assert result.code == 2, (args, result.out, result.err)
        assert result.err.startswith(f"bat: error: {episodes}")  # named, as a link or
        assert "is a symbolic link" in result.err or "leads outside" in result.err  # its file
        assert len(result.err.splitlines()) == 1, result.err
        assert fingerprint(outside) == before, args
    assert report.read_text() == shown  # no page shows the files linked in from outside


def test_a_batcli_model_folder_linked_out_of_its_run_is_refused(tmp_path, bat, home):
    project = verdict_project(tmp_path / "agent", change_t09=True)
    run = copy_run(tmp_path / "runs")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(run / BATCLI_MODEL, outside / BATCLI_MODEL)
    (run / BATCLI_MODEL).symlink_to(outside / BATCLI_MODEL, target_is_directory=True)
    before = fingerprint(tmp_path)
    for args in (["eval.verdict", "--run", str(run)], ["eval.compare", str(run), str(run)]):
        result = bat(*args, cwd=project)
        assert result.code == 2, (args, result.out, result.err)
        assert result.err.startswith("bat: error: ") and "leads outside" in result.err
        assert fingerprint(tmp_path) == before
    # The same folder, moved back inside, is re-judged: the check refuses only links out.
    (run / BATCLI_MODEL).unlink()
    shutil.move(outside / BATCLI_MODEL, run / BATCLI_MODEL)
    result = bat("eval.verdict", "--run", str(run), cwd=project)
    assert result.code == 0, result.err
    assert result.out.strip() == "5 verdicts changed"


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-folder", "dangling"])
def test_a_judge_cache_linked_out_of_the_run_is_refused(project, tmp_path, bat, dangling):
    (run_dir,) = run_dirs(project)
    outside = tmp_path / "outside-cache"
    if not dangling:
        outside.mkdir()
    (run_dir / "judge-cache").symlink_to(outside, target_is_directory=True)
    (project / ".env").write_text("OPENAI_API_KEY=sk-unused-here\n")
    before = fingerprint(tmp_path)
    result = bat("eval.judge", "--run", str(run_dir), cwd=project)
    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith(f"bat: error: {run_dir / 'judge-cache'} is a symbolic link")
    assert fingerprint(tmp_path) == before
    assert outside.is_dir() != dangling


# A file or folder of a run replaced by a link out of it, and the command that would
# have written through it.
PLANTED = {
    "summary": ("agent-default/summary.json", ["eval.summarize", "--run"]),
    "metrics": ("agent-default/metrics.json", ["eval.summarize", "--run"]),
    "run.json": ("run.json", ["eval.summarize", "--run"]),
    "config copy": ("agent-default/agent-config.yaml", ["eval.run", "--resume"]),
    "agent log": ("agent-agent-default.log", ["eval.run", "--resume"]),
    "episodes": ("agent-default/episodes", ["eval.run", "--resume"]),
}


@pytest.mark.parametrize("what", list(PLANTED))
def test_a_link_planted_in_a_run_is_refused_before_anything_is_written(
    project, tmp_path, bat, what
):
    """No command writes through a link in a run folder (the agent is not even started:
    an episode deleted below makes --resume want to run one)."""
    (run_dir,) = run_dirs(project)
    relative, command = PLANTED[what]
    planted = run_dir / relative
    outside = tmp_path / "outside"
    if planted.is_dir():
        shutil.move(planted, outside)
        next(outside.glob("*.json")).unlink()
    elif planted.exists():  # its own content, moved out: a link bat reads without a fuss
        shutil.move(planted, outside)
    else:  # the config copy of an agent that has a config file
        outside.write_text("yours\n")
    planted.symlink_to(outside)
    if what != "episodes":
        next((run_dir / "agent-default" / "episodes").glob("*.json")).unlink()
    before = fingerprint(tmp_path)
    result = bat(*command, run_dir.name, cwd=project)
    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith(f"bat: error: {planted} is a symbolic link"), result.err
    assert fingerprint(tmp_path) == before
    assert not list(tmp_path.rglob("agent-*.process.json"))  # no agent was started


def test_a_link_where_plot_writes_is_replaced_not_written_through(project, tmp_path, bat):
    """report.html and the charts are written beside the runs; a link there is replaced."""
    outside = tmp_path / "outside.html"
    outside.write_text("yours\n")
    report = project / "eval" / "output" / "report.html"
    report.unlink()
    report.symlink_to(outside)
    result = bat("eval.plot", cwd=project)
    assert result.code == 0, result.err
    assert outside.read_text() == "yours\n"
    assert not report.is_symlink() and "<html" in report.read_text()


def test_control_characters_in_a_crafted_run_never_reach_the_terminal(project, bat):
    """Labels and task ids read back from a run are printed with ESC, NUL... escaped."""
    (run_dir,) = run_dirs(project)
    record = json.loads((run_dir / "run.json").read_text())
    record["models"][0]["label"] = "\x1b[31mEV\x00IL"
    (run_dir / "run.json").write_text(json.dumps(record))
    summarized = bat("eval.summarize", "--run", run_dir.name, cwd=project)
    assert summarized.code == 0, summarized.err
    assert "[\\x1b[31mEV\\x00IL]" in summarized.out
    compared = bat("eval.compare", str(run_dir), str(run_dir), cwd=project)
    assert "A  \\x1b[31mEV\\x00IL (" in compared.out, compared.out + compared.err
    for output in (summarized, compared):
        assert not any(c in output.out + output.err for c in "\x1b\x00\x07")
