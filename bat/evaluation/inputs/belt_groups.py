"""belt's scenario groups read as a bat dataset, so a belt suite runs as it is.

A *group* is a folder holding ``_config.json`` (the agent and the workspace shared by
its scenarios) and scenario files ``NAME.json``, one task each. A dataset path that is
a group, or a folder of groups (found below it, at most :data:`MAX_DEPTH` levels down),
loads as bat tasks:

* ``NAME.json`` -> a task with id ``NAME`` (one group) or ``GROUP/NAME`` (several,
  ``GROUP`` the group's folder below the dataset path); ``name`` must be the file's name;
* its ``turns`` (``message`` and belt's per-turn ``expect``) -> the task's turns;
* the group's ``default_tags`` and the scenario's ``tags`` -> the task's tags;
* ``description``, ``llm_scorer_instruction``, ``llm_scorer_raw_transcript`` and the
  text of each ``llm_scorer_evidence_files`` file -> the task's ``meta``, for the judges
  (evidence files are read now, relative to the scenario file, and never copied into the
  workspace: the run's tasks.json snapshot then holds everything a later re-judging needs).

The group's ``_config.json`` is returned beside the tasks as a :class:`BeltGroup`
(``agent``; ``workspace``, in the shape of eval.yaml's ``evaluation.agent.workspace``).
What has no meaning in bat (``workspace_isolation`` other than a private copy, a
scenario's ``flags``, any key bat does not know) is named in a warning, one line per
key; what would make a wrong run (malformed JSON, an unknown ``expect`` field, a name
that is not the file's, ``working_dir`` beside ``fixture_repo``) is an error, all of them
listed at once, each ``file: key (line N): what is wrong``.

Every file is read by :mod:`bat.input_files` (regular files only, bounded); a scenario
or evidence file that is a link leading out of the dataset folder is refused, and
linked folders are not followed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bat.errors import InputError
from bat.evaluation.inputs.evidence import (
    EVIDENCE_KEY,
    INSTRUCTION_KEY,
    inside,
    instruction_problem,
    read_evidence,
)
from bat.figures import counted, integer
from bat.input_files import MiB, json_lines, parse_json, read_text
from bat.locate import validation_problems

CONFIG_FILE = "_config.json"
MAX_SCENARIOS = 10_000  # scenario files in one dataset
MAX_GROUPS = 1_000
MAX_DEPTH = 6  # folders below the dataset path searched for groups
MAX_ENTRIES = 100_000  # folder entries looked at while searching
SCENARIO_LIMIT = 1 * MiB  # bytes of one scenario or _config.json
MAX_TURNS = 100
MAX_PROBLEMS = 200  # problems listed in one error

CONFIG_KEYS = frozenset(
    {
        "agent",
        "default_tags",
        "working_dir",
        "workspace_isolation",
        "workspace_ref",
        "fixture_repo",
        "fixture_ref",
        "resources",
    }
)
SCENARIO_KEYS = frozenset(
    {
        "name",
        "description",
        "tags",
        "turns",
        "llm_scorer_instruction",
        "llm_scorer_evidence_files",
        "llm_scorer_raw_transcript",
    }
)
TURN_KEYS = frozenset({"message", "expect"})
RESOURCE_KEYS = ("kind", "source", "dest", "version")
# Isolation bat gives every episode anyway: a working copy of its own.
ISOLATED = frozenset({"git-worktree", "worktree", "copy", "clone", "git"})
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[\w.-]+@[\w.-]+:)", re.IGNORECASE)


@dataclass(frozen=True)
class BeltGroup:
    """A group's ``_config.json``, in bat's terms.

    ``workspace`` holds eval.yaml's ``evaluation.agent.workspace`` keys (``source``,
    ``ref``, ``resources``), paths made absolute from the group folder; empty when the
    group names no workspace. ``agent`` is belt's agent name (a preset name in bat)."""

    name: str  # the group's folder below the dataset path ("" for the path itself)
    path: Path
    agent: str | None
    workspace: dict[str, Any]
    default_tags: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()


