"""The 2-D embedding figure: embedded codes coloured by labels, one panel per label (paper Fig. 5B, Fig. 2D).

Categorical labels get a legend (the rarest values of a label with many share a grey `other` bucket), real-valued
ones a colour bar; an embedding of constant codes says so instead of drawing. The other figures of the codes
themselves (rule similarity, mean-code heatmaps) are in `codes.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.codes import SPLITS
from probes.degenerate import CONSTANT_RTOL
from probes.embed import Embedding
from probes.figures._base import (
    _MAX_CATEGORIES,
    CONSTANT_TEXT,
    _axes_row,
    _palette,
)

_OTHER_COLOR = "#bbbbbb"
_PLOT_PX = 420  # plotly: width of one panel's plot area; its legend or colour bar sits in the gap after it


@dataclass(frozen=True)
class EmbeddingPanel:
    """One colouring of the embedded points.

    Attributes:
        name: label name.
        values: per point: category name (categorical) or float (continuous).
        categories: category names in legend order (empty for continuous). A label with more than
            `_MAX_CATEGORIES` values keeps its most frequent ones; the rest read `other (k values)`, in
            grey.
    """

    name: str
    values: np.ndarray
    categories: list[str] = field(default_factory=list)

    @property
    def categorical(self) -> bool:
        return bool(self.categories)

    def colors(self) -> list[str]:
        """One colour per category (distinct up to 256; the `other` bucket grey)."""
        named = [c for c in self.categories if not c.startswith("other (")]
        palette = iter(_palette(len(named)))
        return [_OTHER_COLOR if c.startswith("other (") else next(palette) for c in self.categories]

    def _legend_columns(self) -> int:
        return max(1, math.ceil(len(self.categories) / 22))

    def _key_inches(self) -> float:
        """Width of the panel's legend (or colour bar) beside the plot, in inches."""
        if not self.categorical:
            return 1.0
        longest = max(len(c) for c in [*self.categories, self.name])
        return self._legend_columns() * (0.35 + 0.065 * longest)

    def _key_px(self) -> int:
        """Width of the panel's plotly legend (one scrolling column) or colour bar, in pixels."""
        if not self.categorical:
            return 110
        return 60 + 7 * max(len(c) for c in [*self.categories, self.name])


