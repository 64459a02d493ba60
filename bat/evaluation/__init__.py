"""The evaluation engine: datasets of multi-turn tasks run k times against a live A2A agent.

Plain library code (no Invoke). Every stage reads and writes files in one run directory
(``rundir``), so stages are independent, re-runnable and an interrupted run loses
nothing. Modules, in pipeline order: ``config`` and ``dataset`` (inputs),
``agent_process`` (start/stop the agent), ``adapter`` and ``spans`` (talk A2A, collect
traces), ``runner`` (episodes, concurrently), ``verdict`` (deterministic checks),
``metrics`` (summary.json, metrics.json).
"""
