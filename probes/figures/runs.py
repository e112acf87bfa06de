"""Figures across runs: a final metric per variant (paper Table A1, Fig. 4) and training curves from metrics.jsonl."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.figures._base import _axes_row, _palette

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
