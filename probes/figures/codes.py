"""Figures of the codes themselves: 2-D embeddings, rule-by-rule similarity (paper Fig. 5E) and mean-code heatmaps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.codes import LatentCodes
from probes.embed import Embedding
from probes.figures._base import _MAX_CATEGORIES, _axes_grid, _axes_row, _palette, code_value_label
from probes.similarity import ClassMeans, RuleSimilarity, class_means

# ----------------------------------------------------------------------------------------------------------------
# 2-D embedding coloured by labels (paper Fig. 5B, Fig. 2D)


@dataclass(frozen=True)
class EmbeddingPanel:
    """One colouring of the embedded points.

    Attributes:
        name: label name.
        values: per point: category name (categorical) or float (continuous).
        categories: category names in legend order (empty for continuous).
    """

    name: str
    values: np.ndarray
    categories: list[str] = field(default_factory=list)

    @property
    def categorical(self) -> bool:
        return bool(self.categories)


@dataclass(frozen=True)
class EmbeddingFigure:
    """Scatter of embedded codes, one panel per colouring label.

    Attributes:
        coords: [m, 2].
        panels: one `EmbeddingPanel` per label.
        method: "umap" or "pca".
        layer: the layer group embedded.
    """

    coords: np.ndarray
    panels: list[EmbeddingPanel]
    method: str
    layer: str

    def _title(self, panel: EmbeddingPanel) -> str:
        return f"{self.method.upper()} of layer {self.layer} codes, by {panel.name}"

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Figure:
        """One scatter per panel (pass as many axes as panels, or None); returns the figure."""
        axes = _axes_row(ax, len(self.panels), 5.0, 4.2)
        size = max(2.0, min(12.0, 3000 / max(len(self.coords), 1)))
        for ax_, panel in zip(axes, self.panels, strict=True):
            if panel.categorical:
                for category, color in zip(panel.categories, _palette(len(panel.categories)), strict=True):
                    keep = panel.values == category
                    ax_.scatter(*self.coords[keep].T, s=size, color=color, label=category, linewidths=0)
                ax_.legend(fontsize="x-small", markerscale=2, loc="best", title=panel.name)
            else:
                points = ax_.scatter(*self.coords.T, s=size, c=panel.values, cmap="viridis", linewidths=0)
                ax_.figure.colorbar(points, ax=ax_, label=panel.name)
            ax_.set_title(self._title(panel), fontsize="medium")
            ax_.set_xticks([])
            ax_.set_yticks([])
        return axes[0].figure

    def plotly(self):
        """Subplots side by side: one trace per category (categorical) or one with a colour bar (continuous)."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        fig = make_subplots(
            rows=1, cols=len(self.panels), subplot_titles=[self._title(p) for p in self.panels]
        )
        for col, panel in enumerate(self.panels, start=1):
            if panel.categorical:
                for category, color in zip(panel.categories, _palette(len(panel.categories)), strict=True):
                    keep = panel.values == category
                    fig.add_trace(
                        go.Scatter(
                            x=self.coords[keep, 0],
                            y=self.coords[keep, 1],
                            mode="markers",
                            name=f"{panel.name}={category}",
                            legendgroup=panel.name,
                            marker={"size": 4, "color": color},
                        ),
                        row=1,
                        col=col,
                    )
            else:
                fig.add_trace(
                    go.Scatter(
                        x=self.coords[:, 0],
                        y=self.coords[:, 1],
                        mode="markers",
                        name=panel.name,
                        marker={
                            "size": 4,
                            "color": panel.values,
                            "colorscale": "Viridis",
                            "colorbar": {"title": panel.name},
                        },
                    ),
                    row=1,
                    col=col,
                )
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
        fig.update_layout(height=450, width=max(500, 480 * len(self.panels)))
        return fig


