"""What the per-label decoders return, beside a label's own decoding: `TermDecodingResult` (one binary probe per
class of a set label, scored by F1: `decode_terms`) and `BitRegressionResult` (ridge R² per bit of a bits label:
`ridge_bits`). `decode_rules` fits them for the labels whose kind asks for them (`LatentCodes.label_kinds`:
"class_set", "bits"; fuzzy logic's `terms` and `term_bits`) and keeps them in `DecodingResult.extras`, keyed by the
label's own name, so the generic result names no task's labels.

`extras_from_dict` reads that mapping back from a `DecodingResult.to_dict()`, including JSON written before 0.3 (where
they sat under the keys "terms" and "bits").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from probes.codes_io import jsonable
from probes.decoding.headline import Headline, constant_line, headline_grid, reading_line
from probes.tables import NA
from probes.tables import format_score as _fmt

__all__ = ["BitRegressionResult", "LabelResult", "TermDecodingResult", "extras_from_dict"]


@dataclass(frozen=True)
class TermDecodingResult:
    """Per-class binary probes of a set label ("is class c in the row's set?"; fuzzy logic: is term t in the
    instance's composition?), per layer, scored by F1.

    Attributes:
        label: the set label decoded (fuzzy logic: `terms`).
        class_names: names of all classes (fuzzy logic: the 2^L terms).
        layers: probe names, as in `DecodingResult`.
        evaluated: classes with both presence values in the training rows, so a probe was fitted.
        skipped: class -> why no probe was fitted ("absent from train" / "present in every train row"); these
            are predicted constant and have F1 NaN.
        f1: split -> F1 [layer, class] (NaN: skipped, or no positives predicted or present in the split).
        support: split -> rows containing each class [class].
        input_only_f1: split -> mean F1 of the same per-class probes on the raw input tokens (the input-only
            control, `probes.decoding.controls`), or None when the codes carry no inputs.
        always_present_f1: split -> the floor: mean F1, over the evaluated classes, of answering "present" for
            every row (per class 2s / (n + s) for s of the split's n rows holding it; 0 for a class absent there).
        reading: where and on what inputs the codes were read (`LatentCodes.reading`), or None.
        constant_layers: probes whose codes were constant (`probes.degenerate`): their F1 reads rounding noise,
            and the all-layers probe leaves those layers' features out.
    """

    metric: ClassVar[str] = "term_f1"
    """Its key in `DecodingResult.headlines()`."""

    label: str
    class_names: list[str]
    layers: list[str]
    evaluated: list[int]
    skipped: dict[int, str]
    f1: dict[str, np.ndarray]
    support: dict[str, np.ndarray]
    input_only_f1: dict[str, float] | None = None
    always_present_f1: dict[str, float] | None = None
    reading: str | None = None
    constant_layers: list[str] = field(default_factory=list)

    def mean_f1(self, split: str) -> np.ndarray:
        """Mean F1 over evaluated classes with a defined F1, per layer [layer]."""
        with np.errstate(all="ignore"):
            f1 = self.f1[split]
            return np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in f1])

    def headlines(self) -> dict[str, Headline]:
        """Split -> mean F1 per probe beside the always-present floor and the input-only control."""
        return {
            split: Headline("term F1", split, list(self.layers), self.mean_f1(split),
                            {"always_present": (self.always_present_f1 or {}).get(split)},
                            (self.input_only_f1 or {}).get(split))
            for split in self.f1
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN -> null), with `headline`: split -> `Headline.to_dict()`."""
        return jsonable({**asdict(self), "headline": {s: h.to_dict() for s, h in self.headlines().items()}})

    def table(self) -> str:
        """Mean per-class F1 per layer and split beside the always-present floor, the input-only control and the
        headline (codes − best), and the skipped classes."""
        lines = [f"per-class probes of {self.label!r}: mean F1 over {len(self.evaluated)} decodable classes",
                 reading_line(self.reading),
                 headline_grid(self.headlines(), "always_present", "always-present")]
        if self.skipped:
            lines.append(
                f"no probe ({NA}): " + ", ".join(f"{self.class_names[c]} ({why})" for c, why in self.skipped.items())
            )
        if self.constant_layers:
            lines.append(constant_line(self.constant_layers))
        return "\n".join(lines)


@dataclass(frozen=True)
class BitRegressionResult:
    """Ridge regression from codes to each bit of a bits label, as R², per layer (fuzzy logic: the reference
    code's `r2_attn_latent`).

    Attributes:
        label: the bit label, flattened over its trailing axes (fuzzy logic: `term_bits` [K, L]).
        bit_names: "term k bit l" for each flattened bit.
        layers: probe names.
        alpha: ridge strength (1.0 as in the reference; intercept fitted, codes not standardized).
        n_folds: GroupKFold folds on the training rows (groups = compositions, so no composition is in both
            the fitting and the scoring fold).
        n_groups: compositions in the training rows.
        r2_cv: out-of-fold R² on the training rows [layer, bit] (NaN where a bit is constant).
        r2: split -> R² of a ridge fitted on all training rows [layer, bit].
        reading: where and on what inputs the codes were read (`LatentCodes.reading`), or None.
        train_mean_r2: split -> the floor: mean R² over bits of predicting the train rows' mean (at most 0).
        input_only_r2: split -> mean R² over bits of the same ridge on the raw input tokens (the input-only
            control), or None when the codes carry no inputs.
    """

    metric: ClassVar[str] = "bit_r2"
    """Its key in `DecodingResult.headlines()`."""

    label: str
    bit_names: list[str]
    layers: list[str]
    alpha: float
    n_folds: int
    n_groups: int
    r2_cv: np.ndarray
    r2: dict[str, np.ndarray]
    reading: str | None = None
    train_mean_r2: dict[str, float] | None = None
    input_only_r2: dict[str, float] | None = None

    def mean(self, split: str = "cv") -> np.ndarray:
        """Mean R² over bits per layer ("cv" for the grouped cross-validation on train)."""
        values = self.r2_cv if split == "cv" else self.r2[split]
        with np.errstate(all="ignore"):
            return np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in values])

    def headlines(self) -> dict[str, Headline]:
        """Split -> mean R² per probe beside the train-mean floor and the input-only control."""
        return {
            split: Headline("bit R²", split, list(self.layers), self.mean(split),
                            {"train_mean": (self.train_mean_r2 or {}).get(split)},
                            (self.input_only_r2 or {}).get(split))
            for split in self.r2
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (NaN -> null), with `headline`: split -> `Headline.to_dict()`."""
        return jsonable({**asdict(self), "headline": {s: h.to_dict() for s, h in self.headlines().items()}})

    def table(self) -> str:
        """Mean R² over bits per layer (grouped CV on train, then train -> each split) beside the train-mean floor,
        the input-only control and the headline."""
        cv = self.mean("cv")
        title = (
            f"ridge R² (alpha={self.alpha}) of {len(self.bit_names)} bits of {self.label!r}, mean over bits; "
            f"cv = train rows, {self.n_folds}-fold by composition"
        )
        grid = headline_grid(self.headlines(), "train_mean", "train-mean",
                              first=("cv", [_fmt(v) for v in cv]))
        return "\n".join([title, reading_line(self.reading), grid])


LabelResult = TermDecodingResult | BitRegressionResult
"""A per-label result kept in `DecodingResult.extras`: each has `label`, `metric`, `headlines()`, `to_dict()` and
`table()`."""


def extras_from_dict(decoding: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The per-label results of a `DecodingResult.to_dict()` (or a `.decode.json`), as plain dicts keyed by label:
    `{"terms": {...per-class F1...}, "term_bits": {...ridge R²...}}` for fuzzy-logic codes, {} when there are none.

    Reads JSON of every version: since 0.3 they are under `extras`; before, under `terms` and `bits`.

    >>> extras_from_dict({"terms": {"label": "terms", "f1": {}}, "bits": None})
    {'terms': {'label': 'terms', 'f1': {}}}
    """
    if not decoding:
        return {}
    if "extras" in decoding:
        return dict(decoding["extras"] or {})
    return {old["label"]: old for key in ("terms", "bits") if (old := decoding.get(key))}
