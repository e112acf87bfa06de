"""What a training run writes, in one place: train lines, evaluations (with the value-network live fraction and the
snapshots), and resumable checkpoints.

A single run (`train.py`) and every member of an ensemble (`ensemble.py`) write through a `RunRecorder`, so their
metrics lines and checkpoints cannot drift apart. The recorder does not know the disk layout either: it saves
through a `RunStore`, which `RunDirectory` implements for the run-directory format (its paths: `RunFiles`). A trainer
that wants other storage passes its own store.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from latentcode.config import TrainConfig
from latentcode.rundir.checkpoint import append_metrics
from latentcode.rundir.files import RunFiles
from latentcode.rundir.weights import save_snapshot
from latentcode.tasks.base import Batch, Task
from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction, value_live_fraction
from latentcode.training.evaluate import EVAL_SPLITS, _evaluate, live_fraction_inputs
from latentcode.training.train_state import TrainState, capture_rng, save_checkpoint

logger = logging.getLogger(__name__)


class NonFiniteLossError(ValueError):
    """The training loss became NaN or infinite; `step` is the first step where it did."""

    def __init__(self, message: str, *, step: int) -> None:
        super().__init__(message)
        self.step = step


@runtime_checkable
class RunStore(Protocol):
    """Where a training run's records go (what the trainer needs of a run directory)."""

    def append_metrics(self, records: list[dict[str, Any]]) -> None:
        """Append lines to the run's metrics."""

    def save_checkpoint(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: TrainState) -> str:
        """Write a resumable checkpoint; return the hash of the saved weights."""

    def save_snapshot(self, model: nn.Module, step: int) -> None:
        """Keep the weights of `step` (`TrainConfig.snapshots`)."""


@dataclass(frozen=True)
class RunDirectory:
    """`RunStore` over a run directory (config.json, metrics.jsonl, model.safetensors, train_state.*, snapshots/)."""

    path: Path

    @property
    def files(self) -> RunFiles:
        """Where each file of the run directory lives."""
        return RunFiles(self.path)

    def append_metrics(self, records: list[dict[str, Any]]) -> None:
        append_metrics(self.path, records)

    def save_checkpoint(self, model: nn.Module, optimizer: torch.optim.Optimizer, state: TrainState) -> str:
        return save_checkpoint(self.path, model, optimizer, state)

    def save_snapshot(self, model: nn.Module, step: int) -> None:
        save_snapshot(model, self.path, step=step)


@dataclass
class RunRecorder:
    """The records of one run: losses waiting for their train line, lines written, elapsed time, checkpoints.

    `writes=False` (the non-main processes of a DDP job) keeps the same counts without writing or evaluating.
    """

    store: RunStore
    cfg: TrainConfig
    task: Task
    writes: bool = True
    metrics_lines: int = 0
    """Lines of metrics written so far (a checkpoint records it; a resume truncates the file to it)."""
    pending: list[float] = field(default_factory=list)
    """Synced training losses not yet in a train line."""
    elapsed_before: float = 0.0
    """Training seconds of earlier sessions of this run."""
    last_checkpoint: int = 0
    checkpoint_hash: str = ""
    who: str = ""
    """How error messages name this run ("" for a single run, "member 2 (runs/x): " in an ensemble)."""
    session_start: float = field(default_factory=time.perf_counter)
    last_live: list[float | None] | None = None

    @classmethod
    def resumed(cls, store: RunStore, cfg: TrainConfig, task: Task, state: TrainState | None, **kwargs: Any
                ) -> RunRecorder:
        """A recorder continuing from a checkpoint's state (or a fresh one for None)."""
        if state is None:
            return cls(store, cfg, task, **kwargs)
        return cls(store, cfg, task, metrics_lines=state.metrics_lines, pending=list(state.pending_losses),
                   elapsed_before=state.elapsed_s, last_checkpoint=state.step, checkpoint_hash=state.model_hash,
                   **kwargs)

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.session_start

    def add_losses(self, values: list[float], last_step: int, *, kept: str | None = None) -> None:
        """Queue the synced losses of the steps up to `last_step`, and stop on the first non-finite one.

        Raises:
            NonFiniteLossError: naming the step and the checkpoint that is kept (`kept` overrides that text).
        """
        self.pending.extend(values)
        first = last_step - len(self.pending) + 1
        for offset, value in enumerate(self.pending):
            if not math.isfinite(value):
                if kept is None:
                    kept = (f"the last good checkpoint (step {self.last_checkpoint}) is kept"
                            + (f" in {getattr(self.store, 'path', '')}" if hasattr(self.store, "path") else "")
                            if self.last_checkpoint else "no checkpoint had been written yet")
                raise NonFiniteLossError(
                    f"{self.who}training loss is {value} at step {first + offset}; training stopped and {kept}. "
                    "Lower the learning rate (--train.lr) or clip gradients (--train.grad_clip)",
                    step=first + offset,
                )

    def log(self, step: int, lr: float, samples_per_s: float, extra: dict[str, float] | None = None
            ) -> dict[str, Any]:
        """Write one train line: the mean loss since the previous line, lr, throughput and time."""
        record: dict[str, Any] = {
            "step": step,
            "split": "train",
            "loss": math.fsum(self.pending) / len(self.pending),
            "lr": lr,
            "samples_per_s": samples_per_s,
            "elapsed_s": self.elapsed(),
            **(extra or {}),
        }
        if self.writes:
            self.store.append_metrics([record])
        self.metrics_lines += 1
        self.pending = []
        return record

    def evaluate(self, step: int, model: nn.Module, sets: dict[str, Batch]) -> dict[str, dict[str, float]]:
        """Evaluate on the fixed held-out sets, with the live fraction on `ood`; write the lines, and the
        snapshot with `cfg.snapshots`. Returns split -> metrics ({} when this process does not write)."""
        if not self.writes:
            self.metrics_lines += len(EVAL_SPLITS)
            return {}
        results = _evaluate(model, self.task, sets, autocast=self.cfg.autocast)
        records = [{"step": step, "split": split, **m} for split, m in results.items()]
        if "ood" in sets:
            live = value_live_fraction(model, live_fraction_inputs(self.task, self.cfg.seed, sets["ood"].x.device))
            records[list(results).index("ood")][LIVE_KEY] = live
            self.last_live = live
            if any(f is not None for f in live):
                logger.info("%sstep %d value network live fraction: %s", self.who, step, format_live_fraction(live))
        self.store.append_metrics(records)
        self.metrics_lines += len(records)
        if self.cfg.snapshots:
            self.store.save_snapshot(model, step)
        return results

    def checkpoint(self, step: int, model: nn.Module, optimizer: torch.optim.Optimizer, *, world_size: int = 1,
                   rng: dict[str, Any] | None = None) -> None:
        """Write a resumable checkpoint of `step` (the pending losses go with it)."""
        if self.writes:
            state = TrainState(step=step, finished=step == self.cfg.steps, metrics_lines=self.metrics_lines,
                               pending_losses=list(self.pending), elapsed_s=self.elapsed(), world_size=world_size,
                               rng=capture_rng() if rng is None else rng)
            self.checkpoint_hash = self.store.save_checkpoint(model, optimizer, state)
        self.last_checkpoint = step
