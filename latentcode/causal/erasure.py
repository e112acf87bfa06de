"""Concept erasure on latent codes: with the rule linearly erased from the codes, does the model still answer?

LEACE (Belrose et al. 2023, the `concept-erasure` package) fits, from codes and their rule labels, the least-squares
affine map that leaves no linear classifier better than the constant one. `fit_erasers` fits one eraser per view of
a site (the code of a view is its scores over every head and key, flattened), on instances of the training rule
sets. `Erase` is the `Edit` that applies the erasers in the forward pass (`latentcode.causal.patching.intervene`).
`erasure_experiment` reports, per layer, the model's held-out score before and after, beside erasing a random
subspace of the same rank, and the concept's decodability after erasure against its floor: if LEACE-erased codes
still decode above the floor, the erasure failed and the score after it means nothing.

What is erased depends on the task (`concept_for`):

- `RuleConcept` (SRAVEN): one view per feature ('all_features': feature f's query attending to feature f of panels
  7 and 8), its concept the rule of f (one-hot); decodability is a multinomial probe's accuracy against the majority
  class; the score is the task's `acc` and `acc_per_feature`.
- `TermsConcept` (fuzzy logic): one view, the query token's code ('paper': attending to itself; `whole_row`: to every
  example), its concept the function's set of terms, as a multi-hot vector over the 2^L terms; decodability is the
  probes' set score (one binary probe per term, the fraction of an instance's K terms among its K most probable)
  against the K most frequent terms; the score is the task's `r2` and `loss` (MSE).
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

__all__ = ["Erase", "ErasureResult", "RuleConcept", "TermsConcept", "View", "concept_for", "decodability",
           "erasure_experiment", "fit_erasers", "random_erasers", "set_decodability", "view_codes", "views"]


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
    features = spec.feature if spec.feature is not None else np.zeros(spec.n_views, dtype=np.int64)
    return [View(tuple(int(q) for q in np.atleast_1d(query)), every if whole_row else tuple(int(k) for k in
                 np.atleast_1d(key)), int(feature)) for query, key, feature in zip(spec.query, spec.key, features,
                                                                                   strict=True)]


def _index(view: View, device: Any) -> tuple[Tensor, Tensor]:
    return (torch.as_tensor(view.query, device=device)[:, None], torch.as_tensor(view.key, device=device)[None, :])


def view_codes(pattern: Tensor, view: View) -> Tensor:
    """float [batch, head * query * key]: a view's codes from `hook_pattern` activations [batch, head, query, key]."""
    q, k = _index(view, pattern.device)
    return pattern[:, :, q, k].flatten(1)


@dataclass(frozen=True)
class RuleConcept:
    """SRAVEN's concept: the rule of each view's feature (long labels, one-hot for LEACE). Decodability: a
    multinomial logistic probe's accuracy; floor: the majority class. Scores: `acc` (every feature right) and
    `acc_per_feature`."""

    name: ClassVar[str] = "rules"
    positions: ClassVar[str] = "all_features"
    metrics: ClassVar[tuple[str, ...]] = ("acc", "acc_per_feature")

    def labels(self, task: Any, batch: Batch, view: View) -> Tensor:
        """long [batch]: the rule of the view's feature."""
        return batch.labels["rules"][:, view.feature].cpu()

    def n_classes(self, task: Any, batch: Batch) -> int:
        return int(batch.labels["rules"].max()) + 1

    def decode(self, train_codes: Tensor, train_labels: Tensor, codes: Tensor, labels: Tensor, seed: int) -> float:
        return decodability(train_codes, train_labels, codes, labels, seed)

    def floor(self, train_labels: Tensor, labels: Tensor) -> float:
        return majority_floor(train_labels, labels)


