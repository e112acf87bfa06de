"""Generated tasks: fuzzy-logic in-context regression and symbolic Raven (SRAVEN), the `Task` protocol they follow
and the registry. A new task is one module: a class following `Task` (most simply a `CompositionalTask`),
decorated with `register_task("name")`, drawing its batches with the helpers of `tasks.sampling`."""

from latentcode.tasks.base import (
    Batch,
    CodeReading,
    CompositionalTask,
    InputChoice,
    LabelKind,
    PositionSpec,
    Task,
    TaskPresets,
)
from latentcode.tasks.fuzzy_logic import FuzzyLogic, FuzzyLogicConfig
from latentcode.tasks.registry import (
    TASKS,
    get_task,
    register_task,
    task_from_dict,
    task_presets,
    unregister_task,
)
from latentcode.tasks.sraven import RULE_NAMES, SRaven, SRavenConfig

__all__ = [
    "RULE_NAMES",
    "TASKS",
    "Batch",
    "CodeReading",
    "CompositionalTask",
    "FuzzyLogic",
    "FuzzyLogicConfig",
    "InputChoice",
    "LabelKind",
    "PositionSpec",
    "SRaven",
    "SRavenConfig",
    "Task",
    "TaskPresets",
    "get_task",
    "register_task",
    "task_from_dict",
    "task_presets",
    "unregister_task",
]
