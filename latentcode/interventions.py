"""Causal tests of latent codes: transplant, steer and ablate `blocks.{i}.attn.hook_pattern` through TL hooks.

Each intervention runs the model twice through `run_with_hooks` (once clean, once with hooks on the chosen
layers' `hook_pattern`), always over every query position (no `keep_last`, exactly as extraction does), and
returns an `InterventionResult` with both outputs and the task's own metrics. What is intervened on is a boolean
site mask [head_index, query_pos, key_pos] built by `site_mask` from a position choice (default: the paper's
extraction positions, spec §4.1). Experiments built from these live in `latentcode.experiments`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from latentcode.extract import pattern_hook_name, resolve_positions
from latentcode.tasks.base import Batch

__all__ = [
    "InterventionResult",
    "ablate",
    "code_direction",
    "site_mask",
    "steer",
    "transplant",
]

PairsArg = str | Mapping[str, Sequence[int]] | tuple[Sequence[int], Sequence[int]] | np.ndarray | Tensor
"""'paper' | 'all_features' (SRAVEN) | 'all' | {'query': [...], 'key': [...]} | (query, key) | bool [query_pos, key_pos]."""

AblateMethod = Literal["zero", "mean", "resample"]
ABLATE_METHODS: tuple[str, ...] = ("zero", "mean", "resample")


@dataclass(frozen=True)
class InterventionResult:
    """The outputs of one intervention beside the clean run, with the task's metrics for both.

    Attributes:
        kind: 'transplant', 'steer' or 'ablate'.
        layers: the model layers intervened on.
        sites: bool [head_index, query_pos, key_pos], the code entries changed at each of `layers`.
        outputs: float [batch, pos, d_out], the model's outputs with the intervention.
        clean_outputs: float [batch, pos, d_out], the outputs without it.
        prediction: `task.predict(outputs)` (SRAVEN: long [batch, feature]; fuzzy logic: float [batch]).
        clean_prediction: `task.predict(clean_outputs)`.
        metrics: `task.metrics(outputs, batch)` against the batch's own targets (loss and `metric_name`).
        clean_metrics: `task.metrics(clean_outputs, batch)`.
        metric_name: the task's headline metric (`acc` for SRAVEN, `r2` for fuzzy logic).
        donor_outputs: transplant only: float [batch, pos, d_out], the donor batch's own clean outputs.
        donor_prediction: transplant only: `task.predict(donor_outputs)`.
    """

    kind: str
    layers: tuple[int, ...]
    sites: Bool[Tensor, "head_index query_pos key_pos"]
    outputs: Float[Tensor, "batch pos d_out"]
    clean_outputs: Float[Tensor, "batch pos d_out"]
    prediction: Tensor
    clean_prediction: Tensor
    metrics: dict[str, float]
    clean_metrics: dict[str, float]
    metric_name: str
    donor_outputs: Float[Tensor, "batch pos d_out"] | None = None
    donor_prediction: Tensor | None = None

    @property
    def metric(self) -> float:
        """The headline metric with the intervention."""
        return self.metrics[self.metric_name]

    @property
    def drop(self) -> float:
        """Clean minus intervened headline metric (positive: the intervention hurt)."""
        return self.clean_metrics[self.metric_name] - self.metrics[self.metric_name]


def _check_layers(model: torch.nn.Module, layers: int | Sequence[int] | None) -> tuple[int, ...]:
    n_layers = int(model.cfg.n_layers)
    if layers is None:
        return tuple(range(n_layers))
    chosen = [layers] if isinstance(layers, int | np.integer) else list(layers)
    bad = [int(layer) for layer in chosen if not 0 <= int(layer) < n_layers]
    if bad or not chosen:
        raise ValueError(
            f"layers={bad or chosen} out of range: the model has {n_layers} layers, numbered 0..{n_layers - 1}"
        )
    return tuple(int(layer) for layer in chosen)


def site_mask(
    task: Any,
    n_heads: int,
    pairs: PairsArg = "paper",
    *,
    whole_row: bool = False,
    heads: int | Sequence[int] | None = None,
) -> Bool[Tensor, "head_index query_pos key_pos"]:
    """Which code entries an intervention touches, for every layer it touches.

    Args:
        task: the task (its `seq_len`, and what `resolve_positions` needs for named choices).
        n_heads: the model's `n_heads`.
        pairs: 'paper' (spec §4.1: SRAVEN = last query token x feature 4 of panels 7 and 8; fuzzy logic = the
            query token x itself), 'all_features' (SRAVEN: each feature's query token x that feature of panels 7
            and 8), 'all' (every query and key), explicit `{'query': [...], 'key': [...]}` or `(query, key)`
            (every query x every key listed), or a bool array [query_pos, key_pos].
        whole_row: widen to every key of each chosen query position (the whole query row).
        heads: head indices to touch (default every head).

    Returns:
        Bool [head_index, query_pos, key_pos].

    Raises:
        ValueError: an unknown name, positions or heads out of range, or a bool array of the wrong shape.

    >>> from latentcode.tasks.sraven import SRaven
    >>> mask = site_mask(SRaven(), n_heads=2)
    >>> mask.shape, mask.nonzero().tolist()
    (torch.Size([2, 36, 36]), [[0, 35, 27], [0, 35, 31], [1, 35, 27], [1, 35, 31]])
    """
    seq_len = int(task.seq_len)
    if isinstance(pairs, np.ndarray | Tensor):
        pair = torch.as_tensor(pairs)
        if pair.dtype != torch.bool or tuple(pair.shape) != (seq_len, seq_len):
            raise ValueError(
                f"a pairs array must be bool [query_pos, key_pos] = [{seq_len}, {seq_len}]; got "
                f"{pair.dtype} {tuple(pair.shape)}"
            )
        pair = pair.clone()
    elif isinstance(pairs, str) and pairs == "all":
        pair = torch.ones(seq_len, seq_len, dtype=torch.bool)
    else:
        spec = resolve_positions(task, pairs)  # type: ignore[arg-type]
        pair = torch.zeros(seq_len, seq_len, dtype=torch.bool)
        for query, key in zip(spec.query, spec.key, strict=True):
            pair[torch.as_tensor(query)[:, None], torch.as_tensor(key)[None, :]] = True
    if whole_row:
        pair = pair.any(dim=1, keepdim=True).expand(seq_len, seq_len).clone()
    if not pair.any():
        raise ValueError(f"pairs={pairs!r} selects no (query, key) pair")
    chosen = list(range(n_heads)) if heads is None else [heads] if isinstance(heads, int) else list(heads)
    bad = [h for h in chosen if not 0 <= int(h) < n_heads]
    if bad or not chosen:
        raise ValueError(f"heads={bad or chosen} out of range: the model has {n_heads} heads, 0..{n_heads - 1}")
    mask = torch.zeros(n_heads, seq_len, seq_len, dtype=torch.bool)
    mask[torch.as_tensor(chosen, dtype=torch.long)] = pair
    return mask


def _full_pattern_check(layer: int, pattern: Tensor, seq_len: int) -> None:
    if tuple(pattern.shape[-2:]) != (seq_len, seq_len):
        raise ValueError(
            f"layer {layer}'s codes have [query_pos, key_pos] = {tuple(pattern.shape[-2:])}, not the task's "
            f"[{seq_len}, {seq_len}]: interventions need every query position; run the model without keep_last"
        )


def _run(
    model: torch.nn.Module,
    task: Any,
    batch: Batch,
    hooks: list[tuple[str, Callable[..., Tensor]]],
) -> tuple[Tensor, Tensor]:
    """(clean outputs, hooked outputs) in eval mode without gradients; hooks are removed even on errors."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            clean = model(batch.x)
            hooked = model.run_with_hooks(batch.x, fwd_hooks=hooks)
    finally:
        model.train(was_training)
    return clean, hooked


