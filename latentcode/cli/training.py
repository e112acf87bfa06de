"""The training and run subcommands of `latentcode`: `train` (one model into a run directory), `eval` (a run on its
test and ood splits), `info` (a run's or task's configs, parameter count and hook names) and `sweep` (a YAML grid
of trainings).

Each is a pair (adds its parser, runs it) in `COMMANDS`, which `app.py` appends to its own; the work is a call into
`latentcode.training`. `train` and `info` take the `--model.KEY=VALUE`, `--task.KEY=VALUE` and `--train.KEY=VALUE`
config overrides that `app.py` splits off. The library modules that load torch are imported inside the commands.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from latentcode._process import time_left
from latentcode.cli.util import (
    SEED_HELP,
    _add_progress,
    _add_run,
    _echo,
    _field_names,
    _subparser,
    _TaskAction,
    _warn,
    _where,
    _wrap,
)
from latentcode.config import VARIANTS, ModelConfig, TrainConfig
from latentcode.training.build import PRESETS, build_model_config, build_task, build_train_config

if TYPE_CHECKING:
    from latentcode.model.transformer import Transformer
    from latentcode.rundir.checkpoint import Run

__all__ = ["COMMANDS", "EVAL_FILE"]


# ----------------------------------------------------------------------------------------------- printing
def _format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    from probes.tables import align_columns, format_cell

    cells = [[format_cell(r.get(c, ""), ".4f") for c in columns] for r in rows]
    return "\n".join(align_columns([columns, *cells]))


def _metrics_table(results: dict[str, dict[str, float]]) -> str:
    columns = ["split"] + list(dict.fromkeys(k for m in results.values() for k in m))
    return _format_table([{"split": s, **m} for s, m in results.items()], columns)


def _final_metrics(run: Run) -> dict[str, dict[str, float]]:
    from latentcode.training.diagnostics import LIVE_KEY

    results = {}
    for split in ("test", "ood"):
        record = run.eval_metrics(split)
        if record is not None:
            results[split] = {k: v for k, v in record.items() if k not in ("step", "split", LIVE_KEY)}
    return results


def _describe_model(model: Transformer) -> str:
    n_params = sum(p.numel() for p in model.parameters())
    hooks = sorted(model.hook_dict)
    return "\n".join([f"parameters: {n_params:,}", f"hooks ({len(hooks)}):", *(f"  {h}" for h in hooks)])


def _task_summary(task_dict: dict[str, Any]) -> dict[str, Any]:
    """The task's saved dict with its composition lists replaced by their lengths (they can be long)."""
    summary = {k: v for k, v in task_dict.items() if k != "compositions"}
    if "compositions" in task_dict:
        summary["compositions"] = {s: f"{len(v)} compositions" for s, v in task_dict["compositions"].items()}
    return summary


# ------------------------------------------------------------------------------------------------- train
def _add_train_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "train",
        help="train one model on a task into a run directory",
        description="Train one model on a task. Writes config.json, model.safetensors, a resumable checkpoint and "
        "metrics.jsonl to the run directory. Under `torchrun --nproc-per-node N -m latentcode train ...` one "
        "model trains with DDP (the global batch split across the processes).",
        epilog="config overrides (any number):\n" + "\n".join(
            _wrap(f"{option:<20}{text}", indent=22)
            for option, text in (
                ("--model.KEY=VALUE", f"ModelConfig fields: {_field_names(ModelConfig)}, width (SRAVEN)"),
                ("--task.KEY=VALUE", "the task's parameters (see `latentcode info TASK`)"),
                ("--train.KEY=VALUE", f"TrainConfig fields: {_field_names(TrainConfig)}"),
            )
        ),
        example="latentcode train sraven --model hyla --preset small --seed 1 --train.lr=3e-3",
    )
    parser.add_argument("task", metavar="TASK", action=_TaskAction)
    parser.add_argument("--model", required=True, metavar="VARIANT", help=f"variant: {', '.join(VARIANTS)}")
    parser.add_argument("--preset", default="paper", metavar="PRESET",
                        help=f"model and training sizes: {', '.join(PRESETS[:-1])} or {PRESETS[-1]} (default: paper). Those are the "
                        "built-in tasks' presets; another task declares its own")
    parser.add_argument("--steps", type=int,
                        help="training steps (default: the preset's). The learning-rate schedule spans them")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the split, initialisation, data and dropout (default: 0). The split's is "
                        "task.seed")
    parser.add_argument("--device", help="auto (default; cuda, then mps, then cpu), cpu, cuda, cuda:N or mps")
    parser.add_argument("--compile", action="store_true", default=None, help="torch.compile the step (CUDA)")
    parser.add_argument("--checkpoint-every", type=int, metavar="N", help="steps between checkpoints")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="run directory (default: runs/TASK-VARIANT-PRESET-sSEED)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    parser.add_argument("--force", action="store_true", help="delete the run in --out and start over")
    _add_progress(parser)
    _add_threads_and_time_limit(parser, "stop cleanly after this many seconds, resumable with --resume. The "
                                "seconds are wall clock, counted from the start of the command; the run is "
                                "checkpointed first")
    parser.set_defaults(accepts_overrides=True)
    return parser


