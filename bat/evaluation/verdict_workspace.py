"""belt's workspace checks of the verdict: what a command-line agent did to its workspace.

Each check of a :class:`~bat.evaluation.inputs.dataset.WorkspaceExpect` becomes one or
more :class:`Check`, read from the episode alone (the verdict is a pure function of the
episode file, so a run can be judged again later):

* ``tools_invoked``: one check per name, over the tool calls (any agent's);
* ``files_modified_any``: one check, passing when any listed path was created or
  modified (a deleted file does not count);
* ``files_created`` / ``files_unchanged``: one check per path;
* ``file_contains``: one check per (path, text), on the copy of the file the workspace
  record holds (read after the last turn);
* ``diff_contains``: one check per text, in the diff against the workspace's start;
* ``has_reply``: one check, on the answer's text;
* ``command_succeeds``: one check per command, from its run after the last turn.

A path may be a glob (``tests/test_*.py``, matched as :func:`fnmatch.fnmatchcase` does:
``*`` also crosses ``/``). An episode without a workspace record (an A2A agent's) fails
each check that reads the workspace, saying so; ``tools_invoked`` and ``has_reply`` read
the trace and work for any agent.

A turn's ``expect`` (:class:`Scope` of one turn) is checked against that turn only: its
reply, the tool calls made in it (``ToolCall.turn``), its changes and its diff. There is
one copy of each file and one run of each command, after the last turn, so a turn's
``file_contains`` and ``command_succeeds`` read the final workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from bat.evaluation.inputs.dataset import WorkspaceExpect
from bat.evaluation.log.episode import (
    Check,
    EpisodeResult,
    FileChanges,
    ToolCall,
    WorkspaceRecord,
)

NO_WORKSPACE = "the agent has no workspace (only a command-line agent's episode records one)"
_QUOTED = 80  # characters of a text or command quoted in a detail


@dataclass(frozen=True)
class Scope:
    """What a set of checks reads: the whole episode, or one turn of it."""

    label: str  # "" for the episode, "turn 2: " for a turn
    reply: str
    tool_calls: list[ToolCall]
    changes: FileChanges | None  # None: no workspace was recorded
    git_diff: str | None
    diff_truncated: bool
    workspace: WorkspaceRecord | None  # the final record (files, commands)


def episode_scope(episode: EpisodeResult) -> Scope:
    workspace = episode.trace.workspace
    return Scope(
        label="",
        reply=episode.final_output,
        tool_calls=episode.trace.tool_calls,
        changes=None if workspace is None else workspace.changes,
        git_diff=None if workspace is None else workspace.git_diff,
        diff_truncated=workspace is not None and workspace.diff_truncated,
        workspace=workspace,
    )


def turn_scope(episode: EpisodeResult, index: int) -> Scope:
    """Turn ``index`` (0-based) of ``episode``, which must have run. A tool call of no
    known turn counts for the turn when the episode has only one."""
    trace = episode.trace
    turn = trace.turns[index]
    alone = len(trace.turns) == 1
    calls = [
        call
        for call in trace.tool_calls
        if call.turn == index or (call.turn is None and alone and index == 0)
    ]
    workspace = trace.workspace
    changes = turn.changes
    if changes is None and workspace is not None:
        changes = FileChanges()  # a CLI turn that recorded no changes changed nothing
    return Scope(
        label=f"turn {index + 1}: ",
        reply=turn.output,
        tool_calls=calls,
        changes=changes,
        git_diff=turn.git_diff if turn.git_diff is not None or workspace is None else "",
        diff_truncated=False,
        workspace=workspace,
    )


def workspace_checks(want: WorkspaceExpect, scope: Scope) -> list[Check]:
    """The checks of ``want`` against ``scope``, in the order of the fields."""
    checks: list[Check] = []
    names = [call.name for call in scope.tool_calls]
    for tool in want.tools_invoked:
        checks.append(_tool(scope, tool, names))
    if want.files_modified_any:
        checks.append(_modified_any(scope, want.files_modified_any))
    checks += [_created(scope, path) for path in want.files_created]
    checks += [_unchanged(scope, path) for path in want.files_unchanged]
    for path, texts in want.file_contains.items():
        checks += [_file_contains(scope, path, text) for text in texts]
    checks += [_diff_contains(scope, text) for text in want.diff_contains]
    if want.has_reply is not None:
        checks.append(_has_reply(scope, want.has_reply))
    checks += [_command(scope, check.run) for check in want.command_succeeds]
    return checks


def _check(scope: Scope, name: str, passed: bool, detail: str) -> Check:
    return Check(name=scope.label + name, passed=passed, detail=scope.label + detail)


def _tool(scope: Scope, tool: str, names: list[str]) -> Check:
    count = names.count(tool)
    if count:
        return _check(scope, "tools_invoked", True, f"tools_invoked: {tool} called {count}×")
    seen = ", ".join(dict.fromkeys(names)) or "no tool"
    return _check(scope, "tools_invoked", False, f"tools_invoked: {tool} not called ({seen} was)")


def _matches(pattern: str, paths: list[str]) -> list[str]:
    if any(char in pattern for char in "*?["):
        return [path for path in paths if fnmatchcase(path, pattern)]
    return [path for path in paths if path == pattern]


def _no_workspace(scope: Scope, name: str, what: str) -> Check:
    return _check(scope, name, False, f"{what}: {NO_WORKSPACE}")


def _modified_any(scope: Scope, patterns: list[str]) -> Check:
    name = "files_modified_any"
    listed = ", ".join(patterns)
    if scope.changes is None:
        return _no_workspace(scope, name, f"{name}: {listed}")
    changed = [*scope.changes.modified, *scope.changes.created]
    hits = [path for pattern in patterns for path in _matches(pattern, changed)]
    if hits:
        return _check(scope, name, True, f"{name}: {', '.join(dict.fromkeys(hits))} changed")
    return _check(scope, name, False, f"{name}: none of {listed} changed")


def _created(scope: Scope, pattern: str) -> Check:
    name = "files_created"
    if scope.changes is None:
        return _no_workspace(scope, name, f"{name}: {pattern}")
    if _matches(pattern, scope.changes.created):
        return _check(scope, name, True, f"{name}: {pattern} created")
    why = " (it existed and was modified)" if _matches(pattern, scope.changes.modified) else ""
    return _check(scope, name, False, f"{name}: {pattern} not created{why}")


def _unchanged(scope: Scope, pattern: str) -> Check:
    name = "files_unchanged"
    if scope.changes is None:
        return _no_workspace(scope, name, f"{name}: {pattern}")
    for kind in ("modified", "created", "deleted"):
        hits = _matches(pattern, getattr(scope.changes, kind))
        if hits:
            return _check(scope, name, False, f"{name}: {', '.join(hits[:5])} {kind}")
    return _check(scope, name, True, f"{name}: {pattern} unchanged")


def _file_contains(scope: Scope, path: str, text: str) -> Check:
    name = f"file_contains:{path}"
    if scope.workspace is None:
        return _no_workspace(scope, name, name)
    files = scope.workspace.files
    if path not in files:
        return _check(scope, name, False, f"{name}: the workspace record holds no copy of it")
    content = files[path]
    if content is None:
        return _check(scope, name, False, f"{name}: no such file")
    if text in content:
        return _check(scope, name, True, f"{name}: contains {_quote(text)}")
    return _check(scope, name, False, f"{name}: missing {_quote(text)}")


def _diff_contains(scope: Scope, text: str) -> Check:
    name = "diff_contains"
    if scope.git_diff is None:
        return _no_workspace(scope, name, f"{name}: {_quote(text)}")
    if text in scope.git_diff:
        return _check(scope, name, True, f"{name}: {_quote(text)} found")
    detail = f"{name}: {_quote(text)} not in the diff"
    if not scope.git_diff:
        detail += " (nothing changed)"
    elif scope.diff_truncated:
        detail += f" (the diff was cut at {len(scope.git_diff):,} characters)"
    return _check(scope, name, False, detail)


def _has_reply(scope: Scope, wanted: bool) -> Check:
    got = bool(scope.reply.strip())
    said = "a reply" if got else "no reply"
    if got == wanted:
        return _check(scope, "has_reply", True, f"has_reply: {said}")
    expected = "one" if wanted else "none"
    return _check(scope, "has_reply", False, f"has_reply: {said}, expected {expected}")


def _command(scope: Scope, command: str) -> Check:
    name = "command_succeeds"
    shown = _quote(command)
    if scope.workspace is None:
        return _no_workspace(scope, name, f"{name}: {shown}")
    run = next((run for run in scope.workspace.commands if run.command == command), None)
    if run is None:
        return _check(scope, name, False, f"{name}: {shown} was not run")
    if run.timed_out or run.exit_code is None:
        detail = f"{name}: {shown} did not end in time ({run.seconds:g} s)"
        return _check(scope, name, False, detail)
    if run.exit_code == 0:
        return _check(scope, name, True, f"{name}: {shown} exited 0")
    last = run.output_tail.strip().splitlines()[-1:] or [""]
    tail = f": {last[0][:200]}" if last[0] else ""
    return _check(scope, name, False, f"{name}: {shown} exited {run.exit_code}{tail}")


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…")
