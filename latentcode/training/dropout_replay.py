"""Dropout under vmap: the masks of each ensemble member drawn outside `torch.func.vmap`, as a single run of its seed
draws them, and replayed inside the vmapped forward (`DropoutReplay`); and `plain_autograd`, which switches layers
with hand-written autograd kernels to plain torch ops that vmap can batch.

Only `ensemble.py` uses this; a single run draws its masks the ordinary way.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from latentcode.model.attention import MultiHeadAttention
from latentcode.model.transformer import Transformer
from latentcode.tasks.base import Task
from latentcode.training.evaluate import _autocast


class ReplayedDropout(nn.Module):
    """Stands in for an `nn.Dropout` of the vmapped model: multiplies by the next mask of the replay."""

    def __init__(self, p: float, replay: DropoutReplay) -> None:
        super().__init__()
        self.p = p
        self.replay = [replay]  # in a list: not a submodule, not part of the state dict

    def forward(self, x: Tensor) -> Tensor:
        return self.replay[0].take("dropout", x, self.p) if self.training else x


class DropoutReplay:
    """The dropout draws of one member's forward pass, made outside vmap and replayed inside it.

    A single run seeds torch's global generator with its step's dropout seed and draws, in forward order, every
    attention mask (`MultiHeadAttention.dropout_mask`) and residual dropout mask (`nn.Dropout`). vmap cannot give
    each member its own generator, so the ensemble makes the same draws per member outside vmap: seed with the
    member's dropout seed, draw the same shapes with the same ops in the same order, and stack. Inside the vmapped
    forward, each dropout site takes its member's slice in turn. The order and shapes of the draws come from one
    recording forward pass at start-up, so they follow the model code rather than a copy of it.
    """

    def __init__(self, base: Transformer, batch_size: int, task: Task, device: torch.device, *,
                 autocast: bool) -> None:
        self.device = device
        self.sites: list[tuple[str, torch.nn.Module, tuple[int, ...], torch.dtype, float]] = []
        self.queue: list[Tensor] | None = None
        self.recording = False
        for parent in list(base.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Dropout):
                    setattr(parent, name, ReplayedDropout(child.p, self))
        self.attention = [m for m in base.modules() if isinstance(m, MultiHeadAttention)]
        for module in self.attention:
            # an instance attribute shadows the method, on this private copy only
            module.dropout_mask = functools.partial(self._attention_mask, module)
        if not any(isinstance(m, ReplayedDropout) for m in base.modules()) and not base.cfg.attn_dropout > 0:
            return
        self.recording = True
        try:
            with torch.no_grad(), _autocast(device, autocast)():
                base(torch.zeros(batch_size, task.seq_len, task.d_in, device=device), keep_last=task.n_readout)
        finally:
            self.recording = False

    def _attention_mask(self, module: MultiHeadAttention, pattern: Tensor) -> Tensor:
        return self.take("attention", pattern, module.cfg.attn_dropout, module)

    def take(self, kind: str, x: Tensor, p: float, module: torch.nn.Module | None = None) -> Tensor:
        """Record a draw site (start-up), or replay its next mask (`attention`: the mask; `dropout`: x times it)."""
        if self.recording:
            self.sites.append((kind, module, tuple(x.shape), x.dtype, p))
            return self._draw_site(len(self.sites) - 1)
        if self.queue is None or not self.queue:
            raise RuntimeError("the ensemble's forward pass drew more dropout masks than its recording pass")
        mask = self.queue.pop(0)
        return mask if kind == "attention" else x * mask

    def _draw_site(self, index: int) -> Tensor:
        kind, module, shape, dtype, p = self.sites[index]
        if kind == "attention":
            # the unbound method: the very op a single run uses, on a zero-memory stand-in for the pattern
            stand_in = torch.empty((), dtype=dtype, device=self.device).expand(shape)
            return MultiHeadAttention.dropout_mask(module, stand_in)
        # F.dropout(ones) is the multiplier nn.Dropout applies (x * it equals F.dropout(x) bit for bit)
        return F.dropout(torch.ones(shape, dtype=dtype, device=self.device), p, training=True)

    def draw(self, seeds: list[int]) -> list[Tensor]:
        """Every site's mask for each member: [members, *site shape] per site, member i seeded with seeds[i]."""
        if not self.sites:
            return []
        per_member = []
        for seed in seeds:
            torch.manual_seed(seed)
            per_member.append([self._draw_site(i) for i in range(len(self.sites))])
        return [torch.stack(masks) for masks in zip(*per_member, strict=True)]

    @contextlib.contextmanager
    def replaying(self, masks: list[Tensor]) -> Iterator[None]:
        self.queue = list(masks)
        try:
            yield
            if self.queue:
                raise RuntimeError(f"the ensemble's forward pass left {len(self.queue)} dropout masks unused")
        finally:
            self.queue = None


def plain_autograd(model: torch.nn.Module) -> None:
    """Switch layers with hand-written autograd kernels to plain torch ops, which vmap can batch."""
    for module in model.modules():
        if hasattr(module, "fused_kernels"):
            module.fused_kernels = False
