"""The task protocol every generated task follows, the `Batch` it returns, what it declares about itself (its
presets, `TaskPresets`; how its latent codes are read and labelled, `CodeReading` and `PositionSpec`) and the shared
base `CompositionalTask`. The registry is in `registry.py`.

A task owns its compositional split (which compositions are `train`, `test`, `ood`, ...), generates batches
directly on the requested device, knows its loss and metrics, its presets, and where and how its latent codes are
read and labelled. It knows nothing about models. A new task is one module: a class registered with
`register_task` (the shared samplers are in `tasks/sampling.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "Batch",
    "CodeReading",
    "CompositionalTask",
    "InputChoice",
    "LabelKind",
    "PositionSpec",
    "Task",
    "TaskPresets",
    "check_positions",
    "check_split",
]

LabelKind = Literal["class", "class_set", "class_tuple", "bits", "value", "group"]
"""What a label of extracted codes holds, as the probes read it (`LatentCodes.meta["label_kinds"]`): one class per
row [n] ("class"), a set of class ids [n, K] ("class_set", e.g. fuzzy-logic terms), one class per slot [n, K]
("class_tuple", e.g. SRAVEN's rule tuple), binary latent bits [n, ...] ("bits"), a continuous value ("value"), or an
id grouping rows ("group")."""

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
    """How a task's latent codes are read and labelled: the input distributions to choose from, the labels worth
    decoding, and what the torch-free probes need to know about those labels (written into the codes' metadata).

    The first input choice is the task's default reading, the paper's (spec §4.1); together with the first named
    positions (`positions[0]`, 'paper') it is what every analysis uses unless told otherwise.

    Attributes:
        inputs: the input choices, the default first.
        labels: labels of the extracted codes that `probes.decode_rules` can decode, the default first (checked
            before anything is extracted).
        label_kinds: the `LabelKind` of each label the codes carry (`meta["label_kinds"]`): how the probes treat
            it (decode a set label term by term, regress bits, measure a distance between class tuples, ...).
        composition: the label holding each instance's composition (its sorted rows give the `composition` id;
            topographic similarity measures distances between them); None when the task has no such label.
        input_control: what the input-only control reads: the raw tokens at the codes' query and key positions
            ("positions"), or every raw token of the instance ("all_tokens", when one token says too little).
        control_task: whether Hewitt & Liang's control task applies: the tokens at the key positions take few
            discrete values, so each value tuple can get a random fixed label.
        positions: the named positions the task defines (`Task.code_positions`), the paper's first.

    >>> reading = CodeReading((InputChoice("plain", {}, "as in training"),), ("rule",))
    >>> reading.default_inputs, reading.choice(None).name
    ('plain', 'plain')
    """

    inputs: tuple[InputChoice, ...]
    labels: tuple[str, ...]
    label_kinds: Mapping[str, LabelKind] = field(default_factory=dict)
    composition: str | None = None
    input_control: Literal["positions", "all_tokens"] = "all_tokens"
    control_task: bool = False
    positions: tuple[str, ...] = ("paper",)

    def __post_init__(self) -> None:
        bad = {k: v for k, v in self.label_kinds.items() if v not in LabelKind.__args__}  # type: ignore[attr-defined]
        if bad:
            raise ValueError(f"label_kinds {bad} are not label kinds; use one of {', '.join(LabelKind.__args__)}")  # type: ignore[attr-defined]
        if self.input_control not in ("positions", "all_tokens"):
            raise ValueError(f"input_control={self.input_control!r} is not one of 'positions', 'all_tokens'")
        if not self.inputs or not self.positions:
            raise ValueError("a CodeReading needs at least one input choice and one named position ('paper')")

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

    def meta(self) -> dict[str, Any]:
        """What extraction writes into `LatentCodes.meta` for the probes: the default `label`, `label_kinds`,
        `composition_label` and `control` (`{"inputs": input_control, "control_task": control_task}`)."""
        return {
            "label": self.labels[0] if self.labels else None,
            "label_kinds": dict(self.label_kinds),
            "composition_label": self.composition,
            "control": {"inputs": self.input_control, "control_task": self.control_task},
        }


@dataclass(frozen=True)
class TaskPresets:
    """A task's named presets, read by `latentcode.train_config` and `latentcode.model_config`.

    Attributes:
        train: preset name ('tiny', 'small', 'paper', ...) -> `TrainConfig` fields.
        model: preset name -> `ModelConfig` shape fields (the variant's fields and overrides go on top).
        width: whether `model_config(..., width=W)` may multiply the preset's widths (SRAVEN's width sweep).
        demo_params: task parameters `latentcode.pipelines.demo` trains with when it is given none.
    """

    train: Mapping[str, Mapping[str, Any]]
    model: Mapping[str, Mapping[str, Any]]
    width: bool = False
    demo_params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PositionSpec:
    """Where codes are read, resolved against a task.

    Every instance gives `n_views` rows of codes; view v reads queries `query[v]` and keys `key[v]`.

    Attributes:
        name: the named positions ('paper', 'all_features', ...) or 'custom'.
        query: int [view, query] query positions.
        key: int [view, key] key positions.
        feature: int [view], the part of the composition each view analyses (SRAVEN: the feature whose rule is
            the view's `rule` label); None when every view reads the whole composition (fuzzy logic).
    """

    name: str
    query: np.ndarray
    key: np.ndarray
    feature: np.ndarray | None = None

    @property
    def n_views(self) -> int:
        return int(self.query.shape[0])

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "query": self.query.tolist(), "key": self.key.tolist()}


@runtime_checkable
class Task(Protocol):
    """What training, extraction, the experiments and the CLI rely on. See `FuzzyLogic` and `SRaven` for the two
    built-in tasks; `CompositionalTask` implements the reading methods' common case."""

    name: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]
    metric_name: ClassVar[str]
    d_in: int
    d_out: int
    seq_len: int
    n_readout: int
    """How many final positions the loss and metrics read; training runs the last block on those alone."""
    presets: ClassVar[TaskPresets]
    """Its training and model presets."""
    code_reading: ClassVar[CodeReading]
    """The inputs its latent codes are read at (the first is the default, the paper's) and its labels."""
    transfer: ClassVar[str | None]
    """Its transfer experiment, a key of `latentcode.causal.experiments.TRANSFERS` (None: it has none)."""

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

    def code_positions(self, name: str) -> PositionSpec: ...

    def custom_positions(self, query: np.ndarray, key: np.ndarray) -> PositionSpec: ...

    def code_labels(self, batch: Batch) -> dict[str, np.ndarray]: ...

    def row_labels(self, labels: dict[str, np.ndarray], spec: PositionSpec) -> dict[str, np.ndarray]: ...

    def class_names(self) -> list[str] | None: ...

    def to_dict(self) -> dict[str, Any]: ...


class CompositionalTask:
    """What the tasks share: splits held as explicit composition lists in `self._comps` keyed by split, and the
    common case of reading codes (the last token attending to itself; every batch label kept, repeated per view)."""

    splits: ClassVar[tuple[str, ...]]
    code_reading: ClassVar[CodeReading]
    transfer: ClassVar[str | None] = None
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

    def code_positions(self, name: str) -> PositionSpec:
        """Named positions: the default one (`code_reading.positions[0]`, 'paper') is the last (query) token
        attending to itself (spec §4.1, fuzzy logic). A task that declares more names overrides this method.

        Raises:
            ValueError: a name the task does not declare, or one it declares without overriding this method.
        """
        check_positions(name, self.code_reading.positions, self.name)  # type: ignore[attr-defined]
        if name != self.code_reading.positions[0]:  # type: ignore[attr-defined]
            raise ValueError(f"task {self.name!r} declares the positions {name!r} but does not say where they are: "  # type: ignore[attr-defined]
                             f"override {type(self).__name__}.code_positions to return a PositionSpec for {name!r}")
        last = np.array([[int(self.seq_len) - 1]], dtype=np.int64)  # type: ignore[attr-defined]
        return PositionSpec(name, last, last.copy())

    def custom_positions(self, query: np.ndarray, key: np.ndarray) -> PositionSpec:
        """Explicit positions, one view (already range-checked, non-negative)."""
        return PositionSpec("custom", query[None, :], key[None, :])

    def code_labels(self, batch: Batch) -> dict[str, np.ndarray]:
        """The per-instance labels extraction keeps from a batch: every batch label, and `target` (`batch.y`)."""
        kept = {name: value.cpu().numpy() for name, value in batch.labels.items()}
        return {**kept, "target": batch.y.cpu().numpy()}

    def row_labels(self, labels: dict[str, np.ndarray], spec: PositionSpec) -> dict[str, np.ndarray]:
        """Labels per row of codes (instance-major, `spec.n_views` rows per instance) from per-instance arrays."""
        return {name: np.repeat(value, spec.n_views, axis=0) for name, value in labels.items()}

    def class_names(self) -> list[str] | None:
        """Display names of the default label's classes (their count is `n_classes`); None: unknown."""
        return None

    def instance_html(self, tokens: np.ndarray, labels: Mapping[str, Any]) -> str:
        """One instance as HTML for the browser (`latentcode.explore`). A task overrides this with its own picture;
        this default is a plain table of the instance's labels and raw tokens.

        Args:
            tokens: the instance's raw inputs [pos, d_in] (`LatentCodes.inputs` of one of its rows).
            labels: that row's labels (`LatentCodes.labels` at the row, plus `split`; a run's explorer adds
                `answer` and `truth`, the model's and the true outputs at every readout position).
        """
        import html

        head = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_label_text(v))}</td></tr>"
                       for k, v in labels.items())
        rows = "".join(f"<tr><th>{i}</th><td>{' '.join(f'{x:.2g}' for x in row)}</td></tr>"
                       for i, row in enumerate(np.asarray(tokens, dtype=float).reshape(len(tokens), -1)))
        return (f'<table class="lc-instance lc-plain"><caption>{html.escape(self.name)} instance (plain table: '  # type: ignore[attr-defined]
                f"the task draws no picture)</caption>{head}<tr><th>pos</th><th>tokens</th></tr>{rows}</table>")

    def plot_instance(self, tokens: np.ndarray, labels: Mapping[str, Any], ax: Any = None) -> Any:
        """One instance on a matplotlib axes (for papers); arguments as `instance_html`. This default writes its
        labels as a plain table. Returns the axes."""
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(4, 3))[1] if ax is None else ax
        ax.axis("off")
        cells = [[str(k), _label_text(v)] for k, v in labels.items()]
        ax.table(cellText=cells or [["", ""]], colLabels=["label", "value"], loc="center")
        ax.set_title(f"{self.name} instance (plain table)", fontsize=9)  # type: ignore[attr-defined]
        return ax


def _label_text(value: Any) -> str:
    """A label value as short text (arrays as lists, floats to 3 significant digits)."""
    array = np.asarray(value)
    if array.dtype.kind == "f":
        return str(np.round(array, 3).tolist()) if array.ndim else f"{float(array):.3g}"
    return str(array.tolist())


def check_split(split: str, splits: tuple[str, ...]) -> None:
    """Raise a ValueError naming the valid splits unless `split` is one of them."""
    if split not in splits:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(splits)}")


def check_positions(name: str, valid: tuple[str, ...], task: str) -> None:
    """Raise a ValueError naming the task's named positions unless `name` is one of them."""
    if name not in valid:
        raise ValueError(
            f"positions={name!r} is not defined for task {task!r}; valid: {', '.join(valid)}, or explicit "
            "{'query': [...], 'key': [...]}"
        )
