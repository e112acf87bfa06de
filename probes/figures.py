"""One function per figure, in scikit-learn's Display style: compute once, then draw with matplotlib or plotly.

Each `*_figure(...)` function returns a small frozen dataclass holding only the data to draw; its `plot(ax=None)`
returns a matplotlib `Figure` and its `plotly()` a plotly `Figure`, both from the same data. `save_figure`
writes png/svg/pdf (matplotlib) and standalone html (plotly). Nothing here computes analyses or calls
`plt.show()`; plotly PNG export (kaleido + Chrome) is deliberately not used.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from probes.codes import LatentCodes
from probes.decode import DecodingResult, TermDecodingResult
from probes.embed import Embedding
from probes.similarity import ClassMeans, RuleSimilarity, class_means

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


# ----------------------------------------------------------------------------------------------------------------
# Decoding accuracy per layer (paper Fig. 5F, Fig. 2B)


@dataclass(frozen=True)
class DecodingFigure:
    """Decoding score per layer, one line per (run, split), with chance and majority-class lines.

    Attributes:
        layers: x categories (model layers, then "all").
        series: (run, split) -> score per layer (NaN where a run lacks the layer).
        chance: uniform chance level.
        majority: (run, split) -> majority-class rate on that split.
        metric: "accuracy" or "macro_f1".
        title: figure title.
    """

    layers: list[str]
    series: dict[tuple[str, str], list[float]]
    chance: float
    majority: dict[tuple[str, str], float]
    metric: str
    title: str

    def _label(self, run: str, split: str) -> str:
        runs = {r for r, _ in self.series}
        return split if len(runs) == 1 else f"{run} · {split}"

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw on `ax` (or a new figure) and return the figure."""
        (ax,) = _axes_row(ax, 1, 6.0, 4.0)
        x = np.arange(len(self.layers))
        colors = dict(zip(self.series, _palette(len(self.series)), strict=True))
        for key, values in self.series.items():
            ax.plot(x, values, marker="o", color=colors[key], label=self._label(*key))
            if key in self.majority:
                ax.axhline(self.majority[key], color=colors[key], linestyle=":", linewidth=1)
        ax.axhline(
            self.chance, color="grey", linestyle="--", linewidth=1, label=f"chance ({self.chance:.3f})"
        )
        ax.plot([], [], color="black", linestyle=":", linewidth=1, label="majority class")
        ax.set_xticks(x, self.layers)
        ax.set_xlabel("layer")
        ax.set_ylabel(self.metric.replace("_", "-"))
        ax.set_ylim(0, 1.02)
        ax.set_title(self.title)
        ax.legend(fontsize="small")
        return ax.figure

    def plotly(self):
        """The same figure in plotly: one trace per series, one per majority line, one for chance."""
        import plotly.graph_objects as go

        fig = go.Figure()
        colors = dict(zip(self.series, _palette(len(self.series)), strict=True))
        for key, values in self.series.items():
            fig.add_trace(
                go.Scatter(
                    x=self.layers,
                    y=values,
                    mode="lines+markers",
                    name=self._label(*key),
                    line={"color": colors[key]},
                )
            )
        for key, value in self.majority.items():
            fig.add_trace(
                go.Scatter(
                    x=[self.layers[0], self.layers[-1]],
                    y=[value, value],
                    mode="lines",
                    name=f"majority class · {self._label(*key)}",
                    line={"color": colors.get(key, "black"), "dash": "dot", "width": 1},
                )
            )
        fig.add_trace(
            go.Scatter(
                x=[self.layers[0], self.layers[-1]],
                y=[self.chance] * 2,
                mode="lines",
                name=f"chance ({self.chance:.3f})",
                line={"color": "grey", "dash": "dash", "width": 1},
            )
        )
        fig.update_layout(
            title=self.title,
            xaxis_title="layer",
            yaxis_title=self.metric.replace("_", "-"),
            yaxis_range=[0, 1.02],
            xaxis_type="category",
        )
        return fig


