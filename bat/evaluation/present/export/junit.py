"""JUnit XML: the test report every CI server reads (``--to junit:PATH``).

One ``<testsuite>`` per model (its label), one ``<testcase>`` per task (``classname``
the model's label, ``name`` the task id, ``time`` the sum of its episodes' wall times).
A task passes when every attempt bat could observe passed. Otherwise:

* ``<error>`` when every attempt was an infrastructure failure (bat could not observe
  the agent: the task says nothing about it);
* ``<failure>`` otherwise, its message the failed attempts' reasons (attempt number and
  reasons; an agent error names its class, e.g. ``agent error rate_limited``).

The suite's ``<properties>`` carry the model's figures (pass rate, pass@k, pass^k for
every k, infrastructure failures, agent errors, judge means; for a model with simulated
users, the figures of its conversations, named as gates name them: ``conversation.pass^3``,
``conversation.turns.p90``, ``conversation.goal_met``; for a run that priced its
episodes, what they cost, named as gates name them: ``cost.total``,
``cost.per_episode.p90``, ``cost.per_pass``, with ``cost.currency`` and, when some part
had no price, ``cost.unpriced``: the total is then a lower bound). The JUnit schema has
no properties of a test case: each attempt's cost is under its line in ``system-out``. The
layout follows the Jenkins/Ant JUnit schema (``tests/data/junit.xsd`` checks it).
Everything an agent wrote is escaped, and characters XML cannot hold (most control
characters) are removed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from bat.evaluation.log.outcome import row_outcome
from bat.evaluation.log.summary import CostFigures, EpisodeRow, TaskSummary
from bat.evaluation.present import conversation
from bat.evaluation.present.cost_view import amount
from bat.evaluation.present.export.data import ModelData, RunData
from bat.figures import counted, seconds

# XML 1.0's Char production: everything else cannot appear in a document, escaped or not.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MESSAGE_LIMIT = 1000  # characters of a message attribute (the element's text has all)
OUTPUT_LIMIT = 2000  # characters of an answer quoted in system-out


def xml_text(text: object) -> str:
    """``text`` with every character XML 1.0 cannot hold removed and line ends made
    ``\n`` (a parser turns a raw ``\r`` into one anyway); escaping ``&``, ``<``, ``>``
    and quotes is the serializer's."""
    return _NOT_XML.sub("", str(text)).replace("\r\n", "\n").replace("\r", "\n")


class JUnitExporter:
    """JUnit XML: a test suite per model, a test case per task (CI servers read it)."""

    def __call__(self, run: RunData, path: Path) -> None:
        from bat.evaluation.present.export import write_text

        write_text(path, render(run))


