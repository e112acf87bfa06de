"""Decoding figures: accuracy per layer (paper Fig. 5F, 2B) and per-term F1 (fuzzy logic, Fig. 2B), each beside the
floors and the input-only control its score must beat, with the codes' reading in the title."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probes.decoding.extras import TermDecodingResult
from probes.decoding.results import DecodingResult
from probes.figures._base import (
    CONSTANT_TEXT,
    _axes_row,
    _ordered_layers,
    _palette,
    _wrap_title,
    with_reading,
)

# ----------------------------------------------------------------------------------------------------------------
# Decoding accuracy per layer (paper Fig. 5F, Fig. 2B)


@dataclass(frozen=True)
class DecodingFigure:
    """Decoding score per layer, one line per (run, split), with chance, majority-class and input-only lines.

    Attributes:
        layers: x categories (model layers, then "all").
        series: (run, split) -> score per layer (NaN where a run lacks the layer).
        chance: uniform chance level.
        majority: (run, split) -> majority-class rate on that split.
        metric: "accuracy" or "macro_f1".
        title: figure title (with the codes' reading, when recorded).
        constant: run -> its layers whose codes were constant (`probes.degenerate`): named "constant codes"
            on the x axis (with the runs, when not every run's are) and shaded when every run's are, since a
            probe of them reads rounding noise.
        input_only: (run, split) -> the input-only control's accuracy on that split (the same probe on the raw
            tokens), drawn dash-dotted in the series' colour; empty without controls, or for macro-F1, which the
            control does not report.
    """

    layers: list[str]
    series: dict[tuple[str, str], list[float]]
    chance: float
    majority: dict[tuple[str, str], float]
    metric: str
    title: str
    constant: dict[str, list[str]] = field(default_factory=dict)
    input_only: dict[tuple[str, str], float] = field(default_factory=dict)

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
            if key in self.input_only:
                ax.axhline(self.input_only[key], color=colors[key], linestyle="-.", linewidth=1)
        ax.axhline(
            self.chance, color="grey", linestyle="--", linewidth=1, label=f"chance ({self.chance:.3f})"
        )
        ax.plot([], [], color="black", linestyle=":", linewidth=1, label="majority class")
        if self.input_only:
            ax.plot([], [], color="black", linestyle="-.", linewidth=1, label="input-only control")
        for i, layer in enumerate(self.layers):
            if self._flat_everywhere(layer):
                ax.axvspan(i - 0.25, i + 0.25, color="0.92", zorder=0)
        ax.set_xticks(x, [self._tick(layer, "\n") for layer in self.layers])
        ax.set_xlabel("layer")
        ax.set_ylabel(self.metric.replace("_", "-"))
        ax.set_ylim(0, 1.02)
        ax.set_title(_wrap_title(self.title, 64), fontsize="medium")
        ax.legend(fontsize="small")
        return ax.figure

    def plotly(self):
        """The same figure in plotly: one trace per series, one per majority line, one per input-only line, one for
        chance."""
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
        # one legend group per kind of reference line, showing its first line under a title that says how the
        # others are drawn (in their series' colour), so the legend stays short and is never cut off; each line is
        # named on hover, and a click on the entry shows or hides the whole group
        for kind, lines, dash in (("majority class", self.majority, "dot"),
                                  ("input-only control", self.input_only, "dashdot")):
            for index, (key, value) in enumerate(lines.items()):
                group: dict = {}
                if index == 0 and len(lines) > 1:
                    style = "dotted" if dash == "dot" else "dash-dot"
                    group["legendgrouptitle_text"] = f"{kind}: {style}, in each series' colour"
                fig.add_trace(
                    go.Scatter(
                        x=[self.layers[0], self.layers[-1]],
                        y=[value, value],
                        mode="lines",
                        name=f"{kind} · {self._label(*key)}",
                        legendgroup=kind,
                        showlegend=index == 0,
                        line={"color": colors.get(key, "black"), "dash": dash, "width": 1},
                        **group,
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
        shown = sum(1 for trace in fig.data if trace.showlegend is not False) + 2  # + the group titles
        fig.update_layout(
            title=self.title.replace("\n", "<br>"),
            xaxis_title="layer",
            yaxis_title=self.metric.replace("_", "-"),
            yaxis_range=[0, 1.02],
            xaxis_type="category",
            height=max(450, 180 + 21 * shown),  # tall enough for every legend entry, without a scroll bar
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
    """Decoding accuracy (or macro-F1) per layer with chance, majority and input-only lines (paper Fig. 5F / 2B).

    Args:
        results: one `DecodingResult`, or run name -> result to compare runs.
        splits: evaluation splits to draw (default: test and ood where evaluated, else every split).
        metric: "accuracy" or "macro_f1" (the input-only control is drawn for accuracy, the score it reports).
        title: figure title (default names the label, then the codes' reading, `DecodingResult.reading`, when
            recorded).
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
    series, majority, input_only = {}, {}, {}
    for run, result in runs.items():
        chosen = splits or [s for s in ("test", "ood") if s in result.splits] or result.splits
        control = result.controls.input_only if result.controls is not None else {}
        for split in chosen:
            scores = result.accuracy(split) if metric == "accuracy" else result.macro_f1(split)
            by_layer = dict(zip(result.layer_names, scores, strict=True))
            series[run, split] = [float(by_layer.get(layer, np.nan)) for layer in layers]
            majority[run, split] = result.baselines[split].majority
            if metric == "accuracy" and control.get(split) is not None:
                input_only[run, split] = float(control[split])
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
        title=title or with_reading(f"Decoding {what} from latent codes (probe fit on train)",
                                    [r.reading for r in runs.values()]),
        constant={run: layers_ for run, layers_ in constant.items() if layers_},
        input_only=input_only,
    )


