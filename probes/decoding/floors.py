"""What a decoder is judged against, from the labels alone: the floors of a label with one class per row and of a
label of class sets (`Baseline`: chance, the train-majority class, the best constant; the always-present F1 of
per-class probes), and the accuracy with classes that share a code merged, read from the probes' confusion
matrices (`MergedScore`). Nothing is fitted here; `fit.py` calls these beside its probes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from probes.decoding.headline import Baseline
from probes.decoding.results import MergedScore

__all__ = ["always_present_f1", "merge_partition", "merged_score", "multiclass_floors", "set_floors"]


def always_present_f1(indicator: np.ndarray, mask: np.ndarray, evaluated: list[int]) -> float:
    """Mean F1 over the evaluated classes of answering "present" on every row of `mask`: the set-decoding floor."""
    support = indicator[mask][:, evaluated].sum(axis=0)
    n = int(mask.sum())
    return float(np.mean(2 * support / (n + support))) if n else float("nan")


def multiclass_floors(y, train, masks, n_classes) -> tuple[Any, dict[str, Baseline]]:
    """The train split's majority class and, per evaluation split, the floors of a label with one class per row."""
    values, counts = np.unique(y[train], return_counts=True)
    majority = values[np.argmax(counts)]
    baselines = {}
    for split, mask in masks.items():
        _, eval_counts = np.unique(y[mask], return_counts=True)
        baselines[split] = Baseline(
            n_samples=int(mask.sum()),
            chance=1.0 / n_classes,
            majority=float(np.mean(y[mask] == majority)),
            best_constant=float(eval_counts.max() / mask.sum()),
        )
    return majority, baselines


def set_floors(y, train, masks, n_classes) -> tuple[np.ndarray, dict[str, Baseline]]:
    """The train split's majority set and, per evaluation split, the floors of a label holding a set per row (chance:
    one of C(n_classes, K) sets)."""
    sets = np.sort(y, axis=1)
    values, counts = np.unique(sets[train], axis=0, return_counts=True)
    majority = values[np.argmax(counts)]
    baselines = {}
    for split, mask in masks.items():
        _, eval_counts = np.unique(sets[mask], axis=0, return_counts=True)
        baselines[split] = Baseline(
            n_samples=int(mask.sum()),
            chance=1.0 / math.comb(n_classes, y.shape[1]),
            majority=float(np.mean((sets[mask] == majority).all(axis=1))),
            best_constant=float(eval_counts.max() / mask.sum()),
        )
    return majority, baselines


def merge_partition(name: str, merge: Any, classes: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[list[str]]]:
    """Each class's merged class (an index per class) and the merged groups by name, from `merge`: groups of class
    names or values, each class in at most one group; classes not named stay on their own."""
    groups = [list(group) for group in merge] if not isinstance(merge, str) else None
    if not groups or any(isinstance(group, str) or len(group) < 2 for group in groups):
        raise ValueError(
            f"merge={merge!r} is not a list of groups of classes; pass e.g. merge=[[{names[0]!r}, {names[-1]!r}]] "
            f"(classes of {name!r}: {names})"
        )
    values = [str(c) for c in classes]
    group_of = np.arange(len(classes))
    seen: set[int] = set()
    named = []
    for g, group in enumerate(groups):
        members = []
        for member in group:
            text = str(member)
            index = names.index(text) if text in names else values.index(text) if text in values else None
            if index is None:
                raise ValueError(f"merge={merge!r}: {member!r} is not a class of {name!r}; its classes: {names}")
            if index in seen:
                raise ValueError(f"merge={merge!r}: class {names[index]!r} is in more than one group; groups must "
                                 "not overlap")
            seen.add(index)
            members.append(index)
        group_of[members] = len(classes) + g  # relabelled densely below
        named.append([names[i] for i in members])
    return np.unique(group_of, return_inverse=True)[1], named


def merged_score(name, merge, y, classes, names, train, masks, rows) -> MergedScore:
    """The probes' accuracy with the classes of `merge` merged, read from their confusion matrices."""
    group_of, groups = merge_partition(name, merge, classes, names)
    n_merged = int(group_of.max()) + 1
    merged_names = []
    for m in range(n_merged):
        members = [names[i] for i in np.flatnonzero(group_of == m)]
        merged_names.append("+".join(members))
    y_merged = group_of[np.searchsorted(classes, y)]
    majority, baselines = multiclass_floors(y_merged, train, masks, n_merged)
    same = group_of[:, None] == group_of[None, :]
    accuracy = {
        split: np.array([float(row.confusion[split][same].sum() / row.confusion[split].sum()) for row in rows])
        for split in masks
    }
    return MergedScore(groups=groups, n_classes=n_merged, majority_class=merged_names[int(majority)],
                       accuracy=accuracy, baselines=baselines)