def decoding_figure(
    results: DecodingResult | Mapping[str, DecodingResult],
    splits: Sequence[str] | None = None,
    metric: str = "accuracy",
    title: str | None = None,
) -> DecodingFigure:
    """Decoding accuracy (or macro-F1) per layer with chance and majority lines (paper Fig. 5F / 2B).

    Args:
        results: one `DecodingResult`, or run name -> result to compare runs.
        splits: evaluation splits to draw (default: test and ood where evaluated, else every split).
        metric: "accuracy" or "macro_f1".
        title: figure title (default names the label).

    Returns:
        A `DecodingFigure`.
    """
    if metric not in ("accuracy", "macro_f1"):
        raise ValueError(f"metric={metric!r}; choose 'accuracy' or 'macro_f1'")
    runs = {"": results} if isinstance(results, DecodingResult) else dict(results)
    if not runs:
        raise ValueError("results is empty; pass at least one DecodingResult")
    layers = _ordered_layers([r.layer_names for r in runs.values()])
    series, majority = {}, {}
    for run, result in runs.items():
        chosen = splits or [s for s in ("test", "ood") if s in result.splits] or result.splits
        for split in chosen:
            scores = result.accuracy(split) if metric == "accuracy" else result.macro_f1(split)
            by_layer = dict(zip(result.layer_names, scores, strict=True))
            series[run, split] = [float(by_layer.get(layer, np.nan)) for layer in layers]
            majority[run, split] = result.baselines[split].majority
    first = next(iter(runs.values()))
    what = "term sets" if first.kind == "sets" else repr(first.label)
    return DecodingFigure(
        layers=layers,
        series=series,
        chance=first.baselines[first.splits[0]].chance,
        majority=majority,
        metric=metric,
        title=title or f"Decoding {what} from latent codes (probe fit on train)",
    )


# ----------------------------------------------------------------------------------------------------------------
# Per-term F1 (fuzzy logic, paper Fig. 2B)


@dataclass(frozen=True)
class TermF1Figure:
    """F1 of the per-term probes as a heatmap [layer × term].

    Attributes:
        f1: [layer, term] (NaN: skipped or undefined).
        layers: row labels.
        terms: column labels.
        split: evaluation split shown.
        title: figure title.
    """

    f1: np.ndarray
    layers: list[str]
    terms: list[str]
    split: str
    title: str

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw the heatmap and return the figure."""
        (ax,) = _axes_row(ax, 1, max(5.0, 0.45 * len(self.terms) + 2), 0.5 * len(self.layers) + 2)
        image = ax.imshow(np.ma.masked_invalid(self.f1), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(self.terms)), self.terms, rotation=90, fontsize="small")
        ax.set_yticks(range(len(self.layers)), self.layers)
        ax.set_xlabel("term (blank: no probe or no F1, e.g. a term never seen in training)")
        ax.set_ylabel("layer")
        ax.set_title(self.title)
        ax.figure.colorbar(image, ax=ax, label=f"F1 on {self.split}")
        return ax.figure

    def plotly(self):
        """The same heatmap in plotly (one trace)."""
        import plotly.graph_objects as go

        z = np.where(np.isfinite(self.f1), self.f1, None).tolist()
        fig = go.Figure(
            go.Heatmap(
                z=z,
                x=self.terms,
                y=self.layers,
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                colorbar={"title": f"F1 on {self.split}"},
            )
        )
        fig.update_layout(title=self.title, xaxis_title="term", yaxis_title="layer", yaxis_type="category")
        return fig


def term_f1_figure(result: TermDecodingResult | DecodingResult, split: str = "ood") -> TermF1Figure:
    """Per-term probe F1 per layer (fuzzy logic, paper Fig. 2B) on one evaluation split."""
    terms = result.terms if isinstance(result, DecodingResult) else result
    if terms is None:
        raise ValueError("result has no per-term probes (terms=None); run decode_terms on fuzzy-logic codes")
    if split not in terms.f1:
        raise ValueError(f"split={split!r} was not evaluated; evaluated: {list(terms.f1)}")
    return TermF1Figure(
        f1=terms.f1[split],
        layers=list(terms.layers),
        terms=list(terms.class_names),
        split=split,
        title=f"Per-term probes: is the term in the composition? ({split})",
    )


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


# ----------------------------------------------------------------------------------------------------------------
# A final metric across variants (e.g. OOD accuracy, paper Table A1 / Fig. 4)


@dataclass(frozen=True)
class VariantFigure:
    """Bar per variant (mean ± standard error over seeds) with the individual values as points.

    Attributes:
        variants: bar labels.
        values: per variant, the individual values (one per seed/run).
        metric: y-axis label.
        title: figure title.
    """

    variants: list[str]
    values: list[list[float]]
    metric: str
    title: str

    @property
    def means(self) -> np.ndarray:
        return np.array([np.mean(v) for v in self.values])

    @property
    def sems(self) -> np.ndarray:
        """Standard error of the mean (0 for a single value)."""
        return np.array([np.std(v, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0 for v in self.values])

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw the bars and points and return the figure."""
        (ax,) = _axes_row(ax, 1, max(4.0, 0.9 * len(self.variants) + 2), 4.0)
        x = np.arange(len(self.variants))
        ax.bar(x, self.means, yerr=self.sems, color=_palette(len(self.variants)), alpha=0.8, capsize=4)
        for i, values in enumerate(self.values):
            ax.scatter(np.full(len(values), i), values, color="black", s=12, zorder=3)
        ax.set_xticks(x, self.variants, rotation=30, ha="right")
        ax.set_ylabel(self.metric)
        ax.set_title(self.title)
        return ax.figure

    def plotly(self):
        """The same figure in plotly: one bar trace (with error bars) and one scatter trace of the values."""
        import plotly.graph_objects as go

        fig = go.Figure()
        fig.add_trace(
            go.Bar(
                x=self.variants,
                y=self.means,
                error_y={"type": "data", "array": self.sems},
                marker_color=_palette(len(self.variants)),
                name="mean ± s.e.",
            )
        )
        xs = [v for v, values in zip(self.variants, self.values, strict=True) for _ in values]
        ys = [x for values in self.values for x in values]
        fig.add_trace(
            go.Scatter(x=xs, y=ys, mode="markers", marker={"color": "black", "size": 6}, name="runs")
        )
        fig.update_layout(title=self.title, yaxis_title=self.metric)
        return fig