# ----------------------------------------------------------------------------------------------------------------
# Per-term F1 (fuzzy logic, paper Fig. 2B)


@dataclass(frozen=True)
class TermF1Figure:
    """F1 of the per-term probes as a heatmap [layer × term], and beside it their mean F1 per layer against the
    always-present floor and the input-only control (reference lines).

    Attributes:
        f1: [layer, term] (NaN: skipped or undefined).
        layers: row labels.
        terms: column labels.
        split: evaluation split shown.
        title: figure title (with the codes' reading, when recorded).
        mean_f1: [layer] mean F1 over the terms with a defined F1 (`TermDecodingResult.mean_f1`).
        always_present: the floor on this split: mean F1 of answering "present" for every term, or None.
        input_only: the input-only control on this split (the same per-term probes on the raw tokens), or None.
        skipped: term -> why it has no probe (e.g. "absent from train"): its column is labelled so, not blank.
        constant_layers: layers whose codes were constant (`probes.degenerate`): their rows are masked (a probe
            of them reads rounding noise, not an F1 of 0) and labelled "constant codes".
    """

    f1: np.ndarray
    layers: list[str]
    terms: list[str]
    split: str
    title: str
    mean_f1: np.ndarray | None = None
    always_present: float | None = None
    input_only: float | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    constant_layers: list[str] = field(default_factory=list)

    def _masked(self) -> np.ndarray:
        """`f1` with the rows of constant layers set to NaN."""
        f1 = np.array(self.f1, dtype=np.float64)
        for i, layer in enumerate(self.layers):
            if layer in self.constant_layers:
                f1[i] = np.nan
        return f1

    def term_ticks(self) -> list[str]:
        """Column labels: the term, then why it has no probe where it has none ("x1&x2 (absent from train)")."""
        return [f"{t} ({self.skipped[t]})" if t in self.skipped else t for t in self.terms]

    def layer_ticks(self) -> list[str]:
        """Row labels: the layer, "(constant codes)" after a constant one."""
        return [f"{layer} ({CONSTANT_TEXT})" if layer in self.constant_layers else layer for layer in self.layers]

    def references(self) -> dict[str, float]:
        """The reference lines drawn, by legend name: always-present floor, input-only control (when known)."""
        found = {"always present": self.always_present, "input-only control": self.input_only}
        return {f"{name} ({value:.3f})": float(value) for name, value in found.items()
                if value is not None and np.isfinite(value)}

    def _mean(self) -> np.ndarray:
        if self.mean_f1 is not None:
            mean = np.array(self.mean_f1, dtype=np.float64)
        else:
            with np.errstate(all="ignore"):
                mean = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan for row in self.f1])
        return np.where([layer in self.constant_layers for layer in self.layers], np.nan, mean)

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Figure:
        """Draw the heatmap and the mean-F1 panel with its reference lines; returns the figure. One `Axes` gets
        the heatmap alone, with the references in its title (as 0.1 drew it); two get both panels."""
        width = max(5.0, 0.45 * len(self.terms) + 2)
        height = 0.5 * len(self.layers) + 2.5
        if ax is None:
            _, (heat, mean) = plt.subplots(1, 2, figsize=(width + 4.0, max(height, 3.5)), layout="constrained",
                                           gridspec_kw={"width_ratios": [width, 3.5]})
        elif isinstance(ax, Axes):
            heat, mean = ax, None
        else:
            heat, mean = _axes_row(ax, 2)
        heat.set_facecolor("0.88")  # masked cells: no probe, no F1, or constant codes
        image = heat.imshow(np.ma.masked_invalid(self._masked()), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        heat.set_xticks(range(len(self.terms)), self.term_ticks(), rotation=90, fontsize="small")
        heat.set_yticks(range(len(self.layers)), self.layer_ticks())
        heat.set_xlabel("term (grey: no probe or no F1)")
        if not np.isfinite(self._masked()).any() and self.constant_layers:
            heat.text(0.5, 0.5, CONSTANT_TEXT, transform=heat.transAxes, ha="center", va="center", color="0.3")
        heat.set_ylabel("layer")
        heat.figure.colorbar(image, ax=heat, label=f"F1 on {self.split}")
        if mean is None:
            refs = ", ".join(self.references())
            heat.set_title(f"{self.title}" + (f"\n({refs})" if refs else ""), fontsize="medium")
            return heat.figure
        x = np.arange(len(self.layers))
        mean.plot(x, self._mean(), marker="o", color="black", label="codes (mean F1)")
        styles = iter([("grey", "--"), ("tab:red", "-.")])
        for name, value in self.references().items():
            color, style = next(styles)
            mean.axhline(value, color=color, linestyle=style, linewidth=1, label=name)
        mean.set_xticks(x, self.layers)
        mean.set(xlabel="layer", ylabel=f"mean F1 on {self.split}", ylim=(0, 1.02))
        mean.legend(fontsize="small")
        heat.figure.suptitle(self.title)
        return heat.figure

    def plotly(self):
        """The same two panels in plotly: the heatmap, then the mean F1 and one trace per reference line."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        # the colour bar sits in the gap between the panels, its title turned to run along it, clear of the
        # mean-F1 panel's axis title
        fig = make_subplots(rows=1, cols=2, column_widths=[0.68, 0.32], horizontal_spacing=0.2)
        f1 = self._masked()
        z = np.where(np.isfinite(f1), f1, None).tolist()
        fig.add_trace(
            go.Heatmap(z=z, x=self.term_ticks(), y=self.layer_ticks(), zmin=0, zmax=1, colorscale="Viridis",
                       name="F1", colorbar={"title": {"text": f"F1 on {self.split}", "side": "right"},
                                            "x": 0.555, "xanchor": "left", "thickness": 14}),
            row=1, col=1,
        )
        mean = self._mean()
        fig.add_trace(go.Scatter(x=self.layer_ticks(), y=np.where(np.isfinite(mean), mean, None).tolist(),
                                 mode="lines+markers", name="codes (mean F1)", line={"color": "black"}),
                      row=1, col=2)
        dashes = iter(["dash", "dashdot"])
        for name, value in self.references().items():
            ticks = self.layer_ticks()
            fig.add_trace(go.Scatter(x=[ticks[0], ticks[-1]], y=[value, value], mode="lines", name=name,
                                     line={"color": "grey", "dash": next(dashes), "width": 1}),
                          row=1, col=2)
        fig.update_layout(title=self.title.replace("\n", "<br>"), plot_bgcolor="#e0e0e0", height=560)
        # the categories given explicitly, so an all-masked heatmap (every layer constant) keeps its labels
        fig.update_xaxes(title_text="term (grey: no probe or no F1)", type="category", categoryorder="array",
                         categoryarray=self.term_ticks(), tickmode="array", tickvals=self.term_ticks(), row=1, col=1)
        fig.update_yaxes(title_text="layer", type="category", categoryorder="array",
                         categoryarray=self.layer_ticks(), row=1, col=1)
        if not np.isfinite(f1).any() and self.constant_layers:
            fig.add_annotation(text=f"<b>{CONSTANT_TEXT}</b>", xref="x domain", yref="y domain", x=0.5, y=0.5,
                               showarrow=False, font={"size": 14, "color": "#555"})
        fig.update_xaxes(title_text="layer", type="category", row=1, col=2)
        fig.update_yaxes(title_text=f"mean F1 on {self.split}", range=[0, 1.02], row=1, col=2)
        return fig


def term_f1_figure(result: TermDecodingResult | DecodingResult, split: str | None = None) -> TermF1Figure:
    """Per-class probe F1 per layer of a set label (fuzzy logic's terms, paper Fig. 2B) on one evaluation split,
    beside the always-present floor and the input-only control; the title names the codes' reading
    (`TermDecodingResult.reading`).

    Args:
        result: a `TermDecodingResult`, or a `DecodingResult` holding one in `extras`.
        split: an evaluated split (default: "ood" when evaluated, else the first).
    """
    if isinstance(result, DecodingResult):
        found = [extra for extra in result.extras.values() if isinstance(extra, TermDecodingResult)]
        if not found:
            raise ValueError("result has no per-class probes of a set label (DecodingResult.extras); decode a "
                             "set label such as fuzzy logic's terms, or run decode_terms")
        result = found[0]
    terms = result
    split = split or ("ood" if "ood" in terms.f1 else next(iter(terms.f1)))
    if split not in terms.f1:
        raise ValueError(f"split={split!r} was not evaluated; evaluated: {list(terms.f1)}")
    return TermF1Figure(
        f1=terms.f1[split],
        layers=list(terms.layers),
        terms=list(terms.class_names),
        split=split,
        title=with_reading(f"Per-term probes: is the term in the composition? ({split})", terms.reading),
        mean_f1=terms.mean_f1(split),
        always_present=(terms.always_present_f1 or {}).get(split),
        input_only=(terms.input_only_f1 or {}).get(split),
        skipped={terms.class_names[int(c)]: why for c, why in (terms.skipped or {}).items()},
        constant_layers=[str(layer) for layer in (getattr(terms, "constant_layers", None) or [])],
    )
