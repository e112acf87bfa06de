"""The ensemble's training step in a form a CUDA graph can replay (`TrainConfig.cuda_graph`).

A CUDA graph replays the kernels it recorded on the memory it recorded them on, so whatever changes between steps
must be written into the same tensors every step, and nothing inside the recorded region may read a value back to
the host or draw random numbers. `GraphStep` splits one step of `_EnsembleLoop` in two:

- eager, every step: each member's batch is sampled on the training device from its step seed, its dropout masks
  are drawn outside vmap from its dropout seed (`DropoutReplay.draw`, the very draws of the eager step), and the
  step's AdamW scalars (learning rates, weight-decay factors, bias corrections) are computed; all of them are
  `copy_`'d into static buffers;
- recorded: the vmapped forward pass on the static inputs, the losses, the gradients and the AdamW update of the
  stacked parameters and moments in place. On CUDA the first two steps run this part eagerly on a side stream
  (warm-up for the allocator and cuBLAS), the third is captured as a CUDA graph, and every step from then on
  replays it. On other devices the same part simply runs eagerly.

The update uses the same operations as `_EnsembleLoop._adamw`, with its Python-float scalars held in tensors, so the
parameters agree with the eager step to float32 rounding; everything a step needs is a function of the stacked
state and the step number, so a run trained this way resumes bitwise.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from latentcode.tasks.base import Batch
from latentcode.training.optim import lr_at
from latentcode.training.train_step import step_seeds

if TYPE_CHECKING:
    from latentcode.training.ensemble import _EnsembleLoop

WARMUP_STEPS = 2
"""Steps run eagerly on a side stream before the CUDA graph is captured."""


class GraphStep:
    """One training step of an `_EnsembleLoop` through static buffers; call it with the step number.

    Returns the members' losses [members] of the step, a fresh tensor on the training device (not synced).
    """

    def __init__(self, loop: _EnsembleLoop) -> None:
        self.loop = loop
        self.capture = loop.device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.eager_steps = 0
        self.static: dict[str, Tensor] | None = None
        self.masks: list[Tensor] = []
        self.wd = torch.tensor([m.cfg.weight_decay for m in loop.members], dtype=torch.float32, device=loop.device)

    # ------------------------------------------------------------------------------------------- eager part
    def _inputs(self, step: int) -> dict[str, Tensor | list[Tensor]]:
        loop = self.loop
        batches = []
        for member in loop.members:
            data_seed, _ = step_seeds(member.cfg.seed, 0, step)
            batches.append(member.task.sample(loop.cfg.batch_size, "train", seed=data_seed, device=loop.device))
        masks = loop.dropout.draw([step_seeds(m.cfg.seed, 0, step)[1] for m in loop.members])
        (beta1, beta2), _ = loop.cfg.adam_betas, loop.cfg.adam_eps
        lr = torch.tensor([lr_at(step, m.cfg) for m in loop.members], dtype=torch.float32, device=loop.device)
        bias1, bias2 = 1 - beta1**step, 1 - beta2**step
        return {
            "x": torch.stack([b.x for b in batches]),
            "y": torch.stack([b.y for b in batches]),
            "decay": 1 - lr * self.wd,
            "step_size": bias1 / lr,
            "sqrt_bias2": torch.tensor(math.sqrt(bias2), dtype=torch.float32, device=loop.device),
            "masks": masks,
        }

    def _load(self, inputs: dict[str, Tensor | list[Tensor]]) -> None:
        masks = inputs.pop("masks")
        assert isinstance(masks, list)
        if self.static is None:
            self.static = {name: value.clone() for name, value in inputs.items()}  # type: ignore[union-attr]
            self.static["losses"] = torch.zeros(len(self.loop.members), device=self.loop.device)
            self.masks = [m.clone() for m in masks]
            return
        for name, value in inputs.items():
            self.static[name].copy_(value)  # type: ignore[arg-type]
        for static, mask in zip(self.masks, masks, strict=True):
            static.copy_(mask)

    # ---------------------------------------------------------------------------------------- recorded part
    def _autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast as the eager step's (`TrainConfig.autocast`), without its cast cache, which a CUDA graph
        capture does not allow (the cache only saves re-casting the weights; the values are the same)."""
        if self.loop.cfg.autocast and self.loop.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def _compute(self) -> None:
        loop, s = self.loop, self.static
        assert s is not None
        with self._autocast():
            outputs = loop.forward(loop.params, loop.buffers, s["x"], self.masks)
        losses = torch.stack([loop.task.loss(out.float(), Batch(x=x, y=y))
                              for out, x, y in zip(outputs, s["x"], s["y"], strict=True)])
        names = list(loop.params)
        grads = torch.autograd.grad(losses.sum(), [loop.params[n] for n in names])
        (beta1, beta2), eps = loop.cfg.adam_betas, loop.cfg.adam_eps
        with torch.no_grad():
            for name, g in zip(names, grads, strict=True):
                p, m, v = loop.params[name], loop.exp_avg[name], loop.exp_avg_sq[name]
                shape = (-1, *([1] * (p.ndim - 1)))
                if loop.decayed[name]:
                    p.mul_(s["decay"].view(shape))
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                denom = (v.sqrt() / s["sqrt_bias2"]).add_(eps)
                p.addcdiv_(m, denom * s["step_size"].view(shape), value=-1.0)
            s["losses"].copy_(losses.detach())

    def __call__(self, step: int) -> Tensor:
        self._load(self._inputs(step))
        assert self.static is not None
        if not self.capture:
            self._compute()
        elif self.graph is not None:
            self.graph.replay()
        elif self.eager_steps < WARMUP_STEPS:
            side = torch.cuda.Stream(device=self.loop.device)
            side.wait_stream(torch.cuda.current_stream(self.loop.device))
            with torch.cuda.stream(side):
                self._compute()
            torch.cuda.current_stream(self.loop.device).wait_stream(side)
            self.eager_steps += 1
        else:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._compute()
            self.graph = graph
            graph.replay()  # capturing records the kernels without running them
        return self.static["losses"].clone()