def _result(
    kind: str,
    task: Any,
    batch: Batch,
    layers: tuple[int, ...],
    sites: Tensor,
    clean: Tensor,
    hooked: Tensor,
    donor_outputs: Tensor | None = None,
) -> InterventionResult:
    return InterventionResult(
        kind=kind,
        layers=layers,
        sites=sites.cpu(),
        outputs=hooked,
        clean_outputs=clean,
        prediction=task.predict(hooked),
        clean_prediction=task.predict(clean),
        metrics=task.metrics(hooked, batch),
        clean_metrics=task.metrics(clean, batch),
        metric_name=task.metric_name,
        donor_outputs=donor_outputs,
        donor_prediction=None if donor_outputs is None else task.predict(donor_outputs),
    )


def _on_device(model: torch.nn.Module, batch: Batch, what: str) -> Batch:
    if not isinstance(batch, Batch):
        raise ValueError(f"{what} must be a task Batch (task.sample(...)); got {type(batch).__name__}")
    param = next(model.parameters(), None)
    return batch if param is None else batch.to(param.device)


def _cache(model: torch.nn.Module, x: Tensor, names: list[str]) -> dict[str, Tensor]:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out, cache = model.run_with_cache(x, names_filter=names)
    finally:
        model.train(was_training)
    return {"__outputs__": out, **{name: cache[name] for name in names}}


