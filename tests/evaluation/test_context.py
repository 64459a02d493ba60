"""The run context: one command line's stages share what the first one read.

``bat eval.run`` chains the run, the judge, the summaries, the gates, the charts and the
exports. Before the run context each stage read eval.yaml and the agent's ``.env`` again
(4 and 7 times for one run). These count the files a whole ``eval.run`` opens, with an
audit hook in this process (bat runs in-process here), and check that two commands run
one after the other in one process share nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from pathlib import Path

from tests.conftest import run_bat
from tests.evalkit import make_project, run_dirs

TASKS = [
    {"id": f"t{n}", "turns": [f"hello {n}"], "expected": {"output_must_contain": [f"{n}"]}}
    for n in range(5)
]


class Opened:
    """The files this thread opens while it is active (an audit hook cannot be removed,
    so one is installed once and does nothing outside a ``with``)."""

    active: Opened | None = None
    installed = False

    def __init__(self) -> None:
        self.paths: Counter[str] = Counter()
        self.thread = threading.get_ident()

    @classmethod
    def _hook(cls, event: str, args: tuple) -> None:
        watch = cls.active
        if watch is not None and event == "open" and threading.get_ident() == watch.thread:
            path = args[0]
            if isinstance(path, str | bytes | os.PathLike):
                watch.paths[os.path.realpath(os.fsdecode(path))] += 1

    def __enter__(self) -> Opened:
        if not Opened.installed:
            sys.addaudithook(Opened._hook)
            Opened.installed = True
        Opened.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        Opened.active = None

    def count(self, path: Path) -> int:
        return self.paths[os.path.realpath(path)]


def test_one_eval_run_reads_eval_yaml_and_the_env_file_once(tmp_path, home):
    project = make_project(tmp_path / "p", TASKS, k=2, qualitative=False)
    (project / ".env").write_text("SOME_SETTING=1\n")
    with Opened() as opened:
        result = run_bat("eval.run", "--export", "json:out.json", cwd=project, charts=True)
    assert result.code == 0, result.err
    assert opened.count(project / "eval" / "eval.yaml") == 1
    assert opened.count(project / ".env") == 1
    (run_dir,) = run_dirs(project)
    assert opened.count(run_dir / "run.json") >= 1  # the hook sees the files bat opens


def test_two_commands_in_one_process_share_nothing(tmp_path, home):
    """The secrets of one command's configuration are not the next one's: a value that is
    a secret of the first (an agent's token) prints as written in the second's error,
    where it is only a --task pattern. (With the secrets kept in a module, the second
    command's error said [redacted].)"""
    key = "sk-first-0123456789abcdef"
    first = make_project(tmp_path / "a", TASKS[:1], agent_env={"API_TOKEN": key})
    ran = run_bat("eval.run", cwd=first)
    assert ran.code == 0 and key not in ran.out + ran.err, ran.err
    second = make_project(tmp_path / "b", TASKS[:1])
    refused = run_bat("eval.run", "--task", key, cwd=second)
    assert refused.code == 2 and key in refused.err, refused.err
