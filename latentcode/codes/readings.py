"""Readings: where (positions) and on what inputs (the task's `code_reading`) latent codes are read, resolved
against a task, and what a task's codes are labelled with (`task_code_meta`, `composition_ids`).

Every task-specific answer comes from the task's own declarations (`latentcode.tasks.base`: `CodeReading`,
`Task.code_positions`, `Task.custom_positions`, `Task.class_names`); nothing here names a task. Running a model is
`extract.py`'s job.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from latentcode.constants import POSITIONS
from latentcode.tasks.base import CodeReading, InputChoice, PositionSpec

__all__ = [
    "POSITIONS",
    "PositionSpec",
    "PositionsArg",
    "check_extraction",
    "code_reading",
    "composition_ids",
    "resolve_positions",
    "task_code_meta",
]

logger = logging.getLogger(__name__)

PositionsArg = str | Mapping[str, Sequence[int]] | tuple[Sequence[int], Sequence[int]]


def code_reading(task: Any) -> CodeReading:
    """The task's `CodeReading` (`latentcode.tasks.base`): its input choices (the first is the default, the
    paper's), its named positions and its labels. A task without one gets a single input choice, its plain
    `sample`, the `paper` positions and no label list.

    >>> from latentcode.tasks import get_task
    >>> code_reading(get_task("fuzzy_logic")).default_inputs, code_reading(get_task("sraven")).default_inputs
    ('fixed_query', 'unpermuted')
    """
    reading = getattr(task, "code_reading", None)
    if reading is None:
        return CodeReading((InputChoice("default", {}, "the task's own sample()"),), ())
    return reading


def _index_list(values: Any, what: str, seq_len: int) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} positions must be a non-empty list of integers; got {values!r}")
    bad = array[(array < -seq_len) | (array >= seq_len)]
    if bad.size:
        raise ValueError(
            f"{what} position(s) {bad.tolist()} out of range: the sequence has {seq_len} tokens, so valid positions "
            f"are 0..{seq_len - 1} (or -{seq_len}..-1 counted from the end)"
        )
    return np.where(array < 0, array + seq_len, array).astype(np.int64)


def resolve_positions(task: Any, positions: PositionsArg = "paper") -> PositionSpec:
    """Resolve a position choice against a task's sequence layout.

    Args:
        task: the task: its `seq_len`, its named positions (`code_reading.positions`, resolved by its
            `code_positions`) and how it reads explicit ones (`custom_positions`).
        positions: a name the task defines ('paper', spec §4.1: fuzzy logic = the query token attending to itself;
            SRAVEN = the last query token attending to the last feature of panels 7 and 8; 'all_features',
            SRAVEN: one view per feature f, query token of f attending to feature f of panels 7 and 8), or explicit
            positions as `{"query": [...], "key": [...]}` or `(query, key)` (negative positions count from the end).

    Returns:
        The resolved `PositionSpec`.

    Raises:
        ValueError: a name the task does not define (the message lists those it does), or positions out of range.

    >>> from latentcode.tasks.sraven import SRaven
    >>> spec = resolve_positions(SRaven(), "paper")
    >>> spec.query.tolist(), spec.key.tolist()
    ([[35]], [[27, 31]])
    """
    seq_len = int(task.seq_len)
    if not all(hasattr(task, method) for method in ("code_positions", "custom_positions")):
        raise ValueError(
            f"task {getattr(task, 'name', type(task).__name__)!r} lacks code_positions/custom_positions; follow the "
            "Task protocol (latentcode.tasks.base), e.g. by subclassing CompositionalTask"
        )
    if isinstance(positions, str):
        return task.code_positions(positions)
    if isinstance(positions, Mapping):
        extra = sorted(set(positions) - {"query", "key"})
        if extra or not {"query", "key"} <= set(positions):
            raise ValueError(f"explicit positions need exactly the keys 'query' and 'key'; got {sorted(positions)}")
        query_raw, key_raw = positions["query"], positions["key"]
    elif isinstance(positions, tuple) and len(positions) == 2:
        query_raw, key_raw = positions
    else:
        raise ValueError(
            f"positions={positions!r} is not understood; pass one of {', '.join(code_reading(task).positions)}, "
            "{'query': [...], 'key': [...]} or a (query, key) tuple"
        )
    return task.custom_positions(_index_list(query_raw, "query", seq_len), _index_list(key_raw, "key", seq_len))


def check_extraction(
    task: Any,
    splits: Sequence[str] = ("train", "test", "ood"),
    n_samples: int = 2048,
    *,
    positions: PositionsArg = "paper",
    inputs: str | None = None,
    batch_size: int = 512,
) -> tuple[PositionSpec, Any]:
    """Check extraction arguments against a task without running anything (what `extract_latent_codes` and the
    analysis commands do first, before anything is copied, extracted or written).

    Returns:
        (the resolved `PositionSpec`, the `InputChoice` of `inputs`).

    Raises:
        ValueError: an unknown or empty split list, positions the task does not have, an unknown input choice,
            n_samples or batch_size not positive.

    >>> from latentcode.tasks import get_task
    >>> check_extraction(get_task("sraven"), ("train", "val"))
    Traceback (most recent call last):
    ...
    ValueError: unknown split 'val' for task 'sraven'; valid splits: train, test, ood
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) or n_samples <= 0 \
            or isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size <= 0:
        raise ValueError(f"n_samples={n_samples} and batch_size={batch_size} must be positive integers")
    if isinstance(splits, str):
        raise ValueError(f"splits={splits!r} is one string; pass a list of split names, e.g. ['train', 'ood']")
    if not splits:
        raise ValueError(f"splits is empty; pick some of {', '.join(task.splits)}")
    for split in splits:
        if split not in task.splits:
            raise ValueError(f"unknown split {split!r} for task {task.name!r}; valid splits: {', '.join(task.splits)}")
    if len(set(splits)) != len(splits):
        raise ValueError(f"splits={list(splits)} names a split twice; name each once")
    spec = resolve_positions(task, positions)
    choice = code_reading(task).choice(inputs, f"task {task.name!r}")
    return spec, choice


def composition_ids(task: Any, rows: np.ndarray) -> np.ndarray:
    """A global id per composition (the same across splits that share it) for each sorted label row."""
    ids: dict[tuple[int, ...], int] = {}
    for split in task.splits:
        for comp in task.compositions(split):
            ids.setdefault(tuple(int(v) for v in np.sort(comp)), len(ids))
    found = np.array([ids.get(tuple(int(v) for v in np.sort(row)), -1) for row in rows], dtype=np.int64)
    if (found < 0).any():
        logger.warning("%d instance(s) match no composition of the task; their composition id is -1",
                       int((found < 0).sum()))
    return found


def task_code_meta(task: Any) -> dict[str, Any]:
    """What extraction writes into `LatentCodes.meta` from the task's declarations, for the torch-free probes:
    `label` (the default label), `label_kinds`, `composition_label`, `control`, and `n_classes` / `class_names`
    of the default label.

    >>> from latentcode.tasks import get_task
    >>> meta = task_code_meta(get_task("sraven"))
    >>> meta["label"], meta["n_classes"], meta["composition_label"], meta["control"]["control_task"]
    ('rule', 8, 'rules', True)
    """
    names = task.class_names() if hasattr(task, "class_names") else None
    return {
        **code_reading(task).meta(),
        "n_classes": None if names is None else len(names),
        "class_names": None if names is None else list(names),
    }