def transplant(
    model: torch.nn.Module,
    task: Any,
    recipient: Batch,
    donor: Batch,
    *,
    layers: int | Sequence[int] | None = None,
    pairs: PairsArg = "paper",
    whole_row: bool = False,
    heads: int | Sequence[int] | None = None,
    values: bool = False,
) -> InterventionResult:
    """Run `recipient` with the codes of `donor` at the chosen layers, heads and (query, key) pairs.

    Instance i of the recipient receives the codes of instance i of the donor; everything else (queries, keys,
    values, other positions, other layers) is the recipient's own. With `values=True` the chosen layers' values
    (`blocks.{i}.attn.hook_v`, [batch, pos, head_index, d_head]) at the chosen heads and key positions are the
    donor's too.

    Args:
        model: a `Transformer` (or a HookedRootModule with `cfg.n_layers`, `cfg.n_heads` and `hook_pattern`s).
        task: the task the model solves (its `metrics` and `predict` score the outputs).
        recipient: the batch that runs.
        donor: a batch of the same shape whose codes are transplanted.
        layers: model layers (0-based) to transplant at (default: all).
        pairs: which (query, key) code entries, see `site_mask` (default: the paper's extraction positions).
        whole_row: widen `pairs` to every key of each chosen query.
        heads: heads to transplant (default: all).
        values: also transplant the values at the chosen heads and key positions.

    Returns:
        An `InterventionResult` (kind 'transplant') with `donor_outputs`; metrics are against the recipient's
        targets.

    Raises:
        ValueError: layers, heads or positions out of range, or donor and recipient of different shapes.

    >>> from latentcode.model import build_model
    >>> from latentcode.tasks.sraven import SRaven
    >>> task = SRaven()
    >>> model = build_model(task, "hyla", "tiny")
    >>> a, b = task.sample(4, seed=0), task.sample(4, seed=1)
    >>> result = transplant(model, task, a, b, layers=[1])
    >>> result.outputs.shape, result.layers
    (torch.Size([4, 36, 8]), (1,))
    """
    recipient = _on_device(model, recipient, "recipient")
    donor = _on_device(model, donor, "donor")
    if recipient.x.shape != donor.x.shape:
        raise ValueError(
            f"donor x has shape {tuple(donor.x.shape)} but recipient x has {tuple(recipient.x.shape)}; draw both "
            "from the same task with the same n_samples (instance i receives donor instance i's codes)"
        )
    chosen = _check_layers(model, layers)
    seq_len = int(task.seq_len)
    sites = site_mask(task, int(model.cfg.n_heads), pairs, whole_row=whole_row, heads=heads)
    sites = sites.to(recipient.x.device)
    names = [pattern_hook_name(layer) for layer in chosen]
    v_names = [f"blocks.{layer}.attn.hook_v" for layer in chosen] if values else []
    donor_cache = _cache(model, donor.x, names + v_names)
    v_sites = sites.any(dim=1).T  # [key_pos, head_index]: the keys whose values feed a transplanted code

    def pattern_hook(layer: int) -> Callable[..., Tensor]:
        def hook(pattern: Tensor, hook: Any) -> Tensor:
            _full_pattern_check(layer, pattern, seq_len)
            return torch.where(sites, donor_cache[pattern_hook_name(layer)], pattern)

        return hook

    def value_hook(layer: int) -> Callable[..., Tensor]:
        def hook(v: Tensor, hook: Any) -> Tensor:
            return torch.where(v_sites[:, :, None], donor_cache[f"blocks.{layer}.attn.hook_v"], v)

        return hook

    hooks = [(pattern_hook_name(layer), pattern_hook(layer)) for layer in chosen]
    hooks += [(f"blocks.{layer}.attn.hook_v", value_hook(layer)) for layer in chosen if values]
    clean, hooked = _run(model, task, recipient, hooks)
    return _result("transplant", task, recipient, chosen, sites, clean, hooked, donor_cache["__outputs__"])