@dataclass(frozen=True)
class EmbeddingFigure:
    """Scatter of embedded codes, one panel per colouring label.

    Categorical labels (rules, term pairs, splits; anything integer or text) get one distinct colour per
    value and a legend; only real-valued labels (a fuzzy-logic target) get a colour scale. Each panel's
    legend or colour bar sits beside that panel. Constant codes (`probes.degenerate`) are not drawn: each
    panel says "constant codes".

    Attributes:
        coords: [m, 2].
        panels: one `EmbeddingPanel` per label.
        method: "umap" or "pca".
        layer: the layer group embedded.
        constant: the codes were constant and were not embedded (`Embedding.constant`).
        note: why nothing is drawn (the codes' relative spread), shown under "constant codes".
    """

    coords: np.ndarray
    panels: list[EmbeddingPanel]
    method: str
    layer: str
    constant: bool = False
    note: str = ""

    def _title(self, panel: EmbeddingPanel) -> str:
        return f"{self.method.upper()} of layer {self.layer} codes, by {panel.name}"

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Figure:
        """One scatter per panel, its legend or colour bar to its right (pass one axes per panel, or None)."""
        if ax is None:
            widths = [4.4 + (0 if self.constant else p._key_inches()) for p in self.panels]
            fig = plt.figure(figsize=(sum(widths), 4.4), layout="constrained")
            axes = list(fig.subplots(1, len(self.panels), width_ratios=widths, squeeze=False)[0])
        else:
            axes = _axes_row(ax, len(self.panels))
        size = max(2.0, min(12.0, 3000 / max(len(self.coords), 1)))
        for ax_, panel in zip(axes, self.panels, strict=True):
            ax_.set_title(self._title(panel), fontsize="medium")
            ax_.set_xticks([])
            ax_.set_yticks([])
            if self.constant:
                ax_.text(0.5, 0.5, f"{CONSTANT_TEXT}\n{self.note}", transform=ax_.transAxes, ha="center",
                         va="center", wrap=True, color="0.3")
            elif panel.categorical:
                for category, color in zip(panel.categories, panel.colors(), strict=True):
                    keep = panel.values == category
                    ax_.scatter(*self.coords[keep].T, s=size, color=color, label=category, linewidths=0)
                ax_.legend(
                    loc="upper left",
                    bbox_to_anchor=(1.01, 1.0),
                    borderaxespad=0,
                    ncols=panel._legend_columns(),
                    fontsize="small" if len(panel.categories) <= 12 else "x-small",
                    markerscale=max(1.0, 6 / size),
                    title=panel.name,
                    frameon=False,
                    handletextpad=0.2,
                    columnspacing=0.8,
                )
            else:
                points = ax_.scatter(*self.coords.T, s=size, c=panel.values, cmap="viridis", linewidths=0)
                ax_.figure.colorbar(points, ax=ax_, label=panel.name, fraction=0.08, pad=0.02)
        return axes[0].figure

    def plotly(self):
        """Panels side by side, each with its own legend (categorical: one trace per category) or colour bar
        (continuous: one trace) in the gap to its right, so keys never overlap."""
        import plotly.graph_objects as go

        keys = [40 if self.constant else p._key_px() for p in self.panels]
        width = sum(_PLOT_PX + k for k in keys)
        fig = go.Figure()
        left = 0
        for index, (panel, key) in enumerate(zip(self.panels, keys, strict=True), start=1):
            domain = [left / width, (left + _PLOT_PX) / width]
            left += _PLOT_PX + key
            suffix = "" if index == 1 else str(index)
            axis = {"domain": domain, "showticklabels": False, "showgrid": False, "zeroline": False,
                    "visible": not self.constant}
            fig.update_layout({f"xaxis{suffix}": {**axis, "anchor": f"y{suffix}"},
                               f"yaxis{suffix}": {**axis, "domain": [0, 1], "anchor": f"x{suffix}"}})
            fig.add_annotation(text=self._title(panel), x=sum(domain) / 2, y=1.0, xref="paper", yref="paper",
                               xanchor="center", yanchor="bottom", showarrow=False, font={"size": 14})
            key_x = domain[1] + 10 / width
            if self.constant:  # no axes without traces: a grey panel with the words instead
                fig.add_shape(type="rect", x0=domain[0], x1=domain[1], y0=0, y1=1, xref="paper", yref="paper",
                              fillcolor="#f2f2f2", line={"width": 0}, layer="below")
                fig.add_annotation(text=f"<b>{CONSTANT_TEXT}</b><br>{self.note}", x=sum(domain) / 2, y=0.5,
                                   xref="paper", yref="paper", xanchor="center", showarrow=False,
                                   font={"size": 12, "color": "#555"})
                continue
            if panel.categorical:
                legend = "legend" if index == 1 else f"legend{index}"
                fig.update_layout({legend: {
                    "title": {"text": panel.name}, "x": key_x, "y": 1.0, "xanchor": "left", "yanchor": "top",
                    "itemsizing": "constant", "tracegroupgap": 0, "font": {"size": 10},
                    "bgcolor": "rgba(0,0,0,0)",
                }})
                for category, color in zip(panel.categories, panel.colors(), strict=True):
                    keep = panel.values == category
                    fig.add_trace(go.Scatter(
                        x=self.coords[keep, 0], y=self.coords[keep, 1], mode="markers", name=category,
                        legendgroup=panel.name, legend=legend, marker={"size": 4, "color": color},
                        xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                        hovertemplate=f"{panel.name}={category}<extra></extra>",
                    ))
            else:
                fig.add_trace(go.Scatter(
                    x=self.coords[:, 0], y=self.coords[:, 1], mode="markers", name=panel.name,
                    showlegend=False, xaxis=f"x{suffix}", yaxis=f"y{suffix}",
                    hovertemplate=f"{panel.name}=%{{marker.color:.3g}}<extra></extra>",
                    marker={"size": 4, "color": panel.values, "colorscale": "Viridis", "colorbar": {
                        "title": {"text": panel.name, "side": "right"}, "x": key_x, "xanchor": "left",
                        "y": 0.5, "len": 1.0, "thickness": 14,
                    }},
                ))
        fig.update_layout(height=480, width=width + 60, margin={"l": 30, "r": 30, "t": 70, "b": 30},
                          showlegend=not self.constant)
        return fig


