"""Episodes of a command-line agent: each in a workspace of its own, one process per turn.

:class:`CliSession` is to a CLI what ``A2ASession`` is to an A2A server: the runner
(:mod:`bat.evaluation.run.runner`) asks it for episodes and gets the same ``Observed``
back, so everything downstream (verdicts, judges, summaries, gates, reports) is the same
for both. For each episode it

1. makes a workspace (:mod:`bat.agents.workspace`) and a private ``HOME``;
2. for each turn, asks the adapter for the command (:class:`~bat.agents.kinds.Invocation`),
   runs it bounded (:mod:`bat.agents.processes`), keeps its raw output beside the
   episode (``raw/STEM.ATTEMPT/turn-N.out``, and ``.stderr``), and has the adapter read it;
   the files the turn changed and its diff are read from the workspace;
3. after the last turn, reads what the task's checks need from the workspace (the final
   diff, the files ``file_contains`` names, the ``command_succeeds`` commands' results),
   so that the verdict is a pure function of the episode file;
4. once the verdict is known, removes the workspace, or keeps it (``keep: failed``, the
   default, keeps those of failed episodes, in ``workspaces/STEM.ATTEMPT``).

A turn that ran out of time is the agent's ``timeout``: a CLI that hangs or retries
forever is the agent's behaviour, not the harness's. A program that cannot be started is
an infrastructure failure (``unreachable``), as an A2A server that does not answer.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bat.agents import workspace as workspaces
from bat.agents.kinds import CliAgent, ModelTarget, TurnInput, TurnOutput
from bat.agents.processes import Ran, run_async
from bat.errors import BatError
from bat.evaluation.log import layout
from bat.evaluation.log.episode import (
    AgentError,
    EpisodeTrace,
    InfraError,
    StatusEvent,
    TurnRecord,
    WorkspaceRecord,
)
from bat.evaluation.run.adapter import Observed, _render

TURN_DIFF_LIMIT = 50_000  # characters of one turn's diff kept in its record
STDERR_KEPT = 2_000
KEEP = ("failed", "always", "never")


class CliSession:
    """Runs episodes of one command-line agent (one model of a run)."""

    def __init__(
        self,
        adapter: CliAgent,
        *,
        options: Mapping[str, Any],
        source: workspaces.Source,
        sources: Mapping[str, workspaces.Source] | None = None,  # by task id (belt groups)
        base: Path,
        model: ModelTarget,
        model_dir: Path,
        keep: str = "failed",
        env: Mapping[str, str] | None = None,
        scrub: Callable[[str], str] | None = None,
    ) -> None:
        self.adapter = adapter
        self.options = dict(options)
        self.source = source
        self.sources = dict(sources or {})
        self.base = base
        self.model = model
        self.model_dir = model_dir
        self.keep = keep
        self.env = dict(env or {})
        self.scrub = scrub or (lambda text: text)
        # What the runner reads of an A2A session: there is no card nor binding here.
        self.card = None
        self.card_document = None
        self.binding = f"{adapter.name} (command line)"
        self.requests_resent = 0

    async def __aenter__(self) -> CliSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def run_episode(
        self,
        turns: list[str],
        *,
        turn_timeout_s: float,
        templates: Any = None,
        work: Any = None,
    ) -> Observed:
        import asyncio

        stem, attempt = (work.task.file_stem, work.attempt) if work else (uuid.uuid4().hex, 1)
        raw = layout.raw_output_dir(self.model_dir, stem, attempt)
        kept = layout.kept_workspace(self.model_dir, stem, attempt)
        session_id = str(uuid.uuid4())
        trace = EpisodeTrace(context_id=session_id)
        started = time.monotonic()
        try:
            source = self.sources.get(work.task.id, self.source) if work else self.source
            space = await asyncio.to_thread(workspaces.make, source, self.base)
        except (BatError, OSError) as exc:
            words = exc.message if isinstance(exc, BatError) else str(exc)
            return _infra(trace, "not_run", f"the workspace could not be made: {words}")
        observed: Observed | None = None
        try:
            if space.resources:  # belt's resource_lock.json, beside the raw output
                _write_lock(raw, space.resources)
            observed = await self._turns(space, turns, turn_timeout_s, templates, raw, trace)
            observed.trace.wall_time_s = round(time.monotonic() - started, 6)
            if observed.infra_error is None:
                expected = work.task.expected if work is not None else None
                extra = getattr(work.task, "turn_expected", None) if work is not None else None
                record = await asyncio.to_thread(self._record, space, expected, extra)
                observed.trace.workspace = record
        except (BatError, OSError) as exc:
            # The workspace failed under the episode (git, a full disk): not the agent's.
            words = exc.message if isinstance(exc, BatError) else str(exc)
            observed = _infra(trace, "crash", f"the workspace failed: {words}")
        finally:
            if observed is None or observed.infra_error is not None:
                space.remove()
        if observed.infra_error is None:
            observed.after_verdict = lambda passed: self._settle(space, kept, passed)
        return observed

    async def _turns(self, space, turns, turn_timeout_s, templates, raw, trace) -> Observed:
        status, output = "working", ""
        agent_error: AgentError | None = None
        started = time.monotonic()
        session: str | None = None
        for index, text in enumerate(turns):
            if templates is not None and templates[index] is not None:
                from bat.evaluation.inputs.turn_templates import RenderError

                try:
                    text = await _render(templates[index], trace.turns, turn_timeout_s)
                except RenderError as exc:
                    problem = f"turn {index + 1} could not be made from its template: {exc}"
                    return _infra(trace, "template", problem, status, output)
            turn = TurnInput(
                message=text,
                index=index,
                session=session,
                workspace=space.path,
                home=space.home,
                model=self.model,
                options=self.options,
                new_session=trace.context_id,
            )
            try:
                invocation = self.adapter.invocation(turn)
                _write_home_files(space.home, invocation.files)
            except (BatError, OSError, ValueError) as exc:
                problem = f"turn {index + 1}: the {self.adapter.name} command: {exc}"
                return _infra(trace, "protocol", problem, status, output)
            turn_started = time.monotonic()
            ran = await run_async(
                invocation.argv,
                cwd=space.path,
                env=self._environment(space, invocation.env),
                timeout_s=turn_timeout_s,
                output=raw / f"turn-{index + 1}.out",
                stdin=invocation.stdin,
            )
            self._scrub_raw(raw, index)
            if ran.missing:
                return _infra(trace, "unreachable", ran.stderr_tail, status, output)
            read = self._read(ran)
            error = _turn_error(read, ran, index, turn_timeout_s)
            before = space.trees[-1]
            after = await _in_thread(space.snapshot)
            changes = await _in_thread(space.changes, before, after)
            diff, _ = await _in_thread(space.diff, before, after)
            for call in read.tool_calls:
                call.turn = index
            trace.tool_calls.extend(read.tool_calls)
            if read.tool_calls:
                trace.tool_source = "stream"
            if read.usage is not None:
                trace.usage = trace.usage.add(read.usage)
                trace.usage_source = "stream"
            status = "error" if error is not None else "completed"
            output = read.reply
            record = TurnRecord(
                input=text,
                status=status,
                output=read.reply,
                time_to_first_event_s=_rounded(ran.first_output_s),
                wall_time_s=round(time.monotonic() - turn_started, 6),
                exit_code=ran.exit_code,
                stderr_tail=ran.stderr_tail[-STDERR_KEPT:],
                changes=changes,
                git_diff=diff[:TURN_DIFF_LIMIT],
                tool_sequence=[call.name for call in read.tool_calls],
            )
            trace.turns.append(record)
            trace.events.append(
                StatusEvent(
                    t=round(time.monotonic() - started, 6),
                    turn=index,
                    kind="message",
                    status="failed" if error else "completed",
                    preview=(error.message if error and not read.reply else read.reply)[:200],
                    input=text,
                )
            )
            session = read.session or session
            if error is not None:
                agent_error = error
                break
        if trace.turns:
            trace.time_to_first_event_s = trace.turns[0].time_to_first_event_s
        return Observed(status=status, final_output=output, trace=trace, agent_error=agent_error)

    def _read(self, ran: Ran) -> TurnOutput:
        """The adapter's reading of a turn; an adapter that fails on odd output says so as
        the turn's error rather than ending bat."""
        try:
            return self.adapter.read(ran.stdout, ran.stderr_tail, ran.exit_code)
        except Exception as exc:  # a plugin's bug must not end the run
            message = f"the {self.adapter.name} adapter could not read the output: {exc}"
            return TurnOutput(error=AgentError(kind="unknown", message=message[:500]))

    def _environment(self, space, extra: Mapping[str, str]) -> dict[str, str]:
        """A small, explicit environment: nothing of bat's own (or the user's shell) leaks
        into the agent but what is named here. The model's address and keys come from the
        run's ``models:`` entry; the adapter's key variables from bat's environment when
        the entry gives none (the user's own subscription)."""
        tmp = space.scratch / "tmp"
        tmp.mkdir(exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(space.home),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TMPDIR": str(tmp),
            "USER": os.environ.get("USER", "bat"),
            "NO_COLOR": "1",
            "CI": "1",
        }
        for name in self.adapter.key_variables:
            if os.environ.get(name):
                env[name] = os.environ[name]
        model = self.model
        env.update(
            {
                "BAT_MODEL": model.model or "",
                "BAT_MODEL_BASE_URL": model.base_url or "",
                "BAT_MODEL_PROVIDER": model.provider or "",
            }
        )
        env.update(self.env)
        env.update(model.env)
        env.update(extra)
        return env

    def _record(self, space, expected: Any, extra: Any) -> WorkspaceRecord:
        """What the checks need of the workspace, read before it goes."""
        first, last = space.trees[0], space.trees[-1]
        diff, cut = space.diff(first, last)
        record = WorkspaceRecord(
            source=space.source.path,
            ref=space.source.ref,
            commit=space.commit,
            changes=space.changes(first, last),
            git_diff=diff,
            diff_truncated=cut,
            resources=list(space.resources),
        )
        wanted = [expected, *(extra or [])] if expected is not None else list(extra or [])
        env = self._environment(space, {})
        for want in wanted:
            if want is None:
                continue
            for path in getattr(want, "file_contains", {}):
                if path not in record.files:
                    record.files[path] = space.read(path)
            for check in getattr(want, "command_succeeds", []):
                if all(run.command != check.run for run in record.commands):
                    record.commands.append(space.run_check(check.run, check.timeout_s, env))
        return record

    def _settle(self, space, kept: Path, passed: bool) -> str | None:
        """Keep or remove the workspace once the verdict is known; where it was kept."""
        if self.keep == "always" or (self.keep == "failed" and not passed):
            try:
                return str(space.keep(kept))
            except OSError:  # shutil.Error too: a workspace that cannot be kept is removed
                pass
        space.remove()
        return None

    def _scrub_raw(self, raw: Path, index: int) -> None:
        """Secrets of the configuration never stay in a raw output file."""
        for path in (raw / f"turn-{index + 1}.out", raw / f"turn-{index + 1}.out.stderr"):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            clean = self.scrub(text)
            if clean != text:
                path.write_text(clean, encoding="utf-8")


