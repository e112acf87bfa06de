"""Do the codes cause the rule? Three experiments, one result type (over 400 lines: they share it and helpers).

- `rule_transfer` (SRAVEN): pairs whose rules differ in one feature; the donor's codes at that feature's query
  position are transplanted, layer by layer; how often the answer becomes what the donor's rule gives on the
  recipient's panels, against how often it stays the recipient's.
- `function_transfer` (fuzzy logic): donor and recipient share every input x and differ in their terms; R² of
  the output against the donor's function and against the recipient's, layer by layer.
- `mean_ablation` (both): the drop of the task metric (default on `ood`) when one layer's codes are replaced by
  their mean over a reference batch.
Each returns an `ExperimentResult` (`table()`, `plot()`, `save(out_dir)` writing CSV, JSON and PNG);
`run_experiment` takes a run directory and records what it writes there in the run's manifest. No training here,
and nothing is written into a shipped checkpoint.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from latentcode.constants import INTERVENTIONS_DIR
from latentcode.interventions import ablate, transplant
from latentcode.patching import check_layers
from latentcode.rundir import atomic_write_bytes, atomic_write_json, record_outputs, require_writable_run
from latentcode.tasks.base import Batch
from latentcode.tasks.fuzzy_logic import fuzzy_dnf

__all__ = [
    "EXPERIMENTS",
    "ExperimentResult",
    "function_transfer",
    "mean_ablation",
    "rule_transfer",
    "run_experiment",
]

logger = logging.getLogger(__name__)

EXPERIMENTS: tuple[str, ...] = ("transfer", "ablate")
"""Experiment names of `run_experiment` (transfer = rule transfer on SRAVEN, function transfer on fuzzy logic)."""


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


def _take(batch: Batch, index: torch.Tensor) -> Batch:
    index = index.to(batch.x.device)
    return Batch(
        x=batch.x.index_select(0, index),
        y=batch.y.index_select(0, index),
        labels={k: v.index_select(0, index) for k, v in batch.labels.items()},
        split=batch.split,
    )


def _layer_choices(model: torch.nn.Module, layers: Sequence[int] | None) -> list[tuple[str, list[int]]]:
    chosen = list(check_layers(model, layers))
    return [(str(layer), [layer]) for layer in chosen] + ([("all", chosen)] if len(chosen) > 1 else [])


def _bar(items: list, desc: str, progress: bool | None) -> Any:
    return tqdm(items, desc=desc, unit="layer", disable=None if progress is None else not progress, leave=False)


def _variant(model: torch.nn.Module) -> str:
    return str(getattr(model.cfg, "variant", type(model).__name__))


def _check_task(task: Any, name: str, experiment: str) -> None:
    if task.name != name:
        raise ValueError(f"{experiment} runs on {name} models; this run's task is {task.name!r}")


def _one_feature_pairs(rules: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """For each instance, one other instance whose rule tuple differs in exactly one feature (seeded choice)."""
    differs = rules[:, None, :] != rules[None, :, :]
    candidates = differs.sum(-1) == 1
    has = candidates.any(dim=1)
    scores = torch.rand(candidates.shape, generator=generator) * candidates
    donor = scores.argmax(dim=1)
    recipient = torch.nonzero(has).squeeze(1)
    return recipient, donor[recipient]


def rule_transfer(
    model: torch.nn.Module,
    task: Any,
    *,
    n_samples: int = 1024,
    split: str = "test",
    seed: int = 0,
    layers: Sequence[int] | None = None,
    whole_row: bool = True,
    progress: bool | None = None,
) -> ExperimentResult:
    """SRAVEN rule transfer: does the donor's code at a feature's query make the model apply the donor's rule?

    Instances are drawn unpermuted (so recipient and donor share their column arrangement). Each recipient is
    paired with a donor whose rule tuple differs in exactly one feature f. The donor's codes at feature f's query
    position are transplanted (`whole_row`: that query's codes over every key; else only its paper view, the
    keys of feature f in panels 7 and 8), at one layer at a time and at every layer at once. A pair counts
    when the donor's rule gives a defined answer on the recipient's panels (`SRaven.rule_answer`) that differs
    from the recipient's answer; the others are left out and counted.

    Args:
        model: a SRAVEN model.
        task: its task.
        n_samples: instances drawn (each can become a recipient).
        split: the split drawn from.
        seed: batch seed (also seeds the donor choice).
        layers: model layers (default: all).
        whole_row: transplant the whole query row (default) rather than the paper's (query, key) pairs.
        progress: progress bar (None: only on a terminal).

    Returns:
        An `ExperimentResult` with columns `transfer` (the answer became the donor rule's: it is with the
        transplant and was not without), `keep` (the answer is the recipient's), `clean_keep` (the recipient's
        answer without intervention) and `n_pairs`, per layer.

    Raises:
        ValueError: not a SRAVEN task, layers out of range, or no usable pair.
    """
    _check_task(task, "sraven", "rule_transfer")
    n_features = int(task.config.n_features)
    device = next(model.parameters()).device
    batch = task.sample(n_samples, split, seed=seed, device=device, unpermuted=True)
    rules = batch.labels["rules"].cpu()
    generator = torch.Generator().manual_seed(seed)
    recipient, donor = _one_feature_pairs(rules, generator)
    counts = {"instances": n_samples, "without_partner": n_samples - len(recipient)}
    feature = (rules[recipient] != rules[donor]).int().argmax(dim=1)
    panels = batch.labels["panels"].cpu()
    grid = panels[recipient, :, :, feature]  # [pair, row, column] of the differing feature
    answer, defined = task.rule_answer(grid, rules[donor, feature])
    own = batch.y.cpu()[recipient, feature]
    same = defined & (answer == own)
    keep_pairs = defined & ~same
    counts.update(undefined=int((~defined).sum()), same_answer=int(same.sum()), pairs=int(keep_pairs.sum()))
    if not keep_pairs.any():
        raise ValueError(f"no usable pair among {n_samples} instances; raise n_samples")
    recipient, donor, feature = recipient[keep_pairs], donor[keep_pairs], feature[keep_pairs]
    answer, own = answer[keep_pairs], own[keep_pairs]
    rows = []
    for name, chosen in _bar(_layer_choices(model, layers), "rule transfer", progress):
        predictions = torch.empty(len(recipient), dtype=torch.long)
        clean = torch.empty(len(recipient), dtype=torch.long)
        for f in range(n_features):
            at = torch.nonzero(feature == f).squeeze(1)
            if not len(at):
                continue
            query = task.seq_len - n_features + f
            keys = [8 * n_features - 2 * n_features + f, 8 * n_features - n_features + f]
            result = transplant(
                model, task, _take(batch, recipient[at]), _take(batch, donor[at]), layers=chosen,
                positions={"query": [query], "key": keys}, whole_row=whole_row,
            )
            predictions[at] = result.prediction[:, f].cpu()
            clean[at] = result.clean_prediction[:, f].cpu()
        became = (predictions == answer) & (clean != answer)
        transfer = float(became.float().mean())
        keep = float((predictions == own).float().mean())
        rows.append({"layer": name, "transfer": transfer, "keep": keep,
                     "clean_keep": float((clean == own).float().mean()), "n_pairs": len(recipient)})
    return ExperimentResult(
        name="rule_transfer",
        task=task.name,
        variant=_variant(model),
        columns=["transfer", "keep", "clean_keep", "n_pairs"],
        rows=rows,
        counts=counts,
        params={"n_samples": n_samples, "split": split, "seed": seed, "whole_row": whole_row},
        description=(
            "transfer: share of pairs whose answer at the differing feature becomes the donor rule's answer on "
            "the recipient's panels (and was not before); keep: the answer is the recipient's; clean_keep: the "
            "recipient's answer without intervention. Pairs whose donor-rule answer is undefined or equals the "
            "recipient's are left out (counts)."
        ),
    )


def _with_terms(task: Any, batch: Batch, bits: torch.Tensor, labels: dict[str, torch.Tensor]) -> Batch:
    """`batch`'s inputs x with the function of other terms: y recomputed, the query's y zeroed."""
    inputs = batch.x[..., :-1]
    targets = fuzzy_dnf(inputs, bits)
    x = torch.cat([inputs, targets.unsqueeze(-1)], dim=-1)
    x[:, -1, -1] = 0.0
    return Batch(x=x, y=targets[:, -1], labels=labels, split=batch.split)


def function_transfer(
    model: torch.nn.Module,
    task: Any,
    *,
    n_samples: int = 1024,
    split: str = "ood",
    seed: int = 0,
    layers: Sequence[int] | None = None,
    whole_row: bool = True,
    progress: bool | None = None,
) -> ExperimentResult:
    """Fuzzy-logic function transfer: with the donor's codes, does the output follow the donor's function?

    The recipient batch is drawn from `split`; each donor takes the recipient's inputs x with the terms of
    another instance of the split (so the two differ only in the y column). The donor's codes at the query
    (`whole_row`: the query's codes over every key; else only query -> itself, the paper's code) are
    transplanted at one layer at a time and at every layer at once.

    Args:
        model: a fuzzy-logic model.
        task: its task.
        n_samples: pairs.
        split: the split drawn from.
        seed: batch seed.
        layers: model layers (default: all).
        whole_row: transplant the query's whole row of codes (default) rather than the paper's code.
        progress: progress bar.

    Returns:
        An `ExperimentResult` with columns `r2_donor` and `r2_recipient` (the task's R² of the patched output
        against the donor's and the recipient's targets), and `clean_r2_donor`, `clean_r2_recipient`,
        `donor_r2_donor` (the unpatched runs) per layer.

    Raises:
        ValueError: not a fuzzy-logic task, or layers out of range.
    """
    _check_task(task, "fuzzy_logic", "function_transfer")
    device = next(model.parameters()).device
    recipient = task.sample(n_samples, split, seed=seed, device=device)
    other = task.sample(n_samples, split, seed=seed + 1, device=device)
    same = (recipient.labels["terms"] == other.labels["terms"]).all(dim=1)
    keep = torch.nonzero(~same).squeeze(1)
    recipient, other = _take(recipient, keep), _take(other, keep)
    donor = _with_terms(task, recipient, other.labels["term_bits"], other.labels)
    rows = []
    for name, chosen in _bar(_layer_choices(model, layers), "function transfer", progress):
        result = transplant(model, task, recipient, donor, layers=chosen, positions="paper",
                            whole_row=whole_row)
        rows.append({
            "layer": name,
            "r2_donor": task.metrics(result.outputs, donor)["r2"],
            "r2_recipient": result.metrics["r2"],
            "clean_r2_donor": task.metrics(result.clean_outputs, donor)["r2"],
            "clean_r2_recipient": result.clean_metrics["r2"],
            "donor_r2_donor": task.metrics(result.donor_outputs, donor)["r2"],
        })
    return ExperimentResult(
        name="function_transfer",
        task=task.name,
        variant=_variant(model),
        columns=["r2_donor", "r2_recipient", "clean_r2_donor", "clean_r2_recipient", "donor_r2_donor"],
        rows=rows,
        counts={"pairs": len(keep), "same_terms": int(same.sum())},
        params={"n_samples": n_samples, "split": split, "seed": seed, "whole_row": whole_row},
        description=(
            "r2_donor / r2_recipient: the task's R² of the output with the donor's codes against the donor's and "
            "the recipient's targets (the two share every x); clean_*: the recipient unpatched; "
            "donor_r2_donor: the donor's own run. Pairs with equal terms are left out (counts)."
        ),
    )


def mean_ablation(
    model: torch.nn.Module,
    task: Any,
    *,
    n_samples: int = 1024,
    split: str = "ood",
    reference_split: str = "train",
    seed: int = 0,
    layers: Sequence[int] | None = None,
    method: str = "mean",
    progress: bool | None = None,
) -> ExperimentResult:
    """The drop of the task metric on `split` when a layer's codes (every head, query and key) are ablated.

    Args:
        model: the model.
        task: its task.
        n_samples: instances of `split` (and of the reference batch).
        split: the split scored (default ood).
        reference_split: the split whose mean codes replace them.
        seed: batch seed.
        layers: model layers (default: all).
        method: 'mean' (default), 'zero' or 'resample' (see `ablate`).
        progress: progress bar.

    Returns:
        An `ExperimentResult` with columns `clean`, `ablated` and `drop` (clean - ablated) of the task metric.
    """
    device = next(model.parameters()).device
    batch = task.sample(n_samples, split, seed=seed, device=device)
    reference = task.sample(n_samples, reference_split, seed=seed + 1, device=device)
    rows = []
    for name, chosen in _bar(_layer_choices(model, layers), "ablation", progress):
        result = ablate(model, task, batch, method=method, layers=chosen, reference=reference, seed=seed)
        rows.append({"layer": name, "clean": result.clean_metrics[task.metric_name], "ablated": result.metric,
                     "drop": result.drop})
    return ExperimentResult(
        name="mean_ablation" if method == "mean" else f"{method}_ablation",
        task=task.name,
        variant=_variant(model),
        columns=["clean", "ablated", "drop"],
        rows=rows,
        counts={"instances": n_samples},
        params={"n_samples": n_samples, "split": split, "reference_split": reference_split, "seed": seed,
                "method": method, "metric": task.metric_name},
        description=(
            f"{task.metric_name} on {split} with every code of the layer replaced ({method} over {reference_split} "
            "instances for 'mean'); drop = clean - ablated."
        ),
    )


def _out_dir(run_path: Path, out_dir: str | os.PathLike | None) -> Path:
    if out_dir is None:
        require_writable_run(run_path, "write intervention results into")
        return run_path / INTERVENTIONS_DIR
    require_writable_run(out_dir, "write into")
    return Path(out_dir)


def run_experiment(
    run_dir: str | os.PathLike,
    experiment: str,
    *,
    out_dir: str | os.PathLike | None = None,
    device: str = "cpu",
    **options: Any,
) -> tuple[ExperimentResult, list[Path]]:
    """Load a run directory, run one experiment on it and save its CSV, JSON and figure.

    Args:
        run_dir: a run directory (`latentcode.load_run`).
        experiment: 'transfer' (rule transfer on SRAVEN, function transfer on fuzzy logic) or 'ablate'.
        out_dir: where the files go (default: `<run_dir>/interventions`; required for shipped checkpoints). Files
            written inside the run are recorded in its manifest (`latentcode.rundir.record_outputs`).
        device: where the model runs.
        **options: keyword arguments of the experiment function (n_samples, split, seed, layers, ...).

    Returns:
        (the result, the files written).

    Raises:
        ValueError: an unknown experiment, a shipped checkpoint without `out_dir`, or a bad option.
    """
    from latentcode.checkpoint import load_run

    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; valid: {', '.join(EXPERIMENTS)}")
    run_path = Path(run_dir)
    out = _out_dir(run_path, out_dir)
    run = load_run(run_path, device=device)
    if experiment == "ablate":
        result = mean_ablation(run.model, run.task, **options)
    elif run.task.name == "sraven":
        result = rule_transfer(run.model, run.task, **options)
    else:
        result = function_transfer(run.model, run.task, **options)
    result = ExperimentResult(**{**result.__dict__, "params": {**result.params, "run": str(run_path),
                                                                "step": run.step,
                                                                "checkpoint": run.checkpoint_hash}})
    paths = result.save(out)
    if any(path.resolve().is_relative_to(run_path.resolve()) for path in paths):
        record_outputs(run_path, paths)  # so `--force` may remove them with the run
    logger.debug("wrote %s", ", ".join(str(p) for p in paths))
    return result, paths
