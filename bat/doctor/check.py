"""One check's result, and how doctor prints a list of them (as lines or as JSON).

A check is ``ok``; ``fail`` (a required check: doctor exits 1); ``warn`` (it failed, but
what it checks is not required for what you asked: printed with ``!``); ``skip`` (not
applicable here, ``–``); or ``info`` (a fact worth listing, such as an exporter).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from bat.figures import counted

STATUSES = ("ok", "fail", "warn", "skip", "info")
MARKS = {"ok": "✓", "fail": "✗", "warn": "!", "skip": "–", "info": "·"}
ASCII_MARKS = {"ok": "+", "fail": "x", "warn": "!", "skip": "-", "info": "*"}


@dataclass(frozen=True)
class Check:
    """``name`` (a stable identifier), its status, one line of detail, one line of fix."""

    name: str
    status: str
    detail: str
    fix: str = ""
    required: bool = True

    def scrubbed(self, scrub: Callable[[str], str]) -> Check:
        """This check with ``scrub`` applied to what it says (no key is ever printed)."""
        return replace(self, detail=scrub(self.detail), fix=scrub(self.fix))

    @property
    def ok(self) -> bool:
        """Nothing wrong: passed, not applicable, or a fact."""
        return self.status in ("ok", "skip", "info")

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "ok": self.ok,
            "required": self.required,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix if not self.ok else "",
        }


def passed(name: str, detail: str, *, required: bool = True) -> Check:
    return Check(name, "ok", detail, required=required)


def failed(name: str, detail: str, fix: str, *, required: bool = True) -> Check:
    """A failed check: ``fail`` when required, else a warning."""
    return Check(name, "fail" if required else "warn", detail, fix, required=required)


def skipped(name: str, detail: str) -> Check:
    return Check(name, "skip", detail, required=False)


def info(name: str, detail: str) -> Check:
    return Check(name, "info", detail, required=False)


def render(checks: list[Check], stream: TextIO | None = None) -> str:
    """The checks as lines: ``✓ name: detail`` and, under a failure, ``fix: ...``."""
    marks = MARKS if _can_print(stream or sys.stdout, "✓✗–·") else ASCII_MARKS
    lines = []
    for check in checks:
        lines.append(f"{marks[check.status]} {check.name}: {check.detail}")
        if not check.ok and check.fix:
            lines.append(f"    fix: {check.fix}")
    problems = [c for c in checks if c.status == "fail"]
    warnings = [c for c in checks if c.status == "warn"]
    if problems:
        failures = counted(len(problems), "required check")
        lines.append(f"{failures} failed, {counted(len(warnings), 'warning')}")
    else:
        lines.append(f"every required check passed, {counted(len(warnings), 'warning')}")
    return "\n".join(lines)


def render_json(checks: list[Check]) -> str:
    return json.dumps([check.as_json() for check in checks], indent=2, ensure_ascii=False)


def _can_print(stream: TextIO, text: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


@dataclass(frozen=True)
class Options:
    """What doctor looks at: the folder, eval.yaml, and the image settings of bat build."""

    cwd: Path
    eval_file: Path = Path("eval/eval.yaml")
    host: str | None = None  # --host (or images.host): the SSH host of a remote build
    build: bool = False  # --build: the Docker checks are required, not warnings
    # bat's configured image keys (``docker.registry``, ``images.context``, ...), as
    # ``bat build`` reads them from the Invoke configuration.
    configured: dict[str, Any] = field(default_factory=dict)
