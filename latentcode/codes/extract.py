"""Latent-code extraction: run a model over a task's splits and keep the attention codes at chosen positions.

`extract_latent_codes` caches only `blocks.{i}.attn.hook_pattern` (through `names_filter`), slices the chosen
query/key positions per batch and moves them to the CPU; `codes_from_patterns` does the slicing for patterns
you already have (a dict, or any `ActivationCache`, e.g. from a TransformerLens `TransformerBridge`). A reading is
positions plus inputs (`readings.py`, from the task's declarations); the default of both is the paper's (spec §4.1).
What is task-specific (positions, labels, their metadata) the task itself says; nothing here names a task.
`LatentCodes` itself lives in the torch-free `probes.codes` and is re-exported here; the probes live in `probes/`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens import ActivationCache

from latentcode.codes.readings import (
    POSITIONS,
    PositionsArg,
    PositionSpec,
    check_extraction,
    code_reading,
    composition_ids,
    resolve_positions,
    task_code_meta,
)
from latentcode.model.hooks import hook_name, split_hook_name
from probes.codes import LatentCodes
from probes.metadata import reading_text

__all__ = [
    "POSITIONS",
    "LatentCodes",
    "PositionSpec",
    "check_extraction",
    "code_reading",
    "codes_from_patterns",
    "extract_latent_codes",
    "pattern_hook_name",
    "resolve_positions",
]

logger = logging.getLogger(__name__)

def pattern_hook_name(layer: int) -> str:
    """The hook holding layer `layer`'s latent codes, [batch, head_index, query_pos, key_pos].

    The same name on our `Transformer` and on a TransformerLens `TransformerBridge`: `hooks.hook_name("pattern",
    layer)`.

    >>> pattern_hook_name(2)
    'blocks.2.attn.hook_pattern'
    """
    return hook_name("pattern", layer)


def _pattern_layer(name: str) -> int | None:
    """The layer of a full `hook_pattern` name (`hooks.split_hook_name`); None for any other name, hooks of other
    models included (a cache may hold them beside the patterns)."""
    try:
        short, layer = split_hook_name(name)
    except ValueError:
        return None
    return layer if short == "pattern" else None


def _pattern_dict(patterns: Any) -> dict[int, Tensor | np.ndarray]:
    """Layer -> pattern from a dict keyed by layer, a dict keyed by hook name, or an ActivationCache."""
    found: dict[int, Tensor | np.ndarray] = {}
    items = patterns.items() if isinstance(patterns, (Mapping, ActivationCache)) else None
    if items is None:
        raise ValueError(
            f"patterns must be a dict {{layer: pattern}} or an ActivationCache; got {type(patterns).__name__}"
        )
    for name, value in items:
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            found[int(name)] = value
        elif isinstance(name, str) and (layer := _pattern_layer(name)) is not None:
            found[layer] = value
    if not found:
        raise ValueError(
            "no attention patterns found: pass {layer: [batch, head_index, query_pos, key_pos]} or a cache "
            "holding 'blocks.{i}.attn.hook_pattern' (run_with_cache(..., names_filter=lambda n: "
            "n.endswith('hook_pattern')))"
        )
    return dict(sorted(found.items()))


def _as_views(positions: Any, what: str) -> np.ndarray:
    array = np.asarray(positions)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} must be a list of positions or a [view, {what}] integer array; got {positions!r}")
    return array.astype(np.int64)


def _slice_views(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"], query: Tensor, key: Tensor
) -> Float[Tensor, "batch head_index view query key"]:
    # one advanced index for every view: [batch, head, view, query, key]
    return pattern[:, :, query[:, :, None], key[:, None, :]]


def _check_range(query: np.ndarray, key: np.ndarray, n_query: int, n_key: int) -> None:
    for what, index, size in (("query", query, n_query), ("key", key, n_key)):
        bad = index[(index < 0) | (index >= size)]
        if bad.size:
            raise ValueError(
                f"{what} position(s) {sorted(set(bad.tolist()))} out of range: the patterns have {size} "
                f"{what} positions, so valid positions are 0..{size - 1}"
            )


def _rows(codes: Float[Tensor, "batch layer head_index view query key"]) -> np.ndarray:
    """[batch, layer, head, view, query, key] -> float32 [batch * view, layer, head, query, key], instance-major."""
    return codes.permute(0, 3, 1, 2, 4, 5).flatten(0, 1).float().numpy()


def codes_from_patterns(
    patterns: Mapping[Any, Any] | ActivationCache,
    query: Sequence[int] | Sequence[Sequence[int]] | np.ndarray,
    key: Sequence[int] | Sequence[Sequence[int]] | np.ndarray,
    *,
    labels: Mapping[str, Any] | None = None,
    split: str | Sequence[str] | np.ndarray = "train",
    meta: Mapping[str, Any] | None = None,
) -> LatentCodes:
    """Latent codes from attention patterns you already computed, from this package's model or any other.

    Args:
        patterns: `{layer: pattern}` with patterns [batch, head_index, query_pos, key_pos] (torch or numpy), a
            dict keyed by hook name, or an `ActivationCache` holding `blocks.{i}.attn.hook_pattern` (our
            `Transformer` and TransformerLens' `TransformerBridge` both use that name). Other entries are
            ignored.
        query: query positions, a list (one view) or an int array [view, query].
        key: key positions, a list or an int array [view, key] (as many views as `query`).
        labels: ground truth per instance (first axis = batch); with several views each instance's labels are
            repeated for its rows and a `view` label is added.
        split: one split name for every instance, or one per instance.
        meta: extra metadata, merged over the computed `positions`, `query`, `key` and `layers`.

    Returns:
        `LatentCodes` with codes float32 [batch * view, layer, head_index, query, key] (rows instance-major).

    Raises:
        ValueError: no patterns, patterns of different shapes, positions out of range, or labels/split of the
            wrong length.

    >>> pattern = torch.rand(3, 2, 5, 5)
    >>> codes = codes_from_patterns({0: pattern, 1: pattern}, query=[4], key=[3, 4])
    >>> codes.codes.shape
    (3, 2, 2, 1, 2)
    """
    by_layer = _pattern_dict(patterns)
    tensors = {layer: torch.as_tensor(p).detach().cpu() for layer, p in by_layer.items()}
    shapes = {tuple(t.shape) for t in tensors.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 4:
        raise ValueError(f"patterns must all be [batch, head_index, query_pos, key_pos] of one shape; got {shapes}")
    n_batch, _, n_query, n_key = next(iter(shapes))
    query_views, key_views = _as_views(query, "query"), _as_views(key, "key")
    if query_views.shape[0] != key_views.shape[0]:
        raise ValueError(f"query has {query_views.shape[0]} views but key has {key_views.shape[0]}; give as many")
    _check_range(query_views, key_views, n_query, n_key)
    q, k = torch.as_tensor(query_views), torch.as_tensor(key_views)
    stacked = torch.stack([_slice_views(t, q, k) for t in tensors.values()], dim=1)
    n_views = query_views.shape[0]

    split_array = np.asarray([split] * n_batch if isinstance(split, str) else split, dtype=str)
    if split_array.shape != (n_batch,):
        raise ValueError(f"split has shape {split_array.shape}; give one name or one per instance ({n_batch})")
    out_labels: dict[str, np.ndarray] = {}
    for name, value in (labels or {}).items():
        array = np.asarray(value.detach().cpu() if isinstance(value, Tensor) else value)
        if array.ndim == 0 or array.shape[0] != n_batch:
            raise ValueError(f"label {name!r} has shape {array.shape}; its first axis must be the batch ({n_batch})")
        out_labels[name] = np.repeat(array, n_views, axis=0)
    if n_views > 1:
        out_labels["view"] = np.tile(np.arange(n_views), n_batch)
    full_meta = {
        "positions": "custom",
        "reading": "custom positions, the caller's inputs (codes_from_patterns)",
        "query": query_views.tolist(),
        "key": key_views.tolist(),
        "layers": list(tensors),
        **(meta or {}),
    }
    return LatentCodes(
        codes=_rows(stacked), labels=out_labels, split=np.repeat(split_array, n_views), meta=full_meta
    )


def extract_latent_codes(
    model: torch.nn.Module,
    task: Any,
    splits: Sequence[str] = ("train", "test", "ood"),
    n_samples: int = 2048,
    *,
    positions: PositionsArg = "paper",
    layers: Sequence[int] | None = None,
    batch_size: int = 512,
    device: str | torch.device | None = None,
    seed: int = 0,
    checkpoint: str | None = None,
    progress: bool | None = None,
    inputs: str | None = None,
) -> LatentCodes:
    """Run `model` on `n_samples` fresh instances of each split and keep its latent codes at `positions`.

    Batches are generated on the device, run through `model.run_with_cache` with a `names_filter` that caches
    only the needed `hook_pattern`s, sliced to the chosen positions and moved to the CPU one batch at a time.
    By default codes are read as the paper reads them (spec §4.1): fuzzy-logic instances share one query input,
    SRAVEN instances are drawn unpermuted (slot f follows `rules[f]`). The reading is recorded in `meta`
    (`positions`, `inputs`, `reading`, `default_reading`). The model runs in eval mode (no attention dropout) and
    is put back in its previous mode afterwards.

    Args:
        model: a `Transformer` (or any HookedRootModule with `cfg.n_layers` and `blocks.{i}.attn.hook_pattern`
            that maps the task's `x` to outputs `task.predict` understands).
        task: the task the model was trained on (with its splits).
        splits: which splits to draw from.
        n_samples: instances per split.
        positions: 'paper', 'all_features' (SRAVEN) or explicit positions; see `resolve_positions`.
        layers: layers to keep (default: all).
        batch_size: instances per forward pass.
        device: where batches are generated and the model runs (default: the model's device; the model is
            moved there otherwise, as `Module.to` does).
        seed: batch seed (the task mixes in the split, so splits draw independent instances).
        checkpoint: the checkpoint hash to record in `meta` (the CLI passes the run's).
        progress: show a progress bar (None: only on a terminal).
        inputs: the input choice of the task's `code_reading` (None: its default, the paper's reading). Fuzzy
            logic: 'fixed_query' (default: every instance shares one query input, as the reference's latent
            analyses read the query's self-code), 'uniform' or 'fixed_context'. SRAVEN: 'unpermuted' (default:
            feature permutation off) or 'permuted' (as in training).

    Returns:
        `LatentCodes`: codes float32 [rows, layer, head_index, query, key] with `n_views` rows per instance
        (1, or n_features for 'all_features'). Labels, SRAVEN: `rule` (rule of the analysed feature), `rules`,
        `feature`, `target`, `prediction`, `correct`, `composition`, `instance`. Fuzzy logic: `terms`,
        `term_bits`, `target`, `prediction`, `composition`, `instance`.

    Raises:
        ValueError: an unknown split or input choice, positions or layers out of range, n_samples or batch_size
            not positive.

    >>> from latentcode.model.transformer import build_model
    >>> from latentcode.tasks.sraven import SRaven
    >>> task = SRaven()
    >>> codes = extract_latent_codes(build_model(task, "hyla", "tiny"), task, n_samples=8, progress=False)
    >>> codes.codes.shape, codes.splits
    ((24, 2, 4, 1, 2), ('train', 'test', 'ood'))
    """
    spec, choice = check_extraction(task, splits, n_samples, positions=positions, inputs=inputs,
                                    batch_size=batch_size)
    reading = code_reading(task)
    n_layers = int(model.cfg.n_layers)
    chosen = list(range(n_layers)) if layers is None else [int(layer) for layer in layers]
    bad = [layer for layer in chosen if not 0 <= layer < n_layers]
    if bad or not chosen:
        raise ValueError(f"layers {bad or chosen} out of range: the model has {n_layers} layers, 0..{n_layers - 1}")
    names = [pattern_hook_name(layer) for layer in chosen]
    param = next(model.parameters(), None)
    run_device = torch.device(device) if device is not None else (param.device if param is not None else "cpu")
    if param is not None and param.device != run_device:
        model.to(run_device)
    query = torch.as_tensor(spec.query, device=run_device)
    key = torch.as_tensor(spec.key, device=run_device)

    rows: list[np.ndarray] = []
    tokens: list[np.ndarray] = []  # raw inputs per row, for the input-only controls (probes.decoding.controls)
    row_splits: list[np.ndarray] = []
    raw: dict[str, list[np.ndarray]] = {}
    n_batches = sum(-(-n_samples // batch_size) for _ in splits)
    was_training = model.training
    model.eval()
    bar = tqdm(total=n_batches, desc="extract codes", unit="batch", disable=None if progress is None else not progress)
    try:
        with torch.no_grad():
            for split in splits:
                batch = task.sample(n_samples, split, seed=seed, device=run_device, **choice.sample_options)
                for start in range(0, n_samples, batch_size):
                    x = batch.x[start : start + batch_size]
                    out, cache = model.run_with_cache(x, names_filter=names)
                    sliced = torch.stack([_slice_views(cache[name], query, key) for name in names], dim=1)
                    rows.append(_rows(sliced.cpu()))
                    tokens.append(np.repeat(x.float().cpu().numpy(), spec.n_views, axis=0))
                    raw.setdefault("prediction", []).append(task.predict(out).cpu().numpy())
                    bar.update(1)
                for name, value in task.code_labels(batch).items():
                    raw.setdefault(name, []).append(value)
                row_splits.append(np.full(n_samples * spec.n_views, split))
    finally:
        bar.close()
        model.train(was_training)

    labels = {name: np.concatenate(values) for name, values in raw.items()}
    is_default = spec.name == reading.positions[0] and choice.name == reading.default_inputs
    sort_key = labels.get(reading.composition) if reading.composition else None
    if sort_key is not None:
        labels["composition"] = composition_ids(task, sort_key)
    labels["instance"] = np.concatenate([np.arange(n_samples) for _ in splits])
    meta = {
        "task": task.name,
        "task_params": task.to_dict().get("params"),
        "variant": getattr(model.cfg, "variant", type(model).__name__),
        "score_norm": getattr(model.cfg, "score_norm", None),
        "positions": spec.name,
        "inputs": choice.name,
        "reading": reading_text(spec.name, choice.name, default=is_default),
        "default_reading": is_default,
        "query": spec.query.tolist(),
        "key": spec.key.tolist(),
        "layers": chosen,
        "checkpoint": checkpoint,
        "splits": list(splits),
        "n_per_split": n_samples,
        "seed": seed,
        **task_code_meta(task),
    }
    return LatentCodes(
        codes=np.concatenate(rows),
        labels=task.row_labels(labels, spec),
        split=np.concatenate(row_splits),
        inputs=np.concatenate(tokens),
        meta=meta,
    )
