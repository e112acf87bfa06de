"""Plain-text tables, one way across both packages: a number as a cell (`format_score`, `format_cell`) and cells as
aligned columns (`align_columns`).

`n/a` (`NA`) marks a number not computed, `–` (`UNDEFINED`) one computed but undefined (NaN). Only the standard
library here, so `probes` (no torch) and `latentcode` (which imports `probes`) both use it; HTML tables are the
report's (`probes.report`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

NA = "n/a"
"""A cell whose number does not apply or was not computed (e.g. the input-only control when it was not fitted)."""
UNDEFINED = "–"
"""A cell whose number was computed but is undefined (NaN: e.g. a macro F1 over a split with no positive labels)."""


def format_score(value: float | None, signed: bool = False) -> str:
    """A score as a table cell: three decimals (with a sign when `signed`), `n/a` for None, `–` for NaN or inf.

    >>> format_score(0.98765), format_score(-0.5, signed=True), format_score(None), format_score(float("nan"))
    ('0.988', '-0.500', 'n/a', '–')
    """
    if value is None:
        return NA
    if not math.isfinite(value):
        return UNDEFINED
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def format_cell(value: Any, spec: str = ".4g") -> str:
    """Any table cell: a real non-integer number formatted with `spec`, `n/a` for None, `–` for NaN or inf, and
    anything else (integers, strings) as `str` does.

    >>> format_cell(0.123456), format_cell(2000), format_cell(None), format_cell(float("inf")), format_cell("hyla")
    ('0.1235', '2000', 'n/a', '–', 'hyla')
    """
    if value is None:
        return NA
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return format(value, spec) if math.isfinite(value) else UNDEFINED
    return str(value)


def align_columns(rows: Sequence[Sequence[str]], *, right: bool = False) -> list[str]:
    """Rows of cells (header first, if any) as lines of columns as wide as their widest cell, two spaces apart.

    The first column is left-aligned; the others too, or right-aligned with `right` (numbers). Trailing spaces are
    dropped.

    >>> align_columns([["layer", "acc"], ["0", "0.5"], ["all", "0.75"]], right=True)
    ['layer   acc', '0       0.5', 'all    0.75']
    """
    rows = [[str(c) for c in row] for row in rows]
    if not rows:
        return []
    lengths = sorted({len(row) for row in rows})
    if len(lengths) > 1:
        raise ValueError(f"rows have different numbers of cells ({lengths}); give every row one cell per column")
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if right and i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
            .rstrip() for row in rows]
