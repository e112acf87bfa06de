"""Sweeps: expand a YAML grid into one run directory per point, then train the points K at a time locally or
through submitit. Each point is an ordinary `latentcode train ... --resume` process, so finished runs are
skipped and interrupted ones continue when a sweep is run again. With `ensemble=True` (`--ensemble`), points
that differ only in seed, learning rate, warm-up or weight decay train as one `train_ensemble` process
(`python -m latentcode.training.sweep GROUP.json`, the only training this module starts itself); its members write
the run directories single processes would, with the same numbers. Several processes sharing one queue of points
(lanes) are `lanes.py`.

Grid format (YAML; only `task` and `variants` are required)::

    task: sraven                  # a registered task
    preset: small                 # tiny | small | paper (default: paper)
    out: runs/sraven-ablation     # parent folder of the run directories (default: runs/<grid file stem>)
    variants: [softmax, linear, hyla]
    seeds: [0, 1, 2]              # default [0]; a seed sets the task's split seed and the training seed
    frac_ood: [0.25, 0.5]         # optional: values of the task parameter frac_ood
    sizes:                        # optional: model overrides, one run per entry; `name` labels the run
      - {name: w1, width: 1}
      - {name: w2, width: 2, n_layers: 8}
    grid:                         # optional: further axes, keyed section.field
      train.lr: [1.0e-3, 3.0e-4]
      train.weight_decay: [0.1, 0.3]
    model: {attn_dropout: 0.0}    # optional fixed overrides of ModelConfig fields,
    task_params: {n_values: 8}    # ... of the task's parameters,
    train: {steps: 2000}          # ... and of TrainConfig fields
    submitit: {timeout_min: 240, slurm_partition: gpu, gpus_per_node: 1}   # optional executor parameters

The points are the product variants x seeds x frac_ood x sizes x grid axes. Run directories are named
`<out>/<task>-<variant>-s<seed>[-frac<f>][-<size name>][-<field><value>...]`, e.g. `runs/x/sraven-hyla-s0-frac0.25`;
logs go to `<out>/logs/<name>.log`. Write floats with a dot (`1.0e-3`): YAML reads `1e-3` as a string, which
this module converts back to a number anyway.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from latentcode.training.sweep_grid import Grid, SweepPoint, expand_grid, load_grid
from latentcode.training.train_state import is_finished, read_train_state

__all__ = ["Grid", "PointResult", "SweepPoint", "expand_grid", "group_name", "group_points", "load_grid",
           "point_command", "run_sweep", "train_group"]

logger = logging.getLogger(__name__)


def group_points(points: Sequence[SweepPoint]) -> list[list[SweepPoint]]:
    """Points that can train as one ensemble, in grid order: those that differ only in seed and in the train
    fields `latentcode.training.ensemble.MEMBER_FIELDS` (lr, warmup, weight_decay, min_lr_ratio), which change no
    shape. Mixture-of-experts variants stay alone (vmap cannot batch their routing).

    A seed also sets each point's split, so the members of a group may hold out different compositions; every
    member still writes the run directory, with the numbers, that its own `latentcode train` process would.
    """
    from latentcode.training.ensemble import MEMBER_FIELDS, can_ensemble

    groups: dict[str, list[SweepPoint]] = {}
    for point in points:
        shared = {k: v for k, v in point.train.items() if k not in MEMBER_FIELDS}
        key = json.dumps([point.task, point.variant, point.preset, point.model, point.task_params, shared],
                         sort_keys=True, default=str)
        groups.setdefault(key, []).append(point)
    result = []
    for members in groups.values():
        built = [p.build() for p in members]
        if len(members) > 1 and can_ensemble(built[0][1], [b[2] for b in built]):
            result.append(members)
        else:
            result.extend([p] for p in members)
    return result


def group_name(members: Sequence[SweepPoint]) -> str:
    """The name of an ensemble group (its log file and spec file): its first point's name and the group size."""
    return members[0].name if len(members) == 1 else f"{members[0].name}-ensemble{len(members)}"


def train_group(points: Sequence[SweepPoint], *, time_limit: float | None = None,
                progress: bool | None = False) -> list[Any]:
    """Train (or resume) the points of one `group_points` group as one ensemble in this process.

    Raises:
        ValueError: points that cannot share an ensemble, or members stopped at different steps.
    """
    from latentcode.training.ensemble import train_ensemble

    built = [p.build() for p in points]
    model_cfg = built[0][1]
    for point, (_, cfg, _) in zip(points, built, strict=True):
        if cfg != model_cfg:
            raise ValueError(f"sweep point {point.name} has another model than {points[0].name}; it cannot join "
                             "their ensemble")
    return train_ensemble(model_cfg, [b[0] for b in built], [b[2] for b in built], [p.run_dir for p in points],
                          resume=True, progress=progress, time_limit=time_limit)