def variant_figure(
    values: Mapping[str, float | Sequence[float]] | Sequence[Mapping[str, Any]],
    metric: str = "ood_acc",
    title: str | None = None,
) -> VariantFigure:
    """A final metric (default OOD accuracy) across variants, mean ± s.e. over seeds.

    Args:
        values: variant -> value or values; or summary dicts, each with a "variant" key and `metric`.
        metric: the metric name (the key read from summary dicts; the y label).
        title: figure title.

    Returns:
        A `VariantFigure`.

    Example:
        >>> fig = variant_figure({"softmax": [0.55, 0.57], "hyla": 0.69})
        >>> fig.variants, fig.means.round(2).tolist()
        (['softmax', 'hyla'], [0.56, 0.69])
    """
    grouped: dict[str, list[float]] = {}
    if isinstance(values, Mapping):
        for variant, value in values.items():
            grouped[str(variant)] = [float(v) for v in np.atleast_1d(value)]
    else:
        for row in values:
            if "variant" not in row or metric not in row:
                raise ValueError(f"summary dict {dict(row)!r} lacks 'variant' or metric={metric!r}")
            grouped.setdefault(str(row["variant"]), []).append(float(row[metric]))
    grouped = {k: v for k, v in grouped.items() if v}
    if not grouped:
        raise ValueError("values is empty; pass variant -> value(s) or summary dicts")
    return VariantFigure(list(grouped), list(grouped.values()), metric, title or f"{metric} by variant")


# ----------------------------------------------------------------------------------------------------------------
# Training curves from metrics.jsonl rows


