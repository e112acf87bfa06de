"""Distributed alignment search on latent codes: the rotation's training (`fit_rotation`), its score
(`interchange_accuracy`) and the search with its controls (`alignment_search` -> `AlignmentResult`). The edit is
`latentcode.causal.interchange`, the rotation `latentcode.causal.rotation`, the counterfactuals
`latentcode.causal.counterfactuals`.

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

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from latentcode.causal.counterfactuals import (
    FunctionCounterfactual,
    RuleCounterfactual,
    as_counterfactual,
    counterfactual_for,
)
from latentcode.causal.edits import EditFn
from latentcode.causal.experiment_result import rows_table, save_rows, take, variant_name
from latentcode.causal.interchange import interchange
from latentcode.causal.patching import Site, _site_hook, check_layers
from latentcode.causal.rotation import Rotation, random_rotation
from latentcode.model.hooks import hook_name, hooks
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

CODE_HOOK = "pattern"
"""The hook whose entries are the latent codes (`hook_pattern`: [batch, head_index, query_pos, key_pos])."""


def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion `hits / n` (95% for z = 1.96); (nan, nan) when n = 0.

    >>> [round(v, 3) for v in wilson_interval(8, 10)]
    [0.49, 0.943]
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _check_k(k: int, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= int(k) <= n:
        raise ValueError(f"k={k!r} must be an integer in 1..{n}: the code is a vector over the model's {n} heads")
    return int(k)


def default_ks(n_heads: int) -> list[int]:
    """The swapped dimensions analysed by default: 1, n_heads // 4 and n_heads // 2 (each at least 1, distinct)."""
    return sorted({1, max(1, n_heads // 4), max(1, n_heads // 2)})


def _site_layer(model: torch.nn.Module, task: Any, site: Site) -> tuple[str, Tensor, int]:
    """(the hook name, the bool mask [head, query, key], the layer) of a one-layer code site; ValueError
    otherwise."""
    if site.hook not in (CODE_HOOK, "attn"):
        raise ValueError(f"alignment search acts on the codes (Site(hook='pattern')); got hook={site.hook!r}")
    if site.heads is not None:
        raise ValueError("the code is the vector across every head; leave Site.heads=None")
    layers, names, mask = site.resolve(model, task)
    if len(layers) != 1:
        raise ValueError(f"an alignment site is one layer; got layers={list(layers)}")
    return names[0], mask, layers[0]


def _cache_codes(model: torch.nn.Module, x: Tensor, name: str, batch_size: int) -> Tensor:
    chunks = []
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            _, cache = model.run_with_cache(x[start:start + batch_size], names_filter=[name])
            chunks.append(cache[name])
    return torch.cat(chunks)


def _cache_resid(model: torch.nn.Module, x: Tensor, layers: Sequence[int], batch_size: int) -> dict[int, Tensor]:
    """Each layer's block input (`resid_pre`) for `x`, so a run patched at layer L can start there (latentcode's
    `Transformer` only; other models run whole)."""
    from latentcode.model.transformer import Transformer

    if not isinstance(model, Transformer):
        return {}
    names = {layer: hook_name("resid_pre", layer) for layer in layers}
    chunks: dict[int, list[Tensor]] = {layer: [] for layer in layers}
    with torch.no_grad():
        for start in range(0, len(x), batch_size):
            _, cache = model.run_with_cache(x[start:start + batch_size], names_filter=list(names.values()))
            for layer, name in names.items():
                chunks[layer].append(cache[name])
    return {layer: torch.cat(parts) for layer, parts in chunks.items()}


def _run(model: torch.nn.Module, x: Tensor, source_codes: Tensor, name: str, mask: Tensor,
         rotation: Rotation | Tensor, k: int, start: tuple[int, Tensor] | None = None) -> Tensor:
    """The model's outputs on `x` with the interchange at hook `name`; with `start` = (layer, that layer's cached
    block input), only the blocks from that layer on run (the same outputs for less work)."""
    fn: EditFn = lambda act, m, hook_name: interchange(act, source_codes, m, rotation, k)  # noqa: E731
    with hooks(model, fwd_hooks=[(name, _site_hook(fn, mask.to(x.device), int(x.shape[1])))]):
        if start is None:
            return model(x)
        layer, resid = start
        for block in model.blocks[layer:]:
            resid = block(resid)
        return model.unembed(model.ln_final(resid))


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


def fit_rotation(
    model: torch.nn.Module,
    task: Any,
    site: Site,
    k: int,
    base: Batch,
    source: Batch,
    *,
    counterfactual: Any = None,
    steps: int = 50,
    batch_size: int = 32,
    lr: float = 0.05,
    seed: int = 0,
    progress: bool | None = None,
    source_codes: Tensor | None = None,
    base_resid: Tensor | None = None,
) -> Rotation:
    """Train a rotation so that interchanging its first k coordinates from `source` makes the output the
    counterfactual answer (the counterfactual's `loss` on the informative entries: cross-entropy on SRAVEN, squared
    error on fuzzy logic); the model's weights stay frozen.

    Args:
        model: the model (run in eval mode; its parameters are not updated).
        task: its task.
        site: a one-layer code site (`Site('pattern', layers=L, positions=...)`, every head).
        k: the swapped dimension (1..n_heads).
        base, source: training pairs (instance i of each).
        counterfactual: the task's counterfactual (default `counterfactual_for(task)`).
        steps, batch_size, lr: Adam steps over minibatches of pairs (seeded order).
        seed: the initial (random) rotation and the minibatch order.
        progress: progress bar (None: only on a terminal).
        source_codes: the source's codes at the site's hook, if already cached.
        base_resid: the base's block input at the site's layer (`resid_pre`), if cached: runs start there.

    Returns:
        The trained `Rotation`.
    """
    counterfactual = counterfactual_for(task) if counterfactual is None else as_counterfactual(counterfactual)
    name, mask, layer = _site_layer(model, task, site)
    n = int(model.cfg.n_heads)
    k = _check_k(k, n)
    target, informative = counterfactual.targets(task, base, source, mask.any(dim=0).any(dim=1).cpu())
    usable = torch.nonzero(informative.any(dim=1)).squeeze(1)
    if not len(usable):
        raise ValueError("no training pair has an informative counterfactual; raise the number of pairs")
    if source_codes is None:
        source_codes = _cache_codes(model, source.x, name, batch_size)
    rotation = Rotation(n, init="random", seed=seed).to(base.x.device)
    optimizer = torch.optim.Adam(rotation.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    frozen = [p for p in model.parameters() if p.requires_grad]
    model.eval()
    for p in frozen:
        p.requires_grad_(False)
    try:
        for _ in tqdm(range(steps), desc=f"rotation k={k}", disable=None if progress is None else not progress,
                      leave=False):
            pick = usable[torch.randint(len(usable), (min(batch_size, len(usable)),), generator=generator)]
            at = pick.to(base.x.device)
            start = None if base_resid is None else (layer, base_resid.index_select(0, at))
            outputs = _run(model, base.x.index_select(0, at), source_codes.index_select(0, at), name, mask,
                           rotation, k, start)
            scores = counterfactual.scores(task, outputs)
            keep = informative[pick].to(scores.device)
            loss = counterfactual.loss(scores[keep], target[pick].to(scores.device)[keep])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        for p in frozen:
            p.requires_grad_(True)
        model.train(was_training)
    return rotation


def interchange_accuracy(
    model: torch.nn.Module,
    task: Any,
    site: Site,
    rotation: Rotation | Tensor,
    k: int,
    base: Batch,
    source: Batch,
    *,
    target: Tensor | None = None,
    informative: Tensor | None = None,
    counterfactual: Any = None,
    source_codes: Tensor | None = None,
    base_resid: Tensor | None = None,
    batch_size: int = 256,
) -> tuple[int, int]:
    """(hits, informative entries): how often the output with the interchange is the counterfactual answer (the
    counterfactual's `hits`: SRAVEN the argmax answer, fuzzy logic a prediction nearer it than the base's target).

    `target` and `informative` default to the counterfactual of (base, source); pass them to score another
    source against the same targets (the same-rule control).
    """
    counterfactual = counterfactual_for(task) if counterfactual is None else as_counterfactual(counterfactual)
    name, mask, layer = _site_layer(model, task, site)
    k = _check_k(k, int(model.cfg.n_heads))
    if target is None or informative is None:
        target, informative = counterfactual.targets(task, base, source, mask.any(dim=0).any(dim=1).cpu())
    if source_codes is None:
        source_codes = _cache_codes(model, source.x, name, batch_size)
    predictions = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(base.x), batch_size):
                stop = start + batch_size
                begin = None if base_resid is None else (layer, base_resid[start:stop])
                outputs = _run(model, base.x[start:stop], source_codes[start:stop], name, mask, rotation, k, begin)
                predictions.append(counterfactual.scores(task, outputs).cpu())
    finally:
        model.train(was_training)
    hits = counterfactual.hits(task, torch.cat(predictions), target, base) & informative
    return int(hits.sum()), int(informative.sum())


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
