"""Distributed alignment search on latent codes: the search with its controls (`alignment_search` ->
`AlignmentResult`). The rotation's training (`fit_rotation`) and its score (`interchange_accuracy`) are in
`latentcode.causal.alignment_fit`, the edit in `latentcode.causal.interchange`, the rotation in
`latentcode.causal.rotation`, the counterfactuals in `latentcode.causal.counterfactuals`; the public names of these
are re-exported here.

Geiger et al. 2023 (arXiv 2303.02536) ask whether the model *uses* the rule the codes carry.

A site is the code at a layer's (query, key) positions: the vector of attention scores across heads for each pair
(`hook_pattern`). `Rotation` is an orthogonal change of basis of that vector (`torch.nn.utils.parametrizations.
orthogonal`, one per layer, shared by every pair of the site). `Interchange` is the `Edit` that takes a base
instance's code, rotates it, puts the source instance's first k rotated coordinates in place of the base's, and
rotates back. The rotation is trained so that the model's output becomes the *counterfactual* answer: what the task's
own ground truth says the answer would be if the base took the source's rule (SRAVEN: `rule_answer`, the source's
rule applied to the base's panels; fuzzy logic: `function_answer`, the source's function at the base's query input,
a hit being a prediction closer to it than to the base's own target). The interchange-intervention accuracy (IIA) is
how often it does.

`alignment_search` runs the whole analysis on one model: per layer and k, the IIA on held-out rule sets (`ood`)
beside the identity rotation (the plain transplant of the first k heads' codes; with k = n_heads, a
`Transplant`), a random rotation, the same-rule source control (the source replaced by another instance with the
base's own rules or terms: codes move, the rule does not), the IIA on the training rule sets (`test` split) and a Wilson
interval. A task without counterfactual ground truth is refused before any work (`counterfactual_for`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor
from tqdm.auto import tqdm

from latentcode.causal.alignment_fit import (
    CODE_HOOK,
    _cache_codes,
    _cache_resid,
    _check_k,
    _site_layer,
    default_ks,
    fit_rotation,
    interchange_accuracy,
    wilson_interval,
)
from latentcode.causal.counterfactuals import (
    FunctionCounterfactual,
    RuleCounterfactual,
    as_counterfactual,
    counterfactual_for,
)
from latentcode.causal.experiment_result import rows_table, save_rows, take, variant_name
from latentcode.causal.patching import Site, check_layers
from latentcode.causal.rotation import Rotation, random_rotation
from latentcode.tasks.base import Batch

__all__ = [
    "AlignmentResult",
    "FunctionCounterfactual",
    "Rotation",
    "RuleCounterfactual",
    "alignment_search",
    "counterfactual_for",
    "fit_rotation",
    "interchange_accuracy",
    "random_rotation",
    "wilson_interval",
]


@dataclass
class _Pairs:
    """Base and source instances with their counterfactual targets and the source's codes at the site."""

    base: Batch
    source: Batch
    target: Tensor
    informative: Tensor
    source_codes: Tensor | None = None


def _pairs(task: Any, counterfactual: Any, n: int, split: str, seed: int, device: Any, site_queries: Tensor,
           options: dict[str, Any]) -> _Pairs:
    """`n` (base, source) pairs of `split`, drawn by the counterfactual with the input choice's `options` (none: its
    own draw; a counterfactual that takes no options is then called as before)."""
    base = counterfactual.sample(task, n, split, seed, device, **options)
    source = counterfactual.sample(task, n, split, seed + 1, device, **options)
    target, informative = counterfactual.targets(task, base, source, site_queries)
    return _Pairs(base, source, target, informative)


def _same_rule_sources(concept: Tensor, seed: int) -> tuple[Tensor, Tensor]:
    """For each base instance another instance of the same batch with the same concept (SRAVEN: rule tuple; fuzzy
    logic: terms), seeded, and whether one exists."""
    rules = concept.cpu()
    same = (rules[:, None, :] == rules[None, :, :]).all(-1)
    same.fill_diagonal_(False)
    scores = torch.rand(same.shape, generator=torch.Generator().manual_seed(seed)) * same
    return scores.argmax(dim=1), same.any(dim=1)


