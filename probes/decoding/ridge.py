"""The reference code's decoder of latent bits: ridge regression from codes to each bit, as R², with folds grouped
by composition (`fit_bits`, without its input-only control, which `controls.py` adds). For codes whose metadata has
a bits label (`label_kinds`: fuzzy logic's `term_bits`). Numpy and scikit-learn only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.model_selection import GroupKFold, cross_val_predict

from probes.codes import LatentCodes
from probes.decoding.extras import BitRegressionResult
from probes.decoding.fit import LayerChoice, _require_kind, _resolve_splits, _train_rows

__all__ = ["fit_bits"]


def _composition_groups(codes: LatentCodes, groups: str | None) -> np.ndarray:
    """An id per row naming its composition: the `groups` label, else `composition`, else the codes' composition
    label (`LatentCodes.composition_label`, as a set when its kind is "class_set"), else their bits label."""
    return codes.composition_ids(groups)


def _r2_per_column(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    residual = ((y_true - y_pred) ** 2).sum(axis=0)
    total = ((y_true - y_true.mean(axis=0)) ** 2).sum(axis=0)
    with np.errstate(all="ignore"):
        return np.where(total > 0, 1.0 - residual / total, np.nan)


def fit_bits(
    codes: LatentCodes,
    label: str = "term_bits",
    layers: LayerChoice = "each+all",
    *,
    alpha: float = 1.0,
    n_folds: int = 5,
    groups: str | None = None,
    splits: str | Sequence[str] | None = None,
) -> BitRegressionResult:
    """`ridge_bits` without the input-only control (its train-mean floor included).

    The ridge reads every layer of the all-layers group: it does not standardize, so constant layers add no
    noise to it.

    Args and Raises: as in `probes.ridge_bits`.
    """
    _require_kind(codes, label, "bits", "ridge_bits")
    train = _train_rows(codes)
    splits = _resolve_splits(codes, splits)
    bits = codes.label_values(label).reshape(codes.n_samples, -1).astype(np.float64)
    shape = codes.labels[label].shape[1:]
    if len(shape) == 2:
        bit_names = [f"term {k} bit {b}" for k in range(shape[0]) for b in range(shape[1])]
    else:
        bit_names = [f"bit {b}" for b in range(bits.shape[1])]
    composition = _composition_groups(codes, groups)[train]
    n_groups = int(np.unique(composition).size)
    if n_groups < 2:
        raise ValueError(
            f"groups={groups!r}: the train rows hold {n_groups} composition; grouped cross-validation needs >= 2"
        )
    folds = min(n_folds, n_groups)
    layer_groups = codes.layer_groups(layers)
    r2_cv = np.full((len(layer_groups), bits.shape[1]), np.nan)
    r2 = {s: np.full_like(r2_cv, np.nan) for s in splits}
    for g, (_, positions) in enumerate(layer_groups):
        X = codes._flat_axis(positions).astype(np.float64)
        ridge = Ridge(alpha=alpha, fit_intercept=True)
        out_of_fold = cross_val_predict(
            ridge, X[train], bits[train], groups=composition, cv=GroupKFold(folds)
        )
        r2_cv[g] = _r2_per_column(bits[train], out_of_fold)
        ridge.fit(X[train], bits[train])
        for split in splits:
            mask = codes.split == split
            r2[split][g] = _r2_per_column(bits[mask], ridge.predict(X[mask]))
    train_mean = bits[train].mean(axis=0)
    with np.errstate(all="ignore"):
        floor = {}
        for split in splits:
            mask = codes.split == split
            per_bit = _r2_per_column(bits[mask], np.broadcast_to(train_mean, bits[mask].shape))
            floor[split] = float(np.nanmean(per_bit)) if np.isfinite(per_bit).any() else float("nan")
    return BitRegressionResult(
        label=label,
        bit_names=bit_names,
        layers=[name for name, _ in layer_groups],
        alpha=alpha,
        n_folds=folds,
        n_groups=n_groups,
        r2_cv=r2_cv,
        r2=r2,
        reading=codes.reading,
        train_mean_r2=floor,
    )
