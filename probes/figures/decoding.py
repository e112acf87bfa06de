"""Decoding figures: accuracy per layer (paper Fig. 5F, 2B) and per-term F1 (fuzzy logic, Fig. 2B)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.decode import DecodingResult, TermDecodingResult
from probes.figures._base import CONSTANT_TEXT, _axes_row, _ordered_layers, _palette

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
        constant: run -> its layers whose codes were constant (`probes.degenerate`): named "constant codes"
            on the x axis (with the runs, when not every run's are) and shaded when every run's are, since a
            probe of them reads rounding noise.
    """

    layers: list[str]
    series: dict[tuple[str, str], list[float]]
    chance: float
    majority: dict[tuple[str, str], float]
    metric: str
    title: str
    constant: dict[str, list[str]] = field(default_factory=dict)

    def _label(self, run: str, split: str) -> str:
        runs = {r for r, _ in self.series}
        return split if len(runs) == 1 else f"{run} · {split}"

    def _flat_everywhere(self, layer: str) -> bool:
        """Whether `layer`'s codes were constant in every run drawn (its column is then shaded)."""
        runs = list(dict.fromkeys(r for r, _ in self.series))
        return all(layer in self.constant.get(r, []) for r in runs)

    def _tick(self, layer: str, sep: str) -> str:
        """The x tick of `layer`, saying whether its codes were constant (in which runs, when runs differ)."""
        runs = list(dict.fromkeys(r for r, _ in self.series))
        flat = [r for r in runs if layer in self.constant.get(r, [])]
        if not flat:
            return layer
        return f"{layer}{sep}{CONSTANT_TEXT}" + ("" if len(flat) == len(runs) else f" ({', '.join(flat)})")

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
        for i, layer in enumerate(self.layers):
            if self._flat_everywhere(layer):
                ax.axvspan(i - 0.25, i + 0.25, color="0.92", zorder=0)
        ax.set_xticks(x, [self._tick(layer, "\n") for layer in self.layers])
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
        ticks = [self._tick(layer, "<br>") for layer in self.layers]
        if ticks != self.layers:
            fig.update_xaxes(tickvals=self.layers, ticktext=ticks)
            for i, layer in enumerate(self.layers):
                if self._flat_everywhere(layer):
                    fig.add_vrect(x0=i - 0.25, x1=i + 0.25, fillcolor="#d9d9d9", opacity=0.5, line_width=0,
                                  layer="below")
        return fig


def decoding_figure(
    results: DecodingResult | Mapping[str, DecodingResult],
    splits: Sequence[str] | None = None,
    metric: str = "accuracy",
    title: str | None = None,
    constant_layers: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> DecodingFigure:
    """Decoding accuracy (or macro-F1) per layer with chance and majority lines (paper Fig. 5F / 2B).

    Args:
        results: one `DecodingResult`, or run name -> result to compare runs.
        splits: evaluation splits to draw (default: test and ood where evaluated, else every split).
        metric: "accuracy" or "macro_f1".
        title: figure title (default names the label).
        constant_layers: layers whose codes were constant (`code_spread(...).constant_layers` of
            `probes.degenerate`), marked "constant codes": a list (every run) or run name -> list. Default:
            each result's own `constant_layers` where it has one, else none.

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
    if constant_layers is None:
        constant = {run: list(getattr(result, "constant_layers", None) or []) for run, result in runs.items()}
    elif isinstance(constant_layers, Mapping):
        constant = {str(run): [str(x) for x in layers_] for run, layers_ in constant_layers.items()}
    else:
        constant = {run: [str(x) for x in constant_layers] for run in runs}
    first = next(iter(runs.values()))
    what = "term sets" if first.kind == "sets" else repr(first.label)
    return DecodingFigure(
        layers=layers,
        series=series,
        chance=first.baselines[first.splits[0]].chance,
        majority=majority,
        metric=metric,
        title=title or f"Decoding {what} from latent codes (probe fit on train)",
        constant={run: layers_ for run, layers_ in constant.items() if layers_},
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