def _add_threads_and_time_limit(parser: argparse.ArgumentParser, time_help: str) -> None:
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch CPU threads (default: torch's). Torch's default is OMP_NUM_THREADS, else the "
                        "core count")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS", help=time_help)


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        if threads < 1:
            raise ValueError(f"--threads={threads} must be a positive integer")
        import torch

        torch.set_num_threads(threads)


def _cmd_train(args: argparse.Namespace) -> int:
    from latentcode.training import distributed
    from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction
    from latentcode.training.train import train

    task_params = dict(args.overrides["task"])
    task_params.setdefault("seed", args.seed)
    task = build_task(args.task, task_params)
    mcfg = build_model_config(task, args.model, args.preset, args.overrides["model"])
    flags = {"steps": args.steps, "seed": args.seed, "device": args.device, "compile": args.compile,
             "checkpoint_every": args.checkpoint_every}
    tcfg = build_train_config(args.task, args.preset, {k: v for k, v in flags.items() if v is not None},
                              args.overrides["train"])
    out = args.out or Path("runs") / f"{args.task}-{args.model}-{args.preset}-s{args.seed}"
    _set_threads(args.threads)
    run = _with_tqdm_logging(lambda: train(mcfg, task, tcfg, out, resume=args.resume, force=args.force,
                                           progress=args.progress, time_limit=time_left(args.time_limit)))
    if distributed.env_info().is_main:
        _echo(f"run: {run.path} (step {run.step}, checkpoint {run.checkpoint_hash})")
        if run.step < run.config.train.steps:
            _echo(f"stopped by --time-limit at step {run.step} of {run.config.train.steps}; continue with --resume")
        results = _final_metrics(run)
        if results:
            _echo(_metrics_table(results))
        live = (run.eval_metrics("ood") or {}).get(LIVE_KEY)
        if live and any(f is not None for f in live):
            _echo(f"value network live fraction: {format_live_fraction(live)}")
    return 0


def _with_tqdm_logging(fn: Callable[[], Any]) -> Any:
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm():
        return fn()


# -------------------------------------------------------------------------------------------------- eval
def _add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "eval",
        help="evaluate a run on its test and ood splits",
        description="Load a run directory or a shipped checkpoint and evaluate its model on fixed samples of its "
        "splits: the same instances its training evaluations used (same seed and sample count). Prints the table "
        "(or --json) and writes nothing, unless --out names a folder for eval.json.",
        example="latentcode eval fuzzy_logic-hyla --seed 1 --splits test ood",
    )
    _add_run(parser)
    parser.add_argument("--splits", nargs="+", default=["test", "ood"], help="splits (default: test ood)")
    parser.add_argument("--n-samples", "--samples", dest="samples", type=int, metavar="N",
                        help="instances per split (default: the run's eval_samples). --samples is the old spelling")
    parser.add_argument("--device", default="cpu", help="device for the model (default: cpu)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="also write the JSON to DIR/eval.json (default: write nothing). Never inside the shipped "
                        "checkpoints: e.g. --out runs/analysis/NAME[-sSEED]")
    return parser


