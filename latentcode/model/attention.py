"""Multi-head attention covering every variant of the paper: one fixed dataflow with two swappable steps.

forward = `qkv` -> `scores` -> `normalize` (score_norm) -> attention dropout -> `value_network` (value_net) ->
`project_out`. Attention is computed explicitly, so every step has a hook, and hooks may edit their tensors in
place (`EditableHookPoint`). The one exception: while HYLA trains on a CPU with nothing hooked onto its codes, the
middle steps run as one kernel (`hyla_kernel.py`, `uses_fused_core`). The hypernetwork reading of the same
layer (explicit generated weights, a loop over query-key pairs) lives in `hypernetwork.py`, reuses these methods,
and is held equal to this batched form by the tests.

Axis letters in the einsum strings:
    b  batch        q  query_pos     k  key_pos     (q and k both run over the positions of self-attention)
    h  head_index   d  d_head (d_head_qk for queries and keys)
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from transformer_lens.hook_points import HookPoint

from latentcode.config import ModelConfig
from latentcode.model.hyla_kernel import hyla_core
from latentcode.model.position import RelativePositionBias


def _identity(x: Tensor) -> Tensor:
    return x


ACTIVATIONS = {
    "relu": torch.relu,
    "gelu": F.gelu,  # exact (erf) form
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "identity": _identity,
}
"""The value-network nonlinearities `ModelConfig.value_act` can name."""


def lecun_normal_(weight: Tensor, fan_in: int) -> Tensor:
    """Flax's default kernel init: truncated normal (2 std) with variance 1 / fan_in."""
    std = math.sqrt(1.0 / fan_in) / 0.87962566103423978  # the std of a unit normal truncated at +-2
    return nn.init.trunc_normal_(weight, std=std, a=-2 * std, b=2 * std)


class _RMSHead(torch.autograd.Function):
    """a = s / sqrt(mean_h s^2 + eps) with a hand-written backward (half the memory passes of autograd's).

    With `query_major`, the output is written [batch, query_pos, head_index, key_pos] in memory (still indexed
    [batch, head_index, query_pos, key_pos]): the layout HYLA's second generated layer reads, which saves a copy.
    """

    @staticmethod
    def forward(ctx: Any, scores: Tensor, eps: float, query_major: bool) -> Tensor:
        # mean of squares in at least float32 (a no-op for float32 and float64 inputs)
        wide = scores.to(torch.promote_types(scores.dtype, torch.float32))
        rms_inv = torch.rsqrt(wide.square().mean(dim=1, keepdim=True) + eps).to(scores.dtype)
        B, H, Q, K = scores.shape
        out = scores.new_empty(B, Q, H, K).transpose(1, 2) if query_major else None
        out = torch.mul(scores, rms_inv, out=out)
        ctx.save_for_backward(out, rms_inv)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        # d a_h / d s_j = r (delta_hj - a_h a_j / H), so grad_s = r (grad - a mean_h(grad * a))
        out, rms_inv = ctx.saved_tensors
        along_out = (grad * out).mean(dim=1, keepdim=True)
        grad_scores = torch.empty_like(grad, memory_format=torch.contiguous_format)
        torch.addcmul(grad, out, along_out, value=-1, out=grad_scores)
        return grad_scores.mul_(rms_inv), None, None


def _hooked(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks)


class EditableHookPoint(HookPoint):
    """A `HookPoint` whose forward hooks may edit the activation in place (`pattern[:, 0] = 0`), with gradients on.

    Some activations are saved by the op that made them (softmax, RMSHead and relu/tanh/sigmoid keep their
    outputs for the backward pass) or are views that autograd forbids editing (q, k and v are views of one
    matmul's output). When a forward hook is attached and the activation is part of an autograd graph, the hooks
    get a copy, which no autograd node has saved: the TransformerLens behaviour. Otherwise the activation passes
    through untouched: training attaches no hooks, so its computation is op for op what it was, and under
    `torch.no_grad` (extraction) nothing is saved for a backward pass, so in-place edits are safe without a copy.
    """

    def forward(self, x: Tensor) -> Tensor:
        return x.clone() if self._forward_hooks and x.requires_grad else x


