"""When rule codes appear: held-out rule decoding per layer against the training step, beside its controls and the
model's own held-out accuracy (the table `latentcode emergence` writes)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from probes.figures._base import _axes_row, _palette


@dataclass(frozen=True)
class EmergenceFigure:
    """Lines over training steps: decoding accuracy per layer (solid), the input-only control (dashed grey), the
    model's held-out accuracy (black), chance and majority (dotted); a second panel shows selectivity per layer,
    and, for a model with live-unit fractions (HYLA), a third the live value units per layer.

    Attributes:
        steps: the snapshot steps, ascending.
        layers: probe names ("0", ..., "all").
        decoding: [layer, step] held-out rule-decoding accuracy.
        selectivity: [layer, step] decoding minus control-task accuracy.
        input_only: [step] the input-only control.
        model_accuracy: [step] the model's own held-out accuracy.
        chance, majority: the trivial floors (constant over steps: the same held-out rows).
        title: figure title (names the run and the reading).
        live_fraction: [layer, step] fraction of live value-network units (HYLA-style value networks; NaN where
            a layer has none, e.g. the "all" row or softmax attention), shown in `table`.
    """

    steps: list[int]
    layers: list[str]
    decoding: np.ndarray
    selectivity: np.ndarray
    input_only: np.ndarray
    model_accuracy: np.ndarray
    chance: float
    majority: float
    title: str
    live_fraction: np.ndarray | None = None

    @property
    def missing_steps(self) -> list[int]:
        """Snapshot steps the table's own cadence implies but it lacks (see `missing_steps`): the lines break
        there instead of bridging the gap, and the first panel marks each one."""
        return missing_steps(self.steps)

    def _line(self, values: np.ndarray) -> tuple[list[float], list[float]]:
        """(x, y) of one curve, with a NaN point at every missing step so that neither plotting library draws a
        segment across it."""
        return with_gaps(self.steps, values)

    @property
    def has_live_fraction(self) -> bool:
        """Whether any layer has a live-unit fraction (a third panel)."""
        return self.live_fraction is not None and not np.isnan(self.live_fraction).all()

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Figure:
        """Two panels: accuracies, then selectivity (three with live units: see the class docstring); returns the
        figure. `ax` must hold as many axes as there are panels."""
        axes = _axes_row(ax, 3 if self.has_live_fraction else 2, 5.2, 4.0)
        if ax is None:  # room between panels: each y label otherwise sits on the tick labels of the panel before
            axes[0].figure.get_layout_engine().set(wspace=0.06)
        left, right = axes[:2]
        colors = _palette(len(self.layers))
        if self.has_live_fraction:
            live = axes[2]
            for i, layer in enumerate(self.layers):
                if not np.isnan(self.live_fraction[i]).all():
                    live.plot(*self._line(100 * self.live_fraction[i]), "-o", color=colors[i], ms=3,
                              label=f"layer {layer}")
            live.set(xlabel="training step", ylabel="live value-network units (%)", ylim=(0, 100),
                     title="live value units")
            live.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
        for i, layer in enumerate(self.layers):
            name = "all layers" if layer == "all" else f"layer {layer}"
            left.plot(*self._line(self.decoding[i]), "-o", color=colors[i], ms=3, label=f"codes, {name}")
            right.plot(*self._line(self.selectivity[i]), "-o", color=colors[i], ms=3, label=name)
        # markers too, so a table of one snapshot still shows both
        left.plot(*self._line(self.input_only), "--s", color="0.45", ms=5, label="input-only control")
        left.plot(*self._line(self.model_accuracy), "-D", color="black", lw=2.2, ms=5, label="model OOD accuracy")
        for k, step in enumerate(self.missing_steps):
            left.axvline(step, color="0.7", ls=(0, (1, 3)), lw=1.2,
                         label=None if k else f"no snapshot analysed ({_steps_text(self.missing_steps)})")
        left.axhline(self.majority, color="0.3", ls=":", lw=1, label=f"majority ({self.majority:.3f})")
        left.axhline(self.chance, color="0.6", ls=":", lw=1, label=f"chance ({self.chance:.3f})")
        left.set(xlabel="training step", ylabel="accuracy on held-out rule combinations", ylim=(0, 1.02),
                 title="rule decoding vs. the model")
        right.axhline(0.0, color="0.6", lw=1)
        right.set(xlabel="training step", ylabel="selectivity (codes − control task)", title="selectivity")
        # below the panels: inside, the legend hides the highest curves (codes near 0.8 in a trained model)
        left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
        right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
        for panel in axes:  # training starts at 0: a table of one or two snapshots still reads as "how far in"
            panel.set_xlim(0, 1.05 * max(self.steps))
            if max(self.steps) >= 10_000:  # "100000120000" runs together under a 5-inch panel; "100k 120k" does not
                panel.xaxis.set_major_formatter(_THOUSANDS)
        left.figure.suptitle(self.title)
        return left.figure

    def table(self) -> str:
        """The figure's numbers as text: one line per step, decoding per layer beside the input-only control, the
        floors, the selectivity of the layer that decodes best and the model's own accuracy; with live-unit
        fractions (HYLA), a last column of the percentage of live value-network units per layer ("19/3/5/27%" for
        layers 0 to 3)."""
        layers = ["all layers" if layer == "all" else f"layer {layer}" for layer in self.layers]
        header = ["step", *layers, "input-only", "majority", "chance", "selectivity (best-decoding layer)",
                  "model OOD acc"]
        live = self.live_fraction if self.has_live_fraction else None
        per_layer = [i for i, layer in enumerate(self.layers) if layer != "all"]
        if live is not None:
            header.append("live value units (" + "/".join(f"L{self.layers[i]}" for i in per_layer) + ")")
        lines = [header]
        for j, step in enumerate(self.steps):
            best = int(np.nanargmax(self.decoding[:, j])) if not np.all(np.isnan(self.decoding[:, j])) else 0
            lines.append([f"{step:,}", *(f"{v:.3f}" for v in self.decoding[:, j]), f"{self.input_only[j]:.3f}",
                          f"{self.majority:.3f}", f"{self.chance:.3f}",
                          f"{self.selectivity[best, j]:+.3f} ({layers[best]})", f"{self.model_accuracy[j]:.3f}"])
            if live is not None:
                lines[-1].append(format_live_percent(live[per_layer, j]))
        widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                         for row in lines)

    def plotly(self):
        """The same panels in plotly (line traces; layers share colours across panels)."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        titles = ("rule decoding vs. the model", "selectivity", "live value units")
        panels = 3 if self.has_live_fraction else 2
        fig = make_subplots(rows=1, cols=panels, subplot_titles=titles[:panels])
        colors = _palette(len(self.layers))
        for i, layer in enumerate(self.layers):
            if panels == 3 and not np.isnan(self.live_fraction[i]).all():
                x, y = self._line(100 * self.live_fraction[i])
                fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers",
                                         name=f"layer {layer}", line={"color": colors[i]}, legendgroup=layer,
                                         showlegend=False), row=1, col=3)
        for i, layer in enumerate(self.layers):
            name = "all layers" if layer == "all" else f"layer {layer}"
            x, y = self._line(self.decoding[i])
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=f"codes, {name}",
                                     line={"color": colors[i]}, legendgroup=layer), row=1, col=1)
            x, y = self._line(self.selectivity[i])
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name=name,
                                     line={"color": colors[i]}, legendgroup=layer, showlegend=False), row=1, col=2)
        x, y = self._line(self.input_only)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name="input-only control",
                                 line={"color": "#737373", "dash": "dash"}), row=1, col=1)
        x, y = self._line(self.model_accuracy)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines+markers", name="model OOD accuracy",
                                 line={"color": "black", "width": 3}), row=1, col=1)
        for k, step in enumerate(self.missing_steps):
            fig.add_trace(go.Scatter(x=[step, step], y=[0, 1.02], mode="lines", legendgroup="missing",
                                     name=f"no snapshot analysed ({_steps_text(self.missing_steps)})",
                                     showlegend=not k, line={"color": "#b3b3b3", "dash": "dot"}), row=1, col=1)
        for value, name, color in ((self.majority, "majority", "#4d4d4d"), (self.chance, "chance", "#999999")):
            fig.add_trace(go.Scatter(x=[self.steps[0], self.steps[-1]], y=[value, value], mode="lines",
                                     name=f"{name} ({value:.3f})", line={"color": color, "dash": "dot"}), row=1, col=1)
        fig.update_xaxes(title_text="training step", range=[0, 1.05 * max(self.steps)])
        fig.update_yaxes(title_text="accuracy on held-out rule combinations", range=[0, 1.02], row=1, col=1)
        fig.update_yaxes(title_text="selectivity (codes − control task)", row=1, col=2)
        if panels == 3:
            fig.update_yaxes(title_text="live value-network units (%)", range=[0, 100], row=1, col=3)
        fig.update_layout(title=self.title)
        return fig