@dataclass(frozen=True)
class TermsConcept:
    """Fuzzy logic's concept: which terms the function ORs, a multi-hot vector over the 2^L terms (what the probes
    read on this task: the `terms` label, one binary probe per term, `results/probing/fuzzy_logic-*`).

    One LEACE eraser takes the whole multi-hot vector as its concept Z. LEACE's guarantee is then that no linear
    predictor of any term's presence (of any linear function of Z) beats the constant one, which is what "the terms
    are linearly erased" means. One eraser per term, applied in turn, would carry no joint guarantee (a later
    projection can restore what an earlier one removed), and a label per combination of terms would be a different
    concept: it has more classes than the code has dimensions at the paper's site, and the held-out combinations
    never occur in the fitting data. The erased rank is at most the number of known terms minus one (the K
    indicators of an instance always sum to K). Decodability: the probes' set score (the fraction of an instance's
    K terms among the K most probable under one logistic probe per term); floor: the same score of the K terms
    most frequent in the fitting data. Scores: the task's `r2` and `loss` (MSE)."""

    name: ClassVar[str] = "terms"
    positions: ClassVar[str] = "paper"
    metrics: ClassVar[tuple[str, ...]] = ("r2", "loss")

    def labels(self, task: Any, batch: Batch, view: View) -> Tensor:
        """long [batch, 2^L]: 1 where the instance's function has the term."""
        terms = batch.labels["terms"].cpu().long()
        hot = torch.zeros(len(terms), self.n_classes(task, batch), dtype=torch.long)
        return hot.scatter_(1, terms, 1)

    def n_classes(self, task: Any, batch: Batch) -> int:
        return 2 ** int(task.config.n_variables)

    def decode(self, train_codes: Tensor, train_labels: Tensor, codes: Tensor, labels: Tensor, seed: int) -> float:
        return set_decodability(train_codes, train_labels, codes, labels, seed)

    def floor(self, train_labels: Tensor, labels: Tensor) -> float:
        return _set_score(train_labels.double().mean(dim=0).expand(len(labels), -1), labels)


def concept_for(task: Any) -> RuleConcept | TermsConcept:
    """What erasure removes on this task (SRAVEN: `RuleConcept`; fuzzy logic: `TermsConcept`); raises ValueError
    (one line) for a task with neither."""
    if hasattr(task, "rule_answer"):
        return RuleConcept()
    if hasattr(task, "function_answer"):
        return TermsConcept()
    raise ValueError(f"erasure needs a task with per-feature rule labels (SRAVEN) or term labels (fuzzy logic); task "
                     f"{getattr(task, 'name', task)!r} has neither")


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
    """One LEACE eraser per view (`concept_erasure.LeaceEraser.fit`): class labels [n] are one-hot encoded, multi-hot
    labels [n, n_classes] (a set of classes per row) are the concept as they are. The trace constraint is off, so
    the guarantee holds exactly on the fitting data: no linear classifier beats the constant one."""
    return [LeaceEraser.fit(x.double(), (z if z.ndim == 2 else torch.nn.functional.one_hot(z.long(), n_classes))
                            .double(), constrain_cov_trace=False)
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


def set_decodability(train_codes: Tensor, train_sets: Tensor, codes: Tensor, sets: Tensor, seed: int = 0) -> float:
    """The probes' score of a set label: one binary logistic-regression probe per class (standardized codes) fitted on
    (`train_codes`, multi-hot `train_sets` [n, classes]); a held-out row scores the fraction of its classes among its
    k most probable (k = the size of its set), averaged over rows. A class that is constant in training gets its
    training frequency as its probability."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_sets, sets = train_sets.long(), sets.long()
    probability = train_sets.double().mean(dim=0).expand(len(sets), -1).clone()
    for c in range(train_sets.shape[1]):
        if len(torch.unique(train_sets[:, c])) < 2:
            continue
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500, random_state=seed))
        probe.fit(train_codes.double().numpy(), train_sets[:, c].numpy())
        probability[:, c] = torch.from_numpy(probe.predict_proba(codes.double().numpy())[:, 1])
    return _set_score(probability, sets)


def _set_score(probability: Tensor, sets: Tensor) -> float:
    """Mean over rows of the fraction of a row's classes among its k most probable (k = its set's size)."""
    sizes = sets.sum(dim=1)
    order = probability.argsort(dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order).scatter_(1, order, torch.arange(sets.shape[1]).expand_as(order).contiguous())
    found = ((ranks < sizes[:, None]) & sets.bool()).sum(dim=1).double()
    return float((found / sizes.clamp(min=1)).mean())


def majority_floor(train_labels: Tensor, labels: Tensor) -> float:
    """The accuracy of always answering the training labels' most common class."""
    values, counts = torch.unique(train_labels, return_counts=True)
    return float((labels == values[counts.argmax()]).float().mean())


