"""``eval.gate --save``: a what-if's gates made the run's record, with the report that shows it.

A run's gates are those it ran with (``eval.run``, ``eval.merge`` and ``eval.judge``
write gates.json in their chain, and draw the report after it). ``bat eval.gate`` on
its own only answers a what-if: it prints the table and its exit status and writes
nothing. With ``--save`` its answer replaces the run's gates, and every place that shows
them must then say the same: the exports and the viewer read gates.json when asked, but
report.html holds a copy, so the report of the folder the run is in (the one ``eval.run``
draws) is drawn again right after gates.json is replaced, both atomically. A folder
without a report (``eval.charts: false``) gets none: nothing there contradicts the new
gates. The charts are reused as drawn (only the gates changed), so this takes a moment.
"""

from __future__ import annotations

from pathlib import Path

from bat.evaluation.log.gates import GatesFile
from bat.evaluation.present import gates
from bat.evaluation.present.plot.report import REPORT_FILE
from bat.secrets import Scrubber


def save(run_dir: Path, result: GatesFile, scrubber: Scrubber) -> list[Path]:
    """Write ``result`` as the run's gates.json and redraw the report beside the run when
    there is one; returns the files written."""
    written = [gates.write(run_dir, result, scrubber)]
    report = run_dir.parent / REPORT_FILE
    if report.is_file():
        from bat.evaluation.present.plot.render import plot_folder

        plot_folder(run_dir.parent, scrubber=scrubber)
        written.append(report)
    return written
