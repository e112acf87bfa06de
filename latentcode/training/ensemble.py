"""Several runs of one variant trained as one vectorized program: `torch.func.vmap` over `functional_call`.

The models are tiny, so one run leaves a GPU mostly idle; stacking the parameters of M runs and vmapping the
forward pass trains them in about the time of one. Members share the architecture, task, step count and batch
size, and may differ in seed, learning rate, warm-up and weight decay. Each member draws the same batches and
dropout masks a single run of its seed would (the masks are drawn outside vmap and replayed inside it:
`dropout_replay.py`), keeps
its own AdamW state, and writes a run directory in exactly the single-run
format, so `load_run`, `latentcode train --resume`, `latentcode eval` and every analysis treat it as any other
run. Not here: mixture-of-experts variants (their routing has data-dependent shapes vmap cannot batch) and
several processes (use `torchrun` with `train()` for one big model).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from latentcode.config import ModelConfig, TrainConfig
from latentcode.model.transformer import Transformer
from latentcode.rundir.checkpoint import Run, RunConfig, truncate_metrics
from latentcode.rundir.directory import remove_run_files, remove_stale_temp_files
from latentcode.tasks.base import Task
from latentcode.training.dropout_replay import DropoutReplay, plain_autograd
from latentcode.training.evaluate import _autocast, eval_sets
from latentcode.training.graph_step import GraphStep
from latentcode.training.optim import build_optimizer, decay_mask, lr_at
from latentcode.training.record import RunDirectory, RunRecorder
from latentcode.training.resume import DeferredInterrupt, deadline_after, kept_on_resume, prepare_run_dir
from latentcode.training.train_state import capture_rng, load_checkpoint, restore_rng
from latentcode.training.train_step import allow_tf32, resolve_device, step_seeds

logger = logging.getLogger(__name__)

MEMBER_FIELDS = ("seed", "lr", "warmup", "weight_decay", "min_lr_ratio")
"""TrainConfig fields in which the members of one ensemble may differ; all others must be equal."""


def can_ensemble(model_cfg: ModelConfig, train_cfgs: Sequence[TrainConfig]) -> bool:
    """True when these runs can be trained together by `train_ensemble`."""
    return not _ensemble_problems(model_cfg, train_cfgs)


def _ensemble_problems(model_cfg: ModelConfig, train_cfgs: Sequence[TrainConfig]) -> list[str]:
    problems = []
    if model_cfg.n_experts > 0:
        problems.append(f"variant {model_cfg.variant!r} has a mixture-of-experts feed-forward, which vmap cannot "
                        "batch; train its runs one by one")
    if train_cfgs:
        shared = {f.name for f in dataclasses.fields(TrainConfig)} - set(MEMBER_FIELDS)
        for name in sorted(shared):
            values = {repr(getattr(cfg, name)) for cfg in train_cfgs}
            if len(values) > 1:
                problems.append(f"members differ in {name} ({', '.join(sorted(values))}); only "
                                f"{', '.join(MEMBER_FIELDS)} may differ")
    return problems


@dataclasses.dataclass
class _Member:
    """One run of the ensemble: its own (unstacked) model and optimizer, used to evaluate and to write
    checkpoints, and the recorder that writes its run directory exactly as a single run's."""

    cfg: TrainConfig
    task: Task
    out: Path
    model: Transformer
    optimizer: torch.optim.AdamW
    record: RunRecorder


