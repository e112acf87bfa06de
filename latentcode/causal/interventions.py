"""The paper's interventions on the latent codes (`hook_pattern`): `transplant`, `steer`, `ablate`, `code_direction`.

Each is one call of `latentcode.causal.patching.intervene` with a `Site` on the codes and an `Edit`; the runner, the
sites and `InterventionResult` live there, the edits in `latentcode.causal.edits`, and all are re-exported here. The experiments built from these
functions live in `latentcode.causal.experiments`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from latentcode.causal.edits import Ablate, Edit, Steer, Transplant, Zero, _check_reference
from latentcode.causal.patching import (
    InterventionResult,
    PositionsArg,
    Site,
    _on_device,
    check_layers,
    intervene,
    site_mask,
)
from latentcode.codes.extract import resolve_positions
from latentcode.tasks.base import Batch

__all__ = [
    "Ablate",
    "Edit",
    "InterventionResult",
    "Site",
    "Steer",
    "Transplant",
    "Zero",
    "ablate",
    "code_direction",
    "intervene",
    "site_mask",
    "steer",
    "transplant",
]

PairsArg = PositionsArg  # the name before `positions=`

AblateMethod = Literal["zero", "mean", "resample"]
ABLATE_METHODS: tuple[str, ...] = ("zero", "mean", "resample")


def transplant(
    model: torch.nn.Module,
    task: Any,
    recipient: Batch,
    donor: Batch,
    *,
    layers: int | Sequence[int] | None = None,
    positions: PositionsArg = "paper",
    whole_row: bool = False,
    heads: int | Sequence[int] | None = None,
    values: bool = False,
) -> InterventionResult:
    """Run `recipient` with the codes of `donor` at the chosen layers, heads and (query, key) positions.

    Instance i of the recipient receives the codes of instance i of the donor; everything else (queries, keys,
    values, other positions, other layers) is the recipient's own. With `values=True` the chosen layers' values
    (`hook_v`, [batch, pos, head_index, d_head]) at the chosen heads and key positions are the donor's too.
    `intervene(model, task, recipient, [(Site(...), Transplant(donor))])` with a `Site("v")` for the values.

    Args:
        model: as in `intervene`.
        task: as in `intervene`.
        recipient: the batch that runs.
        donor: a batch of the same shape whose codes are transplanted.
        layers: model layers (0-based) to transplant at (default: all).
        positions: which (query, key) code entries, see `site_mask` (default: the paper's extraction positions).
        whole_row: widen `positions` to every key of each chosen query.
        heads: heads to transplant (default: all).
        values: also transplant the values at the chosen heads and key positions.

    Returns:
        An `InterventionResult` (kind 'transplant') with `donor_outputs`; metrics are against the recipient's
        targets.

    Raises:
        ValueError: layers, heads or positions out of range, or donor and recipient of different shapes.

    >>> from latentcode.model.transformer import build_model
    >>> from latentcode.tasks.sraven import SRaven
    >>> task = SRaven()
    >>> model = build_model(task, "hyla", "tiny")
    >>> a, b = task.sample(4, seed=0), task.sample(4, seed=1)
    >>> result = transplant(model, task, a, b, layers=[1])
    >>> result.outputs.shape, result.layers
    (torch.Size([4, 36, 8]), (1,))
    """
    recipient = _on_device(model, recipient, "recipient")
    edit = Transplant(_on_device(model, donor, "donor"))
    site = Site("pattern", layers=layers, positions=positions, heads=heads, whole_row=whole_row)
    edits = [(site, edit), *([(replace(site, hook="v"), edit)] if values else [])]
    return intervene(model, task, recipient, edits, kind="transplant")


def steer(
    model: torch.nn.Module,
    task: Any,
    batch: Batch,
    direction: Float[Tensor, "*direction"] | np.ndarray,
    *,
    layer: int,
    alpha: float = 1.0,
    positions: PositionsArg = "paper",
) -> InterventionResult:
    """Add `alpha * direction` to the codes of one layer at one view's (query, key) positions.

    Args:
        model: as in `intervene`.
        task: as in `intervene`.
        batch: the batch that runs.
        direction: [head_index, query, key] over the view's query and key positions (e.g. [n_heads, 1, 2] at
            SRAVEN's paper positions), or the same flattened (head, query, key) - the feature order of a probe
            fitted on one layer of `LatentCodes.flat`. Use `code_direction` to take it from a fitted probe.
        layer: the model layer (0-based).
        alpha: the multiple added.
        positions: one view (a name that resolves to one view, `{'query', 'key'}` or `(query, key)`).

    Returns:
        An `InterventionResult` (kind 'steer'); its `sites` are the entries that moved (`alpha * direction != 0`).

    Raises:
        ValueError: a layer out of range, positions with several views, or a direction of the wrong size.
    """
    batch = _on_device(model, batch, "batch")
    (chosen,) = check_layers(model, [layer])
    if isinstance(positions, np.ndarray | Tensor) or positions == "all":
        raise ValueError("steer needs positions as a name, {'query': [...], 'key': [...]} or (query, key)")
    spec = resolve_positions(task, positions)  # type: ignore[arg-type]
    if spec.n_views != 1:
        raise ValueError(f"positions={positions!r} has {spec.n_views} views; steer one view at a time (e.g. 'paper')")
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
    dense = torch.zeros(n_heads, task.seq_len, task.seq_len)
    dense[:, query[:, None], key[None, :]] = vector.reshape(shape).float().cpu()
    site = Site("pattern", layers=[chosen], positions=positions)
    result = intervene(model, task, batch, [(site, Steer(dense, alpha))], kind="steer")
    return replace(result, sites=(alpha * dense) != 0)


def ablate(
    model: torch.nn.Module,
    task: Any,
    batch: Batch,
    *,
    method: AblateMethod | str = "mean",
    layers: int | Sequence[int] | None = None,
    heads: int | Sequence[int] | None = None,
    positions: PositionsArg = "all",
    whole_row: bool = False,
    reference: Batch | None = None,
    seed: int = 0,
) -> InterventionResult:
    """Replace the codes of chosen layers, heads and positions by zero, their mean, or another instance's codes.

    `intervene(model, task, batch, [(Site(...), Ablate(method, reference, seed))])`, or `Zero()`.

    Args:
        model: as in `intervene`.
        task: as in `intervene`.
        batch: the batch that runs.
        method: 'zero'; 'mean' (each entry's mean over the `reference` batch); 'resample' (instance i gets the
            codes of a reference instance drawn uniformly with replacement, from `seed`).
        layers: model layers (default: all).
        heads: heads (default: all).
        positions: (query, key) entries, see `site_mask` (default 'all': the whole pattern).
        whole_row: widen `positions` to whole query rows.
        reference: the batch the mean or the resampled codes come from (default: `batch` itself). Any size;
            same sequence shape.
        seed: seed of the resampling.

    Returns:
        An `InterventionResult` (kind 'ablate').

    Raises:
        ValueError: an unknown method, layers/heads/positions out of range, or a reference of another shape.

    >>> from latentcode.model.transformer import build_model
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
    if reference is not None:
        reference = _check_reference(_on_device(model, reference, "reference"), batch)
    edit = Zero() if method == "zero" else Ablate(method, reference, seed)
    site = Site("pattern", layers=layers, positions=positions, heads=heads, whole_row=whole_row)
    return intervene(model, task, batch, [(site, edit)], kind="ablate")


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
    from probes.decoding.estimators import code_space_directions

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
