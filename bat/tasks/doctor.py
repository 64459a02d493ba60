"""``bat doctor``: check this machine and folder for what would make bat fail.

Thin: it gathers the flags and bat's configured image settings and calls
:func:`bat.doctor.run_doctor`, then prints (lines, or JSON with ``--json``).
"""

from __future__ import annotations

from invoke import Context

from bat.tasks._options import command, setting


@command(
    help={
        "json": "Print the checks as a JSON list of {name, ok, required, status, detail, fix}.",
        "host": "[USER@]HOST[:PORT]: also check that this build host's SSH key is known.",
        "build": "Require what bat build/push need (the Docker checks fail, not warn).",
    },
)
def doctor(c: Context, json: bool = False, host: str | None = None, build: bool = False) -> None:
    """Check Python, uv, the agent project, eval.yaml, models, judges, Docker: say what
    would fail and how to fix it. Exit 1 when a required check fails."""
    from pathlib import Path

    from bat.doctor import Options, exit_code, run_doctor
    from bat.doctor.check import render, render_json
    from bat.doctor.images import configured_keys
    from bat.errors import OperationError
    from bat.tasks.images import DEFAULTS as IMAGE_DEFAULTS
    from bat.terminal import safe

    options = Options(
        cwd=Path.cwd(),
        eval_file=Path(setting(c, None, "eval.file", "eval/eval.yaml")),
        host=host or setting(c, None, "images.host", None),
        build=build,
        configured=configured_keys(lambda key, d: setting(c, None, key, d), IMAGE_DEFAULTS),
    )
    checks = run_doctor(options)
    print(safe(render_json(checks) if json else render(checks)))
    if exit_code(checks):
        from bat.figures import counted

        failing = [check.name for check in checks if check.status == "fail"]
        raise OperationError(
            f"doctor: {counted(len(failing), 'required check')} failed: {', '.join(failing)}"
        )


# What another project's tasks.py may import (docs/reuse.md; tests/test_reuse.py).
__all__ = ["doctor"]
