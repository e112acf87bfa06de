"""Shared test builders: tiny model configs, task dims and the list of every named variant.

Test files import it as `from tests.helpers import ...` (tests/ and its folders are packages).
"""

from __future__ import annotations

from typing import Any

import torch

from latentcode.config import VARIANTS, ModelConfig
from latentcode.model.transformer import Transformer

TASK_DIMS: dict[str, dict[str, int]] = {
    "fuzzy_logic": dict(d_in=5, d_out=1, seq_len=16),
    "sraven": dict(d_in=8, d_out=8, seq_len=36),
}
"""Default dims of each task, so model tests run without building a task."""

ALL_VARIANTS: list[str] = list(VARIANTS)
NON_MOE_VARIANTS: list[str] = [name for name in VARIANTS if not VARIANTS[name].get("n_experts")]
MLP_VARIANTS: list[str] = [name for name in VARIANTS if VARIANTS[name]["value_net"] == "mlp"]


def tiny_model_config(**overrides: Any) -> ModelConfig:
    """A very small model (1 s to build and run many times): 2 layers, 4 heads of dim 2, short sequences."""
    fields: dict[str, Any] = dict(
        d_in=5,
        d_out=3,
        seq_len=6,
        d_model=16,
        n_heads=4,
        d_qk=8,
        d_v=8,
        d_mlp=32,
        n_layers=2,
        variant="custom",
    )
    fields.update(overrides)
    return ModelConfig(**fields)


def tiny_model(variant: str = "hyla", seed: int = 0, **overrides: Any) -> Transformer:
    """A seeded tiny `Transformer` of a named variant, in eval mode."""
    torch.manual_seed(seed)
    return Transformer(tiny_model_config(**{**VARIANTS[variant], "variant": variant, **overrides})).eval()
