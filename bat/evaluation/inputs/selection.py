"""``eval.run --task GLOB --tag T --exclude-tag T --limit N``: which tasks of the dataset run.

A task is chosen when its id matches any ``--task`` glob (none given: every task; the
one rule of :mod:`~bat.evaluation.inputs.task_glob`: a plain word naming no task is
``*WORD*``), it has
every ``--tag`` (as belt reads several tags: all of them), and none of the
``--exclude-tag`` tags; ``--limit`` then keeps the first N in the dataset's order.
Tags are a task's ``tags`` and bat-cli's ``meta.category`` (``TaskSpec.all_tags``).

The selection is recorded in run.json (``selection``) with the number of tasks chosen
and in the dataset, and the run's ``tasks`` list holds the chosen ids, so summaries,
charts and gates cover exactly what ran; ``--resume`` runs the same selection again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bat.errors import UsageError
from bat.evaluation.inputs.dataset import Dataset, TaskSpec
from bat.evaluation.inputs.task_glob import task_matcher


@dataclass(frozen=True)
class Selection:
    tasks: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    limit: int | None = None

    @classmethod
    def of(
        cls,
        tasks: list[str] | None = None,
        tags: list[str] | None = None,
        exclude_tags: list[str] | None = None,
        limit: int | None = None,
    ) -> Selection:
        """From the command line's flags; an empty glob or tag, or a limit under 1, is a
        UsageError naming the flag."""
        for flag, values in (("--task", tasks), ("--tag", tags), ("--exclude-tag", exclude_tags)):
            for value in values or []:
                if not value.strip():
                    raise UsageError(f"{flag} needs a value (got an empty one)")
        if limit is not None and limit < 1:
            raise UsageError(f"--limit {limit}: give a number of tasks, 1 or more")
        return cls(tuple(tasks or ()), tuple(tags or ()), tuple(exclude_tags or ()), limit)

    @classmethod
    def from_record(cls, record: dict[str, Any] | None) -> Selection:
        """The selection a run.json recorded (None: every task)."""
        if not record:
            return cls()
        return cls(
            tuple(record.get("task") or ()),
            tuple(record.get("tag") or ()),
            tuple(record.get("exclude_tag") or ()),
            record.get("limit"),
        )

    @property
    def empty(self) -> bool:
        return not (self.tasks or self.tags or self.exclude_tags or self.limit)

    def chooses(self, task: TaskSpec, known: Collection[str] = ()) -> bool:
        """Whether the task is chosen; ``known``: every task id of the dataset (a plain
        ``--task`` word naming none of them is read as ``*WORD*``: see task_glob)."""
        tags = task.all_tags
        known = known or (task.id,)
        return (
            (not self.tasks or any(task_matcher(glob, known)(task.id) for glob in self.tasks))
            and all(tag in tags for tag in self.tags)
            and not any(tag in tags for tag in self.exclude_tags)
        )

    def apply(self, dataset: Dataset) -> Dataset:
        """The dataset with only the chosen tasks; choosing none is a UsageError."""
        if self.empty:
            return dataset
        known = {task.id for task in dataset.tasks}
        chosen = [task for task in dataset.tasks if self.chooses(task, known)][: self.limit]
        if not chosen:
            raise UsageError(
                f"no task of {dataset.path} ({len(dataset.tasks)} tasks) is chosen by "
                f"{self.flags()}"
            )
        return dataset.model_copy(update={"tasks": chosen})

    def record(self, chosen: int, total: int) -> dict[str, Any] | None:
        """What run.json keeps (None when every task runs)."""
        if self.empty:
            return None
        return {
            "task": list(self.tasks),
            "tag": list(self.tags),
            "exclude_tag": list(self.exclude_tags),
            "limit": self.limit,
            "chosen": chosen,
            "of": total,
        }

    def flags(self) -> str:
        """The selection as the command-line flags that make it."""
        words = [f"--task {t}" for t in self.tasks] + [f"--tag {t}" for t in self.tags]
        words += [f"--exclude-tag {t}" for t in self.exclude_tags]
        words += [f"--limit {self.limit}"] if self.limit else []
        return " ".join(words) or "(every task)"