def train_ensemble(
    model_cfg: ModelConfig,
    task: Task | Sequence[Task],
    train_cfgs: Sequence[TrainConfig],
    run_dirs: Sequence[str | os.PathLike],
    *,
    resume: bool = False,
    force: bool = False,
    progress: bool | None = None,
    time_limit: float | None = None,
) -> list[Run]:
    """Train several runs of one architecture together, each into its own run directory.

    Args:
        model_cfg: the architecture shared by every member (no mixture of experts).
        task: the task, with its splits, or one task per member (the same task with another split seed, say;
            every member's task must have the same name and sizes).
        train_cfgs: one TrainConfig per member; they may differ only in `MEMBER_FIELDS`.
        run_dirs: one run directory per member.
        resume: continue every member from its last checkpoint (all must be at the same step).
        force: delete the runs in `run_dirs` and start over.
        progress: show a progress bar (None: only on a terminal).
        time_limit: wall-clock seconds from this call after which every member writes a checkpoint and training
            returns between two steps (`resume=True` continues exactly); None: no limit.

    Returns:
        One `Run` per member, in order (models in eval mode on the training device), as far as they got.

    Raises:
        ValueError: mismatched lengths, members that may not be trained together, occupied run directories,
            members at different steps on resume.
        NonFiniteLossError: a member's loss became NaN/inf (the message names the member and the step; every
            member's last good checkpoint is kept).
    """
    if len(train_cfgs) != len(run_dirs) or not train_cfgs:
        raise ValueError(f"got {len(train_cfgs)} train configs and {len(run_dirs)} run directories; give one "
                         "run directory per member (at least one)")
    outs = [Path(p) for p in run_dirs]
    tasks = [task] * len(outs) if not isinstance(task, Sequence) else list(task)
    if len(tasks) != len(outs):
        raise ValueError(f"got {len(tasks)} tasks for {len(outs)} members; give one task, or one per member")
    shapes = {(t.name, t.d_in, t.d_out, t.seq_len) for t in tasks}
    if len(shapes) > 1:
        raise ValueError(f"members' tasks differ in name or sizes ({sorted(shapes)}); an ensemble shares one "
                         "architecture")
    task = tasks[0]
    if len({p.resolve() for p in outs}) != len(outs):
        raise ValueError("two members share a run directory; give each member its own")
    problems = _ensemble_problems(model_cfg, train_cfgs)
    if problems:
        raise ValueError("cannot train these runs as one ensemble: " + "; ".join(problems))
    for name in ("d_in", "d_out", "seq_len"):
        if getattr(model_cfg, name) != getattr(task, name):
            raise ValueError(f"model {name}={getattr(model_cfg, name)} does not match task {task.name!r} "
                             f"{name}={getattr(task, name)}; build the model config from the task")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("train_ensemble runs in one process; under torchrun use train() for one model")
    deadline = deadline_after(time_limit)

    states = [prepare_run_dir(out, RunConfig(model=model_cfg, task=t, train=cfg), resume=resume, force=force)
              for out, t, cfg in zip(outs, tasks, train_cfgs, strict=True)]
    steps_done = {0 if s is None else s.step for s in states}
    if len(steps_done) > 1:
        raise ValueError(f"members are at different steps ({sorted(steps_done)}); resume them one by one with "
                         "`latentcode train ... --resume`")
    resumed = [kept_on_resume(out, RunConfig(model=model_cfg, task=t, train=cfg)) for out, t, cfg, s
               in zip(outs, tasks, train_cfgs, states, strict=True) if s is not None]
    if resumed:
        if len({r.model for r in resumed}) > 1:
            raise ValueError("the members were started with different model settings (act_fn); resume them one by "
                             "one with `latentcode train ... --resume`")
        model_cfg = resumed[0].model
    train_cfgs = [cfg if s is None else kept_on_resume(out, RunConfig(model=model_cfg, task=t, train=cfg)).train
                  for out, t, cfg, s in zip(outs, tasks, train_cfgs, states, strict=True)]
    problems = _ensemble_problems(model_cfg, train_cfgs)
    if problems:
        raise ValueError("cannot resume these runs as one ensemble: " + "; ".join(problems))
    if all(s is not None and s.finished for s in states):
        return [Run.load(out, device=resolve_device(cfg.device)) for out, cfg in zip(outs, train_cfgs, strict=True)]

    device = resolve_device(train_cfgs[0].device)
    allow_tf32(device)
    members = []
    for out, member_task, cfg, state in zip(outs, tasks, train_cfgs, states, strict=True):
        out.mkdir(parents=True, exist_ok=True)
        remove_stale_temp_files(out)
        if state is None:
            remove_run_files(out)
            RunConfig(model=model_cfg, task=member_task, train=cfg).save(out)
        torch.manual_seed(cfg.seed)  # the same initialisation as a single run of this seed
        model = Transformer(model_cfg).to(device)
        optimizer = build_optimizer(model, cfg, device)
        if state is not None:
            state = load_checkpoint(out, model, optimizer)
            truncate_metrics(out, state.metrics_lines)
            restore_rng(state.rng)
        record = RunRecorder.resumed(RunDirectory(out), cfg, member_task, state,
                                     who=f"member {len(members)} ({out}): ")
        members.append(_Member(cfg=cfg, task=member_task, out=out, model=model, optimizer=optimizer, record=record))
    return _EnsembleLoop(model_cfg, task, members, device, start=steps_done.pop()).run(progress, deadline)


