"""Shared by every figure family: the output formats, the colour palette, axes helpers, the code value label."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

STATIC_FORMATS = ("png", "svg", "pdf")
"""Formats `save_figure` draws with matplotlib."""
INTERACTIVE_FORMATS = ("html",)
"""Formats `save_figure` writes with plotly."""
_MAX_CATEGORIES = 24


def code_value_label(score_norm: str | None) -> str:
    """Colour-scale label for code values: only softmax codes are probabilities.

    Example:
        >>> code_value_label("softmax"), code_value_label("rms_head")
        ('attention probability', 'attention score (not a probability)')
    """
    return "attention probability" if score_norm == "softmax" else "attention score (not a probability)"


def _palette(n: int) -> list[str]:
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [to_hex(cmap(i % cmap.N)) for i in range(n)]


def _axes_row(
    ax: Axes | Sequence[Axes] | None, n: int, width: float = 4.5, height: float = 4.0
) -> list[Axes]:
    if ax is None:
        _, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False, layout="constrained")
        return list(axes[0])
    axes = [ax] if isinstance(ax, Axes) else list(ax)
    if len(axes) != n:
        raise ValueError(
            f"ax holds {len(axes)} axes; this figure draws {n} panels, pass that many or ax=None"
        )
    return axes


def _axes_grid(n: int, ncols: int, size: float = 3.2) -> tuple[Figure, list[Axes]]:
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(size * ncols, size * nrows), squeeze=False, layout="constrained"
    )
    flat = list(axes.ravel())
    for extra in flat[n:]:
        extra.set_visible(False)
    return fig, flat[:n]


def _ordered_layers(names: Sequence[Sequence[str]]) -> list[str]:
    union = {name for group in names for name in group}
    numeric = sorted((n for n in union if n.lstrip("-").isdigit()), key=int)
    return numeric + sorted(n for n in union if not n.lstrip("-").isdigit())
