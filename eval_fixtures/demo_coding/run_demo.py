"""The second demo, a coding agent, offline and without any key:
`python eval_fixtures/demo_coding/run_demo.py [--out DIR]`.

bat evaluates eval_fixtures/coding_cli.py, a small headless coding CLI, through the
``command`` adapter on a belt scenario group: fix an off-by-one in a git repository's
``slice_window()`` (checked by the files it changed, their text and the repository's own
tests) and explain it without touching anything. Two stand-in models that bat serves
itself drive the CLI, 3 attempts each: one fixes the bug, one breaks it.

The demo is set up in a new folder (a temporary one, or ``--out DIR``, which must not
exist or be empty), never in this repository: this folder's files are copied there, its
``repo/`` becomes a git repository with one commit, and eval.yaml gets the Python running
this script and the copied CLI's path. Then `bat eval.run` runs there (its report is
drawn as it ends) and the report's path is printed. The exit status is bat's: 0 when the
gates (the fixing model passes every attempt) hold, 1 when one fails, 2 for bad input.

bat runs as a child here, not in place of this process (as the first demo does), because
the report's path is printed after it; a Ctrl-C reaches both, and this script waits
while bat stops what it started (the stand-in models, the CLI's process groups), never
killing it halfway.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = HERE.parent / "coding_cli.py"
GIT_IDENTITY = ["-c", "user.name=bat demo", "-c", "user.email=demo@localhost"]
GIT_IDENTITY += ["-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]


def set_up(out: Path) -> None:
    """The demo's folder: scenarios, models' scripts, eval.yaml, the CLI and a git repo."""
    for part in ("scenarios", "repo", "eval"):
        shutil.copytree(
            HERE / part, out / part, ignore=shutil.ignore_patterns("output", "__pycache__")
        )
    shutil.copy2(CLI, out / "coding_cli.py")
    config = out / "eval" / "eval.yaml"
    text = config.read_text(encoding="utf-8")
    text = text.replace("__PYTHON__", _quoted(sys.executable))
    config.write_text(text.replace("__CODING_CLI__", _quoted(str(out / "coding_cli.py"))))
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "window: a sliding window"]):
        subprocess.run(["git", *GIT_IDENTITY, *args], cwd=out / "repo", env=env, check=True)


def _quoted(text: str) -> str:
    """``text`` as a YAML string in a flow list (a path may hold spaces or colons)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bat's second demo: a coding agent")
    parser.add_argument("--out", type=Path, help="a new (or empty) folder for the demo")
    args = parser.parse_args(argv)
    if args.out is None:
        out = Path(tempfile.mkdtemp(prefix="bat-demo-coding-"))
    else:
        out = args.out.resolve()
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            print(f"error: --out {args.out}: not an empty folder", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
    if shutil.which("git") is None:
        print("error: the demo needs git (to make its repository)", file=sys.stderr)
        return 2
    set_up(out)
    print(f"demo folder: {out}", flush=True)
    bat = Path(sys.executable).with_name("bat")  # the console script beside this Python
    program = [str(bat)] if bat.is_file() else [sys.executable, "-m", "bat.cli"]
    proc = subprocess.Popen([*program, "eval.run"], cwd=out)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # bat got the Ctrl-C too: let it stop what it started
        code = proc.wait()
    report = out / "eval" / "output" / "report.html"
    if report.is_file():
        print(f"report: {report}")
    return code


if __name__ == "__main__":
    sys.exit(main())