@dataclass
class BeltDataset:
    """The tasks of a folder of belt groups (as bat's task dicts, validated by the
    caller), the groups, the warnings, and a canonical tasks.json text of the tasks
    (the run's snapshot; its sha256 is the dataset's)."""

    tasks: list[dict[str, Any]]
    groups: list[BeltGroup]
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Where each task came from, for the messages: id -> (file, its text).
    sources: dict[str, tuple[Path, str]] = field(default_factory=dict)

    def snapshot(self) -> bytes:
        return (json.dumps(self.tasks, ensure_ascii=False, indent=1) + "\n").encode("utf-8")

    def sha256(self) -> str:
        return hashlib.sha256(self.snapshot()).hexdigest()


def is_belt_folder(path: Path) -> bool:
    """Whether a dataset path is a folder (of belt groups) rather than a tasks file."""
    try:
        return path.is_dir()
    except OSError:
        return False


def read_groups(root: Path) -> BeltDataset:
    """The groups under ``root`` and their scenarios as bat task dicts; ``problems``
    lists what is wrong (the caller raises them as one error, with the tasks' own)."""
    found = BeltDataset(tasks=[], groups=[])
    folders = _group_folders(root)
    if not folders:
        raise InputError(
            f"{root} is a folder without {CONFIG_FILE}: a dataset folder is a belt group "
            f"(a folder holding {CONFIG_FILE} and scenario files) or a folder of groups"
        )
    several = len(folders) > 1 or folders[0] != root
    scenarios = 0
    for folder in folders:
        group_name = folder.relative_to(root).as_posix() if folder != root else ""
        config = _read_config(root, folder, found)
        files = _scenario_files(folder)
        scenarios += len(files)
        if scenarios > MAX_SCENARIOS:
            raise InputError(
                f"{root} holds more than {integer(MAX_SCENARIOS)} scenario files, the limit"
            )
        ids = []
        for path in files:  # read even when the config is wrong: every problem is listed
            task = _scenario(root, path, group_name if several else "", config or _NONE, found)
            if task is not None:
                found.tasks.append(task)
                ids.append(task["id"])
        if config is None:
            continue
        found.groups.append(
            BeltGroup(
                name=group_name,
                path=folder,
                agent=config.get("agent"),
                workspace=config["workspace"],
                default_tags=tuple(config["default_tags"]),
                task_ids=tuple(ids),
            )
        )
    if not found.tasks and not found.problems:
        found.problems.append(f"{root}: no scenario files (NAME.json beside {CONFIG_FILE})")
    return found


_NONE: dict[str, Any] = {"agent": None, "default_tags": [], "workspace": {}}


# -- finding the files -------------------------------------------------------------------


def _group_folders(root: Path) -> list[Path]:
    """``root`` when it is a group; else the groups below it (breadth first, sorted,
    linked folders not followed, bounded in depth, entries and groups)."""
    if _has_config(root):
        return [root]
    groups: list[Path] = []
    level = [root]
    seen = 0
    for _ in range(MAX_DEPTH):
        below: list[Path] = []
        for folder in level:
            for entry in _entries(folder):
                seen += 1
                if seen > MAX_ENTRIES:
                    raise InputError(
                        f"{root}: more than {integer(MAX_ENTRIES)} files and folders below it; "
                        "point the dataset at the groups' folder"
                    )
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                path = Path(entry.path)
                if _has_config(path):
                    groups.append(path)
                    if len(groups) > MAX_GROUPS:
                        raise InputError(f"{root} holds more than {MAX_GROUPS} groups, the limit")
                else:
                    below.append(path)
        level = below
    return sorted(groups)


def _entries(folder: Path) -> list[os.DirEntry]:
    """The entries of ``folder``, sorted by name; at most :data:`MAX_ENTRIES`."""
    listed = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                listed.append(entry)
                if len(listed) > MAX_ENTRIES:
                    raise InputError(
                        f"{folder} holds more than {integer(MAX_ENTRIES)} files and folders"
                    )
    except OSError as exc:
        raise InputError(f"{folder}: cannot list the folder: {exc.strerror or exc}") from None
    return sorted(listed, key=lambda entry: entry.name)


