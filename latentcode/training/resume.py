"""Starting, resuming and stopping a run: what a run directory must hold before training starts in it
(`prepare_run_dir`), the settings a resumed run keeps from its config.json (`kept_on_resume`), and clean stops
between two steps (`deadline` for a time limit, `DeferredInterrupt` for Ctrl-C and SIGTERM).

Shared by `train()` and `train_ensemble()`; the loops themselves are in `train.py` and `ensemble.py`.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from latentcode.constants import CONFIG_FILE
from latentcode.rundir.checkpoint import RunConfig
from latentcode.rundir.directory import check_force_target, is_run_dir
from latentcode.training.train_state import TrainState, read_train_state

logger = logging.getLogger(__name__)

RESUME_IGNORES = ("device", "compile", "cuda_graph", "snapshots", "checkpoint_every")
"""TrainConfig fields that may change when a run is resumed (they do not change the numbers on CPU, or change
them by float32 rounding only: `cuda_graph`)."""
RESUME_KEEPS = ("autocast", "lr_schedule", "fused_attention")
"""TrainConfig fields a resumed run keeps from its config.json whatever the request says: they change the numbers,
so a run keeps them from start to end (runs started before fp32 became the default resume in bf16, runs started
before 0.2 with the 'v0.1' learning-rate schedule, runs started before the fused HYLA kernel with the plain
attention path)."""
RESUME_KEEPS_QUIETLY = ("fused_attention",)
"""Kept fields that are logged at INFO, not WARNING: keeping them changes the rounding and the speed, not the model."""
RESUME_KEEPS_MODEL = ("act_fn",)
"""ModelConfig fields a resumed run keeps from its config.json (runs started before 0.2 keep the exact GELU)."""


class DeferredInterrupt:
    """Turns the first Ctrl-C (SIGINT) or SIGTERM into a flag read between steps, so the checkpoint written
    on the way out never holds a half-applied update; a second signal acts at once. Off under torchrun, whose
    agent stops every worker itself (a worker waiting for a dead peer would never reach the flag)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.triggered = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> DeferredInterrupt:
        if self.enabled and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(sig)
                self._previous[sig] = signal.default_int_handler if previous is None else previous
                signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.triggered = True
        signal.signal(signum, self._previous[signum])

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def kept_on_resume(out: Path, run_cfg: RunConfig) -> RunConfig:
    """`run_cfg` with the `RESUME_KEEPS` and `RESUME_KEEPS_MODEL` fields of the run in `out` (which must hold a
    config.json)."""
    saved = RunConfig.load(out)
    changes = {}
    for section, names in (("train", RESUME_KEEPS), ("model", RESUME_KEEPS_MODEL)):
        mine, theirs = getattr(saved, section), getattr(run_cfg, section)
        kept = {name: getattr(mine, name) for name in names if getattr(mine, name) != getattr(theirs, name)}
        if kept:
            # a kept fused_attention changes only the rounding (and the speed), so it is not worth a warning
            level = logging.INFO if set(kept) <= set(RESUME_KEEPS_QUIETLY) else logging.WARNING
            logger.log(level, "resuming %s with %s, as it was started (its %s): a run keeps these settings to the "
                       "end", out, ", ".join(f"{section}.{k}={v}" for k, v in kept.items()), CONFIG_FILE)
            changes[section] = dataclasses.replace(theirs, **kept)
    return dataclasses.replace(run_cfg, **changes) if changes else run_cfg


def deadline_after(time_limit: float | None) -> float | None:
    """`time.monotonic()` value at which a `time_limit` (seconds from now) runs out; None for no limit."""
    if time_limit is None:
        return None
    if not time_limit >= 0:
        raise ValueError(f"time_limit={time_limit} must be a number of seconds >= 0 (or None for no limit)")
    return time.monotonic() + time_limit


def prepare_run_dir(out: Path, run_cfg: RunConfig, *, resume: bool, force: bool) -> TrainState | None:
    """Decide what `out` holds: None for a fresh start, the last checkpoint's state for a resume.

    Read-only, so every process of a job can call it; the caller's rank 0 makes the changes.
    """
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a directory")
    has_config = is_run_dir(out)
    if force:
        check_force_target(out)
        return None
    if has_config and resume:
        saved = RunConfig.load(out)
        diffs = saved.differences(run_cfg, ignore_train=RESUME_IGNORES + RESUME_KEEPS,
                                  ignore_model=RESUME_KEEPS_MODEL)
        if diffs:
            raise ValueError(
                f"cannot resume {out}: its {CONFIG_FILE} differs from the requested run ({'; '.join(diffs)}); "
                "request the same settings, choose another --out, or pass --force to start over"
            )
        return read_train_state(out)
    if has_config:
        state = read_train_state(out)
        where = "no checkpoint yet" if state is None else f"checkpoint at step {state.step}"
        where += ", finished" if state is not None and state.finished else ""
        raise ValueError(
            f"--out {out} already holds a run ({where}); pass --resume to continue it, --force to overwrite it, "
            "or choose another --out"
        )
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(f"--out {out} is not empty and holds no latentcode run; choose another --out or --force")
    if resume:
        logger.info("nothing to resume in %s; starting a new run", out)
    return None
