"""The training loop: online batches, AdamW with warm-up + cosine decay, periodic evaluation, resumable runs.

`train()` knows nothing about attention: it needs a `ModelConfig`, a task (batches, loss, metrics) and a
`TrainConfig`, and one step returns a `StepOutput`. It runs in one process, or under `torchrun` as DDP (one
model, the global batch split across processes). Evaluation lives in `evaluate.py`, the run-directory format in
`checkpoint.py`, the command line in `cli.py`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from latentcode import distributed
from latentcode._allocator import keep_freed_memory
from latentcode.checkpoint import (
    Run,
    RunConfig,
    TrainState,
    check_force_target,
    file_hash,
    is_run_dir,
    load_checkpoint,
    read_metrics,
    read_train_state,
    remove_run_files,
    remove_stale_temp_files,
    restore_rng,
    truncate_metrics,
)
from latentcode.config import ModelConfig, TrainConfig
from latentcode.constants import CONFIG_FILE, MODEL_FILE
from latentcode.distributed import DistInfo
from latentcode.evaluate import (  # noqa: F401 (evaluation moved to evaluate.py; importable here as before)
    EVAL_CHUNK,
    EVAL_SPLITS,
    LIVE_SAMPLES,
    _autocast,
    _evaluate,
    eval_seed,
    eval_sets,
    evaluate,
    live_fraction_inputs,
)
from latentcode.model import Transformer
from latentcode.record import NonFiniteLossError, RunDirectory, RunRecorder  # noqa: F401 (NonFiniteLossError: raised by train())
from latentcode.tasks.base import Batch, Task

logger = logging.getLogger(__name__)

_RESUME_IGNORES = ("device", "compile", "snapshots", "checkpoint_every")
"""TrainConfig fields that may change when a run is resumed (they do not change the numbers on CPU)."""
_RESUME_KEEPS = ("autocast", "lr_schedule")
"""TrainConfig fields a resumed run keeps from its config.json whatever the request says: they change the numbers,
so a run keeps them from start to end (runs started before fp32 became the default resume in bf16, runs started
before 0.2 with the 'v0.1' learning-rate schedule)."""
_RESUME_KEEPS_MODEL = ("act_fn",)
"""ModelConfig fields a resumed run keeps from its config.json (runs started before 0.2 keep the exact GELU)."""


@dataclass(frozen=True)
class StepOutput:
    """What one optimizer step returns; values stay on the training device (reading them syncs)."""

    loss: Tensor
    """Scalar training loss of the step's batch (on this process), detached."""
    metrics: dict[str, Tensor] = field(default_factory=dict)
    """Extra scalars, e.g. `grad_norm` when gradient clipping is on."""


