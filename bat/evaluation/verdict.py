"""The deterministic verdict: rule-based, reproducible, no LLM.

Each expectation of a task is one independent check; the episode passes only if all
pass, and the reason lists every check in order, e.g.
``status: 'completed'; output: missing 'Paris'; tool_call:search: called 0×, expected ≥1×``,
so a failure says exactly which expectation was not met. ``status: null`` (bat-cli's way)
checks no status. A pass is *vacuous* when nothing but the status was checked, or when the answer
was empty and no check needed the agent to act (call a tool, change a file): it counts,
and the summary says how many there were.

belt's workspace checks (a command-line agent's files, diff and commands) are
:mod:`bat.evaluation.verdict_workspace`; a turn's own ``expect`` is checked against that
turn only, each of its checks named with the turn (``turn 2: files_created: ...``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bat.evaluation.inputs.dataset import TaskExpected, ToolCallExpectation, TurnExpect
from bat.evaluation.inputs.output_regex import REGEX_TIME_LIMIT_S
from bat.evaluation.log.episode import Check, EpisodeResult, ToolCall, Verdict
from bat.evaluation.log.scores import JudgeScores
from bat.evaluation.verdict_workspace import (
    episode_scope,
    turn_scope,
    workspace_checks,
)

ASSERTION_CHECK = "assertion:"  # the name of an assertion's check, with its index


def judge_episode(
    expected: TaskExpected,
    episode: EpisodeResult,
    turn_expected: Sequence[TurnExpect | None] = (),
) -> Verdict:
    """The verdict of ``episode`` against ``expected`` and each turn's own expectations
    ``turn_expected`` (``TaskSpec.turn_expected``), a pure function."""
    if episode.infra_error is not None:
        error = episode.infra_error
        check = Check(
            name="infrastructure",
            passed=False,
            detail=f"infrastructure: {error.kind}: {error.message}",
        )
        return Verdict(passed=False, reason=check.detail, checks=[check])
    trace = episode.trace
    output = episode.final_output
    checks = [] if expected.status is None else [_status(expected.status, episode)]
    checks += [_contains(output, phrase) for phrase in expected.output_must_contain]
    checks += [_not_contains(output, phrase) for phrase in expected.output_must_not_contain]
    if expected.output_regex is not None:
        checks.append(_regex(output, expected.output_regex))
    checks += [_tool_call(want, trace.tool_calls) for want in expected.tool_calls]
    if expected.tool_call_order:
        checks.append(_order(expected.tool_call_order, [call.name for call in trace.tool_calls]))
    if expected.max_model_calls is not None:
        checks.append(_at_most("model_calls", trace.usage.model_calls, expected.max_model_calls))
    if expected.max_tokens is not None:
        checks.append(_at_most("tokens", trace.usage.total_tokens, expected.max_tokens))
    if expected.no_errors:
        checks.append(_no_errors(episode))
    for want in expected.agent_calls:
        count = sum(1 for call in trace.agent_calls if call.name == want.name)
        checks.append(_count(f"agent_call:{want.name}", count, want.times))
    checks += _conversation_checks(expected, trace.turns)
    checks += assertion_checks(expected, episode.scores)
    checks += workspace_checks(expected, episode_scope(episode))
    turn_wants = [(index, want) for index, want in enumerate(turn_expected) if want is not None]
    for index, want in turn_wants:
        checks += _turn_checks(want, episode, index)
    passed = all(check.passed for check in checks)
    checked = expected.checks_beyond_status or any(w.checks_anything for _, w in turn_wants)
    acted = expected.checks_action or any(w.checks_action for _, w in turn_wants)
    return Verdict(
        passed=passed,
        reason="; ".join(check.detail for check in checks) or "no checks",
        checks=checks,
        vacuous=passed and (not checked or (not output.strip() and not acted)),
    )


def assertion_checks(expected: TaskExpected, scores: JudgeScores | None) -> list[Check]:
    """One check per natural-language assertion (``assertion:N``, from 0) when the task
    puts them in its verdict (``assertions_in_verdict``), read back from the judges'
    ``scores``: so re-checking a run (``eval.verdict``) keeps them. One not decided yet
    (the episode not judged, or judged before the assertion was written) or decided by
    no judge fails, with the reason."""
    if not expected.assertions_in_verdict:
        return []
    decided = {}
    if scores is not None:
        decided = {entry.assertion: entry for entry in scores.assertions}
    checks = []
    for index, text in enumerate(expected.assertions):
        name = f"{ASSERTION_CHECK}{index}"
        entry = decided.get(text)
        if entry is None:
            why = scores.error if scores is not None and scores.error else "not judged yet"
            detail = f"{name}: {why} ({text[:80]!r})"
            checks.append(Check(name=name, passed=False, detail=detail))
            continue
        word = {True: "passed", False: "failed", None: "undecided"}[entry.passed]
        reason = " ".join(entry.reason.split())[:300].removeprefix("undecided: ")
        detail = f"{name}: {word} ({text[:80]!r})" + (f": {reason}" if reason else "")
        checks.append(Check(name=name, passed=entry.passed is True, detail=detail))
    return checks


def with_assertions(
    verdict: Verdict,
    expected: TaskExpected,
    episode: EpisodeResult,
    turn_expected: Sequence[TurnExpect | None] = (),
) -> Verdict:
    """``verdict`` with its assertion checks made again from the episode's new scores
    (the judge stage: the other checks, made when the episode ran, are kept as they are,
    even if the dataset changed since; ``eval.verdict`` makes them all again)."""
    if not expected.assertions_in_verdict or episode.infra_error is not None:
        return verdict
    kept = [c for c in verdict.checks if not c.name.startswith(ASSERTION_CHECK)]
    checks = kept + assertion_checks(expected, episode.scores)
    passed = all(check.passed for check in checks)
    acted = expected.checks_action or any(w.checks_action for w in turn_expected if w)
    return Verdict(
        passed=passed,
        reason="; ".join(check.detail for check in checks) or "no checks",
        checks=checks,
        # assertions are checks beyond the status: only an empty answer is vacuous
        vacuous=passed and not episode.final_output.strip() and not acted,
    )


def _turn_checks(want: TurnExpect, episode: EpisodeResult, index: int) -> list[Check]:
    """The checks of turn ``index``'s own ``expect``; one failing check when the episode
    ended before that turn ran."""
    if not want.checks_anything:
        return []
    ran = len(episode.trace.turns)
    if index >= ran:
        label = f"turn {index + 1}"
        detail = f"{label}: not checked: the turn did not run (the episode ended after " + (
            f"turn {ran})" if ran else "no turn)"
        )
        return [Check(name=label, passed=False, detail=detail)]
    scope = turn_scope(episode, index)
    checks = workspace_checks(want, scope)
    if want.no_errors:
        check = _no_errors(episode, index)
        checks.append(check.model_copy(update={"name": scope.label + check.name}))
    return checks


def _status(want: str, episode: EpisodeResult) -> Check:
    got = episode.status
    detail = f"status: {got!r}"
    if episode.agent_error is not None:
        error = episode.agent_error
        detail += f" (agent error {error.kind}: {error.message})"
    elif got == "working" and episode.infra_error is None:
        # A2A ends a turn in a final or interrupted state; an answer that stops while the
        # task still works is the agent's doing (or an agent that needs more time).
        detail += " (the agent's reply ended before the task reached a final state)"
    if want == got:
        return Check(name="status", passed=True, detail=detail)
    return Check(name="status", passed=False, detail=f"{detail}, expected {want!r}")


def _contains(output: str, phrase: str) -> Check:
    ok = phrase in output
    detail = f"output: contains {phrase!r}" if ok else f"output: missing {phrase!r}"
    return Check(name="output_must_contain", passed=ok, detail=detail)


def _not_contains(output: str, phrase: str) -> Check:
    ok = phrase not in output
    detail = f"output: free of {phrase!r}" if ok else f"output: contains forbidden {phrase!r}"
    return Check(name="output_must_not_contain", passed=ok, detail=detail)


def _conversation_checks(expected: TaskExpected, turns: Sequence[Any]) -> list[Check]:
    """``conversation_must_contain`` / ``conversation_must_not_contain``: searched in every
    reply of the agent (a question it asked mid-conversation is not in its last answer)."""
    replies = [turn.output for turn in turns]
    checks = []
    for phrase in expected.conversation_must_contain:
        found = next((n for n, reply in enumerate(replies, 1) if phrase in reply), None)
        detail = (
            f"conversation: contains {phrase!r} (turn {found})"
            if found
            else f"conversation: no reply contains {phrase!r}"
        )
        checks.append(Check(name="conversation_must_contain", passed=bool(found), detail=detail))
    for phrase in expected.conversation_must_not_contain:
        found = next((n for n, reply in enumerate(replies, 1) if phrase in reply), None)
        detail = (
            f"conversation: free of {phrase!r}"
            if found is None
            else f"conversation: turn {found} contains forbidden {phrase!r}"
        )
        checks.append(
            Check(name="conversation_must_not_contain", passed=found is None, detail=detail)
        )
    return checks


def _regex(output: str, pattern: str) -> Check:
    """``regex`` (the engine the dataset was checked with) under a time limit: a pattern
    that backtracks without end (``^(a|aa)+$``) fails its check after the limit instead
    of holding the run, and Ctrl-C, handled between checks, is never held up longer."""
    import regex

    try:
        ok = regex.search(pattern, output, timeout=REGEX_TIME_LIMIT_S) is not None
    except TimeoutError:
        detail = f"output_regex took over {REGEX_TIME_LIMIT_S:g} s on this output: /{pattern}/"
        return Check(name="output_regex", passed=False, detail=detail)
    except (MemoryError, RecursionError, regex.error) as exc:  # not refused on load (old runs)
        detail = f"output_regex could not run ({type(exc).__name__}): /{pattern}/"
        return Check(name="output_regex", passed=False, detail=detail)
    detail = f"output: matches /{pattern}/" if ok else f"output: no match for /{pattern}/"
    return Check(name="output_regex", passed=ok, detail=detail)


def _tool_call(want: ToolCallExpectation, calls: list[ToolCall]) -> Check:
    count = sum(
        1
        for call in calls
        if call.name == want.name and subset_matches(want.args_subset, _args(call))
    )
    name = f"tool_call:{want.name}"
    if want.args_subset:
        name += f"({json.dumps(want.args_subset, sort_keys=True, ensure_ascii=False)})"
    return _count(name, count, want.times)


def _count(name: str, count: int, times: int) -> Check:
    ok = count >= times
    detail = f"{name}: called {count}×" + ("" if ok else f", expected ≥{times}×")
    return Check(name=name.split("(")[0], passed=ok, detail=detail)


def _order(want: list[str], got: list[str]) -> Check:
    remaining = iter(got)
    ok = all(any(name == seen for seen in remaining) for name in want)
    detail = f"tool_call_order: {' → '.join(want)}"
    if not ok:
        detail += f" not found in {' → '.join(got) or 'no calls'}"
    return Check(name="tool_call_order", passed=ok, detail=detail)


def _at_most(name: str, value: int, limit: int) -> Check:
    ok = value <= limit
    return Check(
        name=f"max_{name}", passed=ok, detail=f"{name}: {value} {'≤' if ok else '>'} {limit}"
    )


def _no_errors(episode: EpisodeResult, only: int | None = None) -> Check:
    """No failed tool call and no turn ended in error (of turn ``only``, when given);
    a command-line agent's agent error (its process failed, timed out, said it was
    rate limited) is named too."""
    trace = episode.trace
    calls = [call for call in trace.tool_calls if only is None or _in_turn(call, only, trace)]
    failed_tools = [call.name for call in calls if call.error]
    turns = list(enumerate(trace.turns))
    failed_turns = [
        i + 1 for i, turn in turns if turn.status == "error" and (only is None or i == only)
    ]
    problems = []
    if failed_tools:
        problems.append(f"failed tool calls: {', '.join(failed_tools)}")
    if failed_turns:
        problems.append(f"turns ended in error: {', '.join(map(str, failed_turns))}")
    error = episode.agent_error
    cli = trace.workspace is not None or any(turn.exit_code is not None for turn in trace.turns)
    last = len(trace.turns) - 1
    if error is not None and cli and (only is None or only == last):
        problems.append(f"agent error {error.kind}: {error.message[:200]}")
    label = "" if only is None else f"turn {only + 1}: "
    detail = label + "no_errors: " + ("; ".join(problems) if problems else "none")
    return Check(name="no_errors", passed=not problems, detail=detail)


def _in_turn(call: ToolCall, index: int, trace) -> bool:
    return call.turn == index or (call.turn is None and len(trace.turns) == 1 and index == 0)


def _args(call: ToolCall) -> Any:
    """Arguments as data: span files carry them as a JSON string."""
    if isinstance(call.args, str):
        try:
            return json.loads(call.args)
        except json.JSONDecodeError:
            return call.args
    return call.args


def subset_matches(want: Any, got: Any) -> bool:
    """Whether ``got`` holds ``want``: mappings recursively by key, lists item by item."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(
            key in got and subset_matches(value, got[key]) for key, value in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(subset_matches(w, g) for w, g in zip(want, got, strict=True))
        )
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, int | float) and isinstance(got, int | float):
        return float(want) == float(got)
    return want == got
