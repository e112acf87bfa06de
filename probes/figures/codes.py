"""Figures of the codes themselves: rule-by-rule similarity (paper Fig. 5E) and mean-code heatmaps (the 2-D
embedding figure is `embedding.py`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.codes import LatentCodes
from probes.figures._base import (
    CONSTANT_TEXT,
    _axes_grid,
    _axes_row,
    code_value_label,
    with_reading,
)
from probes.similarity import ClassMeans, RuleSimilarity, class_means

# ----------------------------------------------------------------------------------------------------------------
# Rule x rule similarity of mean codes (paper Fig. 5E)


@dataclass(frozen=True)
class SimilarityFigure:
    """Heatmap of the cosine similarity between mean codes of classes.

    Attributes:
        similarity: [class, class].
        class_names: tick labels.
        title: figure title.
        constant: the codes were constant (`probes.degenerate`): every class has the same mean code, which the
            title says; a matrix left all NaN (centered) is replaced by the words "constant codes".
    """

    similarity: np.ndarray
    class_names: list[str]
    title: str
    constant: bool = False

    def _empty(self) -> bool:
        return self.constant and not np.isfinite(self.similarity).any()

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw the heatmap (values written in the cells for up to 12 classes) and return the figure."""
        n = len(self.class_names)
        (ax,) = _axes_row(ax, 1, max(5.5, 0.45 * n + 2.5), max(4.5, 0.45 * n + 2))
        image = ax.imshow(np.ma.masked_invalid(self.similarity), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(n), self.class_names, rotation=90)
        ax.set_yticks(range(n), self.class_names)
        if self._empty():
            ax.text(0.5, 0.5, CONSTANT_TEXT, transform=ax.transAxes, ha="center", va="center", color="0.3")
        elif n <= 12:
            for (i, j), value in np.ndenumerate(self.similarity):
                if np.isfinite(value):
                    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="x-small")
        ax.set_title(self.title)
        ax.figure.colorbar(image, ax=ax, label="cosine similarity of mean codes")
        return ax.figure

    def plotly(self):
        """The same heatmap in plotly (one trace)."""
        import plotly.graph_objects as go

        z = np.where(np.isfinite(self.similarity), self.similarity, None).tolist()
        fig = go.Figure(
            go.Heatmap(
                z=z,
                x=self.class_names,
                y=self.class_names,
                zmin=-1,
                zmax=1,
                colorscale="RdBu_r",
                colorbar={"title": "cosine similarity"},
            )
        )
        fig.update_layout(
            title=self.title.replace("\n", "<br>"),
            yaxis_autorange="reversed",
            xaxis_type="category",
            yaxis_type="category",
        )
        if self._empty():
            fig.add_annotation(text=f"<b>{CONSTANT_TEXT}</b>", x=0.5, y=0.5, xref="paper", yref="paper",
                               xanchor="center", showarrow=False, font={"size": 14, "color": "#555"})
        return fig


def similarity_figure(similarity: RuleSimilarity, title: str | None = None) -> SimilarityFigure:
    """Rule × rule cosine similarity between mean codes (paper Fig. 5E); the title names constant codes."""
    constant = bool(getattr(similarity, "constant", False))
    kind = "centred cosine" if getattr(similarity, "centered", False) else "cosine"
    title = title or f"Mean-code similarity per {similarity.label} ({kind})\n(layer {similarity.layer})"
    if constant:
        title += f"\n{CONSTANT_TEXT}: all classes of {similarity.label!r} share one mean code"
    counts = getattr(similarity, "counts", None)
    names = [f"{name} (no rows)" if counts is not None and counts[i] == 0 else name
             for i, name in enumerate(similarity.class_names)]  # a blank row and column, labelled
    return SimilarityFigure(
        similarity=similarity.similarity,
        class_names=names,
        title=title,
        constant=constant,
    )


# ----------------------------------------------------------------------------------------------------------------
# Mean code per rule as heatmaps [head x (layer, query, key)]