def _steps_done(point: SweepPoint) -> int:
    state = read_train_state(point.run_dir) if (point.run_dir / "config.json").is_file() else None
    return 0 if state is None else state.step


@dataclass(frozen=True)
class PointResult:
    """What happened to one point."""

    point: SweepPoint
    status: str
    """'finished' (skipped: already done), 'done', 'failed', 'planned' (dry run), 'stopped' (the time limit or
    SIGTERM stopped it after a checkpoint; run the sweep again to continue) or 'pending' (the time limit ran out
    before it started)."""
    returncode: int | None = None
    log: Path | None = None
    group: str | None = None
    """The ensemble group it trained in (None: its own process)."""


def _command(point: SweepPoint, threads: int | None = None) -> list[str]:
    extra = [] if threads is None else ["--threads", str(threads)]
    return [sys.executable, "-m", "latentcode", *point.argv(), *extra]


def point_command(point: SweepPoint, *, threads: int | None = None, checkpoint_every: int | None = None,
                  snapshots: bool = False) -> list[str]:
    """The process that trains (or resumes) one point: `python -m latentcode` with the point's `argv()`, then
    `--threads N`, `--checkpoint-every N` and `--train.snapshots=true` where asked. None of the three changes the
    numbers, and a resume may leave any of them out."""
    command = _command(point, threads)
    if checkpoint_every is not None:
        command += ["--checkpoint-every", str(checkpoint_every)]
    return [*command, "--train.snapshots=true"] if snapshots else command


def _child_env(jobs: int, threads: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    elif jobs > 1 and "OMP_NUM_THREADS" not in env:  # K processes share the cores instead of oversubscribing
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))
    return env


def run_sweep(
    grid: Grid,
    *,
    jobs: int = 1,
    launcher: str = "local",
    dry_run: bool = False,
    cluster: str | None = None,
    ensemble: bool = False,
    threads: int | None = None,
    time_limit: float | None = None,
) -> list[PointResult]:
    """Train every unfinished point of a grid.

    Args:
        grid: the parsed grid (`load_grid`).
        jobs: processes at a time (local launcher), or the Slurm array parallelism (submitit).
        launcher: 'local' (subprocesses of this machine) or 'submitit' (`submitit.AutoExecutor`).
        dry_run: report each point's status without training.
        cluster: submitit cluster ('slurm', 'local', 'debug'; None auto-detects).
        ensemble: train the unfinished points of each `group_points` group as one ensemble process (local
            launcher). A group resumes together; one whose members stopped at different steps fails with a
            message, and its points then train alone without `ensemble`.
        threads: torch CPU threads of each process (None: `OMP_NUM_THREADS` if set, else the cores shared among
            `jobs`).
        time_limit: wall-clock seconds for the whole sweep (local launcher): each process gets what is left when
            it starts, checkpoints and exits when it runs out ('stopped'); processes not started by then are
            'pending'. Run the sweep again to continue.

    Returns:
        One result per point, in grid order.

    Raises:
        ValueError: an invalid grid, `jobs` < 1, `threads` < 1, a negative `time_limit`, an unknown launcher,
            or `ensemble`/`time_limit` with submitit.
    """
    if jobs < 1:
        raise ValueError(f"jobs={jobs} must be a positive integer")
    if launcher not in ("local", "submitit"):
        raise ValueError(f"launcher={launcher!r} is not one of local, submitit")
    if threads is not None and threads < 1:
        raise ValueError(f"threads={threads} must be a positive integer (or None for the default)")
    if time_limit is not None and not time_limit >= 0:
        raise ValueError(f"time_limit={time_limit} must be a number of seconds >= 0 (or None for no limit)")
    if launcher == "submitit" and (ensemble or time_limit is not None):
        raise ValueError("ensemble and time_limit work with the local launcher; give submitit's timeout_min in "
                         "the grid's `submitit` mapping instead")
    deadline = None if time_limit is None else time.monotonic() + time_limit
    points = expand_grid(grid)
    results: dict[str, PointResult] = {}
    todo = []
    for point in points:
        if is_finished(point.run_dir):
            results[point.name] = PointResult(point, "finished")
        elif dry_run:
            results[point.name] = PointResult(point, "planned")
        else:
            todo.append(point)
    n_finished = sum(r.status == "finished" for r in results.values())
    logger.info("sweep: %d points, %d finished, %d to run", len(points), n_finished, len(points) - n_finished)
    if todo:
        (grid.out / "logs").mkdir(parents=True, exist_ok=True)
        if launcher == "local":
            groups = group_points(todo) if ensemble else [[p] for p in todo]
            for result in _run_local(groups, grid, jobs=jobs, threads=threads, deadline=deadline):
                results[result.point.name] = result
        else:
            for result in _run_submitit(todo, grid, jobs=jobs, cluster=cluster):
                results[result.point.name] = result
    return [results[p.name] for p in points]


