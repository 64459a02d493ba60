"""The one rule by which a task filter names tasks, wherever bat takes one: ``eval.run
--task``, ``eval.plot --filter``, a gate's task selector and the viewer's task filter.

Why one rule: a filter that is a glob in one command and a substring in the next gives a
user two different sets of tasks for the same words. The rule:

* A filter with a glob character (``*``, ``?`` or ``[``) is a glob over the whole task id,
  case-sensitive (:func:`fnmatch.fnmatchcase`): ``t0*`` keeps ``t00`` and ``t07``, not
  ``at0``.
* A plain word (no glob character) keeps the task of exactly that id, when one of the
  tasks known has it; when none has, it is read as ``*WORD*``: every task whose id holds
  the word (``login`` keeps ``login-ok`` and ``bad-login``). So a plain task id always
  names that task alone, and a plain word still narrows as ``eval.plot --filter`` did.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from fnmatch import fnmatchcase

GLOB_CHARACTERS = frozenset("*?[")


def is_glob(text: str) -> bool:
    """Whether ``text`` has a glob character (else it is a plain word)."""
    return any(char in GLOB_CHARACTERS for char in text)


def task_matcher(pattern: str, known: Collection[str]) -> Callable[[str], bool]:
    """The test ``pattern`` makes of a task id, given the ids of every task ``known`` (the
    dataset's, the run's, the charts'): see the module's docstring."""
    if is_glob(pattern):
        return lambda task_id: fnmatchcase(task_id, pattern)
    if pattern in known:
        return lambda task_id: task_id == pattern
    return lambda task_id: pattern in task_id


def matching(pattern: str | None, tasks: Collection[str]) -> list[str]:
    """The ids of ``tasks`` that ``pattern`` keeps, in their order (no pattern: all)."""
    if not pattern:
        return list(tasks)
    keep = task_matcher(pattern, tasks)
    return [task_id for task_id in tasks if keep(task_id)]
