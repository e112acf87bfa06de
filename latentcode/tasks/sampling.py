"""What every task's sampler and saved split lists share: seeded batch streams, table lookups, the held-out split
of compositions (`hold_out`), and the checks a saved task dict goes through (`make_config`, `read_task_dict`,
`validate_compositions`, `check_disjoint`).

Public so that a new task, in its own file, draws its batches the way the built-in tasks do. Nothing here knows a
particular task, and nothing here touches a model.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "batch_generator",
    "check_disjoint",
    "hold_out",
    "lookup",
    "make_config",
    "randint",
    "read_task_dict",
    "splitmix64",
    "validate_compositions",
]

_MASK64 = (1 << 64) - 1


def splitmix64(z: int) -> int:
    """One step of the splitmix64 mixer on a 64-bit word.

    >>> splitmix64(0)
    16294208416658607535
    """
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def batch_generator(task_seed: int, split: str, seed: int | None, device: str | torch.device) -> torch.Generator:
    """A generator for one batch stream: the split and the task seed are hashed (splitmix64) into the seed, so
    splits with the same batch seed draw independent streams.

    Args:
        task_seed: the task's own seed (the one its held-out compositions were drawn from).
        split: the split the batch is drawn from.
        seed: the batch seed; None draws one from torch's global RNG.
        device: where the generator lives (the batch is generated there).

    Raises:
        ValueError: a negative seed.

    >>> a, b = batch_generator(0, "train", 1, "cpu"), batch_generator(0, "ood", 1, "cpu")
    >>> bool(torch.rand(3, generator=a).ne(torch.rand(3, generator=b)).all())
    True
    """
    if seed is None:
        seed = int(torch.randint(0, 2**62, (), dtype=torch.int64).item())
    elif seed < 0:
        raise ValueError(f"seed={seed} must be a non-negative integer or None")
    mixed = 0
    for word in (seed, zlib.crc32(split.encode()), task_seed):
        mixed = splitmix64(mixed ^ (word & _MASK64))
    generator = torch.Generator(device=device)
    generator.manual_seed(mixed)
    return generator


def lookup(table: Tensor, index: Tensor) -> Tensor:
    """`table[index]` along the first axis. index_select, because advanced indexing (aten::index) on small
    tensors was seen to stall for milliseconds per call on a busy CPU.

    >>> lookup(torch.tensor([[1, 2], [3, 4], [5, 6]]), torch.tensor([[2, 0]])).tolist()
    [[[5, 6], [1, 2]]]
    """
    return table.index_select(0, index.flatten()).view(*index.shape, *table.shape[1:])


def randint(high: int, shape: tuple[int, ...], generator: torch.Generator, device: str | torch.device) -> Tensor:
    """Integers uniform in [0, high) of `shape`, drawn from `generator` on `device`."""
    return torch.randint(high, shape, generator=generator, device=device)


def hold_out(compositions: np.ndarray, frac_ood: float, seed: int) -> dict[str, np.ndarray]:
    """Split a task's compositions into `train` and `ood`: int(len * frac_ood) rows, chosen by a permutation drawn
    from `seed`, are held out; each split keeps the rows' order. The split of a saved task never depends on this
    again: `to_dict` stores both lists.

    >>> {name: rows.tolist() for name, rows in hold_out(np.arange(5)[:, None], 0.4, seed=0).items()}
    {'train': [[0], [1], [3]], 'ood': [[2], [4]]}
    """
    order = np.random.default_rng(seed).permutation(len(compositions))
    n_ood = int(len(compositions) * frac_ood)
    return {"train": compositions[np.sort(order[n_ood:])], "ood": compositions[np.sort(order[:n_ood])]}


def make_config(cls: type, params: dict[str, Any]) -> Any:
    """`cls(**params)`, refusing unknown names with the list of valid ones.

    Raises:
        ValueError: a name that is not a field of the config dataclass `cls`.
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {cls.__name__}; valid: {', '.join(sorted(known))}")
    return cls(**params)


def read_task_dict(
    name: str, config_cls: type, data: dict[str, Any], stored_splits: tuple[str, ...]
) -> tuple[Any, dict[str, Any]]:
    """Check a `Task.to_dict` payload's name and keys; return its config and its (unchecked) composition lists.

    Raises:
        ValueError: another task's name, a missing key, other stored splits, or unknown parameters.
    """
    if data.get("name") != name:
        raise ValueError(f"saved task is {data.get('name')!r}, not {name!r}")
    missing = sorted({"params", "compositions"} - set(data))
    if missing:
        raise ValueError(f"saved {name} task lacks {missing}; it needs name, params and compositions")
    stored = data["compositions"]
    if sorted(stored) != sorted(stored_splits):
        raise ValueError(f"saved {name} compositions have splits {sorted(stored)}; expected {sorted(stored_splits)}")
    return make_config(config_cls, data["params"]), stored


def validate_compositions(split: str, rows: Any, width: int, low: int, high: int, *, strict: bool) -> np.ndarray:
    """Stored compositions as int64 [m, width]: non-empty, in [low, high), sorted within rows (strictly: no part
    twice), no composition repeated.

    Raises:
        ValueError: any of those violated (the message names the split and the rule).
    """
    array = np.asarray(rows)
    if array.ndim != 2 or 0 in array.shape or array.shape[1] != width or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            f"saved {split} compositions must be a non-empty integer list of shape [m, {width}]; "
            f"got shape {array.shape} and dtype {array.dtype}"
        )
    array = array.astype(np.int64)
    if array.min() < low or array.max() >= high:
        raise ValueError(f"saved {split} compositions hold indices outside [{low}, {high})")
    steps = np.diff(array, axis=1)
    if (steps <= 0).any() if strict else (steps < 0).any():
        raise ValueError(f"saved {split} compositions must be sorted {'strictly ' if strict else ''}within rows")
    if len(np.unique(array, axis=0)) != len(array):
        raise ValueError(f"saved {split} compositions repeat a composition")
    return array


def check_disjoint(train: np.ndarray, ood: np.ndarray) -> None:
    """Raise unless no composition is in both `train` and `ood`."""
    shared = {tuple(row) for row in train.tolist()} & {tuple(row) for row in ood.tolist()}
    if shared:
        raise ValueError(f"saved train and ood compositions overlap in {len(shared)} rows, e.g. {min(shared)}")
