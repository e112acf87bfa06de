"""Evaluation of a model on a task's fixed held-out sets: the sets training evaluates on, their metrics, and the
batch behind the value-network live fraction. Shared by `train.py` (periodic evaluation), `latentcode eval` and
the ensemble trainer; no optimizer or training state here.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from latentcode.tasks.base import Batch, Task

EVAL_SPLITS = ("test", "ood")
"""Splits evaluated during training."""
EVAL_CHUNK = {"cpu": 128, "cuda": 1024}
"""Instances per forward pass during evaluation, by device type: a CPU is fastest with a pass that stays in its
caches (`bench/eval_chunk.py`); other devices take the `cuda` value."""
LIVE_SAMPLES = 1024
"""Held-out instances behind a run's value-network live fraction (`latentcode.training.diagnostics`)."""


def eval_seed(seed: int, split: str) -> int:
    """Seed of the fixed evaluation set of `split` for a training seed."""
    words = np.random.SeedSequence([seed, 0xE7A1, zlib.crc32(split.encode())]).generate_state(2, np.uint32)
    return (int(words[0]) << 31) ^ int(words[1])


def _autocast(device: torch.device, enabled: bool) -> Callable[[], contextlib.AbstractContextManager]:
    if enabled and device.type == "cuda":
        return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


def split_names(task: Task, splits: str | Sequence[str]) -> tuple[str, ...]:
    """`splits` as a tuple of split names (one name may come as a plain string), each checked against the task's.

    Raises:
        ValueError: no split, or a name the task does not have (the message lists the valid ones).

    >>> from latentcode.tasks import get_task
    >>> split_names(get_task("sraven"), "ood")
    ('ood',)
    >>> split_names(get_task("sraven"), ["test", "val"])
    Traceback (most recent call last):
    ...
    ValueError: unknown split 'val' for task 'sraven'; valid splits: train, test, ood
    """
    names = (splits,) if isinstance(splits, str) else tuple(splits)
    if not names:
        raise ValueError(f"splits is empty; pick some of {', '.join(task.splits)}")
    for split in names:
        if split not in task.splits:
            raise ValueError(f"unknown split {split!r} for task {task.name!r}; valid splits: {', '.join(task.splits)}")
    return names


def eval_sets(
    task: Task, n_samples: int, seed: int, device: torch.device, splits: str | Sequence[str] = EVAL_SPLITS
) -> dict[str, Batch]:
    """The fixed evaluation batch of each split (the same instances at every evaluation of a run); `splits` as in
    `split_names`."""
    return {
        split: task.sample(n_samples, split, seed=eval_seed(seed, split), device=device)
        for split in split_names(task, splits)
    }


def _chunk(device: torch.device) -> int:
    """Instances per evaluation forward pass on `device` (`EVAL_CHUNK`)."""
    return EVAL_CHUNK["cpu" if device.type == "cpu" else "cuda"]


@torch.no_grad()
def _evaluate(
    model: nn.Module, task: Task, sets: dict[str, Batch], *, autocast: bool = False
) -> dict[str, dict[str, float]]:
    """Loss and task metrics per split, in eval mode, forward passes of `EVAL_CHUNK` instances."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    chunk = _chunk(device)
    context = _autocast(device, autocast)
    results = {}
    try:
        for split, batch in sets.items():
            chunks = []
            for start in range(0, len(batch), chunk):
                with context():
                    chunks.append(model(batch.x[start : start + chunk]).float())
            outputs = torch.cat(chunks)
            metrics = {k: float(v) for k, v in task.metrics(outputs, batch).items()}
            if "loss" not in metrics:
                metrics["loss"] = float(task.loss(outputs, batch))
            results[split] = {"loss": metrics.pop("loss"), **metrics}
    finally:
        model.train(was_training)
    return results


def live_fraction_inputs(task: Task, seed: int, device: torch.device | str = "cpu") -> Tensor:
    """The fixed batch on which a run's value-network live fraction is measured: `LIVE_SAMPLES` held-out (`ood`)
    instances drawn with the evaluation seed of the training seed, so training and `latentcode eval` agree."""
    return task.sample(LIVE_SAMPLES, "ood", seed=eval_seed(seed, "ood"), device=device).x


def evaluate(
    model: nn.Module,
    task: Task,
    *,
    splits: str | Sequence[str] = EVAL_SPLITS,
    n_samples: int = 4096,
    seed: int = 0,
    autocast: bool = False,
) -> dict[str, dict[str, float]]:
    """Evaluate a model on fixed samples of the task's splits, with the sets training uses for the same seed.

    Args:
        model: the model (evaluated in eval mode, without gradients, on its own device).
        task: the task (with the splits the model was trained on).
        splits: split names, or one name (`splits="ood"`).
        n_samples: instances per split.
        seed: the training seed (`TrainConfig.seed`): the same sets as the run's evaluations.
        autocast: bf16 autocast on CUDA.

    Returns:
        {split: {"loss": ..., <task metrics>}}.

    Raises:
        ValueError: an unknown split name (the message lists the task's splits), or none.

    >>> from latentcode.model.transformer import build_model
    >>> from latentcode.tasks import get_task
    >>> task = get_task("fuzzy_logic")
    >>> model = build_model(task, "softmax", "tiny")
    >>> list(evaluate(model, task, splits="ood", n_samples=8))
    ['ood']
    """
    device = next(model.parameters()).device
    return _evaluate(model, task, eval_sets(task, n_samples, seed, device, splits), autocast=autocast)