class _EnsembleLoop:
    """Stacked parameters, a vmapped forward, a vectorized AdamW, and per-member logging and checkpoints."""

    def __init__(self, model_cfg: ModelConfig, task: Task, members: list[_Member], device: torch.device,
                 start: int) -> None:
        self.model_cfg, self.task, self.members, self.device = model_cfg, task, members, device
        self.cfg = members[0].cfg  # the fields every member shares
        self.step = start
        base = Transformer(model_cfg).to(device)
        base.train()
        plain_autograd(base)
        self.base = base
        self.dropout = DropoutReplay(base, self.cfg.batch_size, task, device, autocast=self.cfg.autocast)
        params, buffers = stack_module_state([m.model for m in members])
        self.params = {name: p.detach().clone().requires_grad_(True) for name, p in params.items()}
        self.buffers = buffers
        mask = decay_mask(members[0].model, self.cfg.decay_mask)
        self.decayed = {name: mask[name] for name in self.params}
        self.exp_avg, self.exp_avg_sq = self._stacked_adam_state()
        self.unsynced: list[Tensor] = []
        self.mark_time, self.mark_step, self.overhead_s = time.perf_counter(), start, 0.0
        self.sets = [eval_sets(m.task, m.cfg.eval_samples, m.cfg.seed, device) for m in members]
        # every random draw is made outside vmap (`DropoutReplay`); one inside it would be an error
        forward = vmap(self._member_forward, randomness="error")
        self.forward = torch.compile(forward) if self.cfg.compile and device.type == "cuda" else forward
        self.graph_step = GraphStep(self) if self.cfg.cuda_graph else None

    # ------------------------------------------------------------------------------------------ numerics
    def _member_forward(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor,
                        masks: list[Tensor]) -> Tensor:
        with self.dropout.replaying(masks):
            return functional_call(self.base, (params, buffers), (x,), {"keep_last": self.task.n_readout})

    def _stacked_adam_state(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        exp_avg, exp_avg_sq = {}, {}
        for name, p in self.params.items():
            firsts, seconds = [], []
            for member in self.members:
                param = member.model.get_parameter(name)
                state = member.optimizer.state.get(param, {})
                firsts.append(state.get("exp_avg", torch.zeros_like(param)).detach())
                seconds.append(state.get("exp_avg_sq", torch.zeros_like(param)).detach())
            exp_avg[name] = torch.stack(firsts).to(p.device)
            exp_avg_sq[name] = torch.stack(seconds).to(p.device)
        return exp_avg, exp_avg_sq

    def _per_member(self, values: list[float], like: Tensor) -> Tensor:
        return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *([1] * (like.ndim - 1)))

    @torch.no_grad()
    def _adamw(self, grads: dict[str, Tensor], step: int) -> None:
        """torch.optim.AdamW's update, with a learning rate and weight decay per member."""
        (beta1, beta2), eps = self.cfg.adam_betas, self.cfg.adam_eps
        lrs = [lr_at(step, m.cfg) for m in self.members]
        bias1, bias2 = 1 - beta1**step, 1 - beta2**step
        for name, p in self.params.items():
            g, m, v = grads[name], self.exp_avg[name], self.exp_avg_sq[name]
            lr = self._per_member(lrs, p)
            if self.decayed[name]:
                p.mul_(1 - lr * self._per_member([mb.cfg.weight_decay for mb in self.members], p))
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
            p.addcdiv_(m, denom * (bias1 / lr), value=-1.0)

    def _train_step(self, step: int) -> Tensor:
        batches = []
        for member in self.members:
            data_seed, _ = step_seeds(member.cfg.seed, 0, step)
            batches.append(member.task.sample(self.cfg.batch_size, "train", seed=data_seed, device=self.device))
        masks = self.dropout.draw([step_seeds(m.cfg.seed, 0, step)[1] for m in self.members])
        xs = torch.stack([b.x for b in batches])
        with _autocast(self.device, self.cfg.autocast)():
            outputs = self.forward(self.params, self.buffers, xs, masks)
        losses = torch.stack([self.task.loss(out.float(), b) for out, b in zip(outputs, batches, strict=True)])
        names = list(self.params)
        grads = torch.autograd.grad(losses.sum(), [self.params[n] for n in names])
        self._adamw(dict(zip(names, grads, strict=True)), step)
        return losses.detach()

    # ------------------------------------------------------------------------------------- bookkeeping
    @torch.no_grad()
    def _sync_members(self) -> None:
        """Copy the stacked parameters and AdamW state into each member's own model and optimizer."""
        for i, member in enumerate(self.members):
            for name, p in self.params.items():
                param = member.model.get_parameter(name)
                param.copy_(p[i])
                state = member.optimizer.state[param]
                state["step"] = torch.tensor(float(self.step), dtype=torch.float32, device=param.device)
                state["exp_avg"] = self.exp_avg[name][i].clone()
                state["exp_avg_sq"] = self.exp_avg_sq[name][i].clone()

    def _flush_losses(self) -> None:
        values = (torch.stack(self.unsynced).float().cpu().numpy() if self.unsynced
                  else np.zeros((0, len(self.members))))  # [steps, members]
        self.unsynced.clear()
        last = min(m.record.last_checkpoint for m in self.members)
        for i, member in enumerate(self.members):
            member.record.add_losses(values[:, i].tolist(), self.step, kept=(
                f"every member's last good checkpoint (step {last}) is kept" if last
                else "no checkpoint had been written yet"))

    def _log(self) -> None:
        self._flush_losses()
        now = time.perf_counter()
        train_time = max(now - self.mark_time - self.overhead_s, 1e-9)
        samples_per_s = (self.step - self.mark_step) * self.cfg.batch_size / train_time
        for member in self.members:
            member.record.log(self.step, lr_at(self.step, member.cfg), samples_per_s)
        self.mark_time, self.mark_step, self.overhead_s = now, self.step, 0.0

    def _evaluate(self) -> dict[str, float]:
        self._flush_losses()
        start = time.perf_counter()
        self._sync_members()
        summary = {}
        for i, (member, sets) in enumerate(zip(self.members, self.sets, strict=True)):
            results = member.record.evaluate(self.step, member.model, sets)
            summary[f"m{i}_OOD_{self.task.metric_name}"] = results["ood"].get(self.task.metric_name, math.nan)
        self.overhead_s += time.perf_counter() - start
        return summary

    def _checkpoint(self) -> None:
        if all(m.record.last_checkpoint == self.step for m in self.members):
            return
        start = time.perf_counter()
        self._flush_losses()
        self._sync_members()
        rng = capture_rng()
        for member in self.members:
            member.record.checkpoint(self.step, member.model, member.optimizer, rng=rng)
        self.overhead_s += time.perf_counter() - start

    def run(self, progress: bool | None, deadline: float | None = None) -> list[Run]:
        cfg = self.cfg
        disable = None if progress is None else not progress
        bar = tqdm(total=cfg.steps, initial=self.step, disable=disable, unit="step", dynamic_ncols=True,
                   desc=f"{self.task.name} {self.model_cfg.variant} x{len(self.members)}")
        try:
            with DeferredInterrupt() as interrupt:
                for step in range(self.step + 1, cfg.steps + 1):
                    losses = self._train_step(step) if self.graph_step is None else self.graph_step(step)
                    self.step = step
                    self.unsynced.append(losses)
                    if step % cfg.log_every == 0 or step == cfg.steps:
                        self._log()
                        bar.set_postfix(loss=f"{float(np.mean(self.members[0].record.pending or [0.0])):.4g}",
                                        refresh=False)
                    if step % cfg.eval_every == 0 or step == cfg.steps:
                        bar.set_postfix({k: f"{v:.3f}" for k, v in self._evaluate().items()}, refresh=False)
                    if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                        self._checkpoint()
                    bar.update(1)
                    if interrupt.triggered:
                        self._checkpoint()
                        logger.warning("interrupted at step %d; checkpoints written (continue with resume)", step)
                        raise KeyboardInterrupt
                    if deadline is not None and step < cfg.steps and time.monotonic() >= deadline:
                        self._checkpoint()
                        logger.warning("time limit reached at step %d of %d; checkpoints written (continue with "
                                       "resume)", step, cfg.steps)
                        break
        finally:
            bar.close()
        return [Run.load(m.out, device=self.device) for m in self.members]
