"""The task registry: `TASKS`, `register_task` / `unregister_task`, `get_task`, `task_from_dict`, and the live
views of every registered task's presets (`task_presets`, `PresetTable`) that `latentcode.config` serves as
`TRAIN_PRESETS` and `MODEL_PRESETS`.

Nothing here imports torch or a task module; the built-in tasks register themselves when `latentcode.tasks` is
imported, which importing this module (a submodule of that package) always does first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from latentcode.tasks.base import Task, TaskPresets

__all__ = [
    "TASKS",
    "PresetTable",
    "get_task",
    "register_task",
    "task_from_dict",
    "task_presets",
    "unregister_task",
]

TASKS: dict[str, Callable[..., Task]] = {}


_DECLARED = ("name", "splits", "metric_name", "presets", "code_reading", "transfer", "from_dict")
"""What a task class must declare to be registered (the `Task` protocol's class-level part and `from_dict`)."""


def register_task(name: str) -> Callable[[type], type]:
    """Class decorator adding a task class to `TASKS`.

    Raises:
        ValueError: the name is registered already, the class's `name` differs from it, or the class lacks a
            declaration of the `Task` protocol (presets, code_reading, ...).
    """

    def decorator(cls: type) -> type:
        if name in TASKS:
            raise ValueError(f"task {name!r} is already registered (by {TASKS[name]!r})")
        missing = [attr for attr in _DECLARED if not hasattr(cls, attr)]
        if missing:
            raise ValueError(
                f"task class {cls.__name__} lacks {', '.join(missing)}; declare them as the `Task` protocol "
                "(latentcode.tasks.base) says, e.g. by subclassing CompositionalTask as FuzzyLogic does"
            )
        if cls.name != name:  # type: ignore[attr-defined]
            raise ValueError(f"task class {cls.__name__} is named {cls.name!r}; register it as {cls.name!r}")  # type: ignore[attr-defined]
        TASKS[name] = cls
        return cls

    return decorator


def unregister_task(name: str) -> None:
    """Remove a task registered with `register_task` (e.g. one a test or a notebook defined).

    Raises:
        ValueError: the name is not registered (the message lists those that are).
    """
    if name not in TASKS:
        raise ValueError(f"task {name!r} is not registered; registered tasks: {', '.join(sorted(TASKS))}")
    del TASKS[name]


def get_task(name: str, **params: Any) -> Task:
    """Build a registered task by name.

    Raises:
        ValueError: the name is unknown (the message lists the valid names), or a parameter is impossible.
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name](**params)


def task_from_dict(data: dict[str, Any]) -> Task:
    """Rebuild a task, with its exact split index lists, from `Task.to_dict()` output."""
    name = data.get("name")
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r} in saved config; valid tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name].from_dict(data)  # type: ignore[attr-defined]


def task_presets(task: Any, what: str = "") -> TaskPresets:
    """The `TaskPresets` of a task instance (its own, else its registered class's) or of a registered task name;
    `what` ("model", "training") names the presets wanted in the error message.

    Raises:
        ValueError: neither declares presets (the message lists the registered tasks).
    """
    name = task if isinstance(task, str) else getattr(task, "name", None)
    presets = None if isinstance(task, str) else getattr(task, "presets", None)
    if presets is None and name in TASKS:
        presets = TASKS[name].presets  # type: ignore[attr-defined]
    if presets is None:
        raise ValueError(f"no {what + ' ' if what else ''}presets for task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return presets


class PresetTable(Mapping[str, Mapping[str, Mapping[str, Any]]]):
    """task name -> preset name -> fields, read live from each registered task's `presets.<part>` (part 'train'
    or 'model'), so a task registered later, in its own file, has presets here too. Read-only.

    >>> PresetTable("model")["sraven"]["paper"]["n_layers"]
    4
    """

    def __init__(self, part: str) -> None:
        self._part = part

    def __getitem__(self, task: str) -> Mapping[str, Mapping[str, Any]]:
        if task not in TASKS:
            raise KeyError(task)
        return getattr(TASKS[task].presets, self._part)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[str]:
        return iter(list(TASKS))

    def __len__(self) -> int:
        return len(TASKS)

    def __repr__(self) -> str:
        return repr({name: dict(self[name]) for name in self})
