"""The run log: bat's run folder as typed, versioned files (see ``layout`` for the names).

Every stage, chart, report and comparison reads and writes a run through this package:

* ``layout``   every file and folder name of a run folder, and nothing else does;
* ``run``      ``run.json`` and the run folder (find, make, check for links);
* ``episode``  one episode file (``bat.episode/2``), judge scores included;
* ``scores``   the judges' scores an episode file holds (the judges fill them in);
* ``outcome``  what an episode came to (infrastructure failure, pass, agent error,
  failure) and why an agent failed: decided once, for every reader;
* ``summary``  ``summary.json`` and ``metrics.json`` (``bat.summary/2``, ``bat.metrics/2``);
* ``store``    reading and writing them: one reader of episodes, atomic writes, older
  versions and bat-cli 2026.10's files read as today's;
* ``batcli``   bat-cli 2026.10's run folders, read and re-judged in their own format,
  and described as a run (``read_record``) for the viewer;
* ``batcli_errors``  what a bat-cli ``final_status: "error"`` episode was: the agent's
  failure or an infrastructure failure (``error_of``).
"""

# The modules a plugin or script reads a run with (docs/reuse.md; tests/test_reuse.py);
# the others are bat's own writers and readers, and may change. An exporter gets the run
# already read: bat.evaluation.present.export.RunData.
__all__ = ["episode", "run", "scores", "summary"]
