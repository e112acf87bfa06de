"""What the conditional, MDL and baseline probes share: a label read as a probing target (`Target`: one class per
row, or a set of classes per row as fuzzy-logic terms), the rows of each split, the floors, and fitting any
scikit-learn classifier to it (`fit_proba`, `predict`). A set label is probed as one binary probe per class, as
`decode_rules` does; a class that never varies over the fitting rows gets no probe and its constant is predicted, and
a row's predicted set is its k most probable classes (k = its set's size), scored by the fraction of its classes found.
Numpy and scikit-learn only; nothing here reads a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.base import ClassifierMixin, clone

from probes.codes import LatentCodes
from probes.labels import class_labels

__all__ = ["Target", "eval_splits", "fit_proba", "majority_floor", "predict", "read_target", "score", "set_sizes"]

EstimatorFactory = Callable[[], ClassifierMixin] | ClassifierMixin


@dataclass(frozen=True)
class Target:
    """A label as a probing target.

    Attributes:
        name: the label's name in the codes.
        kind: "class" (one of `n_classes` classes per row) or "set" (a set of classes per row).
        y: "class": int64 [n] class index 0..n_classes-1; "set": int64 [n, n_classes] presence indicator.
        class_names: display name of each class.
    """

    name: str
    kind: str
    y: np.ndarray
    class_names: list[str]

    @property
    def n_classes(self) -> int:
        return len(self.class_names)


def read_target(codes: LatentCodes, label: str | None = None) -> Target:
    """The label `label` (default: the codes' default label) as a `Target`.

    Raises:
        ValueError: the label is missing (the message lists the labels there are) or is not a class label.
    """
    name = label or codes.label
    if name is None or name not in codes.labels:
        raise ValueError(f"label={label!r} is not in these codes; available labels: {sorted(codes.labels)}")
    name, y, classes, names = class_labels(codes, name)
    if y.ndim == 2:
        indicator = np.zeros((y.shape[0], len(classes)), dtype=np.int64)
        np.put_along_axis(indicator, y.astype(np.int64), 1, axis=1)
        return Target(name, "set", indicator, list(names))
    index = np.searchsorted(np.asarray(classes), y)
    return Target(name, "class", index.astype(np.int64), list(names))


def eval_splits(codes: LatentCodes, splits: str | Sequence[str] | None) -> list[str]:
    """The evaluation splits (default: every split but train), each checked to have rows.

    Raises:
        ValueError: no train rows, no evaluation rows, a split named 'train' or a split without rows.
    """
    if not (codes.split == "train").any():
        raise ValueError(f"codes has no rows in split 'train' (splits present: {list(codes.splits)}); the probes "
                         "fit on train-split codes: extract codes for the train split too")
    chosen = [s for s in codes.splits if s != "train"] if splits is None else (
        [splits] if isinstance(splits, str) else list(splits))
    if not chosen:
        raise ValueError(f"codes has no evaluation rows (splits present: {list(codes.splits)}); extract test or ood")
    for split in chosen:
        if split == "train" or not (codes.split == split).any():
            raise ValueError(f"splits={splits!r}: {split!r} is not an evaluation split with rows (present: "
                             f"{[s for s in codes.splits if s != 'train']})")
    return chosen


def _make(estimator: EstimatorFactory) -> ClassifierMixin:
    return clone(estimator) if hasattr(estimator, "get_params") else estimator()


def fit_proba(estimator: EstimatorFactory, X_fit: np.ndarray, y_fit: np.ndarray, X_eval: np.ndarray,
              n_classes: int) -> np.ndarray:
    """Fit a fresh copy of `estimator` on (X_fit, y_fit) and return its probabilities on X_eval.

    Args:
        estimator: an unfitted scikit-learn classifier (cloned) or a function returning one.
        y_fit: class indices [n] or a presence indicator [n, n_classes] (one binary probe per class).
        n_classes: the number of classes (classes absent from `y_fit` get probability 0).

    Returns:
        float64 [n_eval, n_classes]: class probabilities (rows sum to 1), or for an indicator the probability
        that each class is present.
    """
    out = np.zeros((len(X_eval), n_classes))
    if y_fit.ndim == 2:
        for c in range(n_classes):
            column = y_fit[:, c]
            if column.min() == column.max():
                out[:, c] = float(column[0])
            else:
                model = _make(estimator).fit(X_fit, column)
                out[:, c] = model.predict_proba(X_eval)[:, list(model.classes_).index(1)]
        return out
    present = np.unique(y_fit)
    if present.size == 1:
        out[:, present[0]] = 1.0
        return out
    model = _make(estimator).fit(X_fit, y_fit)
    out[:, np.asarray(model.classes_, dtype=np.int64)] = model.predict_proba(X_eval)
    return out


def _top(scores: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Indicator of each row's `sizes[row]` highest-scoring classes."""
    ranks = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1)
    return (ranks < sizes[:, None]).astype(np.int64)


def predict(proba: np.ndarray, kind: str, sizes: np.ndarray | None = None) -> np.ndarray:
    """Predictions from `fit_proba`'s output: the most probable class; for a set label, the `sizes[row]` classes
    most probably present (the true set's size, known to the task: fuzzy logic's compositions have n_terms terms)."""
    if kind == "set":
        return _top(proba, np.asarray(sizes))
    return np.argmax(proba, axis=1)


def score(predicted: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-row score (float [n]): 1 for the right class; for a set label, the fraction of the row's classes among
    the predicted ones (top-k recall with k the set's size)."""
    if y.ndim == 2:
        return (predicted * y).sum(axis=1) / np.maximum(y.sum(axis=1), 1)
    return (predicted == y).astype(float)


def set_sizes(target: Target) -> np.ndarray | None:
    """Each row's number of classes for a set label (None for a class label)."""
    return target.y.sum(axis=1) if target.kind == "set" else None


def majority_floor(target: Target, train: np.ndarray, rows: np.ndarray) -> float:
    """Score on `rows` of always answering from the train split's class frequencies: its most frequent class, or for
    a set label its k most frequent classes."""
    y = target.y
    if target.kind == "set":
        frequency = np.broadcast_to(y[train].mean(axis=0), y[rows].shape)
        return float(score(_top(frequency, y[rows].sum(axis=1)), y[rows]).mean())
    return float(np.mean(y[rows] == np.bincount(y[train]).argmax()))
