"""The training loop: online batches, periodic evaluation, resumable runs; `train()` and its bookkeeping.

`train()` knows nothing about attention: it needs a `ModelConfig`, a task (batches, loss, metrics) and a
`TrainConfig`, and one step returns a `StepOutput`. It runs in one process, or under `torchrun` as DDP (one
model, the global batch split across processes). The optimizer and schedule are in `optim.py`, the step in
`train_step.py`, starting/resuming/stopping in `resume.py`, evaluation in `evaluate.py`, what the run writes in
`record.py` and the run-directory format in `checkpoint.py`; the command line is `cli/training.py`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from latentcode.config import ModelConfig, TrainConfig
from latentcode.constants import MODEL_FILE
from latentcode.model.attention import set_fused_attention
from latentcode.model.transformer import Transformer
from latentcode.rundir.checkpoint import Run, RunConfig, read_metrics, truncate_metrics
from latentcode.rundir.directory import remove_run_files, remove_stale_temp_files
from latentcode.rundir.weights import file_hash
from latentcode.tasks.base import Batch, Task
from latentcode.training import distributed
from latentcode.training._allocator import keep_freed_memory
from latentcode.training.distributed import DistInfo
from latentcode.training.evaluate import (
    eval_sets,
)
from latentcode.training.optim import build_optimizer, lr_at
from latentcode.training.record import RunDirectory, RunRecorder
from latentcode.training.resume import DeferredInterrupt, deadline_after, kept_on_resume, prepare_run_dir
from latentcode.training.train_state import load_checkpoint, restore_rng
from latentcode.training.train_step import StepOutput, allow_tf32, make_train_step, resolve_device, step_seeds

logger = logging.getLogger(__name__)


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


# -------------------------------------------------------------------------------------------------- train
def train(
    model_cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    run_dir: str | os.PathLike,
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
        run_dir: the run directory.
        resume: continue the run in `run_dir` from its last checkpoint (its config must match); a finished run
            is returned as is, an empty or missing directory starts a new run.
        force: delete the run in `run_dir` and start over.
        progress: show a progress bar (None: only on a terminal).
        time_limit: wall-clock seconds from this call after which training writes a checkpoint and returns
            between two steps (`Run.step` < `steps`; `resume=True` then continues exactly where it stopped).
            None: no limit. One process only (not under torchrun).

    Returns:
        The trained `Run` (model in eval mode on the training device), or the run as far as it got when
        `time_limit` stopped it.

    Raises:
        ValueError: invalid configs, `run_dir` holding another run, a config mismatch on resume, or a negative
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
    if train_cfg.cuda_graph:
        # the graph-ready step is the ensemble's: a single run trains as an ensemble of one
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise ValueError("cuda_graph=True trains in one process; under torchrun leave it off")
        from latentcode.training.ensemble import train_ensemble

        return train_ensemble(model_cfg, task, [train_cfg], [run_dir], resume=resume, force=force,
                              progress=progress, time_limit=time_limit)[0]
    deadline = deadline_after(time_limit)
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
        return _train(model_cfg, task, train_cfg, Path(run_dir), device, info, resume, force, progress, deadline)
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
    state = prepare_run_dir(out, run_cfg, resume=resume, force=force)
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
    set_fused_attention(model, cfg.fused_attention)
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
        with DeferredInterrupt(enabled=not info.enabled) as interrupt:
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