class MultiHeadAttention(nn.Module):
    """Self-attention whose normalized scores are the latent codes of a hypernetwork (spec §1).

    Weights are stored TransformerLens-style, so `W_V[h]` is the transpose of the paper's W_h^value and `W_O[h]`
    the transpose of W_h^out. Biases of q, k and v are [head_index, d_head] (2-D, so the reference's weight-decay
    mask `ndim >= 2` decays them, as in the reference); the value bias therefore sits inside v and enters the
    generated value network through the code like the value weights do.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        H, E, Dqk, Dv = cfg.n_heads, cfg.d_model, cfg.d_head_qk, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(H, E, Dqk))
        self.W_K = nn.Parameter(torch.empty(H, E, Dqk))
        self.W_V = nn.Parameter(torch.empty(H, E, Dv))
        self.b_Q = nn.Parameter(torch.zeros(H, Dqk))
        self.b_K = nn.Parameter(torch.zeros(H, Dqk))
        self.b_V = nn.Parameter(torch.zeros(H, Dv))
        self.W_O = nn.Parameter(torch.empty(H, Dv, E))
        self.b_O = nn.Parameter(torch.zeros(E))
        self.position_bias = (
            RelativePositionBias(H, cfg.pos_buckets, cfg.pos_max_distance, cfg.pos_bidirectional)
            if cfg.pos_bias
            else None
        )
        self.act = ACTIVATIONS[cfg.value_act]
        self.scale = 1.0 / math.sqrt(Dqk)
        self.fused_kernels = True  # hand-written RMSHead backward; the ensemble trainer turns it off for vmap
        # HYLA's attention core as one numba kernel while training on a CPU (`hyla_kernel.py`); the trainer turns it
        # on for runs with TrainConfig.fused_attention
        self.fused_core = False
        # Editable where autograd would refuse an in-place edit (a saved output, views of one matmul); the scores
        # and z are fresh tensors that nothing saves.
        self.hook_q = EditableHookPoint()  # [batch, pos, head_index, d_head_qk]
        self.hook_k = EditableHookPoint()  # [batch, pos, head_index, d_head_qk]
        self.hook_v = EditableHookPoint()  # [batch, pos, head_index, d_head]
        # [batch, head_index, query_pos, key_pos]: scaled, with the position bias
        self.hook_attn_scores = HookPoint()
        # [batch, head_index, query_pos, key_pos]: normalized, the latent codes (not contiguous for rms_head + mlp).
        # With score_norm="none" it is the scores tensor itself (the copy keeps hook_attn_scores apart, with grads)
        self.hook_pattern = EditableHookPoint()
        if cfg.value_net == "mlp":
            self.hook_value_hidden = EditableHookPoint()  # [batch, query_pos, key_pos, d_head], after value_act
        self.hook_z = HookPoint()  # [batch, pos, head_index, d_head]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weight in (self.W_Q, self.W_K, self.W_V):
            lecun_normal_(weight, fan_in=self.cfg.d_model)
        lecun_normal_(self.W_O, fan_in=self.cfg.d_v)
        for bias in (self.b_Q, self.b_K, self.b_V, self.b_O):
            nn.init.zeros_(bias)

    def forward(
        self, x: Float[Tensor, "batch pos d_model"], keep_last: int | None = None
    ) -> Float[Tensor, "batch query_pos d_model"]:
        """Self-attention over all positions; with `keep_last`, only the last `keep_last` positions query (their
        outputs are returned; hook_q, the codes and hook_z then cover those queries only)."""
        q, k, v = self.qkv(x)
        if keep_last is not None:
            q = q[:, -keep_last:]
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if self.uses_fused_core(q):
            Q, K = q.shape[1], k.shape[1]
            bias = self.position_bias(Q, K) if self.position_bias is not None else None
            keep = self.dropout_mask(q.new_empty(0, 0, Q, K)) if self.cfg.attn_dropout > 0 else None
            z = self.hook_z(hyla_core(q, k, v, bias, keep, self.scale, self.cfg.rms_eps))
            return self.project_out(z)
        scores = self.hook_attn_scores(self.scores(q, k))
        pattern = self.hook_pattern(self.normalize(scores))
        keep = self.dropout_mask(pattern) if self.training and self.cfg.attn_dropout > 0 else None
        z = self.hook_z(self.value_network(pattern, v, keep))
        return self.project_out(z)

    def uses_fused_core(self, q: Tensor) -> bool:
        """Whether this forward pass runs through `hyla_core`: `fused_core` is on, the layer is HYLA (rms_head
        codes, relu mlp value network, not causal) in training mode with gradients, on a CPU in float32 or float64,
        and nothing is hooked onto the codes (the kernel never makes them). Evaluation and extraction always take
        the plain path."""
        cfg = self.cfg
        return (
            self.fused_core
            and self.fused_kernels
            and self.training
            and torch.is_grad_enabled()
            and (cfg.score_norm, cfg.value_net, cfg.value_act, cfg.causal) == ("rms_head", "mlp", "relu", False)
            and q.device.type == "cpu"
            and q.dtype in (torch.float32, torch.float64)
            and not any(_hooked(point) for point in (self.hook_attn_scores, self.hook_pattern, self.hook_value_hidden))
        )

    def qkv(
        self, x: Float[Tensor, "batch pos d_model"]
    ) -> tuple[
        Float[Tensor, "batch pos head_index d_head_qk"],
        Float[Tensor, "batch pos head_index d_head_qk"],
        Float[Tensor, "batch pos head_index d_head"],
    ]:
        """Queries, keys and values from one matmul (they are views into its output)."""
        H, E = self.cfg.n_heads, self.cfg.d_model
        weight = torch.cat([w.transpose(1, 2).reshape(-1, E) for w in (self.W_Q, self.W_K, self.W_V)])
        bias = torch.cat([self.b_Q.flatten(), self.b_K.flatten(), self.b_V.flatten()])
        q, k, v = F.linear(x, weight, bias).split([self.cfg.d_qk, self.cfg.d_qk, self.cfg.d_v], dim=-1)
        return q.unflatten(-1, (H, -1)), k.unflatten(-1, (H, -1)), v.unflatten(-1, (H, -1))

    def scores(
        self,
        q: Float[Tensor, "batch query_pos head_index d_head_qk"],
        k: Float[Tensor, "batch key_pos head_index d_head_qk"],
    ) -> Float[Tensor, "batch head_index query_pos key_pos"]:
        """Scaled dot products plus the relative position bias (added before normalization, every variant). The
        queries are the last query_pos of the key positions."""
        scores = torch.einsum("bqhd,bkhd->bhqk", q * self.scale, k)
        if self.position_bias is not None:
            scores = scores + self.position_bias(q.shape[1], k.shape[1])
        return scores

    def normalize(
        self, scores: Float[Tensor, "batch head_index query_pos key_pos"]
    ) -> Float[Tensor, "batch head_index query_pos key_pos"]:
        """Scores -> latent codes: softmax over keys, identity (linear attention: not even 1/T), or rms_head
        (divide by the RMS over heads, per (query, key), without a gain). Masked entries become 0 (finfo.min
        before the softmax)."""
        norm = self.cfg.score_norm
        if self.cfg.causal:
            Q, K = scores.shape[-2:]
            future = torch.ones(Q, K, dtype=torch.bool, device=scores.device).triu(K - Q + 1)
            scores = scores.masked_fill(future, torch.finfo(scores.dtype).min if norm == "softmax" else 0.0)
        if norm == "softmax":
            return torch.softmax(scores, dim=-1)
        if norm == "rms_head":
            if not self.fused_kernels:  # plain ops, which torch.func transforms (vmap) can batch
                return scores * torch.rsqrt(scores.square().mean(dim=1, keepdim=True) + self.cfg.rms_eps)
            return _RMSHead.apply(scores, self.cfg.rms_eps, self.cfg.value_net == "mlp")
        return scores

    def dropout_mask(
        self, pattern: Float[Tensor, "batch head_index query_pos key_pos"]
    ) -> Float[Tensor, "query_pos key_pos"]:
        """Attention dropout as the reference: one [query, key] multiplier (0 or 1/keep) shared by the whole batch
        and every head."""
        keep = 1.0 - self.cfg.attn_dropout
        mask = torch.empty(pattern.shape[-2:], dtype=pattern.dtype, device=pattern.device).bernoulli_(keep)
        return mask.div_(keep)

    def value_network(
        self,
        pattern: Float[Tensor, "batch head_index query_pos key_pos"],
        v: Float[Tensor, "batch key_pos head_index d_head"],
        keep: Float[Tensor, "query_pos key_pos"] | None = None,
    ) -> Float[Tensor, "batch query_pos head_index d_head"]:
        """The value network each code generates, applied to every key and summed over keys (before W_O).

        linear: z[q, h] = sum_k a[h, q, k] v[k, h] (standard attention).
        mlp (HYLA): hidden[q, k] = act(sum_h a[h, q, k] v[k, h]) (first generated layer; the value bias is inside
        v), then z[q, h] = sum_k a[h, q, k] hidden[q, k] (the same code spreads it back over heads; W_O then
        supplies the second generated layer sum_h a[h] W_O[h]).
        `keep` (attention dropout) multiplies the pattern. The mlp network applies it to its two [q, k, d_head]
        products instead, which gives the same result with H / d_head times less work.
        """
        if self.cfg.value_net == "linear":
            return torch.einsum("bhqk,bkhd->bqhd", pattern if keep is None else pattern * keep, v)
        # With rms_head the codes are stored query-major, so the second einsum reads them without a copy; the
        # hidden units are made contiguous so the elementwise steps run on dense memory, forward and backward.
        hidden = torch.einsum("bhqk,bkhd->bqkd", pattern, v).contiguous()
        if keep is not None:
            keep = keep[..., None].expand(hidden.shape[1:]).contiguous()
            hidden = hidden * keep
        hidden = self.hook_value_hidden(self.act(hidden))
        if keep is not None:
            hidden = hidden * keep
        return torch.einsum("bhqk,bqkd->bqhd", pattern, hidden)

    def project_out(
        self, z: Float[Tensor, "batch pos head_index d_head"]
    ) -> Float[Tensor, "batch pos d_model"]:
        """sum_h z[h] W_O[h] + b_O."""
        return F.linear(z.flatten(-2), self.W_O.flatten(0, 1).T, self.b_O)


def set_fused_attention(model: nn.Module, on: bool = True) -> None:
    """Turn `MultiHeadAttention.fused_core` on or off in every attention layer of `model` (what the trainer does
    with `TrainConfig.fused_attention`)."""
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.fused_core = on
