"""Concept erasure on latent codes: with the rule linearly erased from the codes, does the model still answer?

LEACE (Belrose et al. 2023, the `concept-erasure` package) fits, from codes and their rule labels, the least-squares
affine map that leaves no linear classifier better than the constant one. `fit_erasers` fits one eraser per view of
a site (SRAVEN's 'all_features': feature f's query attending to feature f of panels 7 and 8; the code of a view is
its scores over every head and key, flattened), on instances of the training rule sets. `Erase` is the `Edit` that
applies the erasers in the forward pass (`latentcode.causal.patching.intervene`). `erasure_experiment` reports, per
layer, the model's held-out accuracy before and after, beside erasing a random subspace of the same rank, and the
rule's decodability after erasure against the majority-class floor: if LEACE-erased codes still decode above the
floor, the erasure failed and the accuracy after it means nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from concept_erasure import LeaceEraser
from torch import Tensor
from tqdm.auto import tqdm

from latentcode.causal.edits import Edit, EditFn
from latentcode.causal.experiment_result import rows_table, save_rows, variant_name
from latentcode.causal.patching import Site, check_layers, intervene
from latentcode.codes.readings import resolve_positions
from latentcode.tasks.base import Batch

__all__ = ["Erase", "ErasureResult", "View", "decodability", "erasure_experiment", "fit_erasers", "random_erasers",
           "view_codes", "views"]


@dataclass(frozen=True)
class View:
    """One code of a site: the scores of every head for `query` x `key` positions; its concept is the rule of
    `feature`."""

    query: tuple[int, ...]
    key: tuple[int, ...]
    feature: int


def views(task: Any, positions: Any = "all_features", whole_row: bool = False) -> list[View]:
    """The site's views (`resolve_positions`; `whole_row`: every key of each query)."""
    spec = resolve_positions(task, positions)
    every = tuple(range(int(task.seq_len)))
    return [View(tuple(int(q) for q in np.atleast_1d(query)), every if whole_row else tuple(int(k) for k in
                 np.atleast_1d(key)), int(feature)) for query, key, feature in zip(spec.query, spec.key, spec.feature,
                                                                                   strict=True)]


def _index(view: View, device: Any) -> tuple[Tensor, Tensor]:
    return (torch.as_tensor(view.query, device=device)[:, None], torch.as_tensor(view.key, device=device)[None, :])


def view_codes(pattern: Tensor, view: View) -> Tensor:
    """float [batch, head * query * key]: a view's codes from `hook_pattern` activations [batch, head, query, key]."""
    q, k = _index(view, pattern.device)
    return pattern[:, :, q, k].flatten(1)


def _labels(task: Any, batch: Batch, view: View) -> Tensor:
    if "rules" not in batch.labels:
        raise ValueError(f"erasure needs a rule label per feature (batch.labels['rules']); task "
                         f"{getattr(task, 'name', task)!r} has none")
    return batch.labels["rules"][:, view.feature].cpu()


def _patterns(model: torch.nn.Module, x: Tensor, layer: int, batch_size: int = 256) -> Tensor:
    from latentcode.model.hooks import hook_name

    name = hook_name("pattern", layer)
    chunks = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(x), batch_size):
                chunks.append(model.run_with_cache(x[start:start + batch_size], names_filter=[name])[1][name])
    finally:
        model.train(was_training)
    return torch.cat(chunks)


def fit_erasers(codes: Sequence[Tensor], labels: Sequence[Tensor], n_classes: int) -> list[LeaceEraser]:
    """One LEACE eraser per view (`concept_erasure.LeaceEraser.fit` on one-hot labels). The trace constraint is
    off, so the guarantee holds exactly on the fitting data: no linear classifier beats the constant one."""
    return [LeaceEraser.fit(x.double(), torch.nn.functional.one_hot(z.long(), n_classes).double(),
                            constrain_cov_trace=False)
            for x, z in zip(codes, labels, strict=True)]


def erased_rank(eraser: LeaceEraser) -> int:
    """The rank of the subspace an eraser removes."""
    return int((eraser.proj_right.abs().sum(dim=1) > 0).sum())