@dataclass(frozen=True)
class CodeHeatmapFigure:
    """Mean latent code of each class, one heatmap per class: heads × (layer, query, key).

    Attributes:
        means: [class, head, column] mean codes (columns: `columns`).
        class_names: panel titles.
        counts: rows behind each mean.
        columns: column labels, "L{layer}" (+ " q{i} k{j}" when several query/key positions).
        value_label: colour-bar label (says whether codes are probabilities).
        title: figure title (with the codes' reading, when recorded).
    """

    means: np.ndarray
    class_names: list[str]
    counts: list[int]
    columns: list[str]
    value_label: str
    title: str

    def _limits(self) -> tuple[float, float]:
        finite = self.means[np.isfinite(self.means)]
        if finite.size == 0:
            return 0.0, 1.0
        low, high = float(finite.min()), float(finite.max())
        return (low, high) if high > low else (low - 0.5, high + 0.5)

    def plot(self, ax: Sequence[Axes] | None = None) -> Figure:
        """A grid of heatmaps sharing one colour scale; returns the figure."""
        n = len(self.class_names)
        if ax is None:  # panels wide enough for a readable label per column (about 0.22 in each at 9 pt)
            fig, axes = _axes_grid(n, min(4, n), size=max(3.2, 0.22 * len(self.columns) + 1.0))
        else:
            axes = _axes_row(ax, n)
            fig = axes[0].figure
        low, high = self._limits()
        image = None
        for ax_, name, count, mean in zip(axes, self.class_names, self.counts, self.means, strict=True):
            image = ax_.imshow(np.ma.masked_invalid(mean), vmin=low, vmax=high, cmap="magma", aspect="auto")
            ax_.set_title(f"{name} (n={count})", fontsize="medium")
            ax_.set_xticks(range(len(self.columns)), self.columns, rotation=90, fontsize=9)
            ax_.set_yticks(range(mean.shape[0]), [str(h) for h in range(mean.shape[0])], fontsize=9)
            ax_.set_ylabel("head")
        fig.colorbar(image, ax=axes, label=self.value_label)
        fig.suptitle(self.title)
        return fig

    def plotly(self):
        """The same grid in plotly: one heatmap trace per class, one shared colour axis."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        n = len(self.class_names)
        ncols = min(4, n)
        nrows = math.ceil(n / ncols)
        fig = make_subplots(
            rows=nrows,
            cols=ncols,
            subplot_titles=[f"{c} (n={k})" for c, k in zip(self.class_names, self.counts, strict=True)],
        )
        low, high = self._limits()
        for index, mean in enumerate(self.means):
            z = np.where(np.isfinite(mean), mean, None).tolist()
            fig.add_trace(
                go.Heatmap(z=z, x=self.columns, coloraxis="coloraxis", name=self.class_names[index]),
                row=index // ncols + 1,
                col=index % ncols + 1,
            )
        fig.update_layout(
            title=self.title.replace("\n", "<br>"),
            height=260 * nrows + 100,
            coloraxis={
                "colorscale": "Magma",
                "cmin": low,
                "cmax": high,
                "colorbar": {"title": self.value_label},
            },
        )
        return fig


def code_heatmap_figure(
    codes: LatentCodes | ClassMeans,
    label: str | None = None,
    split: str | list[str] | None = None,
    max_classes: int = 16,
) -> CodeHeatmapFigure:
    """Mean code per rule (class) as heatmaps of heads × layers (× query/key positions).

    Args:
        codes: latent codes, or precomputed `probes.class_means`.
        label: label to group by (default `codes.label`; ignored for `ClassMeans`).
        split: restrict to these split(s) (ignored for `ClassMeans`).
        max_classes: draw at most this many classes (those with rows, in class order).

    Returns:
        A `CodeHeatmapFigure`; its colour label says whether codes are probabilities (softmax) or not, and its title
        names the codes' reading (`LatentCodes.reading`; none for `ClassMeans` or hand-made codes).
    """
    means = codes if isinstance(codes, ClassMeans) else class_means(codes, label, split)
    keep = [c for c in range(len(means.class_names)) if means.counts[c] > 0][:max_classes]
    if not keep:
        raise ValueError(f"no class of {means.label!r} has rows; nothing to draw")
    array = means.means[keep]  # [class, layer, head, query, key]
    n_classes, n_layers, n_heads, n_query, n_key = array.shape
    array = array.transpose(0, 2, 1, 3, 4).reshape(n_classes, n_heads, n_layers * n_query * n_key)
    layer_names = means.layer_names or list(range(n_layers))
    columns = [
        f"L{layer}" + (f" q{q} k{k}" if n_query * n_key > 1 else "")
        for layer in layer_names
        for q in range(n_query)
        for k in range(n_key)
    ]
    return CodeHeatmapFigure(
        means=array,
        class_names=[means.class_names[c] for c in keep],
        counts=[int(means.counts[c]) for c in keep],
        columns=columns,
        value_label=code_value_label(means.score_norm),
        title=with_reading(f"Mean latent code per {means.label} ({code_value_label(means.score_norm)})",
                           codes.reading if isinstance(codes, LatentCodes) else None),
    )