# ------------------------------------------------------------------------------------------ building blocks
def resolve_device(device: str = "auto", *, local_rank: int = 0) -> torch.device:
    """The torch device for a `TrainConfig.device` string: 'auto' picks cuda, then mps, then cpu.

    Raises:
        ValueError: an unknown device string, or a device this machine lacks.
    """
    if device == "auto":
        if torch.cuda.is_available():
            device = "cuda"
        elif torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise ValueError(f"unknown device {device!r}; use auto, cpu, cuda, cuda:N or mps") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available here; use auto or cpu")
        if dev.index is None:
            dev = torch.device("cuda", local_rank)
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r} requested but MPS is not available here; use auto or cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {device!r} is not supported; use auto, cpu, cuda, cuda:N or mps")
    return dev


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of the update that completes step `step` (1-based), per `cfg.lr_schedule`.

    'optax' (the default) is the reference's `optax.warmup_cosine_decay_schedule(0, lr, warmup, steps - warmup,
    min_lr_ratio * lr)` evaluated at the optimizer count k = step - 1: a linear warm-up whose first update has lr
    0, a cosine over the next steps - 2 * warmup updates (optax counts its decay steps from 0, warm-up included),
    then the floor for the last `warmup` updates. 'v0.1' is latentcode 0.1's: one update ahead (lr reaches `lr`
    at step `warmup`) and the cosine reaching the floor exactly at the last step.

    >>> cfg = TrainConfig(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1)
    >>> lr_at(1, cfg), lr_at(11, cfg), lr_at(51, cfg), lr_at(91, cfg), lr_at(100, cfg)
    (0.0, 1.0, 0.55, 0.1, 0.1)
    >>> old = TrainConfig(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1, lr_schedule="v0.1")
    >>> lr_at(5, old), lr_at(10, old), lr_at(55, old), lr_at(100, old)
    (0.5, 1.0, 0.55, 0.1)
    """
    if not 1 <= step <= cfg.steps:
        raise ValueError(f"step={step} must lie in [1, steps={cfg.steps}]")
    floor = cfg.lr * cfg.min_lr_ratio
    if cfg.lr_schedule == "optax":
        k = step - 1
        if k < cfg.warmup:
            return cfg.lr * k / cfg.warmup
        span = cfg.steps - 2 * cfg.warmup
        progress = min((k - cfg.warmup) / span, 1.0) if span > 0 else 1.0  # a run this short holds the floor
    elif step <= cfg.warmup:
        return cfg.lr * step / cfg.warmup
    else:
        progress = (step - cfg.warmup) / (cfg.steps - cfg.warmup)
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def decay_mask(model: nn.Module, mode: str = "ndim>=2") -> dict[str, bool]:
    """Which parameters get weight decay, by name.

    Args:
        model: the model.
        mode: 'ndim>=2' (the reference: every parameter with at least 2 dims, so q/k/v biases [head, d_head],
            position tables and embeddings decay) or 'weights' (projection matrices only: parameters named
            `W_*` and the `.weight` of `nn.Linear` layers; no biases, LayerNorms or position tables).

    Raises:
        ValueError: an unknown mode.
    """
    params = dict(model.named_parameters())
    if mode == "ndim>=2":
        return {name: p.ndim >= 2 for name, p in params.items()}
    if mode == "weights":
        linear = {f"{prefix}.weight" if prefix else "weight" for prefix, m in model.named_modules()
                  if isinstance(m, nn.Linear)}
        return {name: name.rsplit(".", 1)[-1].startswith("W_") or name in linear for name in params}
    raise ValueError(f"decay_mask={mode!r} is not one of 'ndim>=2', 'weights'")


def build_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with two parameter groups (decayed, not decayed) per `cfg.decay_mask`; fused kernels where torch
    has them (CUDA and CPU), multi-tensor (`foreach`) otherwise."""
    mask = decay_mask(model, cfg.decay_mask)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in params if mask[n]], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in params if not mask[n]], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    fast = {"fused": True} if device.type in ("cuda", "cpu") else {"foreach": True}
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.adam_betas, eps=cfg.adam_eps, **fast)


def step_seeds(seed: int, rank: int, step: int) -> tuple[int, int]:
    """(batch seed, dropout seed) of one step on one process: a pure function of (seed, rank, step), so a
    resumed run draws exactly the batches and dropout masks of an uninterrupted one."""
    words = np.random.SeedSequence([seed, rank, step]).generate_state(4, np.uint32)
    return (int(words[0]) << 31) ^ int(words[1]), (int(words[2]) << 31) ^ int(words[3])


def make_train_step(
    model: nn.Module, task: Task, optimizer: torch.optim.Optimizer, cfg: TrainConfig, device: torch.device
) -> Callable[[Batch, float], StepOutput]:
    """One optimizer step as a function of (batch, learning rate).

    On CUDA the forward pass runs in float32 with TF32 matmuls (`allow_tf32`), or under bf16 autocast with
    `cfg.autocast`, and with `cfg.compile` through `torch.compile`; the model object itself stays uncompiled for
    evaluation and hooks.
    """
    forward: Callable[[Tensor], Tensor] = model
    if cfg.compile and device.type == "cuda":
        forward = torch.compile(model)
    elif cfg.compile:
        logger.warning("compile=True is ignored on %s (torch.compile is used on CUDA only)", device.type)
    autocast = _autocast(device, cfg.autocast)
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def step(batch: Batch, lr: float) -> StepOutput:
        for group in optimizer.param_groups:
            group["lr"] = lr
        with autocast():
            # only the positions the loss reads come out of the last block (same values, less work)
            outputs = forward(batch.x, keep_last=task.n_readout)
        loss = task.loss(outputs.float(), batch)
        loss.backward()
        metrics = {}
        if cfg.grad_clip is not None:
            metrics["grad_norm"] = nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return StepOutput(loss=loss.detach(), metrics=metrics)

    return step


def allow_tf32(device: torch.device) -> None:
    """Let float32 matmuls and convolutions on CUDA use TF32 tensor cores (float32 range and sums, 10-bit mantissa
    products): the CUDA default of training (`TrainConfig.autocast` off). A process-wide torch setting; nothing
    happens on other devices."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


# ------------------------------------------------------------------------------------------------------ loop
@dataclass
class _Loop:
    """Mutable bookkeeping of the training loop (nothing here affects the numbers); what the run writes goes
    through `record`."""

    cfg: TrainConfig
    info: DistInfo
    model: nn.Module
    optimizer: torch.optim.Optimizer
    record: RunRecorder
    step: int
    unsynced: list[Tensor] = field(default_factory=list)  # losses still on the device
    mark_time: float = field(default_factory=time.perf_counter)
    mark_step: int = 0
    overhead_s: float = 0.0  # evaluation and checkpoint time since mark_time
    postfix: dict[str, str] = field(default_factory=dict)


def _flush_losses(loop: _Loop) -> None:
    """Move device losses to the recorder (averaged over processes); it stops on the first non-finite one."""
    values = []
    if loop.unsynced:
        values = distributed.mean_across(torch.stack(loop.unsynced).float(), loop.info).tolist()
        loop.unsynced.clear()
    loop.record.add_losses(values, loop.step)


def _log_step(loop: _Loop, last: StepOutput, bar: Any) -> None:
    """Append one train line: mean loss since the previous line, lr, throughput, time."""
    _flush_losses(loop)
    now = time.perf_counter()
    train_time = max(now - loop.mark_time - loop.overhead_s, 1e-9)
    samples_per_s = (loop.step - loop.mark_step) * loop.cfg.batch_size / train_time
    record = loop.record.log(loop.step, lr_at(loop.step, loop.cfg), samples_per_s,
                             {k: float(v) for k, v in last.metrics.items()})
    loop.mark_time, loop.mark_step, loop.overhead_s = now, loop.step, 0.0
    loop.postfix.update(loss=f"{record['loss']:.4g}", samples_s=f"{record['samples_per_s']:.0f}")
    bar.set_postfix(loop.postfix, refresh=False)


def _eval_if_needed(loop: _Loop, task: Task, sets: dict[str, Batch], bar: Any) -> None:
    if not (loop.step % loop.cfg.eval_every == 0 or loop.step == loop.cfg.steps):
        return
    _flush_losses(loop)  # no evaluation of weights that saw a NaN
    start = time.perf_counter()
    results = loop.record.evaluate(loop.step, loop.model, sets)
    for split, m in results.items():
        name = {"test": "ID", "ood": "OOD"}.get(split, split)
        loop.postfix[f"{name}_{task.metric_name}"] = f"{m.get(task.metric_name, m['loss']):.3f}"
        logger.info("step %d %s: %s", loop.step, split, ", ".join(f"{k}={v:.4g}" for k, v in m.items()))
    if results:
        bar.set_postfix(loop.postfix, refresh=False)
    loop.overhead_s += time.perf_counter() - start


def _checkpoint_if_needed(loop: _Loop, *, now: bool = False) -> None:
    """Write a resumable checkpoint every `checkpoint_every` steps, at the last step, and when `now`."""
    step, cfg = loop.step, loop.cfg
    due = now or step % cfg.checkpoint_every == 0 or step == cfg.steps
    if not due or step == loop.record.last_checkpoint or step == 0:
        return
    start = time.perf_counter()
    _flush_losses(loop)  # never checkpoint weights that saw a NaN
    loop.record.checkpoint(step, loop.model, loop.optimizer, world_size=loop.info.world_size)
    if loop.info.is_main:
        logger.info("checkpoint at step %d written to %s", step, getattr(loop.record.store, "path", "the store"))
    loop.overhead_s += time.perf_counter() - start


class _DeferredInterrupt:
    """Turns the first Ctrl-C (SIGINT) or SIGTERM into a flag read between steps, so the checkpoint written
    on the way out never holds a half-applied update; a second signal acts at once. Off under torchrun, whose
    agent stops every worker itself (a worker waiting for a dead peer would never reach the flag)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.triggered = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _DeferredInterrupt:
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
    """`run_cfg` with the `_RESUME_KEEPS` and `_RESUME_KEEPS_MODEL` fields of the run in `out` (which must hold a
    config.json)."""
    saved = RunConfig.load(out)
    changes = {}
    for section, names in (("train", _RESUME_KEEPS), ("model", _RESUME_KEEPS_MODEL)):
        mine, theirs = getattr(saved, section), getattr(run_cfg, section)
        kept = {name: getattr(mine, name) for name in names if getattr(mine, name) != getattr(theirs, name)}
        if kept:
            logger.warning("resuming %s with %s, as it was started (its %s): a run keeps these settings to the end",
                           out, ", ".join(f"{section}.{k}={v}" for k, v in kept.items()), CONFIG_FILE)
            changes[section] = dataclasses.replace(theirs, **kept)
    return dataclasses.replace(run_cfg, **changes) if changes else run_cfg


def _deadline(time_limit: float | None) -> float | None:
    """`time.monotonic()` value at which a `time_limit` (seconds from now) runs out; None for no limit."""
    if time_limit is None:
        return None
    if not time_limit >= 0:
        raise ValueError(f"time_limit={time_limit} must be a number of seconds >= 0 (or None for no limit)")
    return time.monotonic() + time_limit


# ------------------------------------------------------------------------------------------------- out dir
def _prepare_out_dir(out: Path, run_cfg: RunConfig, *, resume: bool, force: bool) -> TrainState | None:
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
        diffs = saved.differences(run_cfg, ignore_train=_RESUME_IGNORES + _RESUME_KEEPS,
                                  ignore_model=_RESUME_KEEPS_MODEL)
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


# -------------------------------------------------------------------------------------------------- train
def train(
    model_cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    out_dir: str | os.PathLike,
    *,
    resume: bool = False,
    force: bool = False,
    progress: bool | None = None,
    time_limit: float | None = None,
) -> Run:
    """Train a model on a task and write the run directory.

    A fresh batch is sampled on the training device at every step (seeded by seed, process rank and step).
    Train lines go to metrics.jsonl every `log_every` steps, `test`/`ood` evaluations every `eval_every` steps
    and at the end, resumable checkpoints every `checkpoint_every` steps and at the end. Ctrl-C (or SIGTERM)
    writes a checkpoint and raises KeyboardInterrupt. Under `torchrun` (WORLD_SIZE > 1) this trains one model
    with DDP; only rank 0 writes, and interrupts are left to torchrun.

    Args:
        model_cfg: the architecture (its d_in, d_out, seq_len must match the task).
        task: the task, with its splits.
        train_cfg: optimizer, schedule, seed, cadences, device.
        out_dir: the run directory.
        resume: continue the run in `out_dir` from its last checkpoint (its config must match); a finished run
            is returned as is, an empty or missing directory starts a new run.
        force: delete the run in `out_dir` and start over.
        progress: show a progress bar (None: only on a terminal).
        time_limit: wall-clock seconds from this call after which training writes a checkpoint and returns
            between two steps (`Run.step` < `steps`; `resume=True` then continues exactly where it stopped).
            None: no limit. One process only (not under torchrun).

    Returns:
        The trained `Run` (model in eval mode on the training device), or the run as far as it got when
        `time_limit` stopped it.

    Raises:
        ValueError: invalid configs, `out_dir` holding another run, a config mismatch on resume, or a negative
            `time_limit` (or one under torchrun).
        NonFiniteLossError: the loss became NaN/inf (the message names the step; the last good checkpoint is
            kept).
        KeyboardInterrupt: Ctrl-C, after writing a checkpoint.
    """
    for name in ("d_in", "d_out", "seq_len"):
        if getattr(model_cfg, name) != getattr(task, name):
            raise ValueError(
                f"model {name}={getattr(model_cfg, name)} does not match task {task.name!r} {name}="
                f"{getattr(task, name)}; build the model config from the task (model_config(task, ...))"
            )
    if train_cfg.seed < 0:
        raise ValueError(f"seed={train_cfg.seed} must be a non-negative integer")
    deadline = _deadline(time_limit)
    info = distributed.env_info()
    if deadline is not None and info.enabled:
        raise ValueError("time_limit works in one process only: under torchrun the processes could stop at "
                         "different steps; stop a torchrun job with Ctrl-C and continue it with --resume")
    if train_cfg.batch_size % info.world_size:
        raise ValueError(
            f"batch_size={train_cfg.batch_size} is not divisible by the {info.world_size} processes; "
            "pick a multiple of the process count"
        )
    device = resolve_device(train_cfg.device, local_rank=info.local_rank)
    if device.type == "cpu":
        keep_freed_memory()  # no page faults for each step's large temporaries; the numbers do not change
    info, owns_group = distributed.init(device.type)
    try:
        return _train(model_cfg, task, train_cfg, Path(out_dir), device, info, resume, force, progress, deadline)
    finally:
        if owns_group:
            distributed.shutdown()


def _train(
    model_cfg: ModelConfig,
    task: Task,
    cfg: TrainConfig,
    out: Path,
    device: torch.device,
    info: DistInfo,
    resume: bool,
    force: bool,
    progress: bool | None,
    deadline: float | None = None,
) -> Run:
    run_cfg = RunConfig(model=model_cfg, task=task, train=cfg)
    state = _prepare_out_dir(out, run_cfg, resume=resume, force=force)
    if state is not None:
        run_cfg = kept_on_resume(out, run_cfg)
        model_cfg, cfg = run_cfg.model, run_cfg.train
    distributed.barrier(info)  # everyone has read `out` before rank 0 changes it
    if state is not None and state.finished:
        logger.info("%s is already finished (step %d); nothing to do", out, state.step)
        return Run.load(out, device=device)
    if info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        remove_stale_temp_files(out)
        if state is None:
            remove_run_files(out)
            run_cfg.save(out)
    distributed.barrier(info)

    allow_tf32(device)
    torch.manual_seed(cfg.seed)
    model = Transformer(model_cfg).to(device)
    optimizer = build_optimizer(model, cfg, device)
    if state is not None:
        state = load_checkpoint(out, model, optimizer)
        restore_rng(state.rng)
        if state.world_size != info.world_size:
            logger.warning("resuming a run trained on %d processes with %d: later batches differ from an "
                           "uninterrupted run", state.world_size, info.world_size)
        if info.is_main:
            truncate_metrics(out, state.metrics_lines)
        logger.info("resuming %s from step %d", out, state.step)
    record = RunRecorder.resumed(RunDirectory(out), cfg, task, state, writes=info.is_main)
    start = 0 if state is None else state.step
    loop = _Loop(cfg=cfg, info=info, model=model, optimizer=optimizer, record=record, step=start, mark_step=start)
    distributed.barrier(info)

    n_params = sum(p.numel() for p in model.parameters())
    logger.info("training %s on %s: %s parameters, %d steps of %d on %s%s", model_cfg.variant, task.name,
                f"{n_params:,}", cfg.steps, cfg.batch_size, device,
                f" x {info.world_size} processes" if info.enabled else "")
    train_model: nn.Module = model
    if info.enabled:
        # routed experts may skip a step, which DDP must be told about
        train_model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                              find_unused_parameters=model_cfg.n_experts > 0)
    step_fn = make_train_step(train_model, task, optimizer, cfg, device)
    sets = eval_sets(task, cfg.eval_samples, cfg.seed, device) if info.is_main else {}
    local_batch = cfg.batch_size // info.world_size
    disable = True if not info.is_main else (None if progress is None else not progress)
    bar = tqdm(total=cfg.steps, initial=loop.step, disable=disable, unit="step", dynamic_ncols=True,
               desc=f"{task.name} {model_cfg.variant}")
    model.train()
    try:
        with _DeferredInterrupt(enabled=not info.enabled) as interrupt:
            for step in range(loop.step + 1, cfg.steps + 1):
                data_seed, dropout_seed = step_seeds(cfg.seed, info.rank, step)
                torch.manual_seed(dropout_seed)
                batch = task.sample(local_batch, "train", seed=data_seed, device=device)
                last = step_fn(batch, lr_at(step, cfg))
                loop.step = step
                loop.unsynced.append(last.loss)
                if step % cfg.log_every == 0 or step == cfg.steps:
                    _log_step(loop, last, bar)
                _eval_if_needed(loop, task, sets, bar)
                _checkpoint_if_needed(loop)
                bar.update(1)
                if interrupt.triggered:
                    _checkpoint_if_needed(loop, now=True)
                    logger.warning("interrupted at step %d; checkpoint in %s (continue with --resume)", step, out)
                    raise KeyboardInterrupt
                if deadline is not None and step < cfg.steps and time.monotonic() >= deadline:
                    _checkpoint_if_needed(loop, now=True)
                    logger.warning("time limit reached at step %d of %d; checkpoint in %s (continue with --resume)",
                                   step, cfg.steps, out)
                    break
    finally:
        bar.close()
    distributed.barrier(info)
    model.eval()
    digest = loop.record.checkpoint_hash or file_hash(out / MODEL_FILE)
    return Run(path=out, config=run_cfg, model=model, metrics=read_metrics(out), step=loop.step,
               checkpoint_hash=digest)
