"""Latent-code extraction: run a model over a task's splits and keep the attention codes at chosen positions.

`extract_latent_codes` caches only `blocks.{i}.attn.hook_pattern` (through `names_filter`), slices the chosen
query/key positions per batch and moves them to the CPU; `codes_from_patterns` does the slicing for patterns
you already have (a dict, or any `ActivationCache`, e.g. from a TransformerLens `TransformerBridge`). A reading is
positions (here) plus inputs (the task's `code_reading`); the default of both is the paper's (spec §4.1).
`LatentCodes` itself lives in the torch-free `probes.codes` and is re-exported here; the probes live in `probes/`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens import ActivationCache

from latentcode.hooks import hook_name, split_hook_name
from probes._compat import renamed_kwargs
from probes.codes import LatentCodes, reading_text

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

POSITIONS = ("paper", "all_features")
"""Named position choices: `paper` (spec §4.1, both tasks) and `all_features` (SRAVEN only, spec §8.4)."""

PositionsArg = str | Mapping[str, Sequence[int]] | tuple[Sequence[int], Sequence[int]]


def pattern_hook_name(layer: int) -> str:
    """The hook holding layer `layer`'s latent codes, [batch, head_index, query_pos, key_pos].

    The same name on our `Transformer` and on a TransformerLens `TransformerBridge`: `hooks.hook_name("pattern",
    layer)`.

    >>> pattern_hook_name(2)
    'blocks.2.attn.hook_pattern'
    """
    return hook_name("pattern", layer)


@dataclass(frozen=True)
class PositionSpec:
    """Where codes are read, resolved against a task.

    Every instance gives `n_views` rows of codes; view v reads queries `query[v]` and keys `key[v]`.

    Attributes:
        name: 'paper', 'all_features' or 'custom'.
        query: int [view, query] query positions.
        key: int [view, key] key positions.
        feature: int [view], the SRAVEN feature each view analyses (its label `rule` is that feature's rule);
            None for fuzzy logic.
    """

    name: str
    query: np.ndarray
    key: np.ndarray
    feature: np.ndarray | None = None

    @property
    def n_views(self) -> int:
        return int(self.query.shape[0])

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "query": self.query.tolist(), "key": self.key.tolist()}


def code_reading(task: Any) -> Any:
    """The task's `CodeReading` (`latentcode.tasks.base`): its input choices (the first is the default, the paper's)
    and decodable labels. A task without one gets a single input choice, its plain `sample`, and no label list.

    >>> from latentcode.tasks import get_task
    >>> code_reading(get_task("fuzzy_logic")).default_inputs, code_reading(get_task("sraven")).default_inputs
    ('fixed_query', 'unpermuted')
    """
    from latentcode.tasks.base import CodeReading, InputChoice

    reading = getattr(task, "code_reading", None)
    if reading is None:
        return CodeReading((InputChoice("default", {}, "the task's own sample()"),), ())
    return reading


def _index_list(values: Any, what: str, seq_len: int) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 0:
        array = array.reshape(1)
    if array.size == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} positions must be a non-empty list of integers; got {values!r}")
    bad = array[(array < -seq_len) | (array >= seq_len)]
    if bad.size:
        raise ValueError(
            f"{what} position(s) {bad.tolist()} out of range: the sequence has {seq_len} tokens, so valid positions "
            f"are 0..{seq_len - 1} (or -{seq_len}..-1 counted from the end)"
        )
    return np.where(array < 0, array + seq_len, array).astype(np.int64)


def resolve_positions(task: Any, positions: PositionsArg = "paper") -> PositionSpec:
    """Resolve a position choice against a task's sequence layout.

    Args:
        task: the task (its `name` and `seq_len`; SRAVEN also `config.n_features`).
        positions: 'paper' (spec §4.1: fuzzy logic = the query token attending to itself; SRAVEN = the last query
            token attending to the last feature of panels 7 and 8), 'all_features' (SRAVEN: one view per feature
            f, query token of f attending to feature f of panels 7 and 8), or explicit positions as
            `{"query": [...], "key": [...]}` or `(query, key)` (negative positions count from the end).

    Returns:
        The resolved `PositionSpec`.

    Raises:
        ValueError: an unknown name, a name the task does not support, or positions out of range.

    >>> from latentcode.tasks.sraven import SRaven
    >>> spec = resolve_positions(SRaven(), "paper")
    >>> spec.query.tolist(), spec.key.tolist()
    ([[35]], [[27, 31]])
    """
    seq_len = int(task.seq_len)
    name = getattr(task, "name", type(task).__name__)
    if isinstance(positions, str):
        if positions not in POSITIONS:
            raise ValueError(
                f"unknown positions {positions!r}; valid: {', '.join(POSITIONS)}, or explicit "
                "{'query': [...], 'key': [...]}"
            )
        if name == "sraven":
            n_features = int(task.config.n_features)
            first_query = seq_len - n_features
            panels = first_query // n_features  # context panels (8)
            features = np.arange(n_features) if positions == "all_features" else np.array([n_features - 1])
            query = (first_query + features)[:, None]
            key = np.stack([(panels - 2) * n_features + features, (panels - 1) * n_features + features], axis=1)
            return PositionSpec(positions, query.astype(np.int64), key.astype(np.int64), features.astype(np.int64))
        if name == "fuzzy_logic":
            if positions == "all_features":
                raise ValueError("positions='all_features' applies to SRAVEN only; use 'paper' for fuzzy_logic")
            last = np.array([[seq_len - 1]], dtype=np.int64)
            return PositionSpec("paper", last, last.copy())
        raise ValueError(
            f"named positions are defined for sraven and fuzzy_logic, not {name!r}; pass explicit "
            "{'query': [...], 'key': [...]}"
        )
    if isinstance(positions, Mapping):
        extra = sorted(set(positions) - {"query", "key"})
        if extra or not {"query", "key"} <= set(positions):
            raise ValueError(f"explicit positions need exactly the keys 'query' and 'key'; got {sorted(positions)}")
        query_raw, key_raw = positions["query"], positions["key"]
    elif isinstance(positions, tuple) and len(positions) == 2:
        query_raw, key_raw = positions
    else:
        raise ValueError(
            f"positions={positions!r} is not understood; pass one of {', '.join(POSITIONS)}, "
            "{'query': [...], 'key': [...]} or a (query, key) tuple"
        )
    query = _index_list(query_raw, "query", seq_len)[None, :]
    key = _index_list(key_raw, "key", seq_len)[None, :]
    feature = None
    if name == "sraven":
        # the analysed feature: the one whose query token is asked, if a single one is; else the last (as 'paper')
        n_features = int(task.config.n_features)
        asked = np.unique(query) - (seq_len - n_features)
        only = asked.size == 1 and 0 <= asked[0] < n_features
        feature = np.array([asked[0] if only else n_features - 1], dtype=np.int64)
    return PositionSpec("custom", query, key, feature)


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


def _composition_ids(task: Any, rows: np.ndarray) -> np.ndarray:
    """A global id per composition (the same across splits that share it) for each sorted label row."""
    ids: dict[tuple[int, ...], int] = {}
    for split in task.splits:
        for comp in task.compositions(split):
            ids.setdefault(tuple(int(v) for v in np.sort(comp)), len(ids))
    found = np.array([ids.get(tuple(int(v) for v in np.sort(row)), -1) for row in rows], dtype=np.int64)
    if (found < 0).any():
        logger.warning("%d instance(s) match no composition of the task; their composition id is -1",
                       int((found < 0).sum()))
    return found


def _term_names(n_variables: int) -> list[str]:
    bits = (np.arange(2**n_variables)[:, None] >> np.arange(n_variables - 1, -1, -1)[None, :]) & 1
    return ["&".join(("" if b else "~") + f"x{j + 1}" for j, b in enumerate(row)) for row in bits]


def _instance_labels(task: Any, labels: dict[str, np.ndarray], spec: PositionSpec) -> dict[str, np.ndarray]:
    """Labels per row (instance-major, `spec.n_views` rows per instance) from per-instance arrays."""
    n_views = spec.n_views
    out: dict[str, np.ndarray] = {}
    if task.name == "sraven":
        rules, target, prediction = labels["rules"], labels["target"], labels["prediction"]
        slot = np.tile(spec.feature, len(rules))  # the presented slot each row's query predicts
        inst = np.repeat(np.arange(len(rules)), n_views)
        # permuted instances: panel 9 (column 2) presents unpermuted feature perm[2, slot] in that slot
        feature = labels["perm"][inst, 2, slot] if "perm" in labels else slot
        out["rule"] = rules[inst, feature]
        out["rules"] = rules[inst]
        out["feature"] = feature
        out["target"] = target[inst, slot]
        out["prediction"] = prediction[inst, slot]
        out["correct"] = out["target"] == out["prediction"]
        out["composition"] = labels["composition"][inst]
        out["instance"] = labels["instance"][inst]
        return out
    return {name: np.repeat(value, n_views, axis=0) for name, value in labels.items()}


def _task_meta(task: Any) -> dict[str, Any]:
    if task.name == "sraven":
        from latentcode.tasks.sraven import RULE_NAMES

        return {"label": "rule", "n_classes": len(RULE_NAMES), "class_names": list(RULE_NAMES)}
    if task.name == "fuzzy_logic":
        n_variables = int(task.config.n_variables)
        return {"label": "terms", "n_classes": 2**n_variables, "class_names": _term_names(n_variables)}
    return {"label": None, "n_classes": None, "class_names": None}


def check_extraction(
    task: Any,
    splits: Sequence[str] = ("train", "test", "ood"),
    n_samples: int = 2048,
    *,
    positions: PositionsArg = "paper",
    inputs: str | None = None,
    batch_size: int = 512,
) -> tuple[PositionSpec, Any]:
    """Check extraction arguments against a task without running anything (what `extract_latent_codes` and the
    analysis commands do first, before anything is copied, extracted or written).

    Returns:
        (the resolved `PositionSpec`, the `InputChoice` of `inputs`).

    Raises:
        ValueError: an unknown or empty split list, positions the task does not have, an unknown input choice,
            n_samples or batch_size not positive.

    >>> from latentcode.tasks import get_task
    >>> check_extraction(get_task("sraven"), ("train", "val"))
    Traceback (most recent call last):
    ...
    ValueError: unknown split 'val' for task 'sraven'; valid splits: train, test, ood
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) or n_samples <= 0 \
            or isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size <= 0:
        raise ValueError(f"n_samples={n_samples} and batch_size={batch_size} must be positive integers")
    if isinstance(splits, str):
        raise ValueError(f"splits={splits!r} is one string; pass a list of split names, e.g. ['train', 'ood']")
    if not splits:
        raise ValueError(f"splits is empty; pick some of {', '.join(task.splits)}")
    for split in splits:
        if split not in task.splits:
            raise ValueError(f"unknown split {split!r} for task {task.name!r}; valid splits: {', '.join(task.splits)}")
    if len(set(splits)) != len(splits):
        raise ValueError(f"splits={list(splits)} names a split twice; name each once")
    spec = resolve_positions(task, positions)
    choice = code_reading(task).choice(inputs, f"task {task.name!r}")
    return spec, choice