def _turn_error(read: TurnOutput, ran: Ran, index: int, timeout_s: float) -> AgentError | None:
    """The turn's agent error: the adapter's reading first; then what the run says."""
    if ran.timed_out:
        return AgentError(
            kind="timeout",
            message=(
                f"turn {index + 1} did not end within {timeout_s:g} s: its processes were stopped"
            ),
        )
    if ran.too_much_output:
        return AgentError(kind="unknown", message=f"turn {index + 1} printed more than 64 MB")
    if ran.interrupted:
        return AgentError(kind="canceled", message="bat was interrupted")
    if read.error is not None:
        return read.error
    if ran.exit_code not in (0, None):
        last = ran.stderr_tail.strip().splitlines()[-1:] or [""]
        return AgentError(
            kind="unknown", message=f"exited with status {ran.exit_code}: {last[0][:300]}"
        )
    return None


def _write_home_files(home: Path, files: Mapping[str, str]) -> None:
    """An adapter's configuration files, written into the private HOME only."""
    root = home.resolve()
    for relative, text in files.items():
        path = (home / relative).resolve()
        path.relative_to(root)  # a ValueError: the adapter named a path outside HOME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _infra(
    trace: EpisodeTrace, kind: str, message: str, status: str = "working", output: str = ""
) -> Observed:
    return Observed(
        status=status,
        final_output=output,
        trace=trace,
        infra_error=InfraError(kind=kind, message=message[:1000]),
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


async def _in_thread(function, *args):
    import asyncio

    return await asyncio.to_thread(function, *args)


def _write_lock(raw: Path, resources: list) -> None:
    """Each resource installed in the workspace, with its sha256 (belt's lock file)."""
    from bat.atomic import json_text, write_text_atomic

    raw.mkdir(parents=True, exist_ok=True)
    locks = [lock.model_dump(mode="json") for lock in resources]
    write_text_atomic(raw / "resource_lock.json", json_text({"resources": locks}, indent=1))
