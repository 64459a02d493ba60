"""``build_image`` and ``push_image``: one build or push, locally or on a remote host.

Each prints what it does as it happens (see :mod:`bat.images.display`), keeps the full
output in a log file (see :mod:`bat.images.archive`) and either returns what it made or
raises one :class:`~bat.errors.BatError` whose message is the one line to show.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bat.errors import BatError
from bat.figures import seconds
from bat.images.archive import LogFile, context_archive
from bat.images.credentials import Credentials
from bat.images.display import BuildDisplay, PushDisplay
from bat.images.last_build import record_build
from bat.images.remote import RemoteDocker, SshOptions
from bat.images.settings import HostSpec, ImageSettings
from bat.images.stream import BuildTracker, PushTracker


@dataclass(frozen=True)
class BuildOutcome:
    ref: str
    image_id: str
    log: Path
    seconds: float


@dataclass(frozen=True)
class PushOutcome:
    ref: str
    digest: str
    log: Path


def build_image(
    settings: ImageSettings,
    *,
    no_cache: bool = False,
    network: str | None = None,
    host: HostSpec | None = None,
    ssh: SshOptions | None = None,
    stream: TextIO | None = None,
) -> BuildOutcome:
    """Build ``settings.ref`` from its context, on the local engine or on ``host``."""
    from bat.images import engine

    display = BuildDisplay(stream)
    where = f" on {host}" if host else ""
    display.line(f"Building {settings.ref}{where}")
    display.line(
        f"  registry from {settings.registry.source}; repository from {settings.repo.source}; "
        f"version {settings.version.value} from {settings.version.source}"
    )
    started = time.monotonic()
    with LogFile(settings.context, "build") as log:
        log.write(settings.describe())
        log.write(f"context: {settings.context}; engine: {host or engine.engine_address()}")
        tracker = BuildTracker(display, log)
        try:
            if host is not None:
                with (
                    RemoteDocker(host, ssh or SshOptions(), display) as remote,
                    context_archive(settings.context, settings.dockerfile) as archive,
                ):
                    image_id = remote.build(
                        settings, archive, tracker, no_cache=no_cache, network=network
                    )
            else:
                client = engine.connect()
                with context_archive(settings.context, settings.dockerfile) as archive:
                    image_id = engine.build(
                        client, settings, archive, tracker, no_cache=no_cache, network=network
                    )
        except BaseException as exc:
            log.write(f"FAILED: {exc}")
            raise
        finally:
            display.close()
        took = time.monotonic() - started
        log.write(f"built {settings.ref} ({image_id}) in {seconds(took)}")
    short = image_id.removeprefix("sha256:")[:12]
    display.line(f"Built {settings.ref} (image {short}) in {seconds(took)}; log: {log.shown()}")
    try:  # what `eval.run --image` evaluates (bat.images.last_build)
        record_build(settings, image_id, host)
    except (OSError, BatError) as exc:  # the image is built all the same
        display.line(f"  (not recorded as the last build: {getattr(exc, 'message', exc)})")
    return BuildOutcome(settings.ref, image_id, log.path, took)


def push_image(
    settings: ImageSettings,
    *,
    credentials: Credentials | None = None,
    host: HostSpec | None = None,
    ssh: SshOptions | None = None,
    stream: TextIO | None = None,
) -> PushOutcome:
    """Push ``settings.ref`` (already built where it is pushed from) to its registry."""
    from bat.images import engine

    display = PushDisplay(stream)
    where = f" from {host}" if host else ""
    who = f" as {credentials.username}" if credentials else ""
    display.line(f"Pushing {settings.ref}{where}{who}")
    with LogFile(settings.context, "push") as log:
        log.write(f"push {settings.ref}{where}{who}")
        tracker = PushTracker(display, log)
        try:
            if host is not None:
                with RemoteDocker(host, ssh or SshOptions(), display) as remote:
                    digest = remote.push(settings, tracker, credentials)
            else:
                digest = engine.push(engine.connect(), settings, tracker, credentials)
        except BaseException as exc:
            log.write(f"FAILED: {exc}")
            raise
        finally:
            display.close()
        log.write(f"pushed {settings.ref} {digest}")
    display.line(f"Pushed {settings.ref} digest {digest}")
    display.line(f"  pinned: {settings.repository}@{digest}")
    return PushOutcome(settings.ref, digest, log.path)
