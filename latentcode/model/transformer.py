"""The transformer of the paper (spec §3.1), read top-down: `MLP`, `MixtureOfExperts`, `Block`, `Transformer`.

A linear embedding of raw token vectors, pre-LN blocks with T5 relative position bias, a final LayerNorm and a
linear readout; no absolute positions, no token embedding table, no weight tying. The attention variants live in
`attention.py`; training and losses live elsewhere.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from latentcode.config import ModelConfig, model_config
from latentcode.model.attention import EditableHookPoint, MultiHeadAttention, lecun_normal_


def _dense(d_in: int, d_out: int, bias: bool = True) -> nn.Linear:
    """nn.Linear with Flax's init: lecun-normal kernel, zero bias."""
    layer = nn.Linear(d_in, d_out, bias=bias)
    lecun_normal_(layer.weight, fan_in=d_in)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


class MLP(nn.Module):
    """Dense(d_mlp) -> GELU -> Dense(d_model).

    GELU is `cfg.act_fn`: 'gelu_new', the tanh approximation the reference uses (flax's default), or 'gelu', the
    exact erf form of models trained before 0.2 (they differ by at most 5e-4).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc_in = _dense(cfg.d_model, cfg.d_mlp)
        self.fc_out = _dense(cfg.d_mlp, cfg.d_model)
        self.approximate = "tanh" if cfg.act_fn == "gelu_new" else "none"

    def forward(self, x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch d_model"]:
        return self.fc_out(F.gelu(self.fc_in(x), approximate=self.approximate))


class MixtureOfExperts(nn.Module):
    """`n_experts` MLPs of the dense MLP's size. A bias-free linear router gives softmax probabilities over the
    experts; each token uses its `top_k` most probable experts, weighted by their probabilities renormalized to
    sum to one. No load-balancing loss (the paper does not describe one)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.top_k = cfg.top_k
        self.router = _dense(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(MLP(cfg) for _ in range(cfg.n_experts))
        # [batch, pos, n_experts], router probabilities; softmax saves its output, so an in-place edit in a hook
        # gets a copy (only while a hook is attached and gradients are recorded)
        self.hook_router = EditableHookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        tokens = x.reshape(-1, x.shape[-1])
        probs = self.hook_router(torch.softmax(self.router(x), dim=-1)).reshape(tokens.shape[0], -1)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.nonzero(chosen == e, as_tuple=True)
            if token_idx.numel():
                y = expert(tokens[token_idx]) * weights[token_idx, slot, None]
                out = out.index_add(0, token_idx, y)
        return out.view_as(x)


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm with `hook_normalized` on its output (used for the final norm)."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__(d_model, eps=eps)
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: Tensor) -> Tensor:
        return self.hook_normalized(super().forward(x))


