"""`LatentCodes`: attention latent codes with their ground-truth labels, the hand-off from extraction to probes.

Only numpy arrays, JSON metadata and a `.npz` + `.json` file pair (read with `allow_pickle=False`). Producing
codes from a model is `latentcode.codes.extract`'s job; this module deliberately knows nothing about models or
torch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from probes.codes_io import (
    check_labels,
    check_meta,
    read_codes,
    write_codes,
)
from probes.metadata import (
    meta_control,
    meta_label_kinds,
    meta_reading,
    meta_reading_inputs,
    meta_value,
)

logger = logging.getLogger(__name__)

SPLITS: tuple[str, ...] = ("train", "test", "ood", "novel_terms")
"""Every split name a row may carry, in display order (spec §8.1)."""

LAYER_NAMES: tuple[str, ...] = ("each+all", "each", "all", "last")
"""The named layer choices every `layers=` takes, besides model layer numbers (`resolve_layers`)."""

LayerChoice = str | int | Sequence[int]
"""'each+all' | 'each' | 'all' | 'last' | a model layer number | a list of model layer numbers."""


def resolve_layers(layers: LayerChoice, layer_names: Sequence[int]) -> list[tuple[str, list[int]]]:
    """The one reading of `layers=`, shared by every function and estimator that takes it.

    Args:
        layers: "each" (one group per layer), "all" (one group of every layer), "each+all" (both), "last" (the
            last extracted layer), a model layer number (an int, or its string such as "3", as result tables name
            layers), or a list of model layer numbers (one group each).
        layer_names: the model layer of each entry of the layer axis (`LatentCodes.layer_names`).

    Returns:
        (name, positions on the layer axis) per group: a single layer is named by its model layer ("3"), every
        layer together "all".

    Raises:
        ValueError: one line naming the bad value, the model layers there are and what `layers=` takes.

    Example:
        >>> resolve_layers("last", [0, 1, 3]), resolve_layers([3, 0], [0, 1, 3])
        ([('3', [2])], [('3', [2]), ('0', [0])])
        >>> resolve_layers("each+all", [0, 1])
        [('0', [0]), ('1', [1]), ('all', [0, 1])]
    """
    names = [int(x) for x in layer_names]
    takes = f"layers= takes {', '.join(repr(x) for x in LAYER_NAMES)}, a model layer number or a list of them"
    each = [(str(name), [i]) for i, name in enumerate(names)]
    if isinstance(layers, str):
        choices = {"each": each, "all": [("all", list(range(len(names))))], "last": each[-1:]}
        choices["each+all"] = each + choices["all"]
        if layers in choices:
            return choices[layers]
        if not layers.strip().lstrip("-").isdigit():
            raise ValueError(f"layers={layers!r} is not a layer choice; {takes} (these codes hold model layers "
                             f"{names})")
        wanted: list[Any] = [int(layers)]
    elif isinstance(layers, int | np.integer) and not isinstance(layers, bool):
        wanted = [layers]
    else:
        try:
            wanted = list(layers)  # type: ignore[arg-type]
        except TypeError:
            raise ValueError(f"layers={layers!r} is not a layer choice; {takes}") from None
        if not wanted:
            raise ValueError(f"layers={layers!r} selects nothing; {takes} (these codes hold model layers {names})")
    groups = []
    for layer in wanted:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or int(layer) not in names:
            raise ValueError(
                f"layers={layers!r}: {layer!r} is not an extracted model layer; these codes hold model layers "
                f"{names} ({takes})"
            )
        groups.append(each[names.index(int(layer))])
    return groups


@dataclass(frozen=True, eq=False)
class LatentCodes:
    """Latent codes of `n_samples` instances, with ground truth, split and provenance.

    Attributes:
        codes: float32 [n_samples, layer, head, query, key]. The normalized attention scores (`hook_pattern`) at
            the chosen positions: `layer` indexes the extracted layers (model layer `meta["layers"][i]`), `query`
            and `key` the chosen query and key positions (SRAVEN default: 1 query, 2 keys; fuzzy logic: 1, 1).
            Only softmax codes are probabilities; linear and HYLA codes are unbounded scores.
        labels: ground truth, every array with first axis `n`. SRAVEN: `rule` [n] (rule index of the analysed
            feature), `rules` [n, 4] (the instance's rule tuple), `target` [n], `prediction` [n], `correct` [n]
            bool. Fuzzy logic: `terms` [n, K] (term indices of the composition), `term_bits` [n, K, L], `target`
            [n] float, `prediction` [n], optionally `composition` [n] (an id grouping rows of one composition).
        split: str [n], each one of `SPLITS` (train | test | ood | novel_terms).
        meta: JSON-serializable provenance: `task` (its registered name), `variant`, `positions`,
            `inputs` (the input choice the codes were read at, e.g. "fixed_query" or "unpermuted"), `reading`
            (positions and inputs in words, as every result shows them; see `reading`), `default_reading` (the
            task's default, the paper's), `layers` (model layer of each entry of the layer axis), `checkpoint`
            (hash or None), `label` (the default label to decode), `n_classes`, `class_names`, `score_norm`
            (softmax | none | rms_head), and what the task declares for the probes (`probes.metadata`):
            `label_kinds`, `composition_label`, `control`.
        inputs: optional float32 [n, pos, d_in], the raw input tokens of each row's instance (what the
            input-only and control-task probes of `probes.decoding.controls` read); None in files written before it.

    Example:
        >>> import numpy as np
        >>> lc = LatentCodes(
        ...     codes=np.zeros((4, 2, 3, 1, 2), np.float32),
        ...     labels={"rule": np.array([0, 1, 0, 1])},
        ...     split=np.array(["train", "train", "ood", "ood"]),
        ...     meta={"task": "sraven", "n_classes": 8},
        ... )
        >>> lc.n_samples, lc.n_layers, lc.n_heads, lc.splits
        (4, 2, 3, ('train', 'ood'))
        >>> lc.flat().shape, lc.flat(layers=[1]).shape, lc.select(split="ood").n_samples
        ((4, 12), (4, 6), 2)
    """

    codes: np.ndarray
    labels: dict[str, np.ndarray]
    split: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    inputs: np.ndarray | None = None

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes)
        if codes.ndim != 5:
            raise ValueError(
                f"codes has shape {codes.shape}; expected 5 axes [n, layer, head, query, key] "
                "(add size-1 axes with codes[:, :, :, None] for a single query/key position)"
            )
        if not np.issubdtype(codes.dtype, np.number) or np.issubdtype(codes.dtype, np.complexfloating):
            raise ValueError(f"codes has dtype {codes.dtype}; expected a real float array")
        codes = codes.astype(np.float32, copy=False)
        bad = ~np.isfinite(codes)
        if bad.any():
            rows = np.unique(np.nonzero(bad)[0])
            raise ValueError(
                f"codes contain {int(bad.sum())} NaN or infinite values (rows {rows[:5].tolist()}"
                f"{'...' if rows.size > 5 else ''}); extraction went wrong upstream (check the checkpoint)"
            )
        n = codes.shape[0]
        split = np.asarray(self.split)
        if split.ndim != 1 or split.shape[0] != n:
            raise ValueError(
                f"split has shape {split.shape}; expected ({n},), one split name per row of codes"
            )
        split = split.astype(str)
        unknown = sorted(set(split.tolist()) - set(SPLITS))
        if unknown:
            raise ValueError(f"split holds unknown names {unknown}; valid split names are {list(SPLITS)}")
        labels = check_labels(self.labels, n)
        meta = check_meta(self.meta, codes.shape[1])
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "split", split)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "meta", meta)
        if self.inputs is not None:  # the raw tokens of each row's instance, for the input-only controls
            inputs = np.asarray(self.inputs, dtype=np.float32)
            if inputs.ndim < 2 or inputs.shape[0] != codes.shape[0] or not np.isfinite(inputs).all():
                raise ValueError(
                    f"inputs has shape {inputs.shape}; expected finite [{codes.shape[0]}, pos, d_in] (one row "
                    "of raw tokens per row of codes) or None"
                )
            object.__setattr__(self, "inputs", inputs)

    def __repr__(self) -> str:
        labels = ", ".join(f"{k}{list(v.shape[1:])}" for k, v in self.labels.items())
        counts = ", ".join(f"{s}={int((self.split == s).sum())}" for s in self.splits)
        return (
            f"LatentCodes(task={self.task!r}, codes={list(self.codes.shape)}, labels=[{labels}], "
            f"split=[{counts}])"
        )

    def __len__(self) -> int:
        return self.n_samples

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of `codes`, [n_samples, layer, head, query, key]; scikit-learn reads the row count from it."""
        return tuple(self.codes.shape)

    def __getitem__(self, rows: Any) -> LatentCodes:
        """The rows `rows` selects (a slice, a boolean mask or an index array, in that order) as `LatentCodes`.

        This is what lets scikit-learn's model selection (`cross_val_score`, `GridSearchCV`, any splitter) cut
        codes into folds: it indexes `codes[indices, ...]`, which is accepted too.

        Raises:
            TypeError: a single integer (keep one row with `codes[[i]]`) or an index into other axes.
            IndexError: a mask of the wrong length or an index out of range.

        Example:
            >>> import numpy as np
            >>> lc = LatentCodes(np.arange(3.0).reshape(3, 1, 1, 1, 1), {"rule": np.array([0, 1, 2])},
            ...                  np.array(["train", "train", "ood"]))
            >>> lc[[2, 0]].labels["rule"].tolist(), lc[1:].n_samples, lc[lc.split == "ood"].splits
            ([2, 0], 2, ('ood',))
        """
        if isinstance(rows, tuple):
            if len(rows) == 2 and rows[1] is Ellipsis:
                rows = rows[0]
            else:
                raise TypeError(f"LatentCodes[{rows!r}]: index rows only (codes[rows]); the codes array is .codes")
        if isinstance(rows, int | np.integer):
            raise TypeError(f"LatentCodes[{rows!r}]: index with a slice, a boolean mask or an index array "
                            f"(codes[[{rows!r}]] keeps that one row)")
        if isinstance(rows, slice):
            return self._take(np.arange(self.n_samples)[rows])
        index = np.asarray(rows)
        if index.dtype == bool:
            if index.shape != (self.n_samples,):
                raise IndexError(f"a boolean mask of shape {index.shape}; LatentCodes need one of shape "
                                 f"({self.n_samples},)")
            return self._take(np.flatnonzero(index))
        if index.size and index.dtype.kind not in "iu":
            raise TypeError(f"LatentCodes rows are indexed by integers or a boolean mask, not {index.dtype}")
        index = index.astype(np.int64).ravel()
        if index.size and (index.max() >= self.n_samples or index.min() < -self.n_samples):
            raise IndexError(f"row index out of range for {self.n_samples} rows")
        return self._take(index)

    def _take(self, index: np.ndarray) -> LatentCodes:
        """Rows `index` (integers, in that order, repeats kept)."""
        return LatentCodes(
            codes=self.codes[index],
            labels={k: v[index] for k, v in self.labels.items()},
            split=self.split[index],
            meta=dict(self.meta),
            inputs=None if self.inputs is None else self.inputs[index],
        )

    @property
    def n_samples(self) -> int:
        """Number of instances (rows)."""
        return int(self.codes.shape[0])

    @property
    def n_layers(self) -> int:
        """Length of the layer axis."""
        return int(self.codes.shape[1])

    @property
    def n_heads(self) -> int:
        """Number of attention heads."""
        return int(self.codes.shape[2])

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits present, in `SPLITS` order."""
        present = set(self.split.tolist())
        return tuple(s for s in SPLITS if s in present)

    @property
    def task(self) -> str | None:
        """`meta["task"]`, or None when the producer did not say."""
        return self.meta.get("task")

    @property
    def label(self) -> str | None:
        """The default label to decode: `meta["label"]`, which extraction takes from the task's declaration ("rule"
        for SRAVEN, "terms" for fuzzy logic)."""
        return meta_value(self.meta, "label")

    @property
    def label_kinds(self) -> dict[str, str]:
        """label -> what it holds (`probes.metadata.LABEL_KINDS`: "class", "class_set", "bits", ...), from
        `meta["label_kinds"]`; empty when the producer said nothing."""
        return meta_label_kinds(self.meta)

    def labels_of_kind(self, kind: str) -> list[str]:
        """The labels these codes carry whose kind (`label_kinds`) is `kind`, in `label_kinds` order."""
        return [name for name, have in self.label_kinds.items() if have == kind and name in self.labels]

    @property
    def composition_label(self) -> str | None:
        """The label holding each row's composition (`meta["composition_label"]`: "rules", "terms"), or None."""
        return meta_value(self.meta, "composition_label")

    @property
    def control(self) -> dict[str, Any]:
        """Which controls apply (`meta["control"]`, see `probes.metadata.meta_control`): `inputs` ("positions" or
        "all_tokens") and `control_task` (bool)."""
        return meta_control(self.meta)

    @property
    def reading_inputs(self) -> str | None:
        """The input choice the codes were read at (`meta["inputs"]`; `meta_reading_inputs` says what files written
        before readings were recorded are assumed to hold)."""
        return meta_reading_inputs(self.meta)

    @property
    def reading(self) -> str | None:
        """Where and on what inputs the codes were read, in words, as tables and figure titles show it
        (`meta["reading"]`; `meta_reading` for older files); None for codes that record no positions (made by hand).

        Example:
            >>> import numpy as np
            >>> meta = {"task": "fuzzy_logic", "positions": "paper"}  # a file written before readings were recorded
            >>> LatentCodes(np.zeros((2, 1, 1, 1, 1)), {}, np.array(["train", "ood"]), meta).reading
            'paper positions, uniform inputs (assumed: written before readings were recorded)'
        """
        return meta_reading(self.meta)

    @property
    def layer_names(self) -> list[int]:
        """The model layer of each entry of the layer axis (`meta["layers"]`, else 0..n_layers-1)."""
        return [int(x) for x in self.meta.get("layers") or range(self.n_layers)]

    @property
    def score_norm(self) -> str | None:
        """`meta["score_norm"]`: softmax codes are probabilities, `none` and `rms_head` codes are not."""
        return self.meta.get("score_norm")

    def class_names(self, n_classes: int | None = None) -> list[str]:
        """Display names of the classes of the default label (`meta["class_names"]`, else "0", "1", ...)."""
        names = self.meta.get("class_names")
        n_classes = n_classes or self.meta.get("n_classes")
        if names and (n_classes is None or len(names) >= n_classes):
            return [str(x) for x in names]
        return [str(i) for i in range(n_classes or 0)]

    def axis_positions(self, layers: LayerChoice) -> list[int]:
        """Positions on the layer axis of the layers `layers` selects (`resolve_layers`: a layer name, a model layer
        number or a list of them), each once, in the order chosen.

        Raises:
            ValueError: a layer that was not extracted, or a name that is not a layer choice (one line saying which
                values `layers=` takes).

        Example:
            >>> import numpy as np
            >>> lc = LatentCodes(np.zeros((2, 2, 1, 1, 1)), {}, np.array(["train", "ood"]), {"layers": [1, 3]})
            >>> lc.axis_positions([3, 1]), lc.axis_positions("last"), lc.axis_positions("all")
            ([1, 0], [1], [0, 1])
        """
        return list(dict.fromkeys(p for _, positions in self.layer_groups(layers) for p in positions))

    def layer_groups(self, layers: LayerChoice = "each+all") -> list[tuple[str, list[int]]]:
        """Resolve a layer choice into named groups of positions on the layer axis (`resolve_layers`).

        Args:
            layers: "each" (one group per layer), "all" (one group of every layer), "each+all" (both),
                "last", a model layer number, or a list of model layer numbers (one group each).

        Returns:
            (name, positions) pairs. A single layer is named by its model layer (`layer_names`), e.g. "3";
            the group of every layer is named "all".

        Example:
            >>> import numpy as np
            >>> lc = LatentCodes(np.zeros((2, 2, 1, 1, 1)), {}, np.array(["train", "ood"]), {"layers": [1, 3]})
            >>> lc.layer_groups("each+all")
            [('1', [0]), ('3', [1]), ('all', [0, 1])]
            >>> lc.layer_groups(3)
            [('3', [1])]
        """
        return resolve_layers(layers, self.layer_names)

    def layer_group(self, layer: str | int, *, what: str = "layer") -> tuple[str, list[int]]:
        """The one layer group `layer` names ("last", "all", a model layer number or its string, e.g. "3"), for
        analyses of a single group (`rule_similarity`, `embed_codes`).

        Raises:
            ValueError: a choice of several groups ("each", "each+all", a list of layers) or an unknown layer.
        """
        groups = self.layer_groups(layer)
        if len(groups) != 1:
            raise ValueError(
                f"{what}={layer!r} selects {len(groups)} layer groups; {what}= takes one: 'last', 'all' or a model "
                f"layer number from {self.layer_names}"
            )
        return groups[0]

    def label_values(self, label: str | None = None) -> np.ndarray:
        """The array of label `label` (default: `self.label`, the codes' default label).

        Raises:
            ValueError: the label does not exist (the message lists the labels that do).
        """
        label = label or self.label
        if label is None:
            raise ValueError(
                "no label given and meta has neither 'label' nor a known 'task'; "
                f"pass label= one of {sorted(self.labels)}"
            )
        if label not in self.labels:
            raise ValueError(f"label={label!r} is not in these codes; available labels: {sorted(self.labels)}")
        return self.labels[label]

    def composition_ids(self, groups: str | None = None) -> np.ndarray:
        """An integer id per row naming its composition, for grouped cross-validation (`GroupKFold`): the `groups`
        label, else `composition`, else the codes' composition label (`composition_label`, as a set when its kind
        is "class_set"), else their bits label. Rows with equal values get equal ids.

        Raises:
            ValueError: none of those labels is in the codes (the message lists the labels there are).

        Example:
            >>> import numpy as np
            >>> rules = np.array([[0, 1], [2, 3], [0, 1]])
            >>> LatentCodes(np.zeros((3, 1, 1, 1, 1)), {"rules": rules}, np.array(["train"] * 3),
            ...             {"composition_label": "rules"}).composition_ids().tolist()
            [0, 1, 0]
        """
        candidates = [groups] if groups else ["composition", self.composition_label, *self.labels_of_kind("bits")]
        candidates = list(dict.fromkeys(key for key in candidates if key))
        for key in candidates:
            if key in self.labels:
                values = self.labels[key].reshape(self.n_samples, -1)
                if self.label_kinds.get(key) == "class_set":
                    values = np.sort(values, axis=1)
                return np.unique(values, axis=0, return_inverse=True)[1].ravel().astype(np.int64)
        raise ValueError(
            f"groups={groups!r}: these codes have none of the labels that name a composition "
            f"({', '.join(candidates) or 'no composition label recorded'}); available labels: {sorted(self.labels)}"
        )

    def to_sklearn(
        self, layers: LayerChoice | None = None, label: str | None = None, groups: str | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The arrays scikit-learn's estimators and model selection take: `X, y, groups = codes.to_sklearn(...)`.

        Args:
            layers: the feature layers, as in `flat`.
            label: the target label (default: the codes' default label, `label`).
            groups: the label naming each row's composition (default: as `composition_ids` finds it).

        Returns:
            (X float32 [n_samples, features] = `flat(layers)`, y = `label_values(label)`, groups = an integer
            composition id per row, or None when the codes record no composition and `groups` was not given).
        """
        try:
            ids = self.composition_ids(groups)
        except ValueError:
            if groups is not None:
                raise
            ids = None
        return self.flat(layers), self.label_values(label), ids

    def flat(self, layers: LayerChoice | None = None) -> np.ndarray:
        """Codes as a feature matrix.

        Args:
            layers: the layers to keep, as everywhere a layer is taken (`resolve_layers`): "last", "all", a model
                layer number (see `layer_names`) or a list of them ("each" and "each+all" keep every layer, once);
                None keeps every extracted layer.

        Returns:
            float32 [n_samples, features], features = (layers, head, query, key) flattened in that order.
        """
        codes = self.codes
        if layers is not None:
            codes = codes[:, self.axis_positions(layers)]
        return codes.reshape(codes.shape[0], -1)

    def _flat_axis(self, positions: Sequence[int]) -> np.ndarray:
        """`flat` by positions on the layer axis (what `layer_groups` returns), for the probes."""
        codes = self.codes[:, list(positions)]
        return codes.reshape(codes.shape[0], -1)

    def select(
        self, split: str | Sequence[str] | None = None, mask: np.ndarray | Sequence[int] | None = None
    ) -> LatentCodes:
        """Rows by split name(s) and/or a boolean mask or index array (both given: rows satisfying both).

        Raises:
            ValueError: an unknown split name or a mask of the wrong length.
        """
        keep = np.ones(self.n_samples, dtype=bool)
        if split is not None:
            names = [split] if isinstance(split, str) else list(split)
            unknown = sorted(set(names) - set(SPLITS))
            if unknown:
                raise ValueError(f"split={split!r} holds unknown names {unknown}; valid: {list(SPLITS)}")
            keep &= np.isin(self.split, names)
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype == bool:
                if mask.shape != (self.n_samples,):
                    raise ValueError(f"mask has shape {mask.shape}; a boolean mask needs shape ({self.n_samples},)")
                keep &= mask
            else:
                chosen = np.zeros(self.n_samples, dtype=bool)
                chosen[mask.astype(int)] = True
                keep &= chosen
        return self._take(np.flatnonzero(keep))

    def save(self, path: str | os.PathLike) -> Path:
        """Write `<path>.npz` (arrays) and `<path>.json` (meta); `path` may end in `.npz` or not.

        Both files are written to a temporary name first and then renamed, so a crash leaves no half file.

        Returns:
            The path of the `.npz` file.
        """
        npz_path = write_codes(path, self.codes, self.split, self.labels, self.meta, self.inputs)
        logger.info("saved %d latent codes to %s", self.n_samples, npz_path)
        return npz_path

    @classmethod
    def load(cls, path: str | os.PathLike) -> LatentCodes:
        """Read codes written by `save` (`path` with or without `.npz`).

        Raises:
            FileNotFoundError: the `.npz` or `.json` file is missing.
            ValueError: the file is not a latent-code file, is truncated, or holds NaN/infinite codes.
        """
        npz_path, arrays, labels, meta = read_codes(path)
        try:
            return cls(
                codes=arrays["codes"], labels=labels, split=arrays["split"], meta=meta, inputs=arrays.get("inputs")
            )
        except ValueError as err:
            raise ValueError(f"{npz_path}: {err}") from err
