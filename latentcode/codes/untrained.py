"""The untrained model's latent codes: the baseline of Kantamneni et al. (ICML 2025) that a probe on trained codes
must beat. The model is built from a run's model config and seeded exactly as training seeds it
(`torch.manual_seed(seed)` then `Transformer(config)`, `latentcode.training.train`), so its weights are the run's
initial weights; nothing is loaded. Its codes are read by `extract_latent_codes`, with the same arguments as the
trained codes they are compared with. Probing them is `probes.baselines`'.
"""

from __future__ import annotations

from typing import Any

import torch

from latentcode.codes.extract import LatentCodes, extract_latent_codes
from latentcode.config import ModelConfig
from latentcode.model.transformer import Transformer

__all__ = ["untrained_codes", "untrained_model"]


def untrained_model(config: ModelConfig, seed: int) -> Transformer:
    """The model of `config` at the initial weights a run of seed `seed` starts from, in eval mode.

    The global torch RNG is left as it was.

    Raises:
        ValueError: a seed that is not an integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed={seed!r} must be an integer (the run's TrainConfig.seed)")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(config)
    return model.eval()


def untrained_codes(config: ModelConfig, task: Any, model_seed: int, **extract: Any) -> LatentCodes:
    """Latent codes of the untrained model (`untrained_model(config, model_seed)`) on `task`.

    Args:
        config: the run's model config (`Run.config.model`).
        task: the run's task, with its splits (`Run.task`).
        model_seed: the run's training seed (`Run.config.train.seed`): it fixes the initial weights.
        **extract: `extract_latent_codes`' arguments (splits, n_samples, positions, seed of the batches, ...);
            pass the trained codes' own to read the same instances.

    Returns:
        `LatentCodes`, with `meta["checkpoint"]` = "untrained-seed<model_seed>".

    Example:
        >>> from latentcode.config import model_config
        >>> from latentcode.tasks import get_task
        >>> task = get_task("fuzzy_logic")
        >>> codes = untrained_codes(model_config(task, "softmax", "tiny"), task, 0, n_samples=8, splits=("train",))
        >>> codes.meta["checkpoint"], codes.n_samples
        ('untrained-seed0', 8)
    """
    model = untrained_model(config, model_seed)
    return extract_latent_codes(model, task, checkpoint=f"untrained-seed{model_seed}", **extract)
