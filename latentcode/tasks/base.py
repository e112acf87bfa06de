"""The task protocol every generated task follows, the `Batch` it returns, how its latent codes are read by default
(`CodeReading`), and the task registry.

A task owns its compositional split (which compositions are `train`, `test`, `ood`, ...), generates batches
directly on the requested device, knows its loss and metrics, and names the inputs its latent codes are read at.
It knows nothing about models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class Batch:
    """One batch of generated instances.

    Attributes:
        x: float inputs [batch, pos, d_in]; the model maps them to outputs [batch, pos, d_out].
        y: targets. Fuzzy logic: float [batch] (y of the query). SRAVEN: long [batch, 4] (panel 9's features,
            in the presented, possibly permuted, slot order).
        labels: ground truth for analyses, each a tensor whose first axis is the batch (see each task).
        split: the split the batch was drawn from.
    """

    x: Tensor
    y: Tensor
    labels: dict[str, Tensor] = field(default_factory=dict)
    split: str = "train"

    def __len__(self) -> int:
        return self.x.shape[0]

    def to(self, device: str | torch.device) -> Batch:
        return Batch(
            x=self.x.to(device),
            y=self.y.to(device),
            labels={k: v.to(device) for k, v in self.labels.items()},
            split=self.split,
        )


@dataclass(frozen=True)
class InputChoice:
    """One input distribution latent codes can be read at (`latentcode extract --inputs NAME`).

    Attributes:
        name: what `--inputs` / `inputs=` calls it.
        sample_options: keyword arguments of the task's `sample` that draw it.
        description: one line for help texts.
    """

    name: str
    sample_options: dict[str, Any]
    description: str


@dataclass(frozen=True)
class CodeReading:
    """How a task's latent codes are read: the input distributions to choose from and the labels worth decoding.

    The first input choice is the task's default reading, the paper's (spec §4.1); together with the `paper`
    positions (`latentcode.extract.resolve_positions`) it is what every analysis uses unless told otherwise.

    Attributes:
        inputs: the input choices, the default first.
        labels: labels of the extracted codes that `probes.decode_rules` can decode, the default first (checked
            before anything is extracted).

    >>> reading = CodeReading((InputChoice("plain", {}, "as in training"),), ("rule",))
    >>> reading.default_inputs, reading.choice(None).name
    ('plain', 'plain')
    """

    inputs: tuple[InputChoice, ...]
    labels: tuple[str, ...]

    @property
    def default_inputs(self) -> str:
        """The default input choice's name."""
        return self.inputs[0].name

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(choice.name for choice in self.inputs)

    def choice(self, inputs: str | None, task: str = "this task") -> InputChoice:
        """The input choice named `inputs` (None: the default).

        Raises:
            ValueError: an unknown name (the message lists the valid ones).
        """
        if inputs is None:
            return self.inputs[0]
        for choice in self.inputs:
            if choice.name == inputs:
                return choice
        raise ValueError(
            f"inputs={inputs!r} is not an input choice of {task}; valid: {', '.join(self.input_names)} "
            f"(default: {self.default_inputs}, the paper's reading)"
        )


@runtime_checkable
class Task(Protocol):
    """What training, extraction and the CLI rely on. See `FuzzyLogic` and `SRaven` for the two tasks."""

    name: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]
    metric_name: ClassVar[str]
    d_in: int
    d_out: int
    seq_len: int
    n_readout: int
    """How many final positions the loss and metrics read; training runs the last block on those alone."""
    code_reading: ClassVar[CodeReading]
    """The inputs its latent codes are read at (the first is the default, the paper's) and the decodable labels."""

    def compositions(self, split: str) -> np.ndarray: ...

    def sample(
        self,
        n: int,
        split: str = "train",
        *,
        seed: int | None = None,
        device: str | torch.device = "cpu",
        unpermuted: bool = False,
    ) -> Batch: ...

    def loss(self, outputs: Tensor, batch: Batch) -> Tensor: ...

    def metrics(self, outputs: Tensor, batch: Batch) -> dict[str, float]: ...

    def predict(self, outputs: Tensor) -> Tensor: ...

    def to_dict(self) -> dict[str, Any]: ...


class CompositionalTask:
    """What both tasks share: splits held as explicit composition lists in `self._comps`, keyed by split."""

    splits: ClassVar[tuple[str, ...]]
    _comps: dict[str, np.ndarray]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={len(self._comps[s])}" for s in self.splits)
        return f"{type(self).__name__}({self.config}, compositions: {sizes})"  # type: ignore[attr-defined]

    def compositions(self, split: str) -> np.ndarray:
        """The split's compositions: int64 [n_compositions, parts], each row sorted indices of its parts (terms
        for fuzzy logic, rules for SRAVEN). `test` returns the training compositions (its instances are fresh
        draws of them).

        Raises:
            ValueError: `split` is not one of the task's splits.
        """
        check_split(split, self.splits)
        return self._comps[split].copy()


def check_split(split: str, splits: tuple[str, ...]) -> None:
    """Raise a ValueError naming the valid splits unless `split` is one of them."""
    if split not in splits:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(splits)}")


TASKS: dict[str, Callable[..., Task]] = {}


def register_task(name: str) -> Callable[[type], type]:
    """Class decorator adding a task class to `TASKS`; registering a name twice is an error."""

    def decorator(cls: type) -> type:
        if name in TASKS:
            raise ValueError(f"task {name!r} is already registered (by {TASKS[name]!r})")
        TASKS[name] = cls
        return cls

    return decorator


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