def _panel(embedding: Embedding, name: str) -> EmbeddingPanel:
    values = np.asarray(embedding.labels[name])
    if values.ndim == 2:  # a set label: colour by the whole composition
        values = np.array(["+".join(str(v) for v in row) for row in np.sort(values, axis=1)])
    if values.dtype.kind == "f" and not np.all(values == np.round(values)):
        return EmbeddingPanel(name, values.astype(np.float64))
    if values.dtype.kind in "iufb":
        values = values.astype(np.int64)
        if name == embedding.label and embedding.class_names and values.max() < len(embedding.class_names):
            names = np.asarray(embedding.class_names)
            order = [names[i] for i in np.unique(values)]
            return EmbeddingPanel(name, names[values], order)
        if np.unique(values).size > _MAX_CATEGORIES:
            return EmbeddingPanel(name, values.astype(np.float64))
    categories = [str(c) for c in np.unique(values)]
    if len(categories) > _MAX_CATEGORIES:
        # too many categories for a legend: colour by category index instead
        return EmbeddingPanel(name, np.unique(values, return_inverse=True)[1].astype(np.float64))
    return EmbeddingPanel(name, values.astype(str), categories)


def embedding_figure(embedding: Embedding, color_by: Sequence[str] | None = None) -> EmbeddingFigure:
    """Embedded codes coloured by labels (paper Fig. 5B: by rule and by target; Fig. 2D: by terms).

    Args:
        embedding: from `probes.embed_codes`.
        color_by: label names, one panel each (default: the codes' default label, then `target`).

    Returns:
        An `EmbeddingFigure`.
    """
    if color_by is None:
        color_by = [n for n in dict.fromkeys([embedding.label, "target"]) if n in embedding.labels]
        color_by = color_by or [next(iter(embedding.labels), "split")]
    panels = []
    for name in color_by:
        if name == "split":
            panels.append(EmbeddingPanel("split", embedding.split, sorted(set(embedding.split.tolist()))))
        elif name not in embedding.labels:
            raise ValueError(
                f"color_by={color_by!r}: {name!r} is not a label; available: {sorted(embedding.labels)}"
            )
        else:
            panels.append(_panel(embedding, name))
    return EmbeddingFigure(embedding.coords, panels, embedding.method, embedding.layer)


# ----------------------------------------------------------------------------------------------------------------
# Rule x rule similarity of mean codes (paper Fig. 5E)


@dataclass(frozen=True)
class SimilarityFigure:
    """Heatmap of the cosine similarity between mean codes of classes.

    Attributes:
        similarity: [class, class].
        class_names: tick labels.
        title: figure title.
    """

    similarity: np.ndarray
    class_names: list[str]
    title: str

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw the heatmap (values written in the cells for up to 12 classes) and return the figure."""
        n = len(self.class_names)
        (ax,) = _axes_row(ax, 1, max(5.5, 0.45 * n + 2.5), max(4.5, 0.45 * n + 2))
        image = ax.imshow(np.ma.masked_invalid(self.similarity), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(n), self.class_names, rotation=90)
        ax.set_yticks(range(n), self.class_names)
        if n <= 12:
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
            title=self.title, yaxis_autorange="reversed", xaxis_type="category", yaxis_type="category"
        )
        return fig


def similarity_figure(similarity: RuleSimilarity, title: str | None = None) -> SimilarityFigure:
    """Rule × rule cosine similarity between mean codes (paper Fig. 5E)."""
    return SimilarityFigure(
        similarity=similarity.similarity,
        class_names=list(similarity.class_names),
        title=title or f"Mean-code similarity per {similarity.label}\n(layer {similarity.layer})",
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
        title: figure title.
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
        if ax is None:
            fig, axes = _axes_grid(n, min(4, n))
        else:
            axes = _axes_row(ax, n)
            fig = axes[0].figure
        low, high = self._limits()
        image = None
        for ax_, name, count, mean in zip(axes, self.class_names, self.counts, self.means, strict=True):
            image = ax_.imshow(np.ma.masked_invalid(mean), vmin=low, vmax=high, cmap="magma", aspect="auto")
            ax_.set_title(f"{name} (n={count})", fontsize="medium")
            ax_.set_xticks(range(len(self.columns)), self.columns, rotation=90, fontsize="x-small")
            ax_.set_yticks(range(mean.shape[0]))
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
            title=self.title,
            height=260 * nrows + 80,
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
        A `CodeHeatmapFigure`; its colour label says whether codes are probabilities (softmax) or not.
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
        title=f"Mean latent code per {means.label} ({code_value_label(means.score_norm)})",
    )
