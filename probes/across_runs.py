"""Decodability against generalisation across runs (after Redhardt, Akram & Schug, NeurIPS 2025): every emergence row
of every run (a snapshot's layer: the model's held-out score, the rule's held-out decodability and its floor), with
Spearman's rank correlation per task and layer (scipy, with its p-value and a bootstrap interval over rows), a table
and a figure. Rows come from `latentcode emergence` tables (`read_emergence`) or are made by hand (`RunPoint`).
Rows of one run are snapshots of one training: they are not independent, and both axes rise with training, so a
pooled correlation mixes "over training" with "across runs"; `across_runs` reports both, and the last-snapshot one.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from scipy.stats import spearmanr

from probes.codes_io import jsonable
from probes.tables import align_columns, format_score

__all__ = ["AcrossRuns", "Correlation", "RunPoint", "across_runs", "read_emergence"]


@dataclass(frozen=True)
class RunPoint:
    """One layer of one snapshot of one run.

    Attributes:
        run: the run's name (e.g. "sraven-hyla-s1").
        task, variant: the run's task and attention variant.
        step: the snapshot's training step.
        layer: the probe's layer ("0", ..., "all").
        model_accuracy: the model's own held-out score (SRAVEN: accuracy on held-out rule sets; fuzzy logic: R²).
        decoding: the rule's held-out decodability from the codes (linear probe accuracy).
        majority, input_only: its floors (majority class; the same probe on raw inputs).
    """

    run: str
    task: str
    variant: str
    step: int
    layer: str
    model_accuracy: float
    decoding: float
    majority: float
    input_only: float

    @property
    def floor(self) -> float:
        """The best floor: max(majority, input-only)."""
        return float(max(self.majority, self.input_only))


@dataclass(frozen=True)
class Correlation:
    """Spearman's rank correlation of `model_accuracy` with `decoding` over some rows.

    Attributes:
        task, layer: the rows' task and layer.
        rows: "every snapshot" or "last snapshot".
        n: number of rows (points).
        n_runs: number of runs they come from.
        rho, p_value: scipy's `spearmanr` (p-value of the two-sided test of no monotone association, which treats
            the rows as independent).
        interval: 95% percentile bootstrap interval of rho over rows (NaN with fewer than 8 rows).
        rho_above_floor: the same with y = decoding − floor.
    """

    task: str
    layer: str
    rows: str
    n: int
    n_runs: int
    rho: float
    p_value: float
    interval: tuple[float, float]
    rho_above_floor: float


@dataclass(frozen=True)
class AcrossRuns:
    """What `across_runs` returns: the points and their correlations.

    Attributes:
        points: every row.
        correlations: per task, layer and row set (`Correlation`).
        notes: what the numbers can and cannot say.
    """

    points: list[RunPoint]
    correlations: list[Correlation]
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"kind": "probes.across_runs", "points": [asdict(p) | {"floor": p.floor}
                                                                   for p in self.points],
                          "correlations": [asdict(c) for c in self.correlations], "notes": list(self.notes)})

    def to_rows(self) -> list[dict[str, Any]]:
        """The points as flat dicts (for CSV), with their floor."""
        return [asdict(p) | {"floor": p.floor} for p in self.points]

    def table(self) -> str:
        header = ["task", "layer", "rows", "points", "runs", "Spearman rho", "p", "95% CI (bootstrap)",
                  "rho (above floor)"]
        body = [[c.task, c.layer, c.rows, str(c.n), str(c.n_runs), format_score(c.rho, signed=True),
                 "–" if not math.isfinite(c.p_value) else f"{c.p_value:.2g}",
                 "–" if not math.isfinite(c.interval[0]) else f"[{c.interval[0]:+.2f}, {c.interval[1]:+.2f}]",
                 format_score(c.rho_above_floor, signed=True)] for c in self.correlations]
        title = "Decodability against the model's held-out score, across runs (Spearman)"
        return "\n".join([title, *align_columns([header, *body]), *self.notes])

    def plot(self, layer: str | None = None, figsize: tuple[float, float] | None = None) -> Figure:
        """One panel per task: x the model's held-out score, y the decoding (coloured by run), each point's floor
        beside it (grey ×, joined by a thin line); `layer` picks one layer (default: the last model layer)."""
        tasks = sorted({p.task for p in self.points})
        fig = Figure(figsize=figsize or (5.2 * len(tasks), 4.4), layout="constrained")
        axes = fig.subplots(1, len(tasks), squeeze=False)[0]
        for ax, task in zip(axes, tasks, strict=True):
            points = [p for p in self.points if p.task == task]
            layers = sorted({p.layer for p in points if p.layer != "all"}, key=int)
            chosen = layer or layers[-1]
            points = [p for p in points if p.layer == chosen]
            runs = sorted({p.run for p in points})
            colours = dict(zip(runs, [f"C{i % 10}" for i in range(len(runs))], strict=True))
            for run in runs:
                mine = sorted((p for p in points if p.run == run), key=lambda p: p.step)
                x = [p.model_accuracy for p in mine]
                ax.plot(x, [p.decoding for p in mine], "o-", ms=4, lw=0.8, color=colours[run], label=run)
                ax.plot(x, [p.floor for p in mine], "x", ms=4, color="0.55")
                ax.vlines(x, [p.floor for p in mine], [p.decoding for p in mine], colors=colours[run], lw=0.3,
                          alpha=0.5)
            found = sorted((c for c in self.correlations if c.task == task and c.layer == chosen),
                           key=lambda c: c.rows != "every snapshot")
            note = (f"ρ = {found[0].rho:+.2f} (p = {found[0].p_value:.2g}, n = {found[0].n}, {found[0].rows})"
                    if found else "")
            metric = "R²" if task == "fuzzy_logic" else "accuracy"
            ax.set(xlabel=f"model's held-out {metric}", ylabel=f"decoding accuracy, layer {chosen} (× = floor)",
                   title=f"{task}: {note}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
        fig.suptitle("Does the rule decode better in models that generalise better?")
        return fig


def read_emergence(path: str | os.PathLike, run: str, variant: str, task: str = "sraven") -> list[RunPoint]:
    """The rows of an `emergence.csv` (`latentcode emergence`) as `RunPoint`s; rows without a model accuracy (a step
    the run did not evaluate) are left out.

    Raises:
        ValueError: a file that lacks an emergence column (the message names the columns it has).
    """
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    need = {"step", "layer", "decoding", "input_only", "majority", "model_accuracy"}
    if rows and not need <= set(rows[0]):
        raise ValueError(f"{path} is not an emergence table: it lacks {sorted(need - set(rows[0]))} "
                         f"(has {sorted(rows[0])}); write one with `latentcode emergence RUN`")
    points = []
    for row in rows:
        values = {k: float(row[k]) if row[k] not in ("", "nan") else math.nan for k in need - {"step", "layer"}}
        if math.isfinite(values["model_accuracy"]):
            points.append(RunPoint(run, task, variant, int(row["step"]), row["layer"], **values))
    return points


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    result = spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def _correlation(task: str, layer: str, rows: str, points: Sequence[RunPoint], n_resamples: int,
                 rng: np.random.Generator) -> Correlation:
    x = np.array([p.model_accuracy for p in points])
    y = np.array([p.decoding for p in points])
    above = y - np.array([p.floor for p in points])
    rho, p_value = _spearman(x, y)
    interval = (math.nan, math.nan)
    if len(points) >= 8:
        draws = []
        for _ in range(n_resamples):
            index = rng.integers(0, len(points), len(points))
            draws.append(_spearman(x[index], y[index])[0])
        draws = np.array(draws)
        draws = draws[np.isfinite(draws)]
        if draws.size:
            interval = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))
    return Correlation(task, layer, rows, len(points), len({p.run for p in points}), rho, p_value, interval,
                       _spearman(x, above)[0])


def across_runs(points: Sequence[RunPoint], *, n_resamples: int = 2000, random_state: int = 0) -> AcrossRuns:
    """Spearman's rho of the model's held-out score with the decoding, per task and layer, over every row and over
    each run's last snapshot.

    Raises:
        ValueError: no points.
    """
    if not points:
        raise ValueError("no points: pass the rows of at least one run (read_emergence or RunPoint)")
    rng = np.random.default_rng(random_state)
    correlations = []
    for task in sorted({p.task for p in points}):
        mine = [p for p in points if p.task == task]
        last_step = {run: max(p.step for p in mine if p.run == run) for run in {p.run for p in mine}}
        layers = sorted({p.layer for p in mine}, key=lambda name: (name == "all", int(name) if name.isdigit() else 0))
        for layer in layers:
            rows = [p for p in mine if p.layer == layer]
            last = [p for p in rows if p.step == last_step[p.run]]
            if len(last) < len(rows):
                correlations.append(_correlation(task, layer, "every snapshot", rows, n_resamples, rng))
            correlations.append(_correlation(task, layer, "last snapshot", last, n_resamples, rng))
    notes = (
        "every snapshot: rows of one run are snapshots of one training, not independent draws, so p treats "
        "dependent rows as independent and is too small; last snapshot: one row per run",
        "rho (above floor): the same correlation with decoding minus max(majority, input-only)",
    )
    return AcrossRuns(list(points), correlations, notes)
