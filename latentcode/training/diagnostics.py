"""Health checks of a trained model that the paper does not report: the live fraction of HYLA's generated value
network, which tells a layer whose ReLU hidden units never fire (a "dead" layer: its attention output is its
bias, so the model computes with one attention layer fewer). Only measurement lives here; training calls it at
every evaluation and `latentcode eval` prints it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from latentcode.model.hooks import hook_name, hooks

__all__ = [
    "DEAD_REGION_ACTIVATIONS",
    "LIVE_KEY",
    "format_live_fraction",
    "run_value_live_fraction",
    "value_live_fraction",
]

DEAD_REGION_ACTIVATIONS = ("relu",)
"""Value-network activations whose output is exactly zero on a whole region (the only ones that can die)."""

LIVE_KEY = "value_live_fraction"
"""Key of the per-layer live fractions in an evaluation record of metrics.jsonl."""

_CHUNK = 256


def _attention_layers(model: nn.Module) -> list[nn.Module]:
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        raise TypeError(f"{type(model).__name__} has no `blocks`; value_live_fraction needs a latentcode Transformer")
    return [block.attn for block in blocks]


@torch.no_grad()
def value_live_fraction(model: nn.Module, x: Tensor) -> list[float | None]:
    """Share of the generated value network's hidden units that are above zero, per layer.

    For each layer with `value_net="mlp"` and a ReLU `value_act`, counts the entries of
    `blocks.{i}.attn.hook_value_hidden` ([batch, query_pos, key_pos, d_head]) above zero over every (query, key)
    pair of every instance in `x`, and divides by their number. A layer whose fraction is 0 is dead. Layers
    without a generated hidden layer (linear value network) or whose activation has no dead region (identity,
    silu, gelu, sigmoid, tanh) give None: not applicable.

    Args:
        model: a latentcode `Transformer` (run in eval mode; its training mode is restored).
        x: inputs [batch, pos, d_in], e.g. a fixed seeded batch of held-out instances.

    Returns:
        One entry per layer: the live fraction in [0, 1], or None where it does not apply.

    Example:
        >>> import latentcode as lc
        >>> task = lc.get_task("fuzzy_logic", seq_len=8)
        >>> model = lc.build_model(task, "hyla", preset="tiny")
        >>> fractions = value_live_fraction(model, task.sample(4, "ood", seed=0).x)
        >>> len(fractions) == model.cfg.n_layers and all(0.0 <= f <= 1.0 for f in fractions)
        True
    """
    layers = _attention_layers(model)
    applicable = [
        getattr(attn, "hook_value_hidden", None) is not None and attn.cfg.value_act in DEAD_REGION_ACTIVATIONS
        for attn in layers
    ]
    if not any(applicable):
        return [None] * len(layers)
    live = [0] * len(layers)
    total = [0] * len(layers)

    def counter(index: int):
        def hook(hidden: Tensor, hook: Any) -> None:
            live[index] += int((hidden > 0).sum())
            total[index] += hidden.numel()

        return hook

    counters = [(hook_name("value_hidden", i), counter(i)) for i, ok in enumerate(applicable) if ok]
    was_training = model.training
    model.eval()
    try:
        with hooks(model, fwd_hooks=counters):
            for start in range(0, len(x), _CHUNK):
                model(x[start : start + _CHUNK])
    finally:
        model.train(was_training)
    return [live[i] / total[i] if ok and total[i] else None for i, ok in enumerate(applicable)]


def run_value_live_fraction(run: Any) -> list[float | None]:
    """`value_live_fraction` of a loaded run's model on the batch its training records it on.

    That batch is `latentcode.training.evaluate.live_fraction_inputs` of the run's task and training seed, so the
    value equals the run's last recorded one when the model is at that evaluation's step. Use it for runs whose
    metrics predate the diagnostic.

    Args:
        run: a `latentcode.Run` (from `latentcode.load_run`).
    """
    from latentcode.training.evaluate import live_fraction_inputs

    return value_live_fraction(run.model, live_fraction_inputs(run.task, run.config.train.seed, run.model.device))


def format_live_fraction(fractions: list[float | None] | None) -> str:
    """`L0 12.3%  L1 0.0% (dead)`, or `n/a` where no layer has a dead region."""
    if not fractions or all(f is None for f in fractions):
        return "n/a (no ReLU value network)"
    parts = []
    for i, f in enumerate(fractions):
        if f is None:
            parts.append(f"L{i} n/a")
        else:
            parts.append(f"L{i} {100 * f:.2f}%" + (" (dead)" if f == 0 else ""))
    return "  ".join(parts)
