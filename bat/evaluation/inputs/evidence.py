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

import json
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
    cache: dict[str, str] | None = None,
) -> list[dict[str, str]]:
    """Each evidence file's path (as written) and text, read relative to ``folder`` and
    kept within ``root``; every problem reported through ``problem(key path, message)``
    (``named_from``: the file the paths are relative to, for the messages). With
    ``read_already``, an entry ``{path, text}`` (a run's snapshot) is taken as read;
    ``cache`` (path as written -> text) lets tasks naming one file share one read."""
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
        text = cache.get(item) if cache is not None and isinstance(item, str) else None
        if text is None:
            text = _read_one(root, folder, item, named_from)
        if isinstance(text, str):
            if cache is not None:
                cache[item] = text
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


MAX_EVIDENCE_TOTAL = 64 * MiB  # bytes of the distinct evidence files of one dataset
MAX_PROBLEMS = 50  # listed in one error


def read_task_evidence(path: Path, text: str, tasks: list[Any]) -> bytes | None:
    """A tasks.json's ``meta.llm_scorer_instruction`` checked and each task's
    ``meta.llm_scorer_evidence_files`` read (relative to the dataset file's folder) into
    ``{path, text}`` entries, in place. Returns the run's snapshot of the dataset when a
    file was read: the tasks as written, with the texts in place of the paths (None: the
    file's own bytes are the snapshot). Every problem, one line each naming the task and
    the path, in one InputError."""
    if "llm_scorer_" not in text and "\\u" not in text:  # no such key, even escaped
        return None
    root = path.parent
    problems: list[str] = []
    cache: dict[str, str] = {}  # path as written -> text: a file named twice is read once
    total = 0  # characters of the distinct files read
    counted: set[str] = set()
    read_any = False
    for task in tasks:
        meta = task.meta

        def problem(key: tuple, message: str, task_id: str = task.id) -> None:
            where = key[0] + "".join(f"[{part}]" for part in key[1:])
            problems.append(f"{path}: task {task_id!r}: meta.{where}: {message}")

        if INSTRUCTION_KEY in meta:
            why = instruction_problem(meta[INSTRUCTION_KEY])
            if why:
                problem((INSTRUCTION_KEY,), why)
        listed = meta.get(EVIDENCE_KEY)
        if listed is None:
            continue
        read_any = read_any or (
            isinstance(listed, list) and any(isinstance(i, str) for i in listed)
        )
        meta[EVIDENCE_KEY] = read_evidence(
            root, root, listed, problem, named_from=path.name, read_already=True, cache=cache
        )
        for entry in meta[EVIDENCE_KEY]:
            if entry["path"] not in counted:
                counted.add(entry["path"])
                total += len(entry["text"])
        if total > MAX_EVIDENCE_TOTAL:
            problems.append(
                f"{path}: the evidence files of its tasks hold more than "
                f"{integer(MAX_EVIDENCE_TOTAL)} bytes together, the limit"
            )
            break
    if problems:
        if len(problems) == 1:
            raise InputError(problems[0])
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"... and {integer(len(problems) - MAX_PROBLEMS)} more")
        raise InputError(f"{path} has {len(problems)} problems", details=shown)
    if not read_any:
        return None
    return _snapshot(text, tasks)


def _snapshot(text: str, tasks: list[Any]) -> bytes:
    """The dataset's JSON as written, each task's evidence paths replaced by what was
    read (the tasks are those of ``text``, in its order)."""
    data = json.loads(text)
    listed = data["tasks"] if isinstance(data, dict) else data
    for item, task in zip(listed, tasks, strict=True):
        if EVIDENCE_KEY in task.meta:
            item["meta"][EVIDENCE_KEY] = task.meta[EVIDENCE_KEY]
    return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