def emergence_figure(rows: Sequence[Any], title: str = "When do rule codes appear?") -> EmergenceFigure:
    """Build the figure from the table's rows: `latentcode.pipelines.emergence.EmergenceRow`s, or mappings with the
    same keys (a CSV read with `csv.DictReader` works).

    Raises:
        ValueError: no rows, or a (step, layer) cell missing.
    """
    records = [dict(r) if isinstance(r, Mapping) else vars(r) for r in rows]
    if not records:
        raise ValueError("no rows to draw; run `latentcode emergence RUN` on a run with snapshots first")
    steps = sorted({int(r["step"]) for r in records})
    layers = list(dict.fromkeys(str(r["layer"]) for r in records))
    cell = {(int(r["step"]), str(r["layer"])): r for r in records}
    missing = [(s, layer) for s in steps for layer in layers if (s, layer) not in cell]
    if missing:
        raise ValueError(f"the table lacks (step, layer) cells {missing[:4]}; every snapshot needs every layer")

    def value(record: Mapping[str, Any], key: str) -> float:
        found = record.get(key)  # a column a table lacks (older tables have no live_fraction), or an empty CSV cell
        return math.nan if found is None or found == "" else float(found)

    def grid(key: str) -> np.ndarray:
        return np.array([[value(cell[s, layer], key) for s in steps] for layer in layers])

    first = [cell[s, layers[0]] for s in steps]
    return EmergenceFigure(
        steps=steps, layers=layers, decoding=grid("decoding"), selectivity=grid("selectivity"),
        input_only=np.array([float(r["input_only"]) for r in first]),
        model_accuracy=np.array([float(r["model_accuracy"]) for r in first]),
        chance=float(first[0]["chance"]), majority=float(first[0]["majority"]), title=title,
        live_fraction=grid("live_fraction"),
    )