def render(run: RunData) -> str:
    """The JUnit XML document of ``run``."""
    root = ET.Element("testsuites", name=xml_text(f"bat eval {run.run_id}"))
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for n, model in enumerate(run.models):
        suite = _suite(run, model, n)
        root.append(suite)
        for key in ("tests", "failures", "errors"):
            totals[key] += int(suite.get(key, "0"))
        totals["time"] += float(suite.get("time", "0"))
    for n, entry in enumerate(run.unevaluated, start=len(run.models)):
        suite = ET.SubElement(
            root, "testsuite", name=xml_text(entry.label), tests="1", failures="0", errors="1"
        )
        suite.set("skipped", "0")
        suite.set("time", "0")
        suite.set("id", str(n))
        case = ET.SubElement(suite, "testcase", name="(model run)", classname=xml_text(entry.label))
        case.set("time", "0")
        reason = entry.reason or f"status {entry.status}"
        error = ET.SubElement(
            case,
            "error",
            message=_message(f"the model could not be evaluated: {reason}"),
            type="model_not_evaluated",
        )
        error.text = xml_text("\n".join([reason, *entry.log_tail]))
        totals["tests"] += 1
        totals["errors"] += 1
    for key in ("tests", "failures", "errors"):
        root.set(key, str(totals[key]))
    root.set("time", _seconds(totals["time"]))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _suite(run: RunData, model: ModelData, index: int) -> ET.Element:
    suite = ET.Element("testsuite", name=xml_text(model.label))
    failures = errors = 0
    time = 0.0
    properties = ET.SubElement(suite, "properties")
    for name, value in _properties(run, model):
        ET.SubElement(properties, "property", name=xml_text(name), value=xml_text(value))
    for task in model.tasks:
        rows = model.task_rows(task.task_id)
        case, outcome = _case(model, task, rows)
        suite.append(case)
        failures += outcome == "failure"
        errors += outcome == "error"
        time += float(case.get("time", "0"))
    suite.set("tests", str(len(model.tasks)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", "0")
    suite.set("time", _seconds(time))
    suite.set("id", str(index))
    if run.record is not None and (stamp := _timestamp(run.record.started_at)):
        suite.set("timestamp", stamp)
    if run.unreadable:
        out = ET.SubElement(suite, "system-out")
        out.text = xml_text("episode files that could not be read:\n" + "\n".join(run.unreadable))
    return suite


def _case(model: ModelData, task: TaskSummary, rows: list[EpisodeRow]) -> tuple[ET.Element, str]:
    """The test case of one task and its outcome: ``passed``, ``failure`` or ``error``."""
    case = ET.Element("testcase", name=xml_text(task.task_id), classname=xml_text(model.label))
    case.set("time", _seconds(sum(row.wall_time_s for row in rows)))
    outcomes = [(row, row_outcome(row)) for row in rows]
    observed = [(row, o) for row, o in outcomes if o.word != "infra"]
    failed = [(row, o) for row, o in observed if not o.passed]
    outcome = "passed"
    if rows and not observed:
        outcome = "error"
        lines = [f"attempt {row.attempt}: {model.reason(row)}" for row in rows]
        kinds = sorted({o.infra or "" for _, o in outcomes})
        element = ET.SubElement(
            case,
            "error",
            message=_message(
                f"every attempt ({len(rows)}) failed for infrastructure reasons: {lines[0]}"
            ),
            type="infrastructure." + "+".join(kinds),
        )
        element.text = xml_text("\n".join(lines))
    elif failed or not rows:
        outcome = "failure"
        lines = [f"attempt {row.attempt}: {model.reason(row)}" for row, _ in failed]
        kinds = sorted({o.agent_error for _, o in failed if o.word == "error"})
        kind = "verdict"
        if kinds and len(kinds) == 1 and all(o.word == "error" for _, o in failed):
            kind = f"agent_error.{kinds[0]}"
        elif kinds:
            kind = "verdict+agent_error"
        tried = counted(len(observed), "attempt")
        headline = f"{len(failed)} of {tried} failed" if rows else "not run"
        element = ET.SubElement(
            case, "failure", message=_message("; ".join([headline, *lines])), type=kind
        )
        element.text = xml_text("\n".join(lines))
    out = ET.SubElement(case, "system-out")
    out.text = xml_text("\n".join(_attempt_line(model, row) for row in rows))
    return case, outcome


def _attempt_line(model: ModelData, row: EpisodeRow) -> str:
    """One attempt as the CI server shows it under the test case."""
    verdict = "passed" if row_outcome(row).passed else "failed"
    line = f"attempt {row.attempt}: {verdict} (status {row.status}, {seconds(row.wall_time_s)})"
    reason = model.reason(row)
    if reason:
        line += f": {reason}"
    episode = model.episode(row)
    if episode is not None and episode.final_output:
        answer = xml_text(episode.final_output)
        if len(answer) > OUTPUT_LIMIT:
            answer = answer[:OUTPUT_LIMIT] + f"... ({len(answer)} characters)"
        line += "\n  answer: " + answer.replace("\n", "\n  ")
    if row.cost is not None:
        line += f"\n  cost: {amount(row.cost.total, row.cost)}"
        if row.cost.unpriced:
            line += f" (no price for {', '.join(row.cost.unpriced)})"
    return line


def _properties(run: RunData, model: ModelData) -> list[tuple[str, str]]:
    totals = model.summary.totals
    found: list[tuple[str, object]] = [
        ("run_id", run.run_id),
        ("model", model.label),
        ("provider", model.provider),
        ("model_name", model.model_name),
        ("k", model.summary.k),
        ("tasks", totals.tasks),
        ("attempts", totals.attempts),
        ("passed", totals.passed),
        ("failed", totals.failed),
        ("pass_rate", round(totals.success_percentage / 100, 4)),
    ]
    if totals.success_ci95:
        found += [
            ("pass_rate_ci95_low", totals.success_ci95[0]),
            ("pass_rate_ci95_high", totals.success_ci95[1]),
        ]
    found += [("pass_at_k", totals.pass_at_k), ("pass_hat_k", totals.pass_hat_k)]
    found += [(f"pass@{k}", value) for k, value in totals.pass_at.items()]
    found += [(f"pass^{k}", value) for k, value in totals.pass_hat.items()]
    found += [
        ("infra_failures", totals.infra_failures),
        *((f"infra_failures.{kind}", n) for kind, n in totals.infra_failures_by_kind.items() if n),
        ("agent_errors", totals.agent_errors_total),
        *((f"agent_errors.{kind}", n) for kind, n in totals.agent_errors.items() if n),
        ("vacuous_passes", totals.vacuous_passes),
    ]
    found += [(f"judge.{name}", stats.mean) for name, stats in (totals.judge or {}).items()]
    if model.summary.conversation is not None:
        found += conversation.figures(model.summary.conversation)
    if model.summary.cost is not None:
        found += cost_properties(model.summary.cost)
    if run.record is not None:
        found += [
            ("dataset_sha256", run.record.dataset_sha256),
            ("bat_version", run.record.versions.get("bat-cli")),
        ]
    return [(name, "" if value is None else str(value)) for name, value in found]


def cost_properties(cost: CostFigures) -> list[tuple[str, object]]:
    """A model's cost as properties, named as its gates are (``cost.per_episode.p90``);
    ``cost.unpriced`` names the models with no price (then every amount is a lower bound)."""
    found: list[tuple[str, object]] = [
        ("cost.currency", cost.currency),
        ("cost.total", cost.total),
        ("cost.agent", cost.agent),
        ("cost.user", cost.user),
        ("cost.judge.total", cost.judge),
        ("cost.episodes", cost.episodes),
    ]
    found += [(f"cost.per_episode.{name}", value) for name, value in cost.per_episode]
    found += [("cost.per_pass", cost.per_pass)]
    if cost.unpriced:
        found += [
            ("cost.unpriced_episodes", cost.unpriced_episodes),
            ("cost.unpriced", ", ".join(cost.unpriced)),
        ]
    return found


def _message(text: str) -> str:
    """A one-line message attribute, at most :data:`MESSAGE_LIMIT` characters."""
    line = " ".join(xml_text(text).split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 3] + "..."


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _timestamp(iso: str) -> str | None:
    """``2026-12-02T00:57:16`` (UTC, no zone: the schema's pattern) of run.json's time."""
    match = re.match(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})", iso or "")
    return match.group(1) if match else None
