"""The configuration of a run: `TrainConfig` (how to train, `train.py`) and `ModelConfig` (the network and its
attention variant, `VARIANTS`, `model.py`), each with the presets its task declares (`train_config`,
`model_config`); `fields.py` holds the field check both share when a dict is read back.

Each field carries a one-line docstring that doubles as CLI help. Task configs and each task's presets live with
their tasks (`latentcode/tasks/`); `TRAIN_PRESETS` and `MODEL_PRESETS` read them from the task registry (loaded on
first use, so importing this package loads no torch). Import these names from here.
"""

from __future__ import annotations

from typing import Any

from latentcode.config.model import (
    GELU_FORMS,
    SCORE_NORMS,
    VALUE_ACTS,
    VALUE_NETS,
    VARIANTS,
    ModelConfig,
    model_config,
)
from latentcode.config.train import LR_SCHEDULES, TrainConfig, train_config

__all__ = [
    "GELU_FORMS",
    "LR_SCHEDULES",
    "MODEL_PRESETS",
    "SCORE_NORMS",
    "TRAIN_PRESETS",
    "VALUE_ACTS",
    "VALUE_NETS",
    "VARIANTS",
    "ModelConfig",
    "TrainConfig",
    "model_config",
    "train_config",
]


def __getattr__(name: str) -> Any:
    """`TRAIN_PRESETS` and `MODEL_PRESETS`: task -> preset -> fields, live views of every registered task's
    `presets.train` / `presets.model` (`latentcode.tasks.registry.PresetTable`), built on first use."""
    if name in ("TRAIN_PRESETS", "MODEL_PRESETS"):
        from latentcode.tasks.registry import PresetTable

        table = PresetTable("train" if name == "TRAIN_PRESETS" else "model")
        globals()[name] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