class Block(nn.Module):
    """Pre-LN block: z = x + drop(attn(LN(x))); y = z + drop(ffn(LN(z))). With `keep_last`, only the last
    `keep_last` positions query and continue (see `Transformer.forward`)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.attn = MultiHeadAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.mlp = MixtureOfExperts(cfg) if cfg.n_experts else MLP(cfg)
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model], before dropout
        self.hook_resid_mid = HookPoint()  # [batch, pos, d_model]
        self.hook_mlp_out = HookPoint()  # [batch, pos, d_model], before dropout
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(
        self, x: Float[Tensor, "batch pos d_model"], keep_last: int | None = None
    ) -> Float[Tensor, "batch out_pos d_model"]:
        resid_pre = self.hook_resid_pre(x)
        attn_out = self.hook_attn_out(self.attn(self.ln1(resid_pre), keep_last))
        if keep_last is not None:
            resid_pre = resid_pre[:, -keep_last:]
        resid_mid = self.hook_resid_mid(resid_pre + self.drop(attn_out))
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
        return self.hook_resid_post(resid_mid + self.drop(mlp_out))


class Transformer(HookedRootModule):
    """Linear embedding -> blocks -> final LayerNorm -> linear readout, with TransformerLens hooks.

    `cfg` is the `ModelConfig` (TransformerLens code reads `cfg.n_layers`, `cfg.n_heads`, `cfg.d_model`,
    `cfg.d_head`). Initialisation follows Flax's defaults, as the reference: lecun-normal kernels, zero biases,
    LayerNorm 1 and 0, position tables normal with variance 1 / buckets.

    Hook names: `hook_embed`; per block i `blocks.{i}.hook_resid_pre|hook_attn_out|hook_resid_mid|hook_mlp_out|
    hook_resid_post` and `blocks.{i}.attn.hook_q|hook_k|hook_v|hook_attn_scores|hook_pattern|hook_z` (plus
    `hook_value_hidden` for mlp value networks, `blocks.{i}.mlp.hook_router` with experts); `ln_final.
    hook_normalized`. `hook_pattern` holds the latent codes (not row-stochastic unless score_norm is softmax).

    >>> cfg = ModelConfig(d_in=5, d_out=1, seq_len=16, n_layers=1, score_norm="rms_head", value_net="mlp")
    >>> model = Transformer(cfg)
    >>> out, cache = model.run_with_cache(torch.randn(2, 16, 5), names_filter=lambda n: n.endswith("pattern"))
    >>> out.shape, cache["pattern", 0].shape
    (torch.Size([2, 16, 1]), torch.Size([2, 8, 16, 16]))
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = _dense(cfg.d_in, cfg.d_model)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.unembed = _dense(cfg.d_model, cfg.d_out)
        self.setup()

    @property
    def device(self) -> torch.device:
        """Where the parameters live."""
        return next(self.parameters()).device

    def forward(
        self, x: Float[Tensor, "batch pos d_in"], keep_last: int | None = None
    ) -> Float[Tensor, "batch out_pos d_out"]:
        """Outputs at every position, or with `keep_last` at the last `keep_last` positions only.

        `keep_last` gives the same values there for less work: the last block lets only those positions query,
        and its MLP, the final norm and the readout see only them. Losses that read the last positions only
        (fuzzy logic: 1, SRAVEN: 4) can train with it; the last block's hooks then cover those positions.
        """
        if keep_last is not None and not 1 <= keep_last <= x.shape[1]:
            raise ValueError(f"keep_last={keep_last} must lie in [1, pos={x.shape[1]}] or be None")
        resid = self.drop(self.hook_embed(self.embed(x)))
        for i, block in enumerate(self.blocks):
            resid = block(resid, keep_last if i == len(self.blocks) - 1 else None)
        return self.unembed(self.ln_final(resid))

    def run_with_cache(self, *model_args: Any, **kwargs: Any) -> tuple[Tensor, ActivationCache]:  # type: ignore[override]
        """`HookedRootModule.run_with_cache`, returning an `ActivationCache` (so `cache["pattern", 0]` works).

        Takes the same keyword arguments (`names_filter`, `device`, `remove_batch_dim`, ...).
        """
        out, cache = super().run_with_cache(*model_args, **kwargs)
        return out, ActivationCache(cache, self, has_batch_dim=not kwargs.get("remove_batch_dim", False))


def build_model(task: Any, variant: str, preset: str = "paper", **overrides: Any) -> Transformer:
    """A freshly initialised Transformer for a task, variant and preset. Seed with `torch.manual_seed` first.

    Args:
        task: a task name or task instance (see `model_config`).
        variant: a key of `VARIANTS` (softmax, linear, hyla, the ablations, single_head, ...+moe).
        preset: 'tiny', 'small' or 'paper'.
        **overrides: ModelConfig fields, and `width` for SRAVEN.

    Returns:
        The model, in training mode (call `.eval()` to turn attention dropout off).

    Raises:
        ValueError: an unknown name or an invalid configuration (the message lists the valid choices).

    >>> model = build_model("sraven", "hyla", "paper")
    >>> sum(p.numel() for p in model.parameters())
    402824
    """
    return Transformer(model_config(task, variant, preset, **overrides))