def random_erasers(codes: Sequence[Tensor], ranks: Sequence[int], seed: int = 0) -> list[LeaceEraser]:
    """Erasers that project out a random subspace of the given rank (orthogonally, about the codes' mean): the
    control for LEACE's rank."""
    generator = torch.Generator().manual_seed(seed)
    erasers = []
    for x, rank in zip(codes, ranks, strict=True):
        basis, _ = torch.linalg.qr(torch.randn(x.shape[1], max(rank, 1), generator=generator, dtype=torch.float64))
        basis = basis[:, :rank]
        erasers.append(LeaceEraser(proj_left=basis, proj_right=basis.T, bias=x.double().mean(dim=0)))
    return erasers


@dataclass(frozen=True, eq=False)
class Erase(Edit):
    """Apply an eraser to each view's codes (on `hook_pattern`); entries outside the views stay."""

    views: Sequence[View]
    erasers: Sequence[Any]
    kind: ClassVar[str] = "erase"

    def bind(self, batch: Batch, cached: Mapping[str, Tensor]) -> EditFn:
        def fn(act: Tensor, mask: Tensor, name: str) -> Tensor:
            out = act.clone()
            for view, eraser in zip(self.views, self.erasers, strict=True):
                q, k = _index(view, act.device)
                if not bool(mask[:, q, k].all()):
                    raise ValueError(f"view {view} lies outside the site; give Site the views' positions")
                block = act[:, :, q, k]
                out[:, :, q, k] = eraser(block.flatten(1).double()).to(act.dtype).view_as(block)
            return out

        return fn


def decodability(train_codes: Tensor, train_labels: Tensor, codes: Tensor, labels: Tensor, seed: int = 0) -> float:
    """Held-out accuracy of a multinomial logistic-regression probe (standardized codes) trained on
    (`train_codes`, `train_labels`)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(torch.unique(train_labels)) < 2:
        return float((labels == train_labels[0]).float().mean())
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500, random_state=seed))
    probe.fit(train_codes.double().numpy(), train_labels.numpy())
    return float(probe.score(codes.double().numpy(), labels.numpy()))


def majority_floor(train_labels: Tensor, labels: Tensor) -> float:
    """The accuracy of always answering the training labels' most common class."""
    values, counts = torch.unique(train_labels, return_counts=True)
    return float((labels == values[counts.argmax()]).float().mean())


