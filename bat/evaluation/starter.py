"""``bat eval.init``: a commented eval.yaml, an example dataset and the output folder.

Beside eval.yaml goes ``eval.schema.json``, the JSON Schema of the bat that wrote it;
eval.yaml's first line points editors with the YAML language server at it.
"""

from __future__ import annotations

from pathlib import Path

from bat.errors import UsageError
from bat.evaluation.schemas import schema_text
from bat.scaffold.render import render_file, templates_root, write_files

FILES = ("eval/eval.yaml", "eval/input/tasks.json")
# Rewritten by every eval.init (bat's own file, never edited by hand), so it is not one
# of the FILES that make eval.init refuse without --force.
SCHEMA_FILE = "eval/eval.schema.json"


def init_eval(root: Path, *, force: bool = False, command: str = "uv run .") -> list[Path]:
    """Write the starter files under ``root``; refuse to overwrite without ``force``."""
    existing = [name for name in FILES if (root / name).exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exist(s) (use --force to overwrite)")
    files = {
        "eval/eval.yaml": render_file("eval/eval.yaml.j2", {"command": command}),
        "eval/input/tasks.json": (templates_root() / "eval" / "tasks.json").read_text(
            encoding="utf-8"
        ),
        SCHEMA_FILE: schema_text("eval.yaml"),
    }
    written = write_files(root, files)
    output = root / "eval" / "output"
    output.mkdir(parents=True, exist_ok=True)
    return [*written, output]
