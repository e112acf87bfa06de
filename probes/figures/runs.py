"""Figures across runs: a final metric per variant (paper Table A1, Fig. 4) and training curves from metrics.jsonl."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

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


def _steps(value: float, _: Any = None) -> str:
    """Step tick labels as plotly writes them: 20000 -> 20k, 1500000 -> 1.5M."""
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


_SPLIT_DASHES = {"train": "solid", "test": "dash", "ood": "dot", "novel_terms": "dashdot"}
_MPL_DASHES = {"solid": "-", "dash": "--", "dot": ":", "dashdot": "-."}


@dataclass(frozen=True)
class TrainingCurvesFigure:
    """Metrics over training steps, one panel per metric, one line per (run, split).

    Colour says the variant (runs of one variant, e.g. seeds, share it) and the line style the split (train
    solid, test dashed, ood dotted); with a single variant colour says the split too. The loss axis is
    logarithmic when every loss is positive.

    Attributes:
        keys: metric per panel (e.g. "loss", "acc" or "r2").
        curves: (run, split, key) -> (steps, values).
        title: figure title.
        variants: run -> variant (a run missing here is its own variant).
    """

    keys: list[str]
    curves: dict[tuple[str, str, str], tuple[list[float], list[float]]]
    title: str
    variants: dict[str, str] = field(default_factory=dict)

    def _series(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys((run, split) for run, split, _ in self.curves))

    def _label(self, run: str, split: str) -> str:
        return split if len({r for r, _ in self._series()}) == 1 else f"{run} · {split}"

    def _variant(self, run: str) -> str:
        return self.variants.get(run) or run

    def _styles(self) -> tuple[dict[tuple[str, str], str], dict[str, str], dict[str, str]]:
        """(colour per series, colour per variant, dash per split)."""
        series = self._series()
        variants = list(dict.fromkeys(self._variant(run) for run, _ in series))
        splits = list(dict.fromkeys(split for _, split in series))
        others = iter(d for d in ("longdash", "dashdot", "longdashdot") if d not in _SPLIT_DASHES.values())
        dashes = {s: _SPLIT_DASHES.get(s) or next(others, "solid") for s in splits}
        if len(variants) > 1:
            by_variant = dict(zip(variants, _palette(len(variants)), strict=True))
            return {(r, s): by_variant[self._variant(r)] for r, s in series}, by_variant, dashes
        by_split = dict(zip(splits, _palette(len(splits)), strict=True))
        return {(r, s): by_split[s] for r, s in series}, {}, dashes

    def _logscale(self, key: str) -> bool:
        values = [v for (_, _, k), (_, vs) in self.curves.items() if k == key for v in vs]
        return key == "loss" and bool(values) and min(values) > 0

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Figure:
        """One panel per metric, one legend beside the last panel; returns the figure."""
        axes = _axes_row(ax, len(self.keys), 5.0, 3.8)
        colors, by_variant, dashes = self._styles()
        for ax_, key in zip(axes, self.keys, strict=True):
            for run, split in self._series():
                if (run, split, key) in self.curves:
                    steps, values = self.curves[run, split, key]
                    # a single point (one evaluation) draws no line: mark it
                    ax_.plot(steps, values, color=colors[run, split], linewidth=1.2,
                             linestyle=_MPL_DASHES.get(dashes[split], "-"), label=self._label(run, split),
                             marker="o" if len(steps) < 2 else None)
            if self._logscale(key):
                ax_.set_yscale("log")
            ax_.set_xlabel("step")
            ax_.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
            ax_.xaxis.set_major_formatter(FuncFormatter(_steps))
            ax_.set_ylabel(f"{key} (log scale)" if self._logscale(key) else key)
            ax_.set_title(key)
        if by_variant:  # colour = variant, line style = split: a key for each
            handles = [Line2D([], [], color=c, label=v) for v, c in by_variant.items()]
            handles += [Line2D([], [], color="0.35", linestyle=_MPL_DASHES.get(d, "-"), label=s)
                        for s, d in dashes.items()]
            title = "variant / split"
        else:
            handles = [Line2D([], [], color=colors[next(k for k in colors if k[1] == s)],
                              linestyle=_MPL_DASHES.get(d, "-"), label=s) for s, d in dashes.items()]
            title = "split"
        axes[-1].legend(handles=handles, title=title, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                        borderaxespad=0, fontsize="small", frameon=False)
        axes[0].figure.suptitle(self.title)
        return axes[0].figure

    def plotly(self):
        """Subplots per metric, one trace per (run, split, metric); the legend groups the runs by variant."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=1, cols=len(self.keys), subplot_titles=self.keys)
        colors, by_variant, dashes = self._styles()
        titled: set[str] = set()
        for col, key in enumerate(self.keys, start=1):
            for run, split in self._series():
                if (run, split, key) in self.curves:
                    steps, values = self.curves[run, split, key]
                    variant = self._variant(run)
                    group = {}
                    if by_variant:
                        group = {"legendgroup": variant}
                        if variant not in titled and col == 1:
                            group["legendgrouptitle_text"] = variant
                            titled.add(variant)
                    fig.add_trace(
                        go.Scatter(
                            x=steps,
                            y=values,
                            mode="lines" if len(steps) > 1 else "markers",  # one point draws no line
                            name=self._label(run, split),
                            showlegend=col == 1,
                            line={"color": colors[run, split], "dash": dashes[split], "width": 1.5},
                            marker={"color": colors[run, split]},
                            **group,
                        ),
                        row=1,
                        col=col,
                    )
            fig.update_xaxes(title_text="step", row=1, col=col)
            fig.update_yaxes(title_text=f"{key} (log scale)" if self._logscale(key) else key, row=1, col=col)
            if self._logscale(key):
                fig.update_yaxes(type="log", exponentformat="power", row=1, col=col)
        entries = sum(1 for trace in fig.data if trace.showlegend)
        groups = len(titled)
        fig.update_layout(title=self.title, legend={"groupclick": "toggleitem", "tracegroupgap": 8},
                          height=max(450, 160 + 20 * entries + 30 * groups))  # every legend entry shows
        return fig


def training_curves_figure(
    metrics: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Mapping[str, Any]]],
    keys: Sequence[str] | None = None,
    title: str = "Training curves",
    variants: Mapping[str, str | None] | None = None,
) -> TrainingCurvesFigure:
    """Training curves from metrics rows (as in metrics.jsonl: {"step", "split", "loss", "acc" or "r2", ...}).

    Args:
        metrics: the rows of one run, or run name -> rows.
        keys: metrics to draw (default: "loss" and whichever of "acc"/"r2" occur).
        title: figure title.
        variants: run name -> variant (softmax, linear, hyla, ...): runs of one variant share a colour and a
            legend group (default: every run its own).

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
    named = {str(run): str(variant) for run, variant in (variants or {}).items() if variant}
    return TrainingCurvesFigure(keys, curves, title, named)
