"""Generated tasks: fuzzy-logic in-context regression and symbolic Raven (SRAVEN)."""

from latentcode.tasks.base import TASKS, Batch, Task, get_task, register_task, task_from_dict

__all__ = ["TASKS", "Batch", "Task", "get_task", "register_task", "task_from_dict"]