@renamed_kwargs(n="n_samples")
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

    >>> from latentcode.model import build_model
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
    tokens: list[np.ndarray] = []  # raw inputs per row, for the input-only controls (probes.controls)
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
                for name, value in _batch_labels(task, batch).items():
                    raw.setdefault(name, []).append(value)
                row_splits.append(np.full(n_samples * spec.n_views, split))
    finally:
        bar.close()
        model.train(was_training)

    labels = {name: np.concatenate(values) for name, values in raw.items()}
    is_default = spec.name == "paper" and choice.name == reading.default_inputs
    sort_key = labels["rules"] if task.name == "sraven" else labels.get("terms")
    if sort_key is not None:
        labels["composition"] = _composition_ids(task, sort_key)
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
        **_task_meta(task),
    }
    return LatentCodes(
        codes=np.concatenate(rows),
        labels=_instance_labels(task, labels, spec),
        split=np.concatenate(row_splits),
        inputs=np.concatenate(tokens),
        meta=meta,
    )


def _batch_labels(task: Any, batch: Any) -> dict[str, np.ndarray]:
    """The per-instance labels kept from a batch: SRAVEN rules, slot permutation and targets; fuzzy-logic terms,
    bits, target."""
    if task.name == "sraven":
        # perm (identity when unpermuted) maps each presented slot to the feature it holds
        return {name: batch.labels[name].cpu().numpy() for name in ("rules", "perm")} | {"target": batch.y.cpu().numpy()}
    kept = {name: value.cpu().numpy() for name, value in batch.labels.items() if name in ("terms", "term_bits")}
    return {**kept, "target": batch.y.float().cpu().numpy()}
