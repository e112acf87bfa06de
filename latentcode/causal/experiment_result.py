"""What the intervention experiments return: `ExperimentResult` (a row per intervened layer, with `table()`,
`plot()` and `save(out_dir)`), and the small helpers the experiments share (`take`, `layer_choices`, `layer_bar`,
`variant_name`). The experiments themselves are in `transfer.py` and `experiments.py`.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from latentcode.causal.patching import check_layers
from latentcode.rundir.directory import atomic_write_bytes, atomic_write_json
from latentcode.tasks.base import Batch

__all__ = ["ExperimentResult", "layer_bar", "layer_choices", "take", "variant_name"]


@dataclass(frozen=True)
class ExperimentResult:
    """One experiment on one model: a row per intervened layer (and "all" layers at once).

    Attributes:
        name: 'rule_transfer', 'function_transfer' or 'mean_ablation'.
        task: the task name.
        variant: the model's variant (cfg.variant).
        columns: the numeric columns of `rows`, in display order.
        rows: one dict per layer ("layer" first: "0", "1", ..., "all"), holding `columns`.
        counts: bookkeeping (pairs formed, pairs left out and why, instances).
        params: how it was run (n_samples, split, seed, pairs, ...).
        description: what the numbers mean, one paragraph.
    """

    name: str
    task: str
    variant: str
    columns: list[str]
    rows: list[dict[str, Any]]
    counts: dict[str, int] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def column(self, name: str) -> np.ndarray:
        """One column over the rows."""
        return np.array([row[name] for row in self.rows], dtype=np.float64)

    def table(self) -> str:
        """A plain-text table with a title line, the counts and the description."""
        header = ["layer", *self.columns]
        cells = [[str(row["layer"]), *(_fmt(row[c]) for c in self.columns)] for row in self.rows]
        widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
        lines = [f"{self.name} — {self.task}, {self.variant}"]
        lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                  for r in [header, *cells]]
        if self.counts:
            lines.append("counts: " + ", ".join(f"{k}={v}" for k, v in self.counts.items()))
        if self.description:
            lines.append(self.description)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "name": self.name,
            "task": self.task,
            "variant": self.variant,
            "columns": self.columns,
            "rows": self.rows,
            "counts": self.counts,
            "params": self.params,
            "description": self.description,
        }

    def plot(self, ax: Any = None) -> Any:
        """Each column against the layer intervened on, on `ax` or a new figure; returns the figure
        (`probes.figures.experiment_figure`: y-axis labelled with the metric, unpatched runs drawn so that equal
        lines stay visible)."""
        from probes.figures import experiment_figure

        return experiment_figure(self).plot(ax)

    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write `<name>.csv`, `<name>.json` and `<name>.png` into `out_dir` (created, each file atomically);
        returns the paths."""
        import matplotlib.pyplot as plt

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        csv_path, json_path, png_path = (out / f"{self.name}{ext}" for ext in (".csv", ".json", ".png"))
        table = io.StringIO(newline="")
        writer = csv.DictWriter(table, fieldnames=["layer", *self.columns])
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_bytes(csv_path, table.getvalue().encode())
        atomic_write_json(json_path, self.to_dict())
        fig, png = self.plot(), io.BytesIO()
        fig.savefig(png, format="png", dpi=120)
        plt.close(fig)
        atomic_write_bytes(png_path, png.getvalue())
        return [csv_path, json_path, png_path]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "-" if not np.isfinite(value) else f"{value:.3f}"
    return str(value)


def take(batch: Batch, index: torch.Tensor) -> Batch:
    """The batch's instances at `index` (every label too)."""
    index = index.to(batch.x.device)
    return Batch(
        x=batch.x.index_select(0, index),
        y=batch.y.index_select(0, index),
        labels={k: v.index_select(0, index) for k, v in batch.labels.items()},
        split=batch.split,
    )


def layer_choices(model: torch.nn.Module, layers: Sequence[int] | None) -> list[tuple[str, list[int]]]:
    """(row name, layers) per intervention: each layer alone, then all of them at once ("all") when several."""
    chosen = list(check_layers(model, layers))
    return [(str(layer), [layer]) for layer in chosen] + ([("all", chosen)] if len(chosen) > 1 else [])


def layer_bar(items: list, desc: str, progress: bool | None) -> Any:
    """A progress bar over the layer choices (None: only on a terminal)."""
    return tqdm(items, desc=desc, unit="layer", disable=None if progress is None else not progress, leave=False)


def variant_name(model: torch.nn.Module) -> str:
    """The model's variant (`cfg.variant`), else its class name."""
    return str(getattr(model.cfg, "variant", type(model).__name__))


def rows_table(title: str, columns: Sequence[str], rows: Sequence[dict[str, Any]], width: int) -> str:
    """A plain-text table of result rows: a title line, the column names, one line a row (floats at 3 decimals)."""
    lines = [title, "  ".join(f"{c:>{width}}" for c in columns)]
    lines += ["  ".join(f"{row[c]:>{width}.3f}" if isinstance(row[c], float) else f"{row[c]:>{width}}"
                        for c in columns) for row in rows]
    return "\n".join(lines)


def save_rows(out_dir: str | os.PathLike, name: str, columns: Sequence[str], rows: Sequence[dict[str, Any]],
              meta: dict[str, Any]) -> list[Path]:
    """Write result rows as `<name>.csv` (floats rounded to 6 decimals) and `<name>.json` (`meta`, the columns and
    the rows) into `out_dir`, each atomically; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(columns))
    writer.writeheader()
    writer.writerows({c: (round(v, 6) if isinstance(v, float) else v) for c, v in row.items()} for row in rows)
    paths = [out / f"{name}.csv", out / f"{name}.json"]
    atomic_write_bytes(paths[0], table.getvalue().encode())
    atomic_write_json(paths[1], {**meta, "columns": list(columns), "rows": list(rows)})
    return paths