@dataclass
class AlignmentResult:
    """IIA per layer and k, with its controls (`rows`), and the fitted rotations.

    Columns of each row: `layer`, `k`, `iia` (held-out rule sets, trained rotation) with `iia_low`/`iia_high`
    (95% Wilson interval), `identity` (identity rotation: the transplant of the first k heads' codes), `random`
    (a random rotation), `same_rule` (the trained rotation with a source of the base's own rules, or on fuzzy logic
    its own terms, scored against the real source's counterfactual: the floor), `train_iia` (training rule sets,
    held-out instances), `n` and `n_control` (informative entries), `clean_counterfactual` (how often the unpatched
    output already is a hit: the counterfactual answer, or on fuzzy logic nearer the counterfactual value than the
    base's target).
    """

    task: str
    variant: str
    rows: list[dict[str, Any]]
    rotations: dict[tuple[int, int], Rotation] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    columns: ClassVar[tuple[str, ...]] = ("layer", "k", "iia", "iia_low", "iia_high", "identity", "random",
                                          "same_rule", "train_iia", "clean_counterfactual", "n", "n_control")

    def table(self) -> str:
        """A plain-text table."""
        return rows_table(f"alignment search — {self.task}, {self.variant} (IIA on held-out rule sets)",
                          self.columns, self.rows, 10)

    def save(self, out_dir: str | os.PathLike) -> list[Path]:
        """Write `alignment.csv`, `alignment.json` and `rotations/layer{L}_k{k}.safetensors/.json`."""
        out = Path(out_dir)
        paths = save_rows(out, "alignment", self.columns, self.rows,
                          {"name": "alignment_search", "task": self.task, "variant": self.variant,
                           "params": self.params})
        for (layer, k), rotation in self.rotations.items():
            paths += rotation.save(out / "rotations" / f"layer{layer}_k{k}",
                                   {"layer": layer, "k": k, "task": self.task, "variant": self.variant,
                                    "site": self.params.get("site")})
        return paths


