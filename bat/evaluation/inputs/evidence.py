"""A task's words to its judges: ``llm_scorer_instruction`` and ``llm_scorer_evidence_files``.

belt's scenario files and bat's tasks.json (under ``meta``) both give them, with the
same rules, kept here once. The evidence files are read when the dataset is loaded,
not when the run is judged: a missing or hostile file is then one line before anything
runs (not after every episode), and the texts are in the task's ``meta``, so the run's
tasks.json snapshot holds what a later re-judging needs, as written. The judges' prompt
appends them after the episode (``bat.evaluation.judging.rubrics``); the agent never
sees a task's ``meta``.

An evidence path is relative to the file that names it (the scenario, the tasks.json)
and must stay inside the dataset's folder: ``..``, an absolute path, a link leading out
of the folder, a file that is not regular (a FIFO, a device) or larger than
:data:`EVIDENCE_LIMIT`, and a missing file are refused, each one problem naming the path.
An entry already read (``{"path": ..., "text": ...}``, as a run's snapshot holds it) is
taken as it is, within the same bounds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bat.errors import InputError
from bat.figures import integer
from bat.input_files import MiB, read_text

INSTRUCTION_KEY = "llm_scorer_instruction"
EVIDENCE_KEY = "llm_scorer_evidence_files"
INSTRUCTION_LIMIT = 10_000  # characters of llm_scorer_instruction (belt's cap)
EVIDENCE_LIMIT = 1 * MiB  # bytes of one evidence file
MAX_EVIDENCE_FILES = 20  # of one task

# Where a problem is (a key path below the task's or scenario's keys) and what it is.
Problem = Callable[[tuple, str], None]


def instruction_problem(value: Any) -> str | None:
    """What is wrong with an ``llm_scorer_instruction``, or None."""
    if isinstance(value, str) and len(value) <= INSTRUCTION_LIMIT:
        return None
    return (
        f"expected text of at most {integer(INSTRUCTION_LIMIT)} characters "
        "(a longer rubric goes in llm_scorer_evidence_files)"
    )


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, its links followed, is within ``root``."""
    try:
        path.resolve().relative_to(root.resolve())
    except (OSError, ValueError, RuntimeError):
        return False
    return True


def read_evidence(
    root: Path,
    folder: Path,
    listed: Any,
    problem: Problem,
    *,
    named_from: str,
    read_already: bool = False,
) -> list[dict[str, str]]:
    """Each evidence file's path (as written) and text, read relative to ``folder`` and
    kept within ``root``; every problem reported through ``problem(key path, message)``
    (``named_from``: the file the paths are relative to, for the messages). With
    ``read_already``, an entry ``{path, text}`` (a run's snapshot) is taken as read."""
    if not isinstance(listed, list) or len(listed) > MAX_EVIDENCE_FILES:
        problem((EVIDENCE_KEY,), f"expected a list of at most {MAX_EVIDENCE_FILES} paths")
        return []
    texts = []
    for index, item in enumerate(listed):
        where = (EVIDENCE_KEY, index)
        if read_already and isinstance(item, dict) and set(item) == {"path", "text"}:
            if not isinstance(item["path"], str) or not isinstance(item["text"], str):
                problem(where, "expected a path, or {path, text} as a run's snapshot holds it")
            elif len(item["text"].encode("utf-8", "surrogatepass")) > EVIDENCE_LIMIT:
                problem(
                    where, f"{item['path'][:80]!r}: longer than {integer(EVIDENCE_LIMIT)} bytes"
                )
            else:
                texts.append({"path": item["path"], "text": item["text"]})
            continue
        text = _read_one(root, folder, item, named_from)
        if isinstance(text, str):
            texts.append({"path": item, "text": text})
        else:
            problem(where, text.message)
    return texts


def _read_one(root: Path, folder: Path, relative: Any, named_from: str) -> str | InputError:
    """The text of one evidence file, or the InputError saying why it is refused."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        return InputError("expected a path (text)")
    shown = repr(relative[:80])
    parts = relative.replace("\\", "/").split("/")
    if relative.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", relative):
        return InputError(f"{shown}: an absolute path; give it relative to {named_from}")
    if ".." in parts:
        return InputError(f"{shown}: '..' is not allowed in an evidence path")
    target = folder / relative
    if not inside(root, target):
        return InputError(f"{shown}: leads out of the dataset folder {root}")
    try:
        return read_text(target, limit=EVIDENCE_LIMIT, kind="an evidence file")
    except FileNotFoundError:
        return InputError(f"{shown}: no such file ({target})")
    except InputError as exc:
        return exc
