"""The agents bat can evaluate: A2A servers, and command-line agents run once per turn.

An *adapter* is how bat talks to one kind of agent. ``a2a`` (the default) speaks A2A to
a server (:mod:`bat.evaluation.run.adapter`). Every other adapter is a :class:`CliAgent`:
bat runs a program for each turn of an episode, in a workspace of the episode's own
(:mod:`bat.agents.workspace`), and reads what the program printed into the episode
format bat already has, so k attempts, verdicts, judges, gates, exports and charts work
for it unchanged. ``command`` runs any program (an argv template per turn); the presets
(``claude-code``, ``codex``, ...) know one real CLI each. Plugins add adapters through
the entry-point group ``bat.agents`` (:mod:`bat.agents.registry`).

This package is Invoke-free and imports nothing heavy at import time.
"""
