"""What the decoders return: `DecodingResult` and its parts (`Baseline`, `LayerDecoding`, `TermDecodingResult`,
`BitRegressionResult`), frozen dataclasses with `to_dict()` and `table()`. No fitting here (that is `decode.py`);
import them from `probes` or `probes.decode`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from probes._compat import warn_renamed
from probes.codes import _jsonable
from probes.controls import (
    Controls,
    control_columns,
    term_control_columns,
)


@dataclass(frozen=True)
class Baseline:
    """What a decoder that ignores the codes scores on one evaluation split.

    Attributes:
        n_samples: rows in the split.
        chance: uniform guessing: 1 / n_classes (for sets of K classes: 1 / C(n_classes, K)).
        majority: the rate, on this split, of the training split's most frequent class (or set): what a
            decoder that learned only the label prior scores.
        best_constant: the rate of this split's own most frequent class: the best any constant answer can
            score here (an upper bound on constant answers, not achievable without seeing the split).
    """

    n_samples: int
    chance: float
    majority: float
    best_constant: float

    @property
    def n(self) -> int:
        """Deprecated name of `n_samples`."""
        warn_renamed("Baseline.n", "Baseline.n_samples")
        return self.n_samples


@dataclass(frozen=True)
class LayerDecoding:
    """Scores of one probe (one layer, or all layers together).

    Attributes:
        layer: model layer ("3") or "all".
        train_accuracy: in-sample accuracy on the training rows.
        accuracy: split -> accuracy (for sets: the predicted set equals the true set).
        macro_f1: split -> macro-averaged F1 (for sets: mean per-class binary F1 over decodable classes).
        confusion: split -> confusion matrix [true class, predicted class] (for sets: per class [class, 2, 2]
            as `sklearn.metrics.multilabel_confusion_matrix`).
    """

    layer: str
    train_accuracy: float
    accuracy: dict[str, float]
    macro_f1: dict[str, float]
    confusion: dict[str, np.ndarray]


@dataclass(frozen=True)
class TermDecodingResult:
    """Per-class binary probes (fuzzy logic: is term t in the instance's composition?), per layer.

    Attributes:
        label: the set label decoded (`terms`).
        class_names: names of all classes (2^L terms).
        layers: probe names, as in `DecodingResult`.
        evaluated: classes with both presence values in the training rows, so a probe was fitted.
        skipped: class -> why no probe was fitted ("absent from train" / "present in every train row"); these
            are predicted constant and have F1 NaN.
        f1: split -> F1 [layer, class] (NaN: skipped, or no positives predicted or present in the split).
        support: split -> rows containing each class [class].
        input_only_f1: split -> mean F1 of the same per-class probes on the raw input tokens (the input-only
            control, `probes.controls`), or None when the codes carry no inputs.
    """

    label: str
    class_names: list[str]
    layers: list[str]
    evaluated: list[int]
    skipped: dict[int, str]
    f1: dict[str, np.ndarray]
    support: dict[str, np.ndarray]
    input_only_f1: dict[str, float] | None = None

    def mean_f1(self, split: str) -> np.ndarray:
        """Mean F1 over evaluated classes with a defined F1, per layer [layer]."""
        with np.errstate(all="ignore"):
            f1 = self.f1[split]
            return np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in f1])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN -> null)."""
        return _jsonable(asdict(self))

    def table(self) -> str:
        """Mean per-class F1 per layer and split, and the skipped classes."""
        splits = list(self.f1)
        means = {s: self.mean_f1(s) for s in splits}
        rows = [[layer, *(_fmt(means[s][i]) for s in splits)] for i, layer in enumerate(self.layers)]
        header = ["layer", *splits]
        if self.input_only_f1:
            extra_header, extra_rows = term_control_columns(self)
            header, rows = header + extra_header, [r + e for r, e in zip(rows, extra_rows, strict=True)]
        lines = [
            f"per-class probes of {self.label!r}: mean F1 over {len(self.evaluated)} decodable classes",
            _grid(header, rows),
        ]
        if self.skipped:
            lines.append(
                "skipped: " + ", ".join(f"{self.class_names[c]} ({why})" for c, why in self.skipped.items())
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class BitRegressionResult:
    """Ridge regression from codes to each latent bit (the reference code's `r2_attn_latent`), per layer.

    Attributes:
        label: the bit label (`term_bits`, flattened over [K, L]).
        bit_names: "term k bit l" for each flattened bit.
        layers: probe names.
        alpha: ridge strength (1.0 as in the reference; intercept fitted, codes not standardized).
        n_folds: GroupKFold folds on the training rows (groups = compositions, so no composition is in both
            the fitting and the scoring fold).
        n_groups: compositions in the training rows.
        r2_cv: out-of-fold R² on the training rows [layer, bit] (NaN where a bit is constant).
        r2: split -> R² of a ridge fitted on all training rows [layer, bit].
    """

    label: str
    bit_names: list[str]
    layers: list[str]
    alpha: float
    n_folds: int
    n_groups: int
    r2_cv: np.ndarray
    r2: dict[str, np.ndarray]

    def mean(self, split: str = "cv") -> np.ndarray:
        """Mean R² over bits per layer ("cv" for the grouped cross-validation on train)."""
        values = self.r2_cv if split == "cv" else self.r2[split]
        with np.errstate(all="ignore"):
            return np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in values])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN -> null)."""
        return _jsonable(asdict(self))

    def table(self) -> str:
        """Mean R² over bits per layer: grouped CV on train and train -> each split."""
        splits = ["cv", *self.r2]
        means = {s: self.mean(s) for s in splits}
        rows = [[layer, *(_fmt(means[s][i]) for s in splits)] for i, layer in enumerate(self.layers)]
        header = ["layer", f"train ({self.n_folds}-fold by composition)", *self.r2]
        title = (
            f"ridge R² (alpha={self.alpha}) of {len(self.bit_names)} bits of {self.label!r}, mean over bits"
        )
        return title + "\n" + _grid(header, rows)


@dataclass(frozen=True)
class DecodingResult:
    """Linear decoding of a label from codes, per layer, with baselines on every evaluation split.

    Attributes:
        task: `meta["task"]` of the codes.
        label: the label decoded.
        kind: "multiclass" (one class per row) or "sets" (a set of classes per row, one probe per class).
        class_names: names of the classes.
        n_train: training rows the probes were fitted on.
        majority_class: the training split's most frequent class (for sets: classes joined with "+").
        baselines: split -> `Baseline` (chance, majority, best constant) on that split.
        layers: one `LayerDecoding` per probe (each layer, then "all").
        terms: fuzzy logic: per-term F1 (`decode_terms`), else None.
        bits: fuzzy logic: ridge R² per latent bit (`ridge_bits`), else None.
        controls: the input-only control and (SRAVEN) the control task, `probes.controls.Controls`; None when
            the codes carry no `inputs` or `controls=False`.
    """

    task: str | None
    label: str
    kind: Literal["multiclass", "sets"]
    class_names: list[str]
    n_train: int
    majority_class: str
    baselines: dict[str, Baseline]
    layers: list[LayerDecoding]
    terms: TermDecodingResult | None = None
    bits: BitRegressionResult | None = None
    params: dict[str, Any] = field(default_factory=dict)
    controls: Controls | None = None

    @property
    def splits(self) -> list[str]:
        """The evaluation splits, in order."""
        return list(self.baselines)

    @property
    def layer_names(self) -> list[str]:
        """Probe names ("0", "1", ..., "all")."""
        return [row.layer for row in self.layers]

    def accuracy(self, split: str) -> np.ndarray:
        """Accuracy on `split` for every probe, in `layer_names` order ("train" gives in-sample accuracy)."""
        if split == "train":
            return np.array([row.train_accuracy for row in self.layers])
        if split not in self.baselines:
            raise ValueError(f"split={split!r} was not evaluated; evaluated splits: {self.splits}")
        return np.array([row.accuracy[split] for row in self.layers])

    def macro_f1(self, split: str) -> np.ndarray:
        """Macro-F1 on `split` for every probe."""
        if split not in self.baselines:
            raise ValueError(f"split={split!r} was not evaluated; evaluated splits: {self.splits}")
        return np.array([row.macro_f1[split] for row in self.layers])

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (arrays as lists, NaN -> null)."""
        return _jsonable(asdict(self))

    def table(self) -> str:
        """Plain-text table: per probe, train and evaluation accuracy, chance, and majority rate per split."""
        splits = self.splits
        what = "set accuracy (exact)" if self.kind == "sets" else "accuracy"
        lines = [
            f"decoding {self.label!r} ({len(self.class_names)} classes, {self.kind}): {what}; probes fit on "
            f"{self.n_train} train rows; majority = rate of the train-majority class {self.majority_class!r}"
        ]
        chance = self.baselines[splits[0]].chance if splits else float("nan")
        header = ["layer", "train", *splits, "chance", *(f"majority {s}" for s in splits)]
        rows = [
            [
                row.layer,
                _fmt(row.train_accuracy),
                *(_fmt(row.accuracy[s]) for s in splits),
                _fmt(chance),
                *(_fmt(self.baselines[s].majority) for s in splits),
            ]
            for row in self.layers
        ]
        if self.controls is not None:
            extra_header, extra_rows = control_columns(self)
            header, rows = header + extra_header, [r + e for r, e in zip(rows, extra_rows, strict=True)]
        lines.append(_grid(header, rows))
        if self.controls is not None:
            lines.append(f"controls: {self.controls.note}")
        for extra in (self.terms, self.bits):
            if extra is not None:
                lines += ["", extra.table()]
        return "\n".join(lines)


def _fmt(x: float) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.3f}"


def _grid(header: list[str], rows: list[list[str]]) -> str:
    """Columns as wide as their widest cell; the first left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    )
