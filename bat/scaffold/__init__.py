"""Scaffolding: agent projects and client modules from Jinja2 templates, ``.env`` updates.

Plain library code (no Invoke), used by the ``init``, ``add`` and ``set`` task modules.
"""
