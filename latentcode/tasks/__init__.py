"""Generated tasks: fuzzy-logic in-context regression and symbolic Raven (SRAVEN)."""

from latentcode.tasks.base import (
    TASKS,
    Batch,
    CodeReading,
    InputChoice,
    Task,
    get_task,
    register_task,
    task_from_dict,
)
from latentcode.tasks.fuzzy_logic import FuzzyLogic, FuzzyLogicConfig
from latentcode.tasks.sraven import RULE_NAMES, SRaven, SRavenConfig

__all__ = [
    "RULE_NAMES",
    "TASKS",
    "Batch",
    "CodeReading",
    "FuzzyLogic",
    "FuzzyLogicConfig",
    "InputChoice",
    "SRaven",
    "SRavenConfig",
    "Task",
    "get_task",
    "register_task",
    "task_from_dict",
]
