"""Shared by every figure family: output formats, colour palettes, axes helpers, the code value label."""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

STATIC_FORMATS = ("png", "svg", "pdf")
"""Formats `save_figure` draws with matplotlib."""
INTERACTIVE_FORMATS = ("html",)
"""Formats `save_figure` writes with plotly."""
_MAX_CATEGORIES = 80
"""Most categories a label is drawn with, one colour and legend entry each (66 fuzzy-logic term pairs fit);
a label with more shows its most frequent ones and greys the rest as "other"."""
CONSTANT_TEXT = "constant codes"
"""What a figure of constant codes (`probes.degenerate`) shows instead of a picture of rounding noise."""


def with_reading(title: str, readings: str | None | Sequence[str | None]) -> str:
    """`title`, then a line naming where and on what inputs the codes were read (`LatentCodes.reading`); the title
    alone when no reading is recorded (hand-made codes). Several distinct readings are joined with "; ".

    Example:
        >>> with_reading("Decoding 'rule'", "paper positions, unpermuted inputs (default)")
        "Decoding 'rule'\\nreading: paper positions, unpermuted inputs (default)"
        >>> with_reading("Decoding 'rule'", None)
        "Decoding 'rule'"
    """
    shown = [readings] if readings is None or isinstance(readings, str) else list(readings)
    shown = list(dict.fromkeys(r for r in shown if r))
    return f"{title}\nreading: {'; '.join(shown)}" if shown else title


def _wrap_title(title: str, width: int) -> str:
    """Each line of `title` wrapped at `width` characters (matplotlib clips a title wider than its axes)."""
    return "\n".join(textwrap.fill(line, width) for line in title.split("\n"))


def code_value_label(score_norm: str | None) -> str:
    """Colour-scale label for code values: only softmax codes are probabilities.

    Example:
        >>> code_value_label("softmax"), code_value_label("rms_head")
        ('attention probability', 'attention score (not a probability)')
    """
    return "attention probability" if score_norm == "softmax" else "attention score (not a probability)"


def _palette(n: int) -> list[str]:
    """`n` distinct colours: tab10 up to 10, then `_distinct_colors` (tab10 extended; distinct up to 256).

    tab20 is left out: its light halves (#c7c7c7, #dbdb8d) fade on a white page, its pairs read as one hue.
    """
    if n <= 10:
        cmap = plt.get_cmap("tab10")
        return [to_hex(cmap(i)) for i in range(n)]
    colors = _distinct_colors(min(n, 256))
    return [colors[i % len(colors)] for i in range(n)]


def _srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of sRGB colours in [0, 1], [..., 3]."""
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = linear @ np.array(
        [[0.4124, 0.2126, 0.0193], [0.3576, 0.7152, 0.1192], [0.1805, 0.0722, 0.9505]]
    ) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1)


@functools.lru_cache(maxsize=8)
def _distinct_colors(n: int) -> tuple[str, ...]:
    """`n` colours as far apart as a greedy search finds in CIELAB (Glasbey et al. 2007), starting from tab10.

    Candidates are an 18-level sRGB grid without the lightest colours (L* > 88), which vanish on white and
    plotly's grey, and the darkest (L* < 30), which all read as black. Each next colour is the candidate
    farthest from every colour chosen so far.
    """
    levels = np.linspace(0, 1, 18)
    grid = np.stack(np.meshgrid(levels, levels, levels, indexing="ij"), -1).reshape(-1, 3)
    lab = _srgb_to_lab(grid)
    keep = (lab[:, 0] >= 30) & (lab[:, 0] <= 88)
    grid, lab = grid[keep], lab[keep]
    tab10 = np.array([plt.get_cmap("tab10")(i)[:3] for i in range(10)])
    chosen = [to_hex(c) for c in tab10[:n]]
    nearest = np.min(np.linalg.norm(lab[:, None] - _srgb_to_lab(tab10)[None, : len(chosen)], axis=-1), axis=1)
    while len(chosen) < n:
        best = int(np.argmax(nearest))
        chosen.append(to_hex(grid[best]))
        nearest = np.minimum(nearest, np.linalg.norm(lab - lab[best], axis=1))
    return tuple(chosen)


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
