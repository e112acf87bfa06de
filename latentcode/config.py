"""Configuration dataclasses and named presets: `TrainConfig` (here) and `ModelConfig` (below it).

Each field carries a one-line docstring that doubles as CLI help. `__post_init__` validates and never has side
effects. Task configs live with their tasks (`latentcode/tasks/`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal


def _check_fields(cls: type, data: dict[str, Any], what: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {what} field(s) {unknown}; valid fields: {', '.join(sorted(known))}")


@dataclass(kw_only=True, frozen=True)
class TrainConfig:
    """How to train one model. Defaults follow the reference code (spec §3.2)."""

    steps: int = 1000
    """Optimizer steps; the learning-rate schedule spans exactly this many."""
    batch_size: int = 128
    """Instances per step (the global batch when training on several processes)."""
    lr: float = 1e-3
    """Peak learning rate of AdamW."""
    warmup: int = 100
    """Linear warm-up steps from 0 to `lr`, then cosine decay to `min_lr_ratio * lr`."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of `lr`."""
    weight_decay: float = 0.1
    """Decoupled (AdamW) weight decay."""
    decay_mask: Literal["ndim>=2", "weights"] = "ndim>=2"
    """Which parameters decay: 'ndim>=2' as the reference code (q/k/v biases, position tables and embeddings
    included), or 'weights' (projection matrices only, as the paper's text says)."""
    adam_betas: tuple[float, float] = (0.9, 0.999)
    """AdamW (beta1, beta2)."""
    adam_eps: float = 1e-8
    """AdamW epsilon."""
    grad_clip: float | None = None
    """Clip the global gradient norm to this value (the reference does not clip)."""
    seed: int = 0
    """Seed for initialisation, data and dropout."""
    eval_every: int = 1000
    """Evaluate on the `test` and `ood` splits every this many steps (and at the end)."""
    eval_samples: int = 4096
    """Instances per split and evaluation."""
    log_every: int = 50
    """Append a line to metrics.jsonl every this many steps."""
    checkpoint_every: int = 1000
    """Write a resumable checkpoint every this many steps (and at the end)."""
    device: str = "auto"
    """'auto' (cuda, then mps, then cpu), or any torch device string."""
    compile: bool = False
    """torch.compile the training step (CUDA only; extraction and hooks stay uncompiled)."""
    autocast: bool = True
    """bf16 autocast on CUDA; ignored on CPU."""

    def __post_init__(self) -> None:
        positive = ("steps", "batch_size", "eval_every", "eval_samples", "log_every", "checkpoint_every")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)} must be a positive integer")
        if self.warmup < 0 or self.warmup >= self.steps:
            raise ValueError(f"warmup={self.warmup} must lie in [0, steps={self.steps}); lower it or raise steps")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr} must be positive")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio={self.min_lr_ratio} must lie in [0, 1]")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay} must be >= 0")
        if self.decay_mask not in ("ndim>=2", "weights"):
            raise ValueError(f"decay_mask={self.decay_mask!r} is not one of 'ndim>=2', 'weights'")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"grad_clip={self.grad_clip} must be positive or None")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        _check_fields(cls, data, "TrainConfig")
        data = dict(data)
        if "adam_betas" in data:
            data["adam_betas"] = tuple(data["adam_betas"])
        return cls(**data)


TRAIN_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "fuzzy_logic": {
        "tiny": dict(steps=40, batch_size=32, warmup=4, eval_every=20, eval_samples=256, log_every=10,
                     checkpoint_every=20),
        "small": dict(steps=3000, batch_size=128, warmup=100, eval_every=1000, eval_samples=4096),
        "paper": dict(steps=50_000, batch_size=128, warmup=100, eval_every=10_000, eval_samples=16_000,
                      checkpoint_every=5000),
    },
    "sraven": {
        "tiny": dict(steps=40, batch_size=32, warmup=4, eval_every=20, eval_samples=256, log_every=10,
                     checkpoint_every=20),
        "small": dict(steps=2000, batch_size=128, warmup=200, eval_every=1000, eval_samples=4096),
        "paper": dict(steps=156_250, batch_size=128, warmup=1000, eval_every=10_000, eval_samples=51_200,
                      checkpoint_every=10_000),
    },
}


def train_config(task: str, preset: str = "paper", **overrides: Any) -> TrainConfig:
    """The training preset for a task, with field overrides.

    >>> train_config("sraven", "paper").steps
    156250
    """
    if task not in TRAIN_PRESETS:
        raise ValueError(f"no training presets for task {task!r}; valid tasks: {', '.join(sorted(TRAIN_PRESETS))}")
    presets = TRAIN_PRESETS[task]
    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(sorted(presets))}")
    data = {**presets[preset], **overrides}
    _check_fields(TrainConfig, data, "TrainConfig")
    return TrainConfig(**data)
