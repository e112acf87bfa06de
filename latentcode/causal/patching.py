"""The intervention runner: `Site` x `Edit` -> `intervene`.

A `Site` is where (a hook from `latentcode.model.hooks.hook_name`, layers, (query, key) positions, heads), an `Edit`
what (`Transplant`, `Steer`, `Ablate`, `Zero`, in `latentcode.causal.edits`, re-exported here): pyvene's split. `intervene` is TransformerLens'
`generic_activation_patch` with small setters: clean and edited runs in eval mode, without gradients, at every query
position (no `keep_last`). The paper's named interventions (`transplant`, `steer`, `ablate`) are
`latentcode.causal.interventions`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from latentcode.causal.edits import Ablate, Edit, EditFn, Steer, Transplant, Zero
from latentcode.codes.extract import resolve_positions
from latentcode.model.hooks import HOOK_ALIASES, HOOK_NAMES, hook_name, hooks
from latentcode.tasks.base import Batch

__all__ = ["Ablate", "Edit", "InterventionResult", "PositionsArg", "Site", "Steer", "Transplant", "Zero", "check_layers",
           "intervene", "site_mask"]

PositionsArg = str | Mapping[str, Sequence[int]] | tuple[Sequence[int], Sequence[int]] | np.ndarray | Tensor
"""'paper' | 'all_features' (SRAVEN) | 'all' | {'query': [...], 'key': [...]} | (query, key) | bool [query_pos, key_pos]."""

_HEADED = ("pattern", "attn_scores", "q", "k", "v", "z")  # hooks with a head axis
_OUTSIDE_BLOCKS = ("embed", "normalized")  # hooks without a layer


@dataclass(frozen=True)
class InterventionResult:
    """The outputs of one intervention beside the clean run, with the task's metrics for both.

    Attributes:
        kind: 'transplant', 'steer', 'ablate' or 'zero' (the first edit's kind, or what `intervene` was told).
        layers: the model layers intervened on.
        sites: bool, the entries changed at each of `layers` by the first edit: [head_index, query_pos, key_pos] on
            `hook_pattern` (other hooks: their axes after the batch axis, 1 where the site spans the axis).
        outputs: float [batch, pos, d_out], the model's outputs with the intervention.
        clean_outputs: float [batch, pos, d_out], the outputs without it.
        prediction: `task.predict(outputs)` (SRAVEN: long [batch, feature]; fuzzy logic: float [batch]).
        clean_prediction: `task.predict(clean_outputs)`.
        metrics: `task.metrics(outputs, batch)` against the batch's own targets (loss and `metric_name`).
        clean_metrics: `task.metrics(clean_outputs, batch)`.
        metric_name: the task's headline metric (`acc` for SRAVEN, `r2` for fuzzy logic).
        donor_outputs: with a `Transplant` only: float [batch, pos, d_out], the donor batch's own clean outputs.
        donor_prediction: with a `Transplant` only: `task.predict(donor_outputs)`.
        hook_names: the hooks edited, in the order their edits were given.
    """

    kind: str
    layers: tuple[int, ...]
    sites: Bool[Tensor, "..."]
    outputs: Float[Tensor, "batch pos d_out"]
    clean_outputs: Float[Tensor, "batch pos d_out"]
    prediction: Tensor
    clean_prediction: Tensor
    metrics: dict[str, float]
    clean_metrics: dict[str, float]
    metric_name: str
    donor_outputs: Float[Tensor, "batch pos d_out"] | None = None
    donor_prediction: Tensor | None = None
    hook_names: tuple[str, ...] = ()

    @property
    def metric(self) -> float:
        """The headline metric with the intervention."""
        return self.metrics[self.metric_name]

    @property
    def drop(self) -> float:
        """Clean minus intervened headline metric (positive: the intervention hurt)."""
        return self.clean_metrics[self.metric_name] - self.metrics[self.metric_name]


def check_layers(model: torch.nn.Module, layers: int | Sequence[int] | None) -> tuple[int, ...]:
    """`layers` as a tuple of the model's layer numbers (None: every layer); raises ValueError when out of range."""
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
    positions: PositionsArg = "paper",
    *,
    whole_row: bool = False,
    heads: int | Sequence[int] | None = None,
) -> Bool[Tensor, "head_index query_pos key_pos"]:
    """Which code entries an intervention touches, for every layer it touches.

    Args:
        task: the task (its `seq_len`, and what `resolve_positions` needs for named choices).
        n_heads: the model's `n_heads`.
        positions: 'paper' (spec §4.1: SRAVEN = last query token x feature 4 of panels 7 and 8; fuzzy logic = the
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
    if isinstance(positions, np.ndarray | Tensor):
        pair = torch.as_tensor(positions)
        if pair.dtype != torch.bool or tuple(pair.shape) != (seq_len, seq_len):
            raise ValueError(
                f"a positions array must be bool [query_pos, key_pos] = [{seq_len}, {seq_len}]; got "
                f"{pair.dtype} {tuple(pair.shape)}"
            )
        pair = pair.clone()
    elif isinstance(positions, str) and positions == "all":
        pair = torch.ones(seq_len, seq_len, dtype=torch.bool)
    else:
        spec = resolve_positions(task, positions)  # type: ignore[arg-type]
        pair = torch.zeros(seq_len, seq_len, dtype=torch.bool)
        for query, key in zip(spec.query, spec.key, strict=True):
            pair[torch.as_tensor(query)[:, None], torch.as_tensor(key)[None, :]] = True
    if whole_row:
        pair = pair.any(dim=1, keepdim=True).expand(seq_len, seq_len).clone()
    if not pair.any():
        raise ValueError(f"positions={positions!r} selects no (query, key) pair")
    chosen = list(range(n_heads)) if heads is None else [heads] if isinstance(heads, int) else list(heads)
    bad = [h for h in chosen if not 0 <= int(h) < n_heads]
    if bad or not chosen:
        raise ValueError(f"heads={bad or chosen} out of range: the model has {n_heads} heads, 0..{n_heads - 1}")
    mask = torch.zeros(n_heads, seq_len, seq_len, dtype=torch.bool)
    mask[torch.as_tensor(chosen, dtype=torch.long)] = pair
    return mask


def _project(mask: Tensor, short: str) -> Tensor:
    """A site mask [head_index, query_pos, key_pos] on the axes of hook `short` after its batch axis."""
    if short in ("pattern", "attn_scores"):
        return mask
    if short in ("q", "z"):
        return mask.any(dim=2).T[:, :, None]  # [query_pos, head_index, 1]
    if short in ("k", "v"):
        return mask.any(dim=1).T[:, :, None]  # [key_pos, head_index, 1]: the keys the chosen codes read
    if short == "value_hidden":
        return mask.any(dim=0)[:, :, None]  # [query_pos, key_pos, 1]
    return mask.any(dim=2).any(dim=0)[:, None]  # [pos, 1]: the query positions


@dataclass(frozen=True, eq=False)
class Site:
    """Where an edit acts: one hook at some layers, at some (query, key) positions and heads.

    Attributes:
        hook: a short hook name (`latentcode.model.hooks.HOOK_NAMES`, or a TransformerLens alias such as 'attn').
        layers: model layers (default: all); None for the hooks outside the blocks ('embed', 'normalized').
        positions: (query, key) pairs as `site_mask` takes them. On a hook without both axes it is projected:
            q and z take the chosen queries, k and v the keys those queries read, value_hidden the (query, key)
            pairs, and the per-token hooks (resid_*, attn_out, mlp_out, embed, ...) the query positions.
        heads: heads (default: all); only for hooks with a head axis (pattern, attn_scores, q, k, v, z).
        whole_row: widen `positions` to every key of each chosen query.
    """

    hook: str = "pattern"
    layers: int | Sequence[int] | None = None
    positions: PositionsArg = "paper"
    heads: int | Sequence[int] | None = None
    whole_row: bool = False

    def resolve(self, model: torch.nn.Module, task: Any) -> tuple[tuple[int, ...], list[str], Tensor]:
        """(layers, hook names, bool mask over the hook's axes after the batch axis) on `model` and `task`."""
        short = HOOK_ALIASES.get(self.hook, self.hook)
        if short not in HOOK_NAMES:
            raise ValueError(f"Site(hook={self.hook!r}) is not a short hook name; valid: {', '.join(HOOK_NAMES)}")
        if self.heads is not None and short not in _HEADED:
            raise ValueError(f"hook {short!r} has no head axis; leave heads=None (heads apply to {_HEADED})")
        mask = site_mask(task, int(model.cfg.n_heads), self.positions, whole_row=self.whole_row, heads=self.heads)
        if short in _OUTSIDE_BLOCKS:
            if self.layers is not None:
                raise ValueError(f"hook {short!r} sits outside the blocks; leave layers=None")
            return (), [hook_name(short)], _project(mask, short)
        layers = check_layers(model, self.layers)
        return layers, [hook_name(short, layer) for layer in layers], _project(mask, short)


def _on_device(model: torch.nn.Module, batch: Any, what: str) -> Batch:
    if not isinstance(batch, Batch):
        raise ValueError(f"{what} must be a task Batch (task.sample(...)); got {type(batch).__name__}")
    param = next(model.parameters(), None)
    return batch if param is None else batch.to(param.device)


def _in_eval(model: torch.nn.Module, run: Callable[[], Any]) -> Any:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return run()
    finally:
        model.train(was_training)


def _cache(model: torch.nn.Module, x: Tensor, names: list[str]) -> dict[str, Tensor]:
    out, cache = _in_eval(model, lambda: model.run_with_cache(x, names_filter=names))
    return {"__outputs__": out, **{name: cache[name] for name in names}}


def _site_hook(fn: EditFn, mask: Tensor, seq_len: int) -> Callable[..., Tensor]:
    def hook(act: Tensor, hook: Any) -> Tensor:
        shape = tuple(act.shape[1:])
        if len(shape) != mask.ndim or any(m not in (1, a) for m, a in zip(mask.shape, shape, strict=True)):
            raise ValueError(
                f"{hook.name} has shape {shape} after the batch axis, but the site spans {tuple(mask.shape)} "
                f"(seq_len={seq_len}): interventions need every query position; run the model without keep_last"
            )
        return fn(act, mask, hook.name)

    return hook


def intervene(
    model: torch.nn.Module, task: Any, batch: Batch, edits: Sequence[tuple[Site, Edit]], *, kind: str | None = None
) -> InterventionResult:
    """Run `batch` clean and with every (site, edit) pair applied in one forward pass.

    Each edit that reads another batch (a transplant's donor, an ablation's reference) gets that batch's
    activations at its site's hooks; a batch shared by several edits runs once. Edits at the same hook apply in
    the order given. Hooks are attached through `latentcode.model.hooks.hooks`, so none is left behind, even when a
    hook raises.

    Args:
        model: a `Transformer` (or a HookedRootModule with `cfg.n_layers`, `cfg.n_heads` and our hook names).
        task: the task the model solves (its `metrics` and `predict` score the outputs; its `seq_len` the sites).
        batch: the batch that runs.
        edits: (Site, Edit) pairs, at least one.
        kind: the result's `kind` (default: the first edit's).

    Returns:
        An `InterventionResult`; metrics are against `batch`'s targets.

    Raises:
        ValueError: no edit, a site out of range for the model or task, or a source batch of the wrong shape.

    >>> from latentcode.model.transformer import build_model
    >>> from latentcode.tasks.fuzzy_logic import FuzzyLogic
    >>> task = FuzzyLogic()
    >>> model = build_model(task, "hyla", "tiny")
    >>> batch, donor = task.sample(4, seed=0), task.sample(4, seed=1)
    >>> result = intervene(model, task, batch, [(Site("resid_post", layers=0, positions="all"), Transplant(donor))])
    >>> result.kind, result.hook_names, result.sites.shape
    ('transplant', ('blocks.0.hook_resid_post',), torch.Size([16, 1]))
    """
    batch = _on_device(model, batch, "batch")
    if not edits:
        raise ValueError("intervene needs at least one (Site, Edit) pair")
    resolved = [(*site.resolve(model, task), edit) for site, edit in edits]
    # id(source batch) -> (that batch, kept alive so ids stay unique; on the model's device; the names it feeds)
    sources: dict[int, tuple[Batch, Batch, list[str]]] = {}
    keys = []
    for _, names, _, edit in resolved:
        source = edit.source(batch)
        keys.append(None if source is None else id(source))
        if source is not None:
            moved = sources.setdefault(id(source), (source, _on_device(model, source, f"{edit.kind} source"), []))
            moved[2].extend(name for name in names if name not in moved[2])
    caches = {key: _cache(model, source.x, names) for key, (_, source, names) in sources.items()}
    seq_len = int(task.seq_len)
    fwd_hooks = []
    for (_, names, mask, edit), key in zip(resolved, keys, strict=True):
        fn = edit.bind(batch, {} if key is None else {name: caches[key][name] for name in names})
        fwd_hooks += [(name, _site_hook(fn, mask.to(batch.x.device), seq_len)) for name in names]

    def run() -> tuple[Tensor, Tensor]:
        clean = model(batch.x)
        with hooks(model, fwd_hooks=fwd_hooks):
            return clean, model(batch.x)

    clean, edited = _in_eval(model, run)
    donor = next((caches[k]["__outputs__"] for (*_, e), k in zip(resolved, keys, strict=True)
                  if isinstance(e, Transplant)), None)
    layers = tuple(dict.fromkeys(layer for chosen, *_ in resolved for layer in chosen))
    return InterventionResult(
        kind=kind or resolved[0][3].kind,
        layers=layers,
        sites=resolved[0][2].cpu(),
        outputs=edited,
        clean_outputs=clean,
        prediction=task.predict(edited),
        clean_prediction=task.predict(clean),
        metrics=task.metrics(edited, batch),
        clean_metrics=task.metrics(clean, batch),
        metric_name=task.metric_name,
        donor_outputs=donor,
        donor_prediction=None if donor is None else task.predict(donor),
        hook_names=tuple(name for _, names, _, _ in resolved for name in names),
    )