def _has_config(folder: Path) -> bool:
    return os.path.lexists(folder / CONFIG_FILE)


def _scenario_files(folder: Path) -> list[Path]:
    """The scenario files of a group: its ``*.json`` but ``_config.json`` and hidden
    files, sorted (anything that is not a regular file is refused when read)."""
    return [
        Path(entry.path)
        for entry in _entries(folder)
        if entry.name.endswith(".json")
        and entry.name != CONFIG_FILE
        and not entry.name.startswith(".")
        and not entry.is_dir(follow_symlinks=False)
    ]


def _read_json(root: Path, path: Path, kind: str, found: BeltDataset) -> tuple[Any, str] | None:
    """The data and text of the JSON file ``path``; None (the problem noted) when it
    cannot be read, is not JSON, or is a link that leads out of ``root``."""
    try:
        if path.is_symlink() and not inside(root, path):
            raise InputError(
                f"{path}: a link that leads out of {root}; bat reads {kind} only "
                "from inside the dataset folder"
            )
        text = read_text(path, limit=SCENARIO_LIMIT, kind=kind)
        data = parse_json(text, path, constants=False)
        # "\ud800" is valid JSON and no text: no task, file or prompt could hold it.
        from bat.locate import refuse_lone_surrogates

        refuse_lone_surrogates(path, text)
        return data, text
    except InputError as exc:
        found.problems.append(exc.message)
        return None


# -- _config.json ------------------------------------------------------------------------


def _read_config(root: Path, folder: Path, found: BeltDataset) -> dict[str, Any] | None:
    """The group's settings: ``agent``, ``default_tags`` and the ``workspace`` keys."""
    path = folder / CONFIG_FILE
    read = _read_json(root, path, "a belt group's _config.json", found)
    if read is None:
        return None
    data, text = read
    if not isinstance(data, dict):
        found.problems.append(f"{path}: expected a JSON object of the group's settings")
        return None
    lines = json_lines(text)
    before = len(found.problems)

    def problem(key: str, message: str) -> None:
        line = lines.get((key,))
        found.problems.append(f"{path}: {key}{f' (line {line})' if line else ''}: {message}")

    for key in sorted(set(data) - CONFIG_KEYS, key=str):
        found.warnings.append(f"{path}: {str(key)[:80]}: not a key bat reads, ignored")
    agent = data.get("agent")
    if agent is not None and not _short_text(agent):
        problem("agent", "expected the agent's name (text)")
    tags = data.get("default_tags", [])
    if not _texts(tags):
        problem("default_tags", "expected a list of tags (text, 1 to 100 characters)")
    for key in ("working_dir", "workspace_ref", "fixture_repo", "fixture_ref"):
        if key in data and not _short_text(data[key], 4096):
            problem(key, "expected text (1 to 4,096 characters)")
    isolation = data.get("workspace_isolation")
    if isolation is not None:
        if not _short_text(isolation):
            problem("workspace_isolation", "expected text")
        elif isolation not in ISOLATED:
            found.warnings.append(
                f"{path}: workspace_isolation {isolation[:40]!r}: bat gives every episode a "
                "working copy of its own (a clone or a copy), whatever this says"
            )
    if "working_dir" in data and "fixture_repo" in data:
        problem("fixture_repo", "working_dir and fixture_repo are exclusive: give one")
    if "fixture_ref" in data and "fixture_repo" not in data:
        problem("fixture_ref", "fixture_ref needs fixture_repo")
    if "workspace_ref" in data and "working_dir" not in data:
        problem("workspace_ref", "workspace_ref needs working_dir")
    workspace: dict[str, Any] = {}
    if len(found.problems) == before:
        workspace = _workspace(folder, data, problem, found)
    if len(found.problems) != before:
        return None
    return {"agent": agent, "default_tags": list(tags), "workspace": workspace}