def alignment_search(
    model: torch.nn.Module,
    task: Any,
    *,
    layers: Sequence[int] | None = None,
    ks: Sequence[int] | None = None,
    positions: Any = None,
    whole_row: bool = False,
    n_samples: int = 256,
    n_train: int = 512,
    steps: int = 50,
    batch_size: int = 32,
    lr: float = 0.05,
    seed: int = 0,
    inputs: str | None = None,
    counterfactual: Any = None,
    progress: bool | None = None,
) -> AlignmentResult:
    """Distributed alignment search at every chosen layer and k, with its controls (see `AlignmentResult`).

    The rotation trains on `n_train` pairs of the `train` split; IIA is scored on `n_samples` pairs of held-out
    rule sets (`ood`) and, for `train_iia`, of held-out instances of the training rule sets (`test`).

    Args:
        model: a model of `task`.
        task: a task with counterfactual ground truth (SRAVEN, fuzzy logic).
        layers: model layers (default: all).
        ks: swapped dimensions, each in 1..n_heads (default: 1, n_heads / 4 and n_heads / 2; 1, 4, 8 on the
            shipped SRAVEN models).
        positions: the site's (query, key) positions, a name the task declares or explicit ones (see `Site`);
            default the counterfactual's (SRAVEN 'all_features': every feature's query and its keys in panels 7
            and 8; fuzzy logic 'paper': the query token attending to itself).
        whole_row: widen the site to every key of each chosen query.
        n_samples: evaluation pairs per split.
        n_train: training pairs.
        steps, batch_size, lr: training of each rotation (`fit_rotation`).
        seed: seeds the pairs, the initial and random rotations and the minibatches.
        inputs: an input choice the task declares for reading codes (`task.code_reading.inputs`; fuzzy logic:
            'fixed_query', every instance sharing one query input, as the probes read the codes), used for every
            pair's base and source (its `sample_options` go to the counterfactual's `sample`); None: the
            counterfactual's own draw (SRAVEN unpermuted, fuzzy logic every input at random, as in training).
        counterfactual: default `counterfactual_for(task)`.
        progress: progress bar (None: only on a terminal).

    Raises:
        ValueError: before any work, for a task without counterfactual, a k out of 1..n_heads, a layer out of
            range, positions the task does not declare, or inputs it does not declare (or a permuted choice).
    """
    counterfactual = counterfactual_for(task) if counterfactual is None else as_counterfactual(counterfactual)
    options = _input_options(task, inputs)
    positions = counterfactual.positions if positions is None else positions
    n = int(model.cfg.n_heads)
    ks = default_ks(n) if ks is None else [_check_k(k, n) for k in ks]
    if not ks:
        raise ValueError("ks is empty; pass at least one k in 1..n_heads")
    chosen = check_layers(model, layers)
    sites = {layer: Site(CODE_HOOK, layers=layer, positions=positions, whole_row=whole_row) for layer in chosen}
    masks = {layer: _site_layer(model, task, site) for layer, site in sites.items()}
    queries = next(iter(masks.values()))[1].any(dim=0).any(dim=1).cpu()
    device = next(model.parameters()).device
    train = _pairs(task, counterfactual, n_train, "train", seed, device, queries, options)
    if inputs is not None and not bool(train.informative.any()):
        raise ValueError(f"no training pair drawn at inputs={inputs!r} has an informative counterfactual (the "
                         "source's answer and the base's differ nowhere the site reaches); choose other inputs or raise "
                         "n_train")
    held_out = _pairs(task, counterfactual, n_samples, "ood", seed + 10, device, queries, options)
    seen = _pairs(task, counterfactual, n_samples, "test", seed + 20, device, queries, options)
    partner, has_partner = _same_rule_sources(counterfactual.concept(held_out.base), seed)
    control_source = take(held_out.base, partner)
    control_informative = held_out.informative & has_partner[:, None]
    with torch.no_grad():
        clean = counterfactual.scores(task, model.eval()(held_out.base.x))
    clean_hits = counterfactual.hits(task, clean, held_out.target, held_out.base) & held_out.informative
    clean_cf = float(clean_hits.sum() / max(1, int(held_out.informative.sum())))
    rows, rotations = [], {}
    bar = tqdm([(layer, k) for layer in chosen for k in ks], desc="alignment search", unit="site",
               disable=None if progress is None else not progress)
    resid = {key: _cache_resid(model, pairs.base.x, chosen, 256)
             for key, pairs in (("train", train), ("ood", held_out), ("test", seen))}
    codes: dict[str, Tensor] = {}
    for layer, k in bar:
        bar.set_postfix(layer=layer, k=k)
        site, (name, _, _) = sites[layer], masks[layer]
        if codes.get("layer") is not layer:  # the sources' codes at this layer, once per layer
            codes = {key: _cache_codes(model, pairs.source.x, name, 256)
                     for key, pairs in (("train", train), ("ood", held_out), ("test", seen))}
            codes["control"] = _cache_codes(model, control_source.x, name, 256)
            codes["layer"] = layer  # type: ignore[assignment]
        rotation = fit_rotation(model, task, site, k, train.base, train.source, counterfactual=counterfactual,
                                steps=steps, batch_size=batch_size, lr=lr, seed=seed + 1000 * layer + k,
                                progress=progress, source_codes=codes["train"], base_resid=resid["train"].get(layer))
        rotation.requires_grad_(False)

        def score(rot: Rotation | Tensor, pairs: _Pairs, key: str, informative: Tensor | None = None,
                  base: str | None = None, site: Site = site, k: int = k, layer: int = layer,
                  codes: dict[str, Tensor] = codes) -> tuple[int, int]:
            return interchange_accuracy(model, task, site, rot, k, pairs.base, pairs.source, target=pairs.target,
                                        informative=pairs.informative if informative is None else informative,
                                        counterfactual=counterfactual, source_codes=codes[key],
                                        base_resid=resid[base or key].get(layer))

        hits, total = score(rotation, held_out, "ood")
        low, high = wilson_interval(hits, total)
        identity = score(torch.eye(n, device=device), held_out, "ood")
        random = score(random_rotation(n, seed + 7).to(device), held_out, "ood")
        control = score(rotation, held_out, "control", control_informative, base="ood")
        train_hits = score(rotation, seen, "test")
        rows.append({
            "layer": layer, "k": k, "iia": hits / max(1, total), "iia_low": low, "iia_high": high,
            "identity": identity[0] / max(1, identity[1]), "random": random[0] / max(1, random[1]),
            "same_rule": control[0] / max(1, control[1]), "train_iia": train_hits[0] / max(1, train_hits[1]),
            "clean_counterfactual": clean_cf, "n": total, "n_control": control[1],
        })
        rotations[(layer, k)] = rotation
    return AlignmentResult(
        task=task.name, variant=variant_name(model), rows=rows, rotations=rotations,
        params={"layers": list(chosen), "ks": ks, "site": {"hook": CODE_HOOK, "positions": positions if isinstance(
            positions, str) else "custom", "whole_row": whole_row}, "n_samples": n_samples, "n_train": n_train,
            "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "train_split": "train",
            "heldout_split": "ood", "train_iia_split": "test", "counterfactual": counterfactual.name,
            "inputs": inputs},
    )


def _input_options(task: Any, inputs: str | None) -> dict[str, Any]:
    """The `sample` keywords of the task's input choice `inputs` ({} for None); ValueError (one line) for a name
    the task does not declare, or for a choice that permutes SRAVEN's features (the counterfactual reads feature f
    from slot f in base and source alike)."""
    if inputs is None:
        return {}
    reading = getattr(task, "code_reading", None)
    if reading is None:
        raise ValueError(f"inputs={inputs!r}: task {getattr(task, 'name', type(task).__name__)!r} declares no input "
                         "choices (code_reading); leave inputs=None")
    options = dict(reading.choice(inputs, repr(task.name)).sample_options)
    if options.get("unpermuted") is False:
        raise ValueError(f"inputs={inputs!r} permutes the features, but the counterfactual reads feature f from slot "
                         "f in base and source alike; leave inputs=None")
    return options
