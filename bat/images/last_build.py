"""What ``bat build`` last built in a context: ``<context>/.bat/last-build.json``.

Why: ``bat eval.run --image`` without a reference evaluates "the image bat build made
here". Worked out again from eval.run's own command line, that is only the tag a build
*without flags* would give now (agent.json's version, or ``git describe``), not the one
a separate ``bat build --version t3`` made a minute earlier: eval.run then looked for
``:0.1.0``. So every build that succeeds records what it built (the reference, the
image id, where the version came from, when, on which engine), written atomically
beside the build logs, and :func:`image_to_evaluate` takes that record. A build earlier
on the same command line (``bat build --version 2 eval.run --image``) still wins: its
flags are known, and it is the build just recorded anyway.

Without a record (nothing built here since this bat, or the record cannot be read),
``eval.run --image`` evaluates the tag a build would give now, and says so: which tag,
from where its version came, and why no record was used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bat.atomic import json_text, write_text_atomic
from bat.errors import InputError
from bat.images.archive import STATE_DIR
from bat.images.settings import HostSpec, ImageSettings
from bat.input_files import load_json

RECORD = "last-build.json"
SCHEMA = "bat.last-build/1"
LIMIT = 64 << 10  # bytes: a record is a few hundred


@dataclass(frozen=True)
class LastBuild:
    """One build, as recorded."""

    ref: str
    image_id: str
    version: str
    version_source: str
    built_at: str  # ISO 8601, UTC
    host: str | None = None  # [user@]host[:port] of a build over SSH; None: the local engine


@dataclass(frozen=True)
class Choice:
    """The image ``eval.run --image`` evaluates, and the line that says why."""

    ref: str
    note: str
    recorded: bool  # False: no record was used (the note is a warning)


def record_path(context: Path) -> Path:
    return context / STATE_DIR / RECORD


def record_build(settings: ImageSettings, image_id: str, host: HostSpec | None) -> Path:
    """Record that ``settings.ref`` (image ``image_id``) was just built; returns the file."""
    build = LastBuild(
        ref=settings.ref,
        image_id=image_id,
        version=settings.version.value,
        version_source=settings.version.source,
        built_at=datetime.now(UTC).isoformat(timespec="seconds"),
        host=str(host) if host is not None else None,
    )
    path = record_path(settings.context)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json_text({"schema": SCHEMA, **asdict(build)}, indent=1))
    return path


def read_last_build(context: Path) -> LastBuild | None:
    """The record of the last build in ``context``; None when there is none. A record
    that cannot be read or is not one is an :class:`InputError` naming the file."""
    path = record_path(context)
    try:
        data = load_json(path, limit=LIMIT, kind="a build record")
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"{path} is not a record of bat build ({SCHEMA})")
    fields = ("ref", "image_id", "version", "version_source", "built_at")
    wrong = [name for name in fields if not isinstance(data.get(name), str) or not data[name]]
    host = data.get("host")
    if host is not None and not isinstance(host, str):
        wrong.append("host")
    if wrong:
        raise InputError(f"{path}: {', '.join(wrong)} missing or not a text")
    return LastBuild(**{name: data[name] for name in fields}, host=host)


def image_to_evaluate(now: ImageSettings) -> Choice:
    """The image ``eval.run --image`` (no reference, no build before it on the command
    line) evaluates in ``now.context``: the last one recorded there, else ``now.ref``
    (the tag a build would give now), with the line that says which and why."""
    path = record_path(now.context)
    try:
        last = read_last_build(now.context)
    except InputError as exc:
        why = f"the build record cannot be used ({exc.message})"
    else:
        if last is not None:
            note = f"--image: evaluating {last.ref}, built last here by bat build ({last.built_at}"
            note += f" on {last.host})" if last.host else ")"
            if last.ref != now.ref:
                note += f"; a build now would tag {now.ref}"
            return Choice(last.ref, note, recorded=True)
        why = f"no build is recorded in {path} (bat build records each one)"
    return Choice(
        now.ref,
        f"--image: {why}; looking for {now.ref}, the tag bat build would give it now "
        f"(version {now.version.value} from {now.version.source})",
        recorded=False,
    )
