"""How to train one model: `TrainConfig` and its presets (`train_config`).

Each field carries a one-line docstring that doubles as CLI help. `__post_init__` validates and never has side
effects. The presets live with their tasks and are read from the task registry on first use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from latentcode.config.fields import check_fields

LR_SCHEDULES = ("optax", "v0.1")


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
    cuda_graph: bool = False
    """Train through the graph-ready step (`latentcode/training/graph_step.py`): the batch, the dropout masks and
    the per-step AdamW scalars are drawn eagerly and copied into static buffers, and on CUDA the rest of the step
    (forward, backward, update) is captured once as a CUDA graph and replayed. The step is the ensemble's
    (`train_ensemble`; `train()` trains a single run as an ensemble of one); it agrees with the eager step to
    float32 rounding, and a run trained with it resumes bitwise. Off: the eager step, unchanged."""
    autocast: bool = False
    """bf16 autocast of the forward pass on CUDA (off: float32, with TF32 matmuls on CUDA); ignored on CPU."""
    snapshots: bool = False
    """Keep the weights of every evaluation as a loadable run directory `snapshots/step-NNNNNN/` (config.json and
    model.safetensors, 1.6 MB for the SRAVEN paper model), for analyses over training."""
    lr_schedule: Literal["optax", "v0.1"] = "optax"
    """'optax': the reference's `optax.warmup_cosine_decay_schedule` exactly (update 1 has lr 0, the cosine spans
    steps - 2 * warmup updates and the floor holds for the last `warmup`). 'v0.1': latentcode 0.1's schedule, one
    update ahead and reaching the floor at the last step; runs whose config.json predates this field load with it."""
    fused_attention: bool = True
    """On a CPU, train HYLA layers through one numba kernel (`latentcode/model/hyla_kernel.py`) that never stores
    the codes and recomputes them in the backward pass: the same arithmetic in another order, so it agrees with the
    plain path to rounding, not bitwise. Evaluation, extraction, hooked passes and `train_ensemble` (which batches
    models with vmap) use the plain path. Runs whose config.json predates this field load with False and resume
    exactly as they were trained."""

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
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule={self.lr_schedule!r} is not one of {', '.join(LR_SCHEDULES)}")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The config a `to_dict` wrote; a dict without `lr_schedule` (written before 0.2) gets 'v0.1', the
        schedule that run was trained with, and one without `fused_attention` gets False (its plain attention path)."""
        check_fields(cls, data, "TrainConfig")
        data = {"lr_schedule": "v0.1", "fused_attention": False, **data}
        if "adam_betas" in data:
            data["adam_betas"] = tuple(data["adam_betas"])
        return cls(**data)


def train_config(task: str, preset: str = "paper", **overrides: Any) -> TrainConfig:
    """The training preset for a task, with field overrides.

    >>> train_config("sraven", "paper").steps
    156250
    """
    from latentcode.tasks.registry import task_presets  # loads the task modules (and torch) on first use

    presets = task_presets(task, "training").train
    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(sorted(presets))}")
    data = {**presets[preset], **overrides}
    check_fields(TrainConfig, data, "TrainConfig")
    return TrainConfig(**data)
