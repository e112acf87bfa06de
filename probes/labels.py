"""Labels as classes, the way every probe reads them (`class_labels`): 1-D class vectors, sets of classes per row,
and the default label's full class list from the codes' metadata. Numpy only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from probes.codes import LatentCodes


def class_labels(codes: LatentCodes, name: str | None) -> tuple[str, np.ndarray, np.ndarray, list[str]]:
    """A label as classes: (name, y, classes, class names).

    1-D labels are class vectors (int, bool or str; floats only when integer-valued). 2-D int labels are sets
    of classes per row (fuzzy-logic `terms`). The default label uses `meta["n_classes"]`/`meta["class_names"]`
    so absent classes still count; other labels use the values they contain.
    """
    name = name or codes.label
    y = codes.label_values(name)
    if y.ndim > 2:
        raise ValueError(
            f"label={name!r} has shape {y.shape}; class labels are [n] or sets of classes [n, K]"
        )
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError(
                f"label={name!r} is continuous (float values); pass a class label such as "
                f"{[k for k, v in codes.labels.items() if v.dtype.kind in 'iub' and v.ndim == 1]}"
            )
        y = y.astype(np.int64)
    if y.dtype.kind == "b":
        y = y.astype(np.int64)
    if y.ndim == 2 and y.dtype.kind not in "iu":
        raise ValueError(f"label={name!r} is 2-D but not integer; sets of classes must be integer class ids")
    n_meta = codes.meta.get("n_classes")
    if name == codes.label and n_meta and y.dtype.kind in "iu":
        classes = np.arange(int(n_meta))
        names = codes.class_names(int(n_meta))
        if y.size and (y.min() < 0 or y.max() >= int(n_meta)):
            raise ValueError(
                f"label={name!r} holds values outside 0..{int(n_meta) - 1} (meta['n_classes']={n_meta})"
            )
    elif y.ndim == 2:
        classes = np.arange(int(y.max()) + 1 if y.size else 0)
        names = [str(c) for c in classes]
    else:
        classes = np.unique(y)
        names = [str(c) for c in classes]
    return name, y, classes, names
