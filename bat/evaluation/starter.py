"""``bat eval.init``: a commented eval.yaml, an example dataset and the output folder.

Beside eval.yaml goes ``eval.schema.json``, the JSON Schema of the bat that wrote it;
eval.yaml's first line points editors with the YAML language server at it.
"""

from __future__ import annotations

from pathlib import Path

from bat.errors import UsageError
from bat.evaluation.schemas import schema_text
from bat.scaffold.agent import has_scaffolded_tools
from bat.scaffold.render import render_file, templates_root, write_files

FILES = ("eval/eval.yaml", "eval/input/tasks.json")
# Rewritten by every eval.init (bat's own file, never edited by hand), so it is not one
# of the FILES that make eval.init refuse without --force.
SCHEMA_FILE = "eval/eval.schema.json"


def init_eval(root: Path, *, force: bool = False, command: str = "uv run .") -> list[Path]:
    """Write the starter files under ``root``; refuse to overwrite without ``force``.

    An agent made by ``bat init.agent --tools`` also gets the sample tasks that check its
    tool calls and its question back (templates/eval/tool_tasks.json).
    """
    existing = [name for name in FILES if (root / name).exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exist(s) (use --force to overwrite)")
    tools = has_scaffolded_tools(root)
    tasks = _sample_tasks("tasks.json")
    if tools:
        more = _sample_tasks("tool_tasks.json")
        tasks = tasks.rstrip()[:-1].rstrip() + ",\n" + more.lstrip()[1:].lstrip("\n")
    files = {
        "eval/eval.yaml": render_file("eval/eval.yaml.j2", {"command": command, "tools": tools}),
        "eval/input/tasks.json": tasks,
        SCHEMA_FILE: schema_text("eval.yaml"),
    }
    written = write_files(root, files)
    output = root / "eval" / "output"
    output.mkdir(parents=True, exist_ok=True)
    return [*written, output]


def _sample_tasks(name: str) -> str:
    """A sample dataset's text, as written (its layout is part of what it teaches)."""
    return (templates_root() / "eval" / name).read_text(encoding="utf-8").rstrip() + "\n"
