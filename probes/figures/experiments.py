"""Intervention figures: an experiment's table (rule or function transfer, ablation) as a line per column.

Reads the rows of `latentcode.causal.experiments.ExperimentResult` (or its `to_dict()`) without importing
latentcode. Columns of unpatched runs (`clean`, `clean_*`, `donor_*`) are reference lines: dashed, each with
its own marker and size, so a reference that coincides with another (`clean_r2_recipient` under
`donor_r2_donor`) stays visible. No computing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.figures._base import _axes_row, _palette

_METRICS = {"acc": "accuracy", "accuracy": "accuracy", "r2": "R²", "loss": "loss"}
# reference columns: (matplotlib dash, plotly dash, matplotlib marker, plotly symbol, size, filled); big open
# markers go first so the smaller ones drawn over them stay visible where the lines coincide
_REFERENCE_STYLES = (
    ("--", "dash", "o", "circle-open", 10, False),
    (":", "dot", "D", "diamond", 5, True),
    ("-.", "dashdot", "s", "square-open", 8, False),
    ((0, (5, 1, 1, 1, 1, 1)), "longdashdot", "x", "x-thin-open", 7, False),
)
_MAIN_MARKERS = (("o", "circle"), ("s", "square"), ("^", "triangle-up"), ("v", "triangle-down"))


@dataclass(frozen=True)
class ExperimentFigure:
    """One line per numeric column of an experiment's table, against the layer intervened on.

    Attributes:
        layers: x categories ("0", "1", ..., "all").
        series: column -> value per layer (NaN where missing).
        references: the columns that are unpatched runs (drawn as dashed reference lines).
        ylabel: what the numbers are (e.g. "R² of the output", "share of pairs").
        title: figure title.
        errors: column -> half-width of its interval per layer (from a `<column>_ci` column), drawn as error bars.
    """

    layers: list[str]
    series: dict[str, list[float]]
    ylabel: str
    title: str
    references: list[str] = field(default_factory=list)
    errors: dict[str, list[float]] = field(default_factory=dict)

    def _styles(self) -> dict[str, dict[str, Any]]:
        colors = dict(zip(self.series, _palette(len(self.series)), strict=True))
        styles, n_main, n_ref = {}, 0, 0
        for name in self.series:
            if name in self.references:
                style = _REFERENCE_STYLES[n_ref % len(_REFERENCE_STYLES)]
                mpl_dash, ply_dash, marker, symbol, size, filled = style
                n_ref += 1
            else:
                (marker, symbol), mpl_dash, ply_dash, size, filled = (
                    _MAIN_MARKERS[n_main % len(_MAIN_MARKERS)], "-", "solid", 6, True
                )
                n_main += 1
            styles[name] = {"color": colors[name], "mpl_dash": mpl_dash, "ply_dash": ply_dash,
                            "marker": marker, "symbol": symbol, "size": size, "filled": filled}
        return styles

    def _order(self) -> list[str]:
        """References first, largest markers first, so what is drawn later sits on top and stays visible."""
        styles = self._styles()
        refs = sorted(self.references, key=lambda n: -styles[n]["size"])
        return [n for n in refs if n in self.series] + [n for n in self.series if n not in self.references]

    def _label(self, name: str) -> str:
        return f"{name} (95% interval)" if name in self.errors else name

    def plot(self, ax: Axes | None = None) -> Figure:
        """Draw on `ax` (or a new figure) with the legend beside the axes; returns the figure."""
        (ax,) = _axes_row(ax, 1, 6.5, 3.8)
        x = np.arange(len(self.layers))
        styles = self._styles()
        for z, name in enumerate(self._order()):
            st = styles[name]
            ax.plot(x, self.series[name], color=st["color"], linestyle=st["mpl_dash"], marker=st["marker"],
                    markersize=st["size"], markerfacecolor=st["color"] if st["filled"] else "none",
                    markeredgewidth=1.5, linewidth=1.5, label=self._label(name), zorder=2 + z)
            if name in self.errors:
                ax.errorbar(x, self.series[name], yerr=self.errors[name], fmt="none", ecolor=st["color"],
                            elinewidth=1.2, capsize=3, zorder=2 + z)
        ax.axhline(0.0, color="0.8", lw=0.8, zorder=0)
        ax.set_xticks(x, self.layers)
        ax.set_xlabel("layer intervened on")
        ax.set_ylabel(self.ylabel)
        ax.set_title(self.title)
        handles, labels = ax.get_legend_handles_labels()
        order = [labels.index(self._label(n)) for n in self.series]  # legend in table order
        ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize="small", frameon=False,
                  loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        return ax.figure

    def plotly(self):
        """The same figure in plotly: one trace per column."""
        import plotly.graph_objects as go

        fig = go.Figure()
        styles = self._styles()
        rank = {name: i for i, name in enumerate(self.series)}  # legend in table order
        for name in self._order():
            st = styles[name]
            fig.add_trace(
                go.Scatter(
                    x=self.layers,
                    y=self.series[name],
                    mode="lines+markers",
                    name=self._label(name),
                    legendrank=rank[name],
                    error_y={"type": "data", "array": self.errors[name], "visible": True} if name in self.errors
                    else None,
                    line={"color": st["color"], "dash": st["ply_dash"], "width": 2},
                    marker={"symbol": st["symbol"], "size": st["size"] + 3, "color": st["color"],
                            "line": {"width": 2, "color": st["color"]}},
                )
            )
        fig.update_layout(title=self.title, xaxis_title="layer intervened on", yaxis_title=self.ylabel,
                          xaxis_type="category", legend={"traceorder": "normal"})
        return fig


def _ylabel(name: str, params: Mapping[str, Any]) -> str:
    split = params.get("split")
    on = f" on {split}" if split else ""
    if name == "rule_transfer":
        return f"share of pairs{on}"
    if name == "function_transfer":
        return f"R² of the output{on}"
    if name.endswith("_ablation"):
        metric = params.get("metric")
        return f"{_METRICS.get(metric, metric or 'metric')}{on}"
    return "value"


def experiment_figure(result: Any, ylabel: str | None = None, title: str | None = None) -> ExperimentFigure:
    """An experiment's table as lines per layer (transfer: Fig. 5 style; ablation: the metric and its drop).

    Args:
        result: a `latentcode.causal.experiments.ExperimentResult`, or its `to_dict()` (name, task, variant,
            columns, rows with "layer", params).
        ylabel: y-axis label (default from the experiment: "R² of the output on test", "share of pairs on
            test", "accuracy on ood", ...).
        title: figure title (default: experiment, task and variant).

    Returns:
        An `ExperimentFigure`; counting columns (`n_*`) are left out, and a `<column>_ci` column (the half-width of
        `<column>`'s 95% interval) becomes that column's error bars.

    Raises:
        ValueError: no rows or no numeric column.

    Example:
        >>> fig = experiment_figure({"name": "mean_ablation", "task": "fuzzy_logic", "variant": "hyla",
        ...     "columns": ["clean", "ablated", "drop"], "params": {"metric": "r2", "split": "ood"},
        ...     "rows": [{"layer": "0", "clean": 0.9, "ablated": 0.2, "drop": 0.7}]})
        >>> fig.ylabel, list(fig.series)
        ('R² on ood', ['clean', 'ablated', 'drop'])
    """
    data = result if isinstance(result, Mapping) else result.to_dict()
    rows, name = list(data.get("rows") or []), str(data.get("name", "experiment"))
    columns = [c for c in data.get("columns") or [] if not c.startswith("n_")]
    if not rows or not columns:
        raise ValueError(f"experiment {name!r} has no rows or no numeric column to draw")
    intervals = {c for c in columns if c.endswith("_ci") and c[:-3] in columns}  # a column's interval, not a line
    series = {c: [float(row.get(c, np.nan)) for row in rows] for c in columns if c not in intervals}
    params = data.get("params") or {}
    return ExperimentFigure(
        layers=[str(row["layer"]) for row in rows],
        series=series,
        ylabel=ylabel or _ylabel(name, params),
        title=title or f"{name.replace('_', ' ')}: {data.get('task')}, {data.get('variant')}",
        references=[c for c in columns if c == "clean" or c.startswith(("clean_", "donor_"))],
        errors={c[:-3]: [float(row.get(c, np.nan)) for row in rows] for c in sorted(intervals)},
    )
