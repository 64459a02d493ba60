"""``bat eval.init``: a commented eval.yaml, sample tasks, the stand-in model's script,
the scripted simulated user's and the output folder.

Beside eval.yaml goes ``eval.schema.json``, the JSON Schema of the bat that wrote it;
eval.yaml's first line points editors with the YAML language server at it.
"""

from __future__ import annotations

from pathlib import Path

from bat.errors import UsageError
from bat.evaluation.inputs.schemas import schema_text
from bat.scaffold.agent import has_scaffolded_tools
from bat.scaffold.render import render_file, templates_root, write_files

FILES = (
    "eval/eval.yaml",
    "eval/input/tasks.json",
    "eval/scripted-model.yaml",
    "eval/scripted-user.yaml",
)
SCRIPT_FILE = FILES[2]  # the stand-in model's answers to the sample tasks
# The simulated user of the sample conversation (eval.yaml's user: script), so that task
# runs on a first eval.run without a key, as the stand-in model's do.
USER_SCRIPT_FILE = FILES[3]
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
        verb = "exists" if len(existing) == 1 else "exist"
        raise UsageError(f"{', '.join(existing)} already {verb} (use --force to overwrite)")
    tools = has_scaffolded_tools(root)
    tasks = _sample_tasks("tasks.json")
    if tools:
        more = _sample_tasks("tool_tasks.json")
        tasks = tasks.rstrip()[:-1].rstrip() + ",\n" + more.lstrip()[1:].lstrip("\n")
    context = {"command": command, "tools": tools, "stand_in": stand_in_provider(root)}
    files = {
        "eval/eval.yaml": render_file("eval/eval.yaml.j2", context),
        "eval/input/tasks.json": tasks,
        SCRIPT_FILE: render_file("eval/scripted-model.yaml.j2", context),
        USER_SCRIPT_FILE: _sample_tasks("scripted-user.yaml"),
        SCHEMA_FILE: schema_text("eval.yaml"),
    }
    written = write_files(root, files)
    output = root / "eval" / "output"
    output.mkdir(parents=True, exist_ok=True)
    return [*written, output]


def stand_in_provider(root: Path) -> str | None:
    """The provider of the stand-in model entry: the agent's own (``MODEL_PROVIDER`` of
    ./.env, openai when unset) if the scripted model speaks it, else None (no entry: an
    agent made for another provider lacks the client library of these two)."""
    from bat.dotenv import read_dotenv
    from bat.evaluation.inputs.config import SCRIPTED_PROVIDERS

    provider = read_dotenv(root / ".env").get("MODEL_PROVIDER") or "openai"
    return provider if provider in SCRIPTED_PROVIDERS else None


def _sample_tasks(name: str) -> str:
    """A sample file's text (a dataset, the user's script), as written: its layout and
    comments are part of what it teaches."""
    return (templates_root() / "eval" / name).read_text(encoding="utf-8").rstrip() + "\n"