def steer(
    model: torch.nn.Module,
    task: Any,
    batch: Batch,
    direction: Float[Tensor, "*direction"] | np.ndarray,
    *,
    layer: int,
    alpha: float = 1.0,
    pairs: PairsArg = "paper",
) -> InterventionResult:
    """Add `alpha * direction` to the codes of one layer at one view's (query, key) pairs.

    Args:
        model: as in `transplant`.
        task: as in `transplant`.
        batch: the batch that runs.
        direction: [head_index, query, key] over the view's query and key positions (e.g. [n_heads, 1, 2] at
            SRAVEN's paper positions), or the same flattened (head, query, key) - the feature order of a probe
            fitted on one layer of `LatentCodes.flat`. Use `code_direction` to take it from a fitted probe.
        layer: the model layer (0-based).
        alpha: the multiple added.
        pairs: one view of positions (a name that resolves to one view, `{'query', 'key'}` or `(query, key)`).

    Returns:
        An `InterventionResult` (kind 'steer').

    Raises:
        ValueError: a layer out of range, positions with several views, or a direction of the wrong size.
    """
    batch = _on_device(model, batch, "batch")
    (chosen,) = _check_layers(model, [layer])
    if isinstance(pairs, np.ndarray | Tensor) or pairs == "all":
        raise ValueError("steer needs positions as a name, {'query': [...], 'key': [...]} or (query, key)")
    spec = resolve_positions(task, pairs)  # type: ignore[arg-type]
    if spec.n_views != 1:
        raise ValueError(f"pairs={pairs!r} has {spec.n_views} views; steer one view at a time (e.g. 'paper')")
    n_heads = int(model.cfg.n_heads)
    query, key = torch.as_tensor(spec.query[0]), torch.as_tensor(spec.key[0])
    shape = (n_heads, len(query), len(key))
    raw = np.asarray(direction, dtype=np.float32) if isinstance(direction, np.ndarray) else direction
    vector = torch.as_tensor(raw)
    if vector.numel() != int(np.prod(shape)) or (vector.ndim != 1 and tuple(vector.shape) != shape):
        raise ValueError(
            f"direction has shape {tuple(vector.shape)}; at these positions it must be [head_index, query, key] = "
            f"{list(shape)} or flat with {int(np.prod(shape))} entries"
        )
    delta = torch.zeros(n_heads, task.seq_len, task.seq_len)
    delta[:, query[:, None], key[None, :]] = vector.reshape(shape).float().cpu()
    delta = (alpha * delta).to(batch.x.device)
    seq_len = int(task.seq_len)

    def hook(pattern: Tensor, hook: Any) -> Tensor:
        _full_pattern_check(chosen, pattern, seq_len)
        return pattern + delta.to(pattern.dtype)

    clean, hooked = _run(model, task, batch, [(pattern_hook_name(chosen), hook)])
    return _result("steer", task, batch, (chosen,), delta.cpu() != 0, clean, hooked)