@dataclass(frozen=True)
class TrainingCurvesFigure:
    """Metrics over training steps, one panel per metric, one line per (run, split).

    Attributes:
        keys: metric per panel (e.g. "loss", "acc" or "r2").
        curves: (run, split, key) -> (steps, values).
        title: figure title.
    """

    keys: list[str]
    curves: dict[tuple[str, str, str], tuple[list[float], list[float]]]
    title: str

    def _series(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((run, split) for run, split, _ in self.curves))

    def _label(self, run: str, split: str) -> str:
        return split if len({r for r, _ in self._series()}) == 1 else f"{run} · {split}"

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Figure:
        """One panel per metric; the loss axis is logarithmic when all losses are positive."""
        axes = _axes_row(ax, len(self.keys), 5.0, 3.8)
        series = self._series()
        colors = dict(zip(series, _palette(len(series)), strict=True))
        for ax_, key in zip(axes, self.keys, strict=True):
            values_all = []
            for run, split in series:
                if (run, split, key) in self.curves:
                    steps, values = self.curves[run, split, key]
                    # a single point (one evaluation) draws no line: mark it
                    ax_.plot(steps, values, color=colors[run, split], label=self._label(run, split),
                             marker="o" if len(steps) < 2 else None)
                    values_all += values
            if key == "loss" and values_all and min(values_all) > 0:
                ax_.set_yscale("log")
            ax_.set_xlabel("step")
            ax_.set_ylabel(key)
            ax_.set_title(key)
            ax_.legend(fontsize="small")
        axes[0].figure.suptitle(self.title)
        return axes[0].figure

    def plotly(self):
        """Subplots per metric, one trace per (run, split, metric)."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=1, cols=len(self.keys), subplot_titles=self.keys)
        series = self._series()
        colors = dict(zip(series, _palette(len(series)), strict=True))
        for col, key in enumerate(self.keys, start=1):
            for run, split in series:
                if (run, split, key) in self.curves:
                    steps, values = self.curves[run, split, key]
                    fig.add_trace(
                        go.Scatter(
                            x=steps,
                            y=values,
                            mode="lines" if len(steps) > 1 else "markers",  # one point draws no line
                            name=self._label(run, split),
                            legendgroup=f"{run}/{split}",
                            showlegend=col == 1,
                            line={"color": colors[run, split]},
                        ),
                        row=1,
                        col=col,
                    )
            fig.update_xaxes(title_text="step", row=1, col=col)
        fig.update_layout(title=self.title)
        return fig


def training_curves_figure(
    metrics: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Mapping[str, Any]]],
    keys: Sequence[str] | None = None,
    title: str = "Training curves",
) -> TrainingCurvesFigure:
    """Training curves from metrics rows (as in metrics.jsonl: {"step", "split", "loss", "acc" or "r2", ...}).

    Args:
        metrics: the rows of one run, or run name -> rows.
        keys: metrics to draw (default: "loss" and whichever of "acc"/"r2" occur).
        title: figure title.

    Returns:
        A `TrainingCurvesFigure`.

    Raises:
        ValueError: no rows with a "step" and any of the keys.
    """
    runs = (
        {"": list(metrics)} if not isinstance(metrics, Mapping) else {k: list(v) for k, v in metrics.items()}
    )
    present = {key for rows in runs.values() for row in rows for key in row}
    keys = list(keys) if keys else [k for k in ("loss", "acc", "r2") if k in present]
    curves: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for run, rows in runs.items():
        for row in sorted((r for r in rows if "step" in r), key=lambda r: r["step"]):
            for key in keys:
                value = row.get(key)
                if isinstance(value, int | float) and np.isfinite(value):
                    steps, values = curves.setdefault((run, str(row.get("split", "train")), key), ([], []))
                    steps.append(float(row["step"]))
                    values.append(float(value))
    if not curves:
        raise ValueError(
            f"metrics has no rows with 'step' and any of {keys}; is it a metrics.jsonl of a run?"
        )
    keys = [k for k in keys if any(c[2] == k for c in curves)]
    return TrainingCurvesFigure(keys, curves, title)


# ----------------------------------------------------------------------------------------------------------------
# Saving


def save_figure(
    fig: Any, path: str | os.PathLike, formats: Sequence[str] = ("png", "html"), dpi: int = 150
) -> list[Path]:
    """Write a figure to `<path>.<format>` for each format.

    Args:
        fig: a figure object from this module (drawn with matplotlib for png/svg/pdf and with plotly for
            html), a matplotlib `Figure` (static formats only) or a plotly `Figure` (html only).
        path: output path without extension (parents are created).
        formats: any of png, svg, pdf, html. html files embed plotly.js and work offline.
        dpi: resolution of png output.

    Returns:
        The written paths, in `formats` order.

    Raises:
        ValueError: an unknown format, or a format the given figure type cannot produce.
    """
    unknown = sorted(set(formats) - set(STATIC_FORMATS + INTERACTIVE_FORMATS))
    if unknown:
        raise ValueError(
            f"formats holds {unknown}; valid formats: {list(STATIC_FORMATS + INTERACTIVE_FORMATS)}"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    is_display = hasattr(fig, "plot") and hasattr(fig, "plotly")
    is_plotly = type(fig).__module__.startswith("plotly")
    written = []
    static = None
    for fmt in formats:
        out = path.with_name(f"{path.name}.{fmt}")
        if fmt in STATIC_FORMATS:
            if is_plotly:
                raise ValueError(
                    f"formats={list(formats)}: {fmt} from a plotly figure needs kaleido and Chrome; pass the "
                    "figure object from probes.figures (drawn with matplotlib) or formats=('html',)"
                )
            if static is None:
                static = fig.plot() if is_display else fig
            static.savefig(out, dpi=dpi, bbox_inches="tight")
        else:
            if not (is_display or is_plotly):
                raise ValueError(
                    f"formats={list(formats)}: html needs a plotly figure or a probes.figures object, not a "
                    f"{type(fig).__name__}; use formats=('png',)"
                )
            (fig.plotly() if is_display else fig).write_html(out, include_plotlyjs=True)
        written.append(out)
    if is_display and static is not None:
        plt.close(static)
    return written