def _run_local(groups: list[list[SweepPoint]], grid: Grid, *, jobs: int, threads: int | None,
               deadline: float | None) -> list[PointResult]:
    env = _child_env(jobs, threads)

    def one(members: list[SweepPoint]) -> list[PointResult]:
        name = group_name(members)
        log = grid.out / "logs" / f"{name}.log"
        group = name if len(members) > 1 else None
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return [PointResult(p, "pending", None, None, group) for p in members]
        extra = [] if left is None else ["--time-limit", f"{left:.1f}"]
        if len(members) == 1:
            command = _command(members[0], threads) + extra
        else:
            steps = {p.name: _steps_done(p) for p in members}
            if len(set(steps.values())) > 1:
                message = (f"ensemble group {name}: its members stopped at different steps ("
                           f"{', '.join(f'{n}: {s}' for n, s in steps.items())}) and resume only together; run "
                           "this sweep without --ensemble to finish each on its own")
                log.write_text(message + "\n")
                logger.error("sweep: %s", message)
                return [PointResult(p, "failed", None, log, group) for p in members]
            spec = grid.out / "logs" / f"{name}.json"
            spec.write_text(json.dumps({"points": [p.to_dict() for p in members]}, indent=1) + "\n")
            command = [sys.executable, "-m", "latentcode.training.sweep", str(spec), *extra]
            command += [] if threads is None else ["--threads", str(threads)]
        logger.info("sweep: training %s", name)
        with open(log, "w") as f:
            rc = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
        return [PointResult(p, _status(rc, p), rc, log, group) for p in members]

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return [result for results in pool.map(one, groups) for result in results]


INTERRUPTED = 130
"""`latentcode`'s exit status after SIGINT or SIGTERM (the trainer checkpoints between two steps first)."""


def _status(returncode: int, point: SweepPoint) -> str:
    if returncode not in (0, INTERRUPTED):
        return "failed"
    if returncode == 0 and is_finished(point.run_dir):
        return "done"
    return "stopped" if _steps_done(point) > 0 else "failed"


def _run_submitit(points: list[SweepPoint], grid: Grid, *, jobs: int, cluster: str | None) -> list[PointResult]:
    import submitit
    from submitit.helpers import CommandFunction

    executor = submitit.AutoExecutor(folder=grid.out / "submitit", cluster=cluster)
    params = {"timeout_min": 24 * 60, "name": f"latentcode-{grid.task}", **grid.submitit}
    if executor.cluster == "slurm":
        params.setdefault("slurm_array_parallelism", jobs)
    executor.update_parameters(**params)
    submitted = [(p, executor.submit(CommandFunction(_command(p), verbose=False))) for p in points]
    results = []
    for point, job in submitted:
        try:
            output = job.result()
            rc = 0
        except Exception as e:  # submitit raises its own errors for failed jobs; record and go on
            output, rc = f"{type(e).__name__}: {e}", 1
        log = grid.out / "logs" / f"{point.name}.log"
        log.write_text(str(output) + "\n")
        status = "done" if rc == 0 and is_finished(point.run_dir) else "failed"
        results.append(PointResult(point, status, rc, log))
    return results


def main(argv: list[str] | None = None) -> int:
    """`python -m latentcode.training.sweep GROUP.json`: train one ensemble group that `run_sweep` wrote (exit code
    0 also when a time limit stopped it; 2 for a refused group)."""
    parser = argparse.ArgumentParser(prog="python -m latentcode.training.sweep",
                                     description="Train one ensemble group of a sweep (run_sweep starts this).")
    parser.add_argument("spec", type=Path, help="the group's JSON file (<out>/logs/<group>.json)")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS", help="checkpoint and exit after this long")
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    from latentcode._process import time_left

    points = [SweepPoint.from_dict(d) for d in json.loads(args.spec.read_text())["points"]]
    try:
        runs = train_group(points, time_limit=time_left(args.time_limit))
    except ValueError as e:
        logger.error("error: %s", e)
        return 2
    for point, run in zip(points, runs, strict=True):
        logger.info("run: %s (%s, step %d of %d)", run.path, point.name, run.step, run.config.train.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
