"""The lower layer of distributed alignment search (`latentcode.causal.alignment`): training a rotation of a
one-layer code site (`fit_rotation`) and scoring it by its interchange-intervention accuracy (`interchange_accuracy`),
with the Wilson interval of such a score (`wilson_interval`) and the default swapped dimensions (`default_ks`).

`fit_rotation` trains an orthogonal `Rotation` (`latentcode.causal.rotation`) so that the `Interchange` edit
(`latentcode.causal.interchange`) of its first k coordinates from a source instance makes the model's output the
counterfactual answer (`latentcode.causal.counterfactuals`), the model's weights frozen; `interchange_accuracy` counts
how often it does on given (base, source) pairs. Both run only the blocks from the site's layer on when the base's
block input there is cached. `alignment_search` builds the whole analysis and its controls on these two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from latentcode.causal.counterfactuals import as_counterfactual, counterfactual_for
from latentcode.causal.edits import EditFn
from latentcode.causal.interchange import interchange
from latentcode.causal.patching import Site, _site_hook
from latentcode.causal.rotation import Rotation
from latentcode.model.hooks import hook_name, hooks
from latentcode.tasks.base import Batch

__all__ = ["CODE_HOOK", "default_ks", "fit_rotation", "interchange_accuracy", "wilson_interval"]

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