def _workspace(folder: Path, data: dict[str, Any], problem: Any, found: BeltDataset) -> dict:
    """eval.yaml's ``evaluation.agent.workspace`` keys of a group's settings."""
    workspace: dict[str, Any] = {}
    if "working_dir" in data:
        source = (folder / data["working_dir"]).resolve()
        if not source.is_dir():
            problem("working_dir", f"{source} is not a folder")
        workspace["source"] = str(source)
        if "workspace_ref" in data:
            workspace["ref"] = data["workspace_ref"]
    elif "fixture_repo" in data:
        repo = data["fixture_repo"]
        workspace["source"] = repo if _URL.match(repo) else str((folder / repo).resolve())
        if "fixture_ref" in data:
            workspace["ref"] = data["fixture_ref"]
    else:
        problem(
            "working_dir",
            "missing: a group names its workspace, with working_dir (a folder, relative to "
            "the group) or fixture_repo",
        )
    resources = data.get("resources", [])
    if not isinstance(resources, list) or len(resources) > 1000:
        problem("resources", "expected a list (at most 1,000) of {kind, source, dest, version}")
        return workspace
    listed = []
    for index, item in enumerate(resources):
        where = f"resources[{index}]"
        if not isinstance(item, dict):
            problem("resources", f"{where}: expected {{kind, source, dest, version}}")
            continue
        for key in sorted(set(item) - set(RESOURCE_KEYS), key=str):
            found.warnings.append(
                f"{folder / CONFIG_FILE}: {where}.{str(key)[:80]}: not a key bat reads, ignored"
            )
        bad = [
            key
            for key in RESOURCE_KEYS
            if (key in ("source", "dest") or key in item) and not _short_text(item.get(key), 4096)
        ]
        if bad:
            problem("resources", f"{where}: {', '.join(bad)}: expected text")
            continue
        source = item["source"]
        resource = {
            "source": source if _URL.match(source) else str((folder / source).resolve()),
            "dest": item["dest"],
        }
        resource.update({key: item[key] for key in ("kind", "version") if key in item})
        listed.append(resource)
    if listed:
        workspace["resources"] = listed
    return workspace


# -- scenario files ----------------------------------------------------------------------


def _scenario(
    root: Path, path: Path, group: str, config: dict[str, Any], found: BeltDataset
) -> dict[str, Any] | None:
    """The bat task of one scenario file (not validated yet: the caller validates every
    task and lists the problems), or None with its problems noted."""
    read = _read_json(root, path, "a belt scenario file", found)
    if read is None:
        return None
    data, text = read
    if not isinstance(data, dict):
        found.problems.append(f"{path}: expected a JSON object (a belt scenario)")
        return None
    lines = json_lines(text)
    before = len(found.problems)

    def problem(key: tuple, message: str) -> None:
        line = lines.get(key)
        where = ".".join(str(part) for part in key) or "(top level)"
        found.problems.append(f"{path}: {where}{f' (line {line})' if line else ''}: {message}")

    for key in sorted(set(data) - SCENARIO_KEYS, key=str):
        found.warnings.append(f"{path}: {str(key)[:80]}: not a key bat reads, ignored")
    name = data.get("name")
    stem = path.name.removesuffix(".json")
    if name != stem:
        shown = repr(name)[:80] if name is not None else "missing"
        problem(("name",), f"{shown}: a scenario's name is its file's name ({stem!r})")
    turns = data.get("turns")
    if not isinstance(turns, list) or not turns:
        problem(("turns",), "expected a list of turns ({message, expect})")
        turns = []
    elif len(turns) > MAX_TURNS:
        problem(("turns",), f"{len(turns)} turns; a scenario has at most {MAX_TURNS}")
        turns = []
    bat_turns = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict):
            problem(("turns", index), "expected {message, expect}")
            continue
        for key in sorted(set(turn) - TURN_KEYS, key=str):
            found.warnings.append(
                f"{path}: turns[{index}].{str(key)[:80]}: not a key bat reads, ignored"
            )
        if "message" not in turn:
            problem(("turns", index), "message: missing")
            continue
        bat_turn = {"message": turn["message"]}
        if "expect" in turn:
            bat_turn["expect"] = turn["expect"]
        bat_turns.append(bat_turn)
    meta = _meta(root, path, data, problem)
    if meta.get("llm_scorer_raw_transcript"):
        found.warnings.append(
            f"{path}: llm_scorer_raw_transcript: bat's judges read the episode as bat "
            "records it, not the CLI's raw output (kept in the run's raw/ folder)"
        )
    tags = data.get("tags", [])
    if not _texts(tags):
        problem(("tags",), "expected a list of tags (text, 1 to 100 characters)")
        tags = []
    if not bat_turns or (len(found.problems) != before and len(bat_turns) != len(turns)):
        return None
    # A wrong name or meta still gives a task, so that its turns' problems (an unknown
    # expect field) are listed too; the problems noted make the load fail all the same.
    task_id = f"{group}/{stem}" if group else stem
    found.sources[task_id] = (path, text)
    return {
        "id": task_id,
        "turns": bat_turns,
        "tags": list(dict.fromkeys([*config["default_tags"], *tags])),
        "meta": meta,
    }