@dataclass
class ErasureResult:
    """Per layer: the model's score on held-out rule sets clean, with LEACE erasure and with a random erasure of
    the same rank; the concept's decodability (on held-out instances of the training rule sets) before and after
    each erasure, beside its floor. Scores are the concept's `metrics` (SRAVEN: `acc`, every feature right, and
    `acc_per_feature`; fuzzy logic: `r2` and `loss`), in columns `<metric>_clean`, `<metric>_leace` and
    `<metric>_random`; decodabilities average over views."""

    task: str
    variant: str
    rows: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] = RuleConcept.metrics

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns, in order."""
        scores = tuple(f"{m}_{kind}" for m in self.metrics for kind in ("clean", "leace", "random"))
        return ("layer", "rank", *scores, "decode_clean", "decode_leace", "decode_random", "decode_floor", "n_fit",
                "n_eval")

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
    positions: Any = None,
    whole_row: bool = False,
    n_samples: int = 1024,
    n_fit: int = 2048,
    seed: int = 0,
    inputs: str | None = None,
    progress: bool | None = None,
) -> ErasureResult:
    """LEACE erasure of the rule (SRAVEN) or the terms (fuzzy logic) from one layer's codes at a time (see the
    module docstring and `ErasureResult`).

    Erasers and probes fit on `n_fit` instances of the training rule sets (`train`); decodability is scored on
    `n_samples` held-out instances of the training rule sets (`test`), the model's score on `n_samples`
    instances of held-out rule sets (`ood`). Batches are drawn unpermuted, so slot f holds feature f.

    Args:
        positions: the site; default the concept's (SRAVEN 'all_features', fuzzy logic 'paper').
        whole_row: widen each view to every key of its query.
        inputs: an input choice the task declares for reading codes (`task.code_reading.inputs`; fuzzy logic:
            'fixed_query', every instance sharing one query input, as the probes read the codes), used for every
            batch; None: inputs drawn as in training.

    Raises:
        ValueError: before any work, for a task without rule or term labels, a layer out of range or positions
            the task does not declare.
    """
    chosen = check_layers(model, layers)
    concept = concept_for(task)
    positions = concept.positions if positions is None else positions
    site_views = views(task, positions, whole_row)
    device = next(model.parameters()).device
    params: dict[str, Any] = {"unpermuted": True}
    if inputs is not None:
        params.update(task.code_reading.choice(inputs, repr(task.name)).sample_options)
        if params.get("unpermuted") is False:
            raise ValueError(f"inputs={inputs!r} permutes the features, but erasure reads feature f from slot f; "
                             "leave inputs=None")
    draw = lambda n, split, s: task.sample(n, split, seed=s, device=device, **params)  # noqa: E731
    fit, seen, held_out = draw(n_fit, "train", seed), draw(n_samples, "test", seed + 1), draw(n_samples, "ood", seed + 2)
    n_classes = concept.n_classes(task, fit)
    fit_labels = [concept.labels(task, fit, v) for v in site_views]
    seen_labels = [concept.labels(task, seen, v) for v in site_views]
    columns = ErasureResult(task.name, "", [], metrics=concept.metrics).columns
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
            for metric in concept.metrics:
                row.setdefault(f"{metric}_clean", result.clean_metrics[metric])
                row[f"{metric}_{name}"] = result.metrics[metric]
            row[f"decode_{name}"] = float(np.mean([
                concept.decode(e(x.double()), z, e(xs.double()), zs, seed)
                for e, x, z, xs, zs in zip(erasers, fit_codes, fit_labels, seen_codes, seen_labels, strict=True)]))
        row["decode_clean"] = float(np.mean([concept.decode(x, z, xs, zs, seed) for x, z, xs, zs in
                                             zip(fit_codes, fit_labels, seen_codes, seen_labels, strict=True)]))
        row["decode_floor"] = float(np.mean([concept.floor(z, zs) for z, zs in zip(fit_labels, seen_labels,
                                                                                     strict=True)]))
        row.update(n_fit=n_fit, n_eval=n_samples)
        rows.append({c: row[c] for c in columns})
    return ErasureResult(
        task=task.name, variant=variant_name(model), rows=rows, metrics=concept.metrics,
        params={"layers": list(chosen), "positions": positions if isinstance(positions, str) else "custom",
                "whole_row": whole_row, "n_samples": n_samples, "n_fit": n_fit, "seed": seed, "fit_split": "train",
                "decode_split": "test", "accuracy_split": "ood", "eraser": "concept_erasure.LeaceEraser",
                "constrain_cov_trace": False, "concept": concept.name, "metrics": list(concept.metrics),
                "inputs": inputs or "as in training"},
    )


def _to(eraser: LeaceEraser, device: Any) -> LeaceEraser:
    return LeaceEraser(proj_left=eraser.proj_left.to(device), proj_right=eraser.proj_right.to(device),
                       bias=None if eraser.bias is None else eraser.bias.to(device))
