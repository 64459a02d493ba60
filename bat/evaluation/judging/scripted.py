"""Judges with a ``script:``: bat's scripted model, served as the judge while a run is judged.

Why: a judge that is a scripted stand-in (a demo, a CI check of the judging wiring, a
test) would otherwise be a server of its own that someone starts first, on a port that
may be taken, and that stays behind when whoever started it is killed. bat serves the
rule file itself (:func:`bat.evaluation.run.scripted_model.serving`, as for a model's
``script:``): on a free port of 127.0.0.1, for the judging only, in a child that ends
when bat does, even on ``kill -9`` (it waits on a pipe of bat's).

Judgements are cached by where they came from; a served script's address changes every
run, so its cache identity is the rule file's content instead: re-judging an unchanged
run with an unchanged script makes no request, and an edited script is asked again.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

from bat.errors import InputError
from bat.evaluation.inputs.config import JudgeSpec


@contextlib.contextmanager
def scripted_judges(
    judges: list[JudgeSpec], base: Path | None, say: Callable[[str], None]
) -> Iterator[tuple[list[JudgeSpec], list[str | None]]]:
    """``judges`` with each scripted one pointed at its script, served for the block, and
    per judge its cache identity (``script:<sha256>``; None: its base URL is)."""
    if not any(spec.script for spec in judges):
        yield judges, [None] * len(judges)
        return
    from bat.evaluation.run.scripted_model import serving

    served: list[JudgeSpec] = []
    identities: list[str | None] = []
    with contextlib.ExitStack() as stack:
        for spec in judges:
            if spec.script is None:
                served.append(spec)
                identities.append(None)
                continue
            path = (base or Path.cwd()) / spec.script
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:  # checked with eval.yaml; gone since
                raise InputError(
                    f"judge {spec.label}: script {spec.script}: {exc.strerror}"
                ) from None
            address = stack.enter_context(serving(path))
            base_url = f"{address}/v1" if spec.provider == "openai" else address
            say(f"judge {spec.label}: scripted by bat from {spec.script} at {base_url}")
            served.append(spec.model_copy(update={"base_url": base_url}))
            identities.append(f"script:{digest}")
        yield served, identities