def _meta(root: Path, path: Path, data: dict[str, Any], problem: Any) -> dict[str, Any]:
    """What the judges read of a scenario: its description, instruction, evidence."""
    meta: dict[str, Any] = {"belt_scenario": path.name}
    if "description" in data:
        if isinstance(data["description"], str):
            meta["description"] = data["description"]
        else:
            problem(("description",), "expected text")
    instruction = data.get(INSTRUCTION_KEY)
    if instruction is not None:
        why = instruction_problem(instruction)
        if why:
            problem((INSTRUCTION_KEY,), why)
        else:
            meta[INSTRUCTION_KEY] = instruction
    raw = data.get("llm_scorer_raw_transcript")
    if raw is not None:
        if not isinstance(raw, bool):
            problem(("llm_scorer_raw_transcript",), "expected true or false")
        else:
            meta["llm_scorer_raw_transcript"] = raw
    evidence = data.get(EVIDENCE_KEY)
    if evidence is not None:
        texts = read_evidence(root, path.parent, evidence, problem, named_from=path.name)
        if texts:
            meta[EVIDENCE_KEY] = texts
    return meta


def _short_text(value: Any, limit: int = 200) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and "\x00" not in value


def _texts(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= 100 and all(_short_text(v, 100) for v in value)


# -- the problems of the tasks themselves --------------------------------------------------


def task_problems(found: BeltDataset, task_id: str, exc: ValidationError) -> list[str]:
    """One line per error of a scenario's task, at the scenario file's key path (the
    task's ``id`` is the scenario's ``name``, its ``meta`` keys are the scenario's)."""
    path, text = found.sources[task_id]

    def fix(loc: tuple) -> tuple:
        if loc[:1] == ("id",):
            return ("name",)
        if loc[:1] == ("meta",):
            return loc[1:]
        return loc

    return validation_problems(path, text, exc, fix_path=fix, lines=json_lines(text))


def raise_problems(root: Path, problems: list[str]) -> None:
    if problems:
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"... and {integer(len(problems) - MAX_PROBLEMS)} more")
        raise InputError(f"{root} has {counted(len(problems), 'problem')}", details=shown)


# belt's agent names that bat's presets spell otherwise.
AGENT_NAMES = {"claude": "claude-code", "gemini-cli": "gemini", "qwen": "qwen-code"}


def group_agents(root: Path) -> dict[str, list[str]]:
    """bat's adapter name of each agent the groups under ``root`` name, with the groups
    naming it (only the ``_config.json`` files are read: eval.yaml's loader asks)."""
    from bat.input_files import load_json

    agents: dict[str, list[str]] = {}
    for folder in _group_folders(root):
        try:
            data = load_json(folder / CONFIG_FILE, kind="a belt group's _config.json")
        except InputError:
            continue  # said with every other problem when the dataset is read
        name = data.get("agent") if isinstance(data, dict) else None
        if isinstance(name, str) and name.strip():
            name = AGENT_NAMES.get(name.strip(), name.strip())
            agents.setdefault(name, []).append(folder.relative_to(root).as_posix() or ".")
    return agents
