"""The evaluation engine: datasets of multi-turn tasks run k times against a live A2A agent.

Plain library code (no Invoke). Every stage reads and writes files in one run directory,
through one layer that owns it (``log``: names, typed versioned files, the one reader of
episodes), so stages are independent, re-runnable and an interrupted run loses nothing.
Modules, in pipeline order: ``config``, ``variables``, ``dataset`` and
``output_regex`` (inputs; every file is read through ``bat.input_files``),
``agent_settings`` (what the agent's own files say), ``agent_process`` and
``agent_watchdog`` (start, stop, restart the agent; it never outlives bat),
``secrets`` (what must never be written or printed), ``agent_card`` and ``adapter``
(find the card, talk A2A over any binding), ``turn_events`` (a turn's events as its
answer and trace, the same over every binding, streaming or not), ``failures`` (agent
errors apart from infrastructure failures), ``spans`` (traces from span files),
``runner`` (episodes, concurrently, surviving crashes),
``model_run`` and ``pipeline`` (the stages), ``verdict`` (deterministic checks),
``metrics`` (every statistic, computed once), ``judging``, ``plot`` (charts and the
report, which only read), ``compare``, and ``schemas`` (JSON Schemas of every file).
"""