@dataclass
class ErasureResult:
    """Per layer: the model's accuracy on held-out rule sets clean, with LEACE erasure and with a random erasure of
    the same rank; the rule's decodability (probe accuracy on held-out instances of the training rule sets) before
    and after each erasure, beside the majority-class floor. Accuracies are the task's `acc` (every feature right)
    and `acc_per_feature`; decodabilities average over views."""

    task: str
    variant: str
    rows: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)

    columns: ClassVar[tuple[str, ...]] = (
        "layer", "rank", "acc_clean", "acc_leace", "acc_random", "acc_per_feature_clean", "acc_per_feature_leace",
        "acc_per_feature_random", "decode_clean", "decode_leace", "decode_random", "decode_floor", "n_fit", "n_eval")

    def table(self) -> str:
        """A plain-text table."""
        return rows_table(f"erasure — {self.task}, {self.variant}", self.columns, self.rows, 12)

    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write `erasure.csv` and `erasure.json` into `out_dir`."""
        return save_rows(out_dir, "erasure", self.columns, self.rows,
                         {"name": "erasure", "task": self.task, "variant": self.variant, "params": self.params})


def erasure_experiment(
    model: torch.nn.Module,
    task: Any,
    *,
    layers: Sequence[int] | None = None,
    positions: Any = "all_features",
    whole_row: bool = False,
    n_samples: int = 1024,
    n_fit: int = 2048,
    seed: int = 0,
    progress: bool | None = None,
) -> ErasureResult:
    """LEACE erasure of the rule from one layer's codes at a time (see the module docstring and `ErasureResult`).

    Erasers and probes fit on `n_fit` instances of the training rule sets (`train`); decodability is scored on
    `n_samples` held-out instances of the training rule sets (`test`), the model's accuracy on `n_samples`
    instances of held-out rule sets (`ood`). Batches are drawn unpermuted, so slot f holds feature f.

    Raises:
        ValueError: before any work, for a task without per-feature rule labels, a layer out of range or positions
            the task does not declare.
    """
    chosen = check_layers(model, layers)
    if not hasattr(task, "rule_answer"):
        raise ValueError(f"erasure needs a task with per-feature rule labels (SRAVEN); task "
                         f"{getattr(task, 'name', task)!r} has none")
    site_views = views(task, positions, whole_row)
    device = next(model.parameters()).device
    draw = lambda n, split, s: task.sample(n, split, seed=s, device=device, unpermuted=True)  # noqa: E731
    fit, seen, held_out = draw(n_fit, "train", seed), draw(n_samples, "test", seed + 1), draw(n_samples, "ood", seed + 2)
    n_classes = int(fit.labels["rules"].max()) + 1
    fit_labels = [_labels(task, fit, v) for v in site_views]
    seen_labels = [_labels(task, seen, v) for v in site_views]
    rows = []
    for layer in tqdm(chosen, desc="erasure", unit="layer", disable=None if progress is None else not progress):
        fit_pattern, seen_pattern = _patterns(model, fit.x, layer).cpu(), _patterns(model, seen.x, layer).cpu()
        fit_codes = [view_codes(fit_pattern, v) for v in site_views]
        seen_codes = [view_codes(seen_pattern, v) for v in site_views]
        leace = fit_erasers(fit_codes, fit_labels, n_classes)
        ranks = [erased_rank(e) for e in leace]
        random = random_erasers(fit_codes, ranks, seed=seed + layer)
        site = Site("pattern", layers=layer, positions=positions, whole_row=whole_row)
        row: dict[str, Any] = {"layer": layer, "rank": int(max(ranks))}
        for name, erasers in (("leace", leace), ("random", random)):
            on_device = [_to(e, device) for e in erasers]
            result = intervene(model, task, held_out, [(site, Erase(site_views, on_device))])
            row.setdefault("acc_clean", result.clean_metrics["acc"])
            row.setdefault("acc_per_feature_clean", result.clean_metrics["acc_per_feature"])
            row[f"acc_{name}"] = result.metrics["acc"]
            row[f"acc_per_feature_{name}"] = result.metrics["acc_per_feature"]
            row[f"decode_{name}"] = float(np.mean([
                decodability(e(x.double()), z, e(xs.double()), zs, seed)
                for e, x, z, xs, zs in zip(erasers, fit_codes, fit_labels, seen_codes, seen_labels, strict=True)]))
        row["decode_clean"] = float(np.mean([decodability(x, z, xs, zs, seed) for x, z, xs, zs in
                                             zip(fit_codes, fit_labels, seen_codes, seen_labels, strict=True)]))
        row["decode_floor"] = float(np.mean([majority_floor(z, zs) for z, zs in zip(fit_labels, seen_labels,
                                                                                      strict=True)]))
        row.update(n_fit=n_fit, n_eval=n_samples)
        rows.append({c: row[c] for c in ErasureResult.columns})
    return ErasureResult(
        task=task.name, variant=variant_name(model), rows=rows,
        params={"layers": list(chosen), "positions": positions if isinstance(positions, str) else "custom",
                "whole_row": whole_row, "n_samples": n_samples, "n_fit": n_fit, "seed": seed, "fit_split": "train",
                "decode_split": "test", "accuracy_split": "ood", "eraser": "concept_erasure.LeaceEraser",
                "constrain_cov_trace": False},
    )


def _to(eraser: LeaceEraser, device: Any) -> LeaceEraser:
    return LeaceEraser(proj_left=eraser.proj_left.to(device), proj_right=eraser.proj_right.to(device),
                       bias=None if eraser.bias is None else eraser.bias.to(device))
