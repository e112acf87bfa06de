"""The optimizer and its schedule: AdamW over two parameter groups (decayed or not, `decay_mask`) and the learning
rate of every step (`lr_at`: warm-up, cosine decay, floor). Nothing here takes a step; `train_step.py` does.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from latentcode.config import TrainConfig


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of the update that completes step `step` (1-based), per `cfg.lr_schedule`.

    'optax' (the default) is the reference's `optax.warmup_cosine_decay_schedule(0, lr, warmup, steps - warmup,
    min_lr_ratio * lr)` evaluated at the optimizer count k = step - 1: a linear warm-up whose first update has lr
    0, a cosine over the next steps - 2 * warmup updates (optax counts its decay steps from 0, warm-up included),
    then the floor for the last `warmup` updates. 'v0.1' is latentcode 0.1's: one update ahead (lr reaches `lr`
    at step `warmup`) and the cosine reaching the floor exactly at the last step.

    >>> cfg = TrainConfig(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    >>> lr_at(1, cfg), lr_at(11, cfg), lr_at(51, cfg), lr_at(91, cfg), lr_at(100, cfg)
    (0.0, 1.0, 0.55, 0.1, 0.1)
    >>> old = TrainConfig(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1, lr_schedule="v0.1")
    >>> lr_at(5, old), lr_at(10, old), lr_at(55, old), lr_at(100, old)
    (0.5, 1.0, 0.55, 0.1)
    """
    if not 1 <= step <= cfg.steps:
        raise ValueError(f"step={step} must lie in [1, steps={cfg.steps}]")
    floor = cfg.lr * cfg.min_lr_ratio
    if cfg.lr_schedule == "optax":
        k = step - 1
        if k < cfg.warmup:
            return cfg.lr * k / cfg.warmup
        span = cfg.steps - 2 * cfg.warmup
        progress = min((k - cfg.warmup) / span, 1.0) if span > 0 else 1.0  # a run this short holds the floor
    elif step <= cfg.warmup:
        return cfg.lr * step / cfg.warmup
    else:
        progress = (step - cfg.warmup) / (cfg.steps - cfg.warmup)
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def decay_mask(model: nn.Module, mode: str = "ndim>=2") -> dict[str, bool]:
    """Which parameters get weight decay, by name.

    Args:
        model: the model.
        mode: 'ndim>=2' (the reference: every parameter with at least 2 dims, so q/k/v biases [head, d_head],
            position tables and embeddings decay) or 'weights' (projection matrices only: parameters named
            `W_*` and the `.weight` of `nn.Linear` layers; no biases, LayerNorms or position tables).

    Raises:
        ValueError: an unknown mode.
    """
    params = dict(model.named_parameters())
    if mode == "ndim>=2":
        return {name: p.ndim >= 2 for name, p in params.items()}
    if mode == "weights":
        linear = {f"{prefix}.weight" if prefix else "weight" for prefix, m in model.named_modules()
                  if isinstance(m, nn.Linear)}
        return {name: name.rsplit(".", 1)[-1].startswith("W_") or name in linear for name in params}
    raise ValueError(f"decay_mask={mode!r} is not one of 'ndim>=2', 'weights'")


def build_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with two parameter groups (decayed, not decayed) per `cfg.decay_mask`; fused kernels where torch
    has them (CUDA and CPU), multi-tensor (`foreach`) otherwise."""
    mask = decay_mask(model, cfg.decay_mask)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in params if mask[n]], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in params if not mask[n]], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    fast = {"fused": True} if device.type in ("cuda", "cpu") else {"foreach": True}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.adam_betas, eps=cfg.adam_eps, **fast)