EVAL_FILE = "eval.json"
"""What `latentcode eval RUN --out DIR` writes into DIR (the --json record)."""


def _cmd_eval(args: argparse.Namespace) -> int:
    if args.samples is not None and args.samples <= 0:
        raise ValueError(f"--n-samples={args.samples} must be positive (instances per split)")
    run_dir, name, _ = _where(args, args.run, default_out=False)
    from latentcode.rundir.checkpoint import load_run
    from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction, run_value_live_fraction
    from latentcode.training.evaluate import LIVE_SAMPLES, evaluate
    from latentcode.training.train_step import resolve_device

    run = load_run(run_dir, device=resolve_device(args.device))
    cfg = run.config.train
    n_samples = args.samples or cfg.eval_samples
    results = evaluate(run.model, run.task, splits=tuple(args.splits), n_samples=n_samples, seed=cfg.seed)
    live = run_value_live_fraction(run)
    record = {"run": run_dir.name if name else str(run.path), "seed": cfg.seed, "step": run.step, "checkpoint": run.checkpoint_hash,
              "n_samples": n_samples, "results": results, LIVE_KEY: live}
    if args.out is not None:
        from latentcode.rundir.directory import atomic_write_json

        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out / EVAL_FILE, record)
    if args.json:
        _echo(json.dumps(record, indent=2))
    else:
        _echo(f"run: {run.path} (step {run.step}, checkpoint {run.checkpoint_hash}, {n_samples} per split)")
        _echo(_metrics_table(results))
        _echo(f"value network live fraction ({LIVE_SAMPLES} ood instances): {format_live_fraction(live)}")
    if args.out is not None:
        _echo(f"written: {args.out / EVAL_FILE}")
    return 0


# -------------------------------------------------------------------------------------------------- info
def _add_info_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "info",
        help="show a run's or task's config, parameter count and hook names",
        description="For a run directory or a shipped checkpoint: its configs, parameter count and hook names. For "
        "a task name: the model and training configs that `latentcode train` would use, with "
        "--model.*/--task.*/--train.* overrides applied. Writes nothing.",
        example="latentcode info sraven --model hyla --preset paper",
        epilog="more examples:\n  latentcode info fuzzy_logic-hyla --seed 2\n  latentcode info runs/sraven-hyla-small-s0",
    )
    parser.add_argument("target", metavar="RUN|TASK",
                        help="a run directory, a shipped checkpoint's name (sraven-hyla; `latentcode pretrained` "
                        "lists them) or a task name (sraven)")
    parser.add_argument("--seed", type=int, default=None, metavar="K", help=SEED_HELP)
    parser.add_argument("--model", default="hyla", metavar="VARIANT", help="variant for a task (default: hyla)")
    parser.add_argument("--preset", default="paper", metavar="PRESET", help="preset for a task (default: paper)")
    parser.set_defaults(accepts_overrides=True)
    return parser


def _info_run(args: argparse.Namespace) -> Path | None:
    """The run `latentcode info` shows, or None for a task name. A path or a shipped name is found without torch,
    and so are the errors about them; only a bare word that names neither loads the task registry (torch) to be
    looked up as a task."""
    from latentcode.rundir.pretrained import resolve_run

    try:
        path, _ = resolve_run(args.target, args.seed)
    except FileNotFoundError:
        if args.seed is not None or "/" in args.target or os.sep in args.target or Path(args.target).exists():
            raise
        from latentcode.tasks import TASKS

        if args.target in TASKS:
            return None
        raise FileNotFoundError(_neither_run_nor_task(args.target, sorted(TASKS))) from None
    if any(args.overrides.values()):
        raise ValueError("--model.*/--task.*/--train.* overrides apply to a task name, not to a run")
    return path


