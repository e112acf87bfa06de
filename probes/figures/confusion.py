"""The confusion matrix of one decoding probe (true class × predicted class) on a held-out split: where a decoding
score's ceiling comes from. Classes the task says share a code (`DecodingResult.merged`) are outlined."""

from __future__ import annotations

from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from probes.decoding.results import DecodingResult
from probes.figures._base import _wrap_title, with_reading

__all__ = ["ConfusionFigure", "confusion_figure"]


@dataclass(frozen=True)
class ConfusionFigure:
    """A probe's confusion matrix: each cell's rows, coloured by its share of the true class's rows.

    Attributes:
        counts: rows [true class, predicted class].
        class_names: the classes, in matrix order.
        layer: the probe ("3", "all").
        split: the evaluation split.
        title: figure title (with the codes' reading, when recorded).
        accuracy: the probe's accuracy on the split (the diagonal's share).
        merged: groups of class indices the task says share a code (outlined), e.g. [[5, 6]].
        merged_accuracy: the accuracy with those groups merged (None without groups).
    """

    counts: np.ndarray
    class_names: list[str]
    layer: str
    split: str
    title: str
    accuracy: float
    merged: list[list[int]] = field(default_factory=list)
    merged_accuracy: float | None = None

    @property
    def shares(self) -> np.ndarray:
        """Each cell over its row's total (the true class's rows); NaN for a class absent from the split."""
        totals = self.counts.sum(axis=1, keepdims=True)
        with np.errstate(all="ignore"):
            return np.where(totals > 0, self.counts / np.maximum(totals, 1), np.nan)

    def caption(self) -> str:
        """The score the matrix explains, in words (with the merged score when groups are outlined)."""
        text = f"layer {self.layer}, {self.split}: accuracy {self.accuracy:.3f}"
        if self.merged and self.merged_accuracy is not None:
            names = ", ".join("+".join(self.class_names[i] for i in group) for group in self.merged)
            text += f"; {self.merged_accuracy:.3f} with {names} merged (outlined)"
        return text

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw on `ax` (or a new figure) and return the figure."""
        n = len(self.class_names)
        if ax is None:
            size = max(5.0, 0.6 * n + 2.5)
            _, ax = plt.subplots(figsize=(size + 1.0, size), layout="constrained")
        shares = self.shares
        image = ax.imshow(np.ma.masked_invalid(shares), vmin=0, vmax=1, cmap="Blues")
        for i in range(n):
            for j in range(n):
                if self.counts[i, j]:
                    dark = np.isfinite(shares[i, j]) and shares[i, j] > 0.55
                    ax.text(j, i, str(int(self.counts[i, j])), ha="center", va="center", fontsize="small",
                            color="white" if dark else "black")
        for group in self.merged:
            for i in group:
                for j in group:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=2))
        ax.set_xticks(range(n), self.class_names, rotation=45, ha="right")
        ax.set_yticks(range(n), self.class_names)
        ax.set_xlabel("predicted class")
        ax.set_ylabel("true class")
        ax.figure.colorbar(image, ax=ax, label="share of the true class's rows", shrink=0.8)
        ax.set_title(_wrap_title(f"{self.title}\n{self.caption()}", 60), fontsize="medium")
        return ax.figure

    def plotly(self):
        """The same heatmap in plotly: colour = share of the true class's rows, text = rows, hover = both."""
        import plotly.graph_objects as go

        shares = self.shares
        z = np.where(np.isfinite(shares), shares, None).tolist()
        text = [[str(int(c)) if c else "" for c in row] for row in self.counts]
        fig = go.Figure(
            go.Heatmap(
                z=z, x=self.class_names, y=self.class_names, zmin=0, zmax=1, colorscale="Blues",
                text=text, texttemplate="%{text}", customdata=self.counts.tolist(),
                hovertemplate="true %{y} → predicted %{x}<br>%{customdata} rows (%{z:.1%} of the true class)"
                              "<extra></extra>",
                colorbar={"title": {"text": "share of<br>true class", "side": "right"}},
            )
        )
        for group in self.merged:
            lo, hi = min(group), max(group)
            if hi - lo + 1 == len(group):  # a contiguous block: one outline
                fig.add_shape(type="rect", x0=lo - 0.5, x1=hi + 0.5, y0=lo - 0.5, y1=hi + 0.5,
                              line={"color": "#d62728", "width": 2})
            else:
                for i in group:
                    for j in group:
                        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                                      line={"color": "#d62728", "width": 2})
        fig.update_layout(
            title={"text": _wrap_title(f"{self.title}\n{self.caption()}", 90).replace("\n", "<br>"),
                   "font": {"size": 14}},
            margin={"t": 120},
            xaxis_title="predicted class",
            yaxis_title="true class",
            xaxis={"type": "category", "tickangle": -45},
            yaxis={"type": "category", "autorange": "reversed"},
            height=max(480, 60 * len(self.class_names) + 220),
        )
        return fig


def confusion_figure(
    result: DecodingResult, split: str | None = None, layer: str | int | None = None, title: str | None = None
) -> ConfusionFigure:
    """The confusion matrix of one probe of a `DecodingResult` on a held-out split, with the groups of classes
    merged for the merged score (`decode_rules(merge=...)`) outlined.

    Args:
        result: a `decode_rules` result of a label with one class per row.
        split: an evaluated split (default: "ood" when evaluated, else the first).
        layer: the probe ("3", 3 or "all"; default `DecodingResult.last_layer`).
        title: figure title (default names the label, then the codes' reading).

    Returns:
        A `ConfusionFigure`.

    Raises:
        ValueError: a result of sets of classes (their per-class errors are in `result.top_confusions()`), or a
            split or layer that was not evaluated.
    """
    if result.kind != "multiclass":
        raise ValueError(
            f"result decodes {result.label!r} as sets of classes, whose confusions are per class; read them with "
            "result.top_confusions(), or draw a label with one class per row"
        )
    split = split or ("ood" if "ood" in result.splits else result.splits[0])
    counts = result.confusion(split, layer)
    name = result.last_layer if layer is None else str(layer)
    accuracy = float(result.accuracy(split)[result.layer_names.index(name)])
    merged, merged_accuracy = [], None
    if result.merged is not None:
        merged = [[result.class_names.index(c) for c in group] for group in result.merged.groups]
        merged_accuracy = float(result.merged_accuracy(split)[result.layer_names.index(name)])
    return ConfusionFigure(
        counts=np.asarray(counts, dtype=np.int64),
        class_names=list(result.class_names),
        layer=name,
        split=split,
        title=title or with_reading(f"Confusions decoding {result.label!r} (probe fit on train)", result.reading),
        accuracy=accuracy,
        merged=merged,
        merged_accuracy=merged_accuracy,
    )