def _categorical(name: str, values: np.ndarray, categories: list[str]) -> EmbeddingPanel:
    """A categorical panel; past `_MAX_CATEGORIES` values the rarest share a grey `other (k values)`."""
    if len(categories) <= _MAX_CATEGORIES:
        return EmbeddingPanel(name, values, categories)
    counts = {c: int(n) for c, n in zip(*np.unique(values, return_counts=True), strict=True)}
    kept = set(sorted(categories, key=lambda c: -counts.get(c, 0))[: _MAX_CATEGORIES - 1])
    other = f"other ({len(categories) - len(kept)} values)"
    values = np.where(np.isin(values, list(kept)), values, other)
    return EmbeddingPanel(name, values, [c for c in categories if c in kept] + [other])


def _panel(embedding: Embedding, name: str) -> EmbeddingPanel:
    values = np.asarray(embedding.labels[name])
    if values.ndim == 2:  # a set label (fuzzy-logic terms): one category per composition, "x1&x2 + ~x3&x4"
        sets, inverse = np.unique(np.sort(values, axis=1), axis=0, return_inverse=True)
        terms = embedding.class_names if name == embedding.label else None
        if terms and sets.size and sets.min() >= 0 and sets.max() < len(terms):
            names = [" + ".join(terms[int(v)] for v in row) for row in sets]
        else:  # no names recorded for this label: the ids
            names = ["+".join(str(v) for v in row) for row in sets]
        return _categorical(name, np.asarray(names)[inverse.ravel()], names)
    if values.dtype.kind == "f" and not np.all(values == np.round(values)):
        return EmbeddingPanel(name, values.astype(np.float64))  # real-valued: the one continuous case
    if values.dtype.kind in "iufb":
        ints = values.astype(np.int64)
        classes = np.unique(ints)
        names = embedding.class_names
        if name == embedding.label and names and classes.min() >= 0 and classes.max() < len(names):
            return _categorical(name, np.asarray(names)[ints], [names[c] for c in classes])
        return _categorical(name, ints.astype(str), [str(c) for c in classes])
    return _categorical(name, values.astype(str), [str(c) for c in np.unique(values.astype(str))])


def embedding_figure(embedding: Embedding, color_by: Sequence[str] | None = None) -> EmbeddingFigure:
    """Embedded codes coloured by labels (paper Fig. 5B: by rule and by target; Fig. 2D: by terms).

    Args:
        embedding: from `probes.embed_codes`.
        color_by: label names, one panel each (default: the codes' default label, then `target`).

    Returns:
        An `EmbeddingFigure` (of an embedding of constant codes: one that says so instead of drawing).
    """
    if color_by is None:
        color_by = [n for n in dict.fromkeys([embedding.label, "target"]) if n in embedding.labels]
        color_by = color_by or [next(iter(embedding.labels), "split")]
    panels = []
    for name in color_by:
        if name == "split":
            present = set(embedding.split.tolist())
            panels.append(EmbeddingPanel("split", embedding.split, [s for s in SPLITS if s in present]))
        elif name not in embedding.labels:
            raise ValueError(
                f"color_by={color_by!r}: {name!r} is not a label; available: {sorted(embedding.labels)}"
            )
        else:
            panels.append(_panel(embedding, name))
    constant = bool(getattr(embedding, "constant", False))
    note = ""
    if constant:
        relative = embedding.params.get("relative_spread", 0.0)
        rtol = embedding.params.get("rtol", CONSTANT_RTOL)
        note = f"spread / RMS = {relative:.1e} ≤ {rtol:g}: nothing to embed"
    return EmbeddingFigure(embedding.coords, panels, embedding.method, embedding.layer, constant, note)