def _neither_run_nor_task(target: str, tasks: list[str]) -> str:
    """Why `latentcode info TARGET` found nothing, with the closest tasks, shipped names and run folders here."""
    import difflib

    from latentcode.rundir.directory import is_run_dir
    from latentcode.rundir.pretrained import list_pretrained

    try:
        shipped = list_pretrained()
    except OSError:
        shipped = []
    folders = [p.name for p in Path(".").iterdir() if is_run_dir(p)]
    close = difflib.get_close_matches(target, [*tasks, *shipped, *folders], n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "."
    return (f"{target!r} is neither a task ({', '.join(tasks)}), a run directory nor a shipped checkpoint{hint} "
            "`latentcode pretrained` lists the shipped checkpoints")


def _cmd_info(args: argparse.Namespace) -> int:
    path = _info_run(args)
    from latentcode.model.transformer import Transformer
    from latentcode.rundir.checkpoint import load_run

    if path is not None:
        run = load_run(path)
        data = run.config.to_dict()
        data["task"] = _task_summary(data["task"])
        _echo(f"run: {run.path} (step {run.step} of {run.config.train.steps}, checkpoint {run.checkpoint_hash})")
        _echo(json.dumps(data, indent=2))
        _echo(_describe_model(run.model))
        return 0
    task = build_task(args.target, args.overrides["task"])
    mcfg = build_model_config(task, args.model, args.preset, args.overrides["model"])
    tcfg = build_train_config(args.target, args.preset, {}, args.overrides["train"])
    _echo(json.dumps({"model": mcfg.to_dict(), "task": _task_summary(task.to_dict()), "train": tcfg.to_dict()},
                     indent=2))
    _echo(_describe_model(Transformer(mcfg)))
    return 0


# ------------------------------------------------------------------------------------------------- sweep
def _add_sweep_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "sweep",
        help="train every point of a YAML grid, one run directory each, skipping finished runs",
        description="Expand a YAML grid (format: `python -c 'import latentcode.training.sweep; "
        "help(latentcode.training.sweep)'`) into one run directory per point and train them, K at a time locally or "
        "through submitit (Slurm, or local processes). Finished runs are skipped and interrupted ones resumed, "
        "so running a sweep again completes it.",
        example="latentcode sweep grids/ablation.yaml --jobs 2",
    )
    parser.add_argument("grid", metavar="GRID.yaml", type=Path, help="the grid file")
    parser.add_argument("--jobs", type=int, default=1, metavar="K", help="runs at a time (default: 1)")
    parser.add_argument("--launcher", choices=("local", "submitit"), default="local",
                        help="local subprocesses or submitit's AutoExecutor (default: local)")
    parser.add_argument("--cluster", help="submitit cluster: slurm, local or debug (default: auto-detect)")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their status only")
    parser.add_argument("--ensemble", action="store_true",
                        help="vectorize runs that differ only in seed, lr, warmup or weight decay. Each such group "
                        "trains as one process (local launcher), with the same results as one process per run")
    _add_threads_and_time_limit(parser, "seconds for the whole sweep, then trainings checkpoint and stop. Wall-clock "
                                "seconds; later trainings do not start; run the sweep again to continue")
    return parser


def _cmd_sweep(args: argparse.Namespace) -> int:
    from latentcode.training.sweep import load_grid, run_sweep

    grid = load_grid(args.grid)
    results = run_sweep(grid, jobs=args.jobs, launcher=args.launcher, dry_run=args.dry_run, cluster=args.cluster,
                        ensemble=args.ensemble, threads=args.threads, time_limit=args.time_limit)
    rows = [{"run": r.point.name, "status": r.status, "dir": str(r.point.run_dir)} for r in results]
    _echo(_format_table(rows, ["run", "status", "dir"]))
    if any(r.status in ("stopped", "pending") for r in results):
        _warn("the time limit stopped the sweep; run the same command again to continue")
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        _warn(f"failed: {r.point.name} (exit code {r.returncode}); log: {r.log}")
    return 1 if failed else 0


COMMANDS: list[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = [
    (_add_train_parser, _cmd_train),
    (_add_eval_parser, _cmd_eval),
    (_add_info_parser, _cmd_info),
    (_add_sweep_parser, _cmd_sweep),
]
"""The training and run subcommands: (adds its parser, runs it), for `latentcode/cli/app.py` to append to its own."""