def missing_steps(steps: Sequence[int]) -> list[int]:
    """Snapshot steps that a table's own cadence implies but it lacks: with rows every 10,000 steps but none at
    40,000, [40000] (a snapshot lost before it was analysed). The cadence is the most common gap between
    consecutive steps (the smallest of those tied); with fewer than three steps nothing is implied. A last gap
    shorter than the cadence (a run that ends between two evaluations) hides nothing."""
    ordered = sorted({int(s) for s in steps})
    gaps = np.diff(ordered)
    if len(gaps) < 2:
        return []
    values, counts = np.unique(gaps, return_counts=True)
    cadence = int(values[counts == counts.max()].min())
    return [s for a, b in itertools.pairwise(ordered) if b - a > cadence for s in range(a + cadence, b, cadence)]


def with_gaps(steps: Sequence[int], values: Sequence[float]) -> tuple[list[float], list[float]]:
    """(x, y) of a curve over `steps`, with a NaN point at each of its `missing_steps`, where matplotlib and
    plotly both break the line instead of bridging the gap."""
    points = sorted([*zip(steps, values, strict=True), *((s, math.nan) for s in missing_steps(steps))])
    return [float(s) for s, _ in points], [float(v) for _, v in points]


_THOUSANDS = FuncFormatter(lambda x, _: f"{x / 1000:g}k" if x else "0")


def _steps_text(steps: Sequence[int]) -> str:
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(f"{s:,}" for s in steps)


def format_live_percent(fractions: Sequence[float]) -> str:
    """Live-unit fractions of the layers as whole percentages, "19/3/5/27%" ("–" for a layer without a value)."""
    return "/".join("–" if np.isnan(f) else f"{100 * f:.0f}" for f in fractions) + "%"
