"""Do the codes cause the computation? The experiments' entry point: `run_experiment` (a run directory in, CSV,
JSON and PNG out), the generic `mean_ablation`, and the transfer experiments of `transfer.py` re-exported.

- `transfer`: the task's own transfer experiment (`Task.transfer`: `rule_transfer` on SRAVEN, `function_transfer`
  on fuzzy logic; see `latentcode.causal.transfer`).
- `mean_ablation` (every task): the drop of the task metric (default on `ood`) when one layer's codes are replaced
  by their mean over a reference batch.
Each returns an `ExperimentResult` (`latentcode.causal.experiment_result`); `run_experiment` records what it writes
into a run in the run's manifest. No training here, and nothing is written into a shipped checkpoint.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from latentcode.causal.experiment_result import ExperimentResult, layer_bar, layer_choices, variant_name
from latentcode.causal.interventions import ablate
from latentcode.causal.transfer import TRANSFERS, function_transfer, rule_transfer
from latentcode.constants import INTERVENTIONS_DIR
from latentcode.rundir.directory import record_outputs, require_writable_run

__all__ = [
    "EXPERIMENTS",
    "TRANSFERS",
    "ExperimentResult",
    "function_transfer",
    "mean_ablation",
    "rule_transfer",
    "run_experiment",
]

logger = logging.getLogger(__name__)

EXPERIMENTS: tuple[str, ...] = ("transfer", "ablate")
"""Experiment names of `run_experiment` (transfer = the task's own, `Task.transfer`)."""


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
    for name, chosen in layer_bar(layer_choices(model, layers), "ablation", progress):
        result = ablate(model, task, batch, method=method, layers=chosen, reference=reference, seed=seed)
        rows.append({"layer": name, "clean": result.clean_metrics[task.metric_name], "ablated": result.metric,
                     "drop": result.drop})
    return ExperimentResult(
        name="mean_ablation" if method == "mean" else f"{method}_ablation",
        task=task.name,
        variant=variant_name(model),
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
        experiment: 'transfer' (the task's own, `Task.transfer`: rule transfer on SRAVEN, function transfer on
            fuzzy logic) or 'ablate'.
        out_dir: where the files go (default: `<run_dir>/interventions`; required for shipped checkpoints). Files
            written inside the run are recorded in its manifest (`latentcode.rundir.directory.record_outputs`).
        device: where the model runs.
        **options: keyword arguments of the experiment function (n_samples, split, seed, layers, ...).

    Returns:
        (the result, the files written).

    Raises:
        ValueError: an unknown experiment, a task without a transfer experiment, a shipped checkpoint without
            `out_dir`, or a bad option.
    """
    from latentcode.rundir.checkpoint import load_run

    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; valid: {', '.join(EXPERIMENTS)}")
    run_path = Path(run_dir)
    out = _out_dir(run_path, out_dir)
    run = load_run(run_path, device=device)
    transfer = getattr(run.task, "transfer", None)
    if experiment == "transfer" and transfer not in TRANSFERS:
        raise ValueError(
            f"task {run.task.name!r} names no transfer experiment (Task.transfer={transfer!r}); declare one of "
            f"{', '.join(TRANSFERS)} on the task class, or run 'ablate'"
        )
    if experiment == "ablate":
        result = mean_ablation(run.model, run.task, **options)
    else:
        result = TRANSFERS[transfer](run.model, run.task, **options)
    result = ExperimentResult(**{**result.__dict__, "params": {**result.params, "run": str(run_path),
                                                                "step": run.step,
                                                                "checkpoint": run.checkpoint_hash}})
    paths = result.save(out)
    if any(path.resolve().is_relative_to(run_path.resolve()) for path in paths):
        record_outputs(run_path, paths)  # so `--force` may remove them with the run
    logger.debug("wrote %s", ", ".join(str(p) for p in paths))
    return result, paths
