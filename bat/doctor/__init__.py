"""``bat doctor``: why things will not work, found in about two seconds.

Every check is a small function returning :class:`Check` (or a list of them), and each
calls the same code the commands it speaks for would fail in (``load_config``,
``check_dataset``, ``preflight.check_agent_files``, the ``.env`` readers, ``find_uv``, the
image settings, the Docker connection, the known-hosts lookup), turning its
:class:`~bat.errors.BatError` into a failed check with the error's own words. So doctor
cannot drift into a second, different copy of those rules.

The checks are planned first (reading local files only), then run concurrently: the
slow ones (uv looking for interpreters, TCP connects, the Docker engine) each have a
short timeout, so the whole takes about as long as the slowest of them.

Library code, free of Invoke: ``bat.tasks.doctor`` is the command.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from bat.doctor.check import Check, Options, failed
from bat.errors import BatError

__all__ = ["Check", "Options", "exit_code", "run_doctor"]


# A check to run, with the name it is shown under should it crash.
Planned = tuple[str, Callable[[], "Check | list[Check]"]]


def run_doctor(options: Options) -> list[Check]:
    """Every check, in a fixed order (the order of the documentation)."""
    from bat.doctor import basics, images, project

    found = project.Project.read(options)
    planned: list[Planned] = [
        ("python", basics.python_check),
        ("bat", basics.bat_check),
        ("uv", basics.uv_check),
        (
            "uv python",
            partial(
                basics.uv_python_check,
                found.uv_env(),
                found.uv_cwd(),
                required=found.needs_uv_python(),
            ),
        ),
        *project.plan(found),
        *images.plan(options),
        ("exporters", basics.exporters_check),
    ]
    return [check.scrubbed(found.scrubber.text) for check in _run_all(planned)]


def _run_all(planned: Iterable[Planned]) -> list[Check]:
    """Run the checks concurrently; the results keep the planned order."""
    planned = list(planned)
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(planned)))) as pool:
        futures = [pool.submit(_guarded, name, check) for name, check in planned]
        results: list[Check] = []
        for future in futures:
            results += future.result()
    return results


def _guarded(name: str, check: Callable[[], Check | list[Check]]) -> list[Check]:
    """A check's result(s); a BatError it lets out is a failed check in its own words."""
    try:
        result = check()
    except BatError as exc:
        return [failed(name, _words(exc), "")]
    except Exception as exc:  # a check must never end doctor with a traceback
        return [failed(name, f"could not be checked: {type(exc).__name__}: {exc}", "")]
    return result if isinstance(result, list) else [result]


def _words(exc: BatError) -> str:
    return "; ".join([exc.message, *exc.details])


def exit_code(checks: list[Check]) -> int:
    """1 when a required check failed, else 0 (warnings do not fail)."""
    return 1 if any(check.status == "fail" for check in checks) else 0
