"""One training step and what it needs: the device (`resolve_device`), the per-step seeds that make a resumed run
draw what an uninterrupted one would (`step_seeds`), and the step itself (`make_train_step` -> `StepOutput`).

The step knows the model only as a callable and the task only through its loss; the loop around it is `train.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from latentcode.config import TrainConfig
from latentcode.tasks.base import Batch, Task
from latentcode.training.evaluate import _autocast

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepOutput:
    """What one optimizer step returns; values stay on the training device (reading them syncs)."""

    loss: Tensor
    """Scalar training loss of the step's batch (on this process), detached."""
    metrics: dict[str, Tensor] = field(default_factory=dict)
    """Extra scalars, e.g. `grad_norm` when gradient clipping is on."""


def resolve_device(device: str = "auto", *, local_rank: int = 0) -> torch.device:
    """The torch device for a `TrainConfig.device` string: 'auto' picks cuda, then mps, then cpu.

    Raises:
        ValueError: an unknown device string, or a device this machine lacks.
    """
    if device == "auto":
        if torch.cuda.is_available():
            device = "cuda"
        elif torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available here; use auto or cpu")
        if dev.index is None:
            dev = torch.device("cuda", local_rank)
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} requested but MPS is not available here; use auto or cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {device!r} is not supported; use auto, cpu, cuda, cuda:N or mps")
    return dev


def step_seeds(seed: int, rank: int, step: int) -> tuple[int, int]:
    """(batch seed, dropout seed) of one step on one process: a pure function of (seed, rank, step), so a
    resumed run draws exactly the batches and dropout masks of an uninterrupted one."""
    words = np.random.SeedSequence([seed, rank, step]).generate_state(4, np.uint32)
    return (int(words[0]) << 31) ^ int(words[1]), (int(words[2]) << 31) ^ int(words[3])


def make_train_step(
    model: nn.Module, task: Task, optimizer: torch.optim.Optimizer, cfg: TrainConfig, device: torch.device
) -> Callable[[Batch, float], StepOutput]:
    """One optimizer step as a function of (batch, learning rate).

    On CUDA the forward pass runs in float32 with TF32 matmuls (`allow_tf32`), or under bf16 autocast with
    `cfg.autocast`, and with `cfg.compile` through `torch.compile`; the model object itself stays uncompiled for
    evaluation and hooks.
    """
    forward: Callable[[Tensor], Tensor] = model
    if cfg.compile and device.type == "cuda":
        forward = torch.compile(model)
    elif cfg.compile:
        logger.warning("compile=True is ignored on %s (torch.compile is used on CUDA only)", device.type)
    autocast = _autocast(device, cfg.autocast)
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def step(batch: Batch, lr: float) -> StepOutput:
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast():
            # only the positions the loss reads come out of the last block (same values, less work)
            outputs = forward(batch.x, keep_last=task.n_readout)
        loss = task.loss(outputs.float(), batch)
        loss.backward()
        metrics = {}
        if cfg.grad_clip is not None:
            metrics["grad_norm"] = nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return StepOutput(loss=loss.detach(), metrics=metrics)

    return step


def allow_tf32(device: torch.device) -> None:
    """Let float32 matmuls and convolutions on CUDA use TF32 tensor cores (float32 range and sums, 10-bit mantissa
    products): the CUDA default of training (`TrainConfig.autocast` off). A process-wide torch setting; nothing
    happens on other devices."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
