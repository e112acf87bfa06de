"""Labels as colours: what the explorer's static view and its HTML page colour the points by, and which view of
an instance each row of codes reads."""

from __future__ import annotations

from typing import Any

import numpy as np

from probes.codes import LatentCodes

__all__ = ["MAX_CATEGORIES", "colourable_labels", "label_values", "row_views", "unknown_label"]

MAX_CATEGORIES = 400
"""A label with more distinct values than this is not offered for colouring (its legend would say nothing)."""


def label_values(codes: LatentCodes, name: str) -> tuple[np.ndarray, list[str] | None]:
    """A label as colours: (class index per row, class names) for a categorical label, (values, None) for a
    continuous one. Tuples (e.g. SRAVEN's `rules`, fuzzy logic's `terms`) become one class per distinct tuple,
    named with the task's class names where the codes carry them.

    Raises:
        ValueError: a label the codes lack, or one with too many axes or classes to colour by.
    """
    if name == "split":
        values = codes.split
    elif name in codes.labels:
        values = codes.labels[name]
    else:
        raise ValueError(unknown_label(codes, name))
    values = np.asarray(values)
    if values.dtype.kind == "f" and values.ndim == 1:
        return values.astype(np.float64), None
    if values.ndim > 2:
        raise ValueError(f"label {name!r} has shape {values.shape[1:]} per row; colour by a label with one value "
                         f"(or one tuple) per row: {', '.join(colourable_labels(codes))}")
    class_names = codes.meta.get("class_names") or []
    kinds = codes.label_kinds
    named = kinds.get(name) in ("class", "class_set", "class_tuple") and name != "composition"

    def text(value: Any) -> str:
        parts = np.atleast_1d(value).tolist()
        words = [class_names[int(v)] if named and 0 <= int(v) < len(class_names) else str(v) for v in parts]
        return " + ".join(words) if values.ndim == 2 else words[0]

    keys, index = np.unique(values, axis=0, return_inverse=True)
    if len(keys) > MAX_CATEGORIES:
        raise ValueError(f"label {name!r} has {len(keys)} distinct values, too many to colour by (at most "
                         f"{MAX_CATEGORIES}); choose one of {', '.join(colourable_labels(codes))}")
    return index.reshape(-1), [text(key) for key in keys]


def colourable_labels(codes: LatentCodes) -> list[str]:
    """The labels a point can be coloured by: `split` and every label with one value (or one tuple) per row."""
    return ["split"] + [name for name, value in codes.labels.items() if np.asarray(value).ndim <= 2]


def unknown_label(codes: LatentCodes, name: str) -> str:
    """The one-line error for a label the codes lack, naming the ones they have."""
    return f"label={name!r} is not a label of these codes; colour by one of: {', '.join(colourable_labels(codes))}"


def row_views(codes: LatentCodes) -> np.ndarray:
    """Which view of its instance each row of codes reads (0 for codes read at one view)."""
    if "view" in codes.labels:
        return np.asarray(codes.labels["view"], dtype=np.int64)
    n_views = len(codes.meta.get("query", [[0]]))
    return np.arange(codes.n_samples) % n_views
