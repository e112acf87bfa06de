"""`LatentCodes`: attention latent codes with their ground-truth labels, the hand-off from extraction to probes.

Only numpy arrays, JSON metadata and a `.npz` + `.json` file pair (read with `allow_pickle=False`). Producing
codes from a model is `latentcode.codes.extract`'s job; this module deliberately knows nothing about models or
torch. What `layers=` means (`LAYER_NAMES`, `LayerChoice`, `resolve_layers`) and the layer-axis methods of
`LatentCodes` (`layer_groups`, `flat`, ...) are `probes.layers`'; those names are importable from here too.
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
    check_codes,
    check_inputs,
    check_labels,
    check_meta,
    read_codes,
    write_codes,
)
from probes.layers import LAYER_NAMES, LayerAxis, LayerChoice, resolve_layers
from probes.metadata import (
    meta_control,
    meta_label_kinds,
    meta_reading,
    meta_reading_inputs,
    meta_value,
)

__all__ = ["LAYER_NAMES", "SPLITS", "LatentCodes", "LayerChoice", "resolve_layers"]

logger = logging.getLogger(__name__)

SPLITS: tuple[str, ...] = ("train", "test", "ood", "novel_terms")
"""Every split name a row may carry, in display order (spec §8.1)."""


@dataclass(frozen=True, eq=False)
class LatentCodes(LayerAxis):
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
        codes = check_codes(self.codes)
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
            object.__setattr__(self, "inputs", check_inputs(self.inputs, n))

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