def ablate(
    model: torch.nn.Module,
    task: Any,
    batch: Batch,
    *,
    method: AblateMethod | str = "mean",
    layers: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
    pairs: PairsArg = "all",
    whole_row: bool = False,
    reference: Batch | None = None,
    seed: int = 0,
) -> InterventionResult:
    """Replace the codes of chosen layers, heads and pairs by zero, their mean, or another instance's codes.

    Args:
        model: as in `transplant`.
        task: as in `transplant`.
        batch: the batch that runs.
        method: 'zero'; 'mean' (each entry's mean over the `reference` batch); 'resample' (instance i gets the
            codes of a reference instance drawn uniformly with replacement, from `seed`).
        layers: model layers (default: all).
        heads: heads (default: all).
        pairs: (query, key) entries, see `site_mask` (default 'all': the whole pattern).
        whole_row: widen `pairs` to whole query rows.
        reference: the batch the mean or the resampled codes come from (default: `batch` itself). Any size;
            same sequence shape.
        seed: seed of the resampling.

    Returns:
        An `InterventionResult` (kind 'ablate').

    Raises:
        ValueError: an unknown method, layers/heads/positions out of range, or a reference of another shape.

    >>> from latentcode.model import build_model
    >>> from latentcode.tasks.fuzzy_logic import FuzzyLogic
    >>> task = FuzzyLogic()
    >>> model = build_model(task, "softmax", "tiny")
    >>> result = ablate(model, task, task.sample(8, seed=0), method="zero", layers=0)
    >>> result.kind, result.layers, result.sites.shape
    ('ablate', (0,), torch.Size([4, 16, 16]))
    """
    if method not in ABLATE_METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(ABLATE_METHODS)}")
    batch = _on_device(model, batch, "batch")
    reference = batch if reference is None else _on_device(model, reference, "reference")
    if reference.x.shape[1:] != batch.x.shape[1:]:
        raise ValueError(
            f"reference x has shape {tuple(reference.x.shape)} but batch x has {tuple(batch.x.shape)}; they must "
            "agree after the batch axis (same task)"
        )
    chosen = _check_layers(model, layers)
    seq_len = int(task.seq_len)
    sites = site_mask(task, int(model.cfg.n_heads), pairs, whole_row=whole_row, heads=heads).to(batch.x.device)
    names = [pattern_hook_name(layer) for layer in chosen]
    replacement: dict[str, Tensor] = {}
    if method != "zero":
        cached = _cache(model, reference.x, names)
        if method == "mean":
            replacement = {name: cached[name].mean(dim=0, keepdim=True) for name in names}
        else:
            generator = torch.Generator().manual_seed(seed)
            index = torch.randint(len(reference), (len(batch),), generator=generator).to(batch.x.device)
            replacement = {name: cached[name].index_select(0, index) for name in names}

    def pattern_hook(layer: int) -> Callable[..., Tensor]:
        name = pattern_hook_name(layer)

        def hook(pattern: Tensor, hook: Any) -> Tensor:
            _full_pattern_check(layer, pattern, seq_len)
            new = torch.zeros_like(pattern) if method == "zero" else replacement[name].expand_as(pattern)
            return torch.where(sites, new, pattern)

        return hook

    hooks = [(name, pattern_hook(layer)) for layer, name in zip(chosen, names, strict=True)]
    clean, hooked = _run(model, task, batch, hooks)
    return _result("ablate", task, batch, chosen, sites, clean, hooked)


def code_direction(
    probe: Any, target: int | str, shape: Sequence[int] | None = None
) -> Float[np.ndarray, "..."]:
    """A fitted linear probe's direction for one class, mapped from its standardized space to code space.

    A probe `StandardScaler -> LogisticRegression` scores `coef @ (x - mean) / scale`; the same score moves along
    `coef / scale` in raw code space, which is what `steer` adds.

    Args:
        probe: a fitted `probes.RuleDecoder`, or a fitted sklearn Pipeline of a `StandardScaler` and a linear
            classifier (`make_probe()`).
        target: the class (index into `classes_`, or a class value/name present in `classes_`).
        shape: reshape the direction (e.g. `[n_heads, 1, 2]`); default flat.

    Returns:
        float32 direction [features] (or `shape`).

    Raises:
        ValueError: an unfitted or non-linear probe, or an unknown class.
    """
    from probes.estimators import code_space_directions

    directions, classes = code_space_directions(probe)
    hits = np.flatnonzero(np.asarray(classes).astype(str) == str(target))
    if hits.size:
        row = int(hits[0])
    elif isinstance(target, int | np.integer) and 0 <= int(target) < len(directions):
        row = int(target)
    else:
        raise ValueError(f"target={target!r} is not a class of the probe; classes: {list(classes)}")
    direction = directions[row].astype(np.float32)
    return direction if shape is None else direction.reshape(tuple(shape))
