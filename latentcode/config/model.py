"""The network: `ModelConfig`, one dataclass for every attention variant (spec §1.4–1.5, §3.1–3.2), the named
`VARIANTS` of its (score_norm, value_net) grid, and its presets (`model_config`, with SRAVEN's `width`).

Each field carries a one-line docstring that doubles as CLI help. `__post_init__` validates and never has side
effects. The presets live with their tasks and are read from the task registry on first use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from latentcode.config.fields import check_fields

GELU_FORMS = ("gelu_new", "gelu")
SCORE_NORMS = ("softmax", "none", "rms_head")
VALUE_NETS = ("linear", "mlp")
VALUE_ACTS = ("relu", "gelu", "silu", "sigmoid", "tanh", "identity")


@dataclass(kw_only=True, frozen=True)
class ModelConfig:
    """The transformer's shape and its attention variant. Defaults follow the reference code (spec §3.1).

    An attention variant is the pair (`score_norm`, `value_net`): see `VARIANTS` for the named points of that
    grid. `model_config(task, variant, preset)` builds a config from a task, a variant name and a preset.

    >>> cfg = ModelConfig(d_in=8, d_out=8, seq_len=36, d_model=128, n_heads=16, d_qk=64, d_v=64, n_layers=4)
    >>> cfg.d_head, cfg.pos_buckets
    (4, 36)
    """

    d_in: int
    """Size of each input token vector (fuzzy logic: n_variables + 1; SRAVEN: 8)."""
    d_out: int
    """Outputs per position (fuzzy logic: 1; SRAVEN: 8 logits)."""
    seq_len: int
    """Tokens per instance; also the default for `pos_buckets` and `pos_max_distance`."""
    d_model: int = 128
    """Width D of the residual stream."""
    n_heads: int = 8
    """Attention heads H, i.e. the dimension of each latent code."""
    d_qk: int = 16
    """Query/key width summed over heads (head dim = d_qk / n_heads)."""
    d_v: int = 16
    """Value width summed over heads (head dim = d_v / n_heads; HYLA's hidden width per (q, k) pair)."""
    d_mlp: int = 256
    """Hidden width of the GELU feed-forward network (of each expert, with a mixture of experts)."""
    act_fn: Literal["gelu_new", "gelu"] = "gelu_new"
    """The feed-forward GELU, named as TransformerLens names it: 'gelu_new' is the tanh approximation (flax's
    default, so the reference's), 'gelu' the exact erf form. Configs written before 0.2 lack the field and load
    with 'gelu', the form they were trained with."""
    n_layers: int = 2
    """Number of transformer blocks."""
    score_norm: Literal["softmax", "none", "rms_head"] = "softmax"
    """How scores become the latent code: softmax over keys, none (linear attention), or rms_head (RMS
    normalization across heads, no gain)."""
    value_net: Literal["linear", "mlp"] = "linear"
    """The value network the code generates: linear (standard attention) or mlp (HYLA, `value_act` between
    its two generated layers)."""
    value_act: Literal["relu", "gelu", "silu", "sigmoid", "tanh", "identity"] = "relu"
    """Nonlinearity inside the mlp value network (ignored by linear value networks)."""
    dropout: float = 0.0
    """Dropout on the embedding and on each sublayer output before it joins the residual stream."""
    attn_dropout: float = 0.0
    """Dropout on the normalized scores in training, one [query, key] mask shared by the batch and the heads
    (as the reference; its configs use 0.1)."""
    pos_bias: bool = True
    """Add a T5 relative position bias (one table per layer) to the scores before normalization."""
    pos_buckets: int | None = None
    """Relative-position buckets of the T5 bias (None: seq_len, as the reference)."""
    pos_max_distance: int | None = None
    """Distance from which all relative positions share the last bucket (None: seq_len)."""
    pos_bidirectional: bool = False
    """Separate buckets for keys after the query. False is the reference: every key at or after the query
    shares bucket 0."""
    ln_eps: float = 1e-6
    """LayerNorm epsilon (Flax default)."""
    rms_eps: float = 1e-6
    """Epsilon of the rms_head normalization (Flax RMSNorm default)."""
    causal: bool = False
    """Mask keys after the query (off for both synthetic tasks)."""
    n_experts: int = 0
    """0: a dense GELU MLP. > 0: a mixture of this many GELU experts (each of size d_mlp) with a softmax router."""
    top_k: int = 2
    """Experts each token uses when n_experts > 0."""
    variant: str = "custom"
    """Name of the variant these fields came from (informational; the fields above decide behaviour)."""

    def __post_init__(self) -> None:
        if self.pos_buckets is None:
            object.__setattr__(self, "pos_buckets", self.seq_len)
        if self.pos_max_distance is None:
            object.__setattr__(self, "pos_max_distance", self.seq_len)
        positive = ("d_in", "d_out", "seq_len", "d_model", "n_heads", "d_qk", "d_v", "d_mlp", "n_layers")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        for name in ("d_qk", "d_v"):
            if getattr(self, name) % self.n_heads:
                fits = [h for h in range(1, getattr(self, name) + 1) if getattr(self, name) % h == 0]
                raise ValueError(
                    f"{name}={getattr(self, name)} is not divisible by n_heads={self.n_heads}; "
                    f"{name} is the total over heads, so pick n_heads in {fits} or a multiple of n_heads"
                )
        choices = {"score_norm": SCORE_NORMS, "value_net": VALUE_NETS, "value_act": VALUE_ACTS, "act_fn": GELU_FORMS}
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {', '.join(valid)}")
        for name in ("dropout", "attn_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name}={getattr(self, name)} must lie in [0, 1)")
        for name in ("ln_eps", "rms_eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be positive")
        min_buckets = 4 if self.pos_bidirectional else 2
        if self.pos_buckets < min_buckets:
            raise ValueError(f"pos_buckets={self.pos_buckets} must be >= {min_buckets} for the T5 bucketing")
        if self.pos_max_distance < self.pos_buckets:
            raise ValueError(
                f"pos_max_distance={self.pos_max_distance} must be >= pos_buckets={self.pos_buckets}; "
                "raise it or lower pos_buckets"
            )
        if self.n_experts < 0:
            raise ValueError(f"n_experts={self.n_experts} must be 0 (dense MLP) or a positive number of experts")
        if self.n_experts > 0 and not 1 <= self.top_k <= self.n_experts:
            raise ValueError(f"top_k={self.top_k} must lie in [1, n_experts={self.n_experts}]")
        if self.variant != "custom" and self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; valid variants: custom, {', '.join(VARIANTS)}")

    @property
    def d_head(self) -> int:
        """Value width per head (TransformerLens' `d_head`)."""
        return self.d_v // self.n_heads

    @property
    def d_head_qk(self) -> int:
        """Query/key width per head."""
        return self.d_qk // self.n_heads

    # TransformerLens' config names, so its utilities (ActivationCache.decompose_resid, accumulated_resid,
    # stack_head_results) read this config as they read a HookedTransformerConfig. See docs/models.md.
    @property
    def n_ctx(self) -> int:
        """Tokens per instance (TransformerLens' `n_ctx`; the same as `seq_len`)."""
        return self.seq_len

    @property
    def attn_only(self) -> bool:
        """Every block has a feed-forward sublayer (TransformerLens' `attn_only`)."""
        return False

    @property
    def normalization_type(self) -> str:
        """Pre-LN blocks with LayerNorm weights and biases, unfolded (TransformerLens' `normalization_type`)."""
        return "LN"

    @property
    def positional_embedding_type(self) -> str:
        """No absolute positions: a T5 relative bias on the scores (or none, `pos_bias=False`). TransformerLens
        has no name for the T5 bias; its code tests this field only for its own types, which this matches none of."""
        return "relative_bias" if self.pos_bias else "none"

    @property
    def d_vocab(self) -> int:
        """Width of each input token vector (inputs are real vectors, not token ids: there is no embedding table)."""
        return self.d_in

    @property
    def d_vocab_out(self) -> int:
        """Outputs per position (TransformerLens' `d_vocab_out`)."""
        return self.d_out

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """The config a `to_dict` wrote; a dict without `act_fn` (written before 0.2) gets 'gelu', the exact form
        that model was trained with."""
        check_fields(cls, data, "ModelConfig")
        return cls(**{"act_fn": "gelu", **data})


VARIANTS: dict[str, dict[str, Any]] = {
    "softmax": dict(score_norm="softmax", value_net="linear"),
    "linear": dict(score_norm="none", value_net="linear"),
    "hyla": dict(score_norm="rms_head", value_net="mlp", value_act="relu"),
    "linear_rmshead": dict(score_norm="rms_head", value_net="linear"),
    "hyla_no_rmshead": dict(score_norm="none", value_net="mlp", value_act="relu"),
    "hyla_linear": dict(score_norm="rms_head", value_net="mlp", value_act="identity"),
    "hyla_linear_no_rmshead": dict(score_norm="none", value_net="mlp", value_act="identity"),
    "softmax_hyla": dict(score_norm="softmax", value_net="mlp", value_act="relu"),
    # HYLA with one head (Fig. 5C). d_qk and d_v stay totals, so the single head is as wide as all heads were
    # and the parameter count is unchanged; rms_head maps each score to about sign(score).
    "single_head": dict(score_norm="rms_head", value_net="mlp", value_act="relu", n_heads=1),
    # Mixture-of-experts feed-forward controls (Table A1): 5 experts of the original MLP size, top-2 routing.
    "softmax+moe": dict(score_norm="softmax", value_net="linear", n_experts=5, top_k=2),
    "linear+moe": dict(score_norm="none", value_net="linear", n_experts=5, top_k=2),
    "hyla+moe": dict(score_norm="rms_head", value_net="mlp", value_act="relu", n_experts=5, top_k=2),
}
"""Named points of the (score_norm, value_net) grid (spec §1.5 and §8.3); each maps to ModelConfig fields."""

# `width` (a task whose `presets.width` is set: SRAVEN) multiplies these preset entries (spec §3.2), so the head
# dims stay fixed while the latent code grows
_WIDTH_FIELDS = ("d_model", "n_heads", "d_qk", "d_v", "d_mlp")


def model_config(task: Any, variant: str, preset: str = "paper", **overrides: Any) -> ModelConfig:
    """The model for a task, variant and preset, with field overrides.

    Args:
        task: a task name (built with `get_task(name)` for its dims unless `d_in`, `d_out` and `seq_len` are
            all overridden) or a task instance (its `name`, `d_in`, `d_out`, `seq_len` are read).
        variant: a key of `VARIANTS`.
        preset: 'tiny' (tests), 'small' (CPU demo) or 'paper' (spec §3.2).
        **overrides: any ModelConfig field, and `width` (SRAVEN only: multiplies d_model, n_heads, d_qk, d_v and
            d_mlp of the preset, as the reference's width_multiplier).

    Returns:
        The validated ModelConfig.

    Raises:
        ValueError: unknown task, variant, preset or override name (the message lists the valid ones), or an
            invalid resulting config.

    >>> cfg = model_config("sraven", "hyla", "paper", width=2)
    >>> cfg.d_model, cfg.n_heads, cfg.d_head, cfg.seq_len, cfg.score_norm, cfg.value_net
    (256, 32, 4, 36, 'rms_head', 'mlp')
    """
    from latentcode.tasks.registry import TASKS  # loads the task modules (and torch) on first use
    from latentcode.tasks.registry import task_presets as presets_of

    name = task if isinstance(task, str) else getattr(task, "name", None)
    task_presets = presets_of(task, "model")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid variants: {', '.join(VARIANTS)}")
    presets = task_presets.model
    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r}; valid presets: {', '.join(presets)}")
    overrides = dict(overrides)
    width = overrides.pop("width", None)
    valid = {f.name for f in dataclasses.fields(ModelConfig)} | {"width"}
    unknown = sorted(set(overrides) - valid)
    if unknown:
        raise ValueError(f"unknown model override(s) {unknown}; valid names: {', '.join(sorted(valid))}")
    data: dict[str, Any] = dict(presets[preset])
    if width is not None:
        if not task_presets.width:
            widths = ", ".join(sorted(n for n in TASKS if presets_of(n).width))
            raise ValueError(f"width applies to {widths} only, not {name!r}; set d_model etc.")
        if not isinstance(width, int) or isinstance(width, bool) or width <= 0:
            raise ValueError(f"width={width!r} must be a positive integer")
        data.update({key: data[key] * width for key in _WIDTH_FIELDS})
    data.update(VARIANTS[variant])
    data["variant"] = variant
    if not {"d_in", "d_out", "seq_len"} <= set(overrides):
        if isinstance(task, str):
            from latentcode.tasks import get_task  # registers the tasks on import

            task = get_task(task)
        data.update(d_in=task.d_in, d_out=task.d_out, seq_len=task.seq_len)
    data.update(overrides)
    return ModelConfig(**data)
