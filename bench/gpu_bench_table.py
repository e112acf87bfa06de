"""Training rate of the SRAVEN model per variant, ensemble size and step form: the benchmark of the GPU call.

For each variant (softmax, linear, HYLA), each ensemble size K (members trained together by `train_ensemble`'s
vmapped step) and each step form (`eager`: the default step; `graphed`: `TrainConfig.cuda_graph`, captured as a
CUDA graph on CUDA and run through the same static buffers eagerly elsewhere), it builds the ensemble of seeds
0..K-1 (paper preset by default, attention dropout as the preset sets it), runs `--warmup` steps, then times whole
steps in a window of `--window` seconds (synchronising the device at each chunk of `--chunk` steps, so queued work
is counted), and records:

- steps_s: ensemble steps per second; run_steps_s = K * steps_s (runs of 128-instance steps trained per second);
- grid_min: minutes for the 9-run SRAVEN grid (9 x 156,250 run-steps) at run_steps_s in one process;
- peak_mib: peak GPU memory allocated (CUDA only; empty elsewhere).

Writes a CSV (`--csv`) and a markdown table (`--md`), and `--fastest` a JSON naming the step form with the
highest run_steps_s at K=3 summed over variants (what bench/gpu_runbook.sh trains the grid with). Not a test: no
timing is asserted. Stops starting new rows once `--budget` seconds have passed.

    python bench/gpu_bench_table.py --csv $OUT/bench_table.csv --md $OUT/bench_table.md --fastest fastest.json
    python bench/gpu_bench_table.py --device cpu --preset tiny --members 1 3 --warmup 2 --window 1   # CPU rehearsal
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from latentcode.config import model_config, train_config
from latentcode.model.transformer import Transformer
from latentcode.tasks import get_task
from latentcode.training.ensemble import _EnsembleLoop, _Member
from latentcode.training.optim import build_optimizer
from latentcode.training.record import RunDirectory, RunRecorder
from latentcode.training.train_step import allow_tf32, resolve_device

GRID_RUN_STEPS = 9 * 156_250
FIELDS = ("variant", "members", "form", "warmup_steps", "timed_steps", "window_s", "steps_s", "run_steps_s",
          "grid_min", "peak_mib", "error")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _loop(variant: str, members: int, graphed: bool, preset: str, device: torch.device, root: Path) -> _EnsembleLoop:
    """An ensemble loop of seeds 0..members-1, built as `train_ensemble` builds it (fresh runs)."""
    task = get_task("sraven")
    mcfg = model_config(task, variant, preset=preset)
    built = []
    for seed in range(members):
        cfg = train_config("sraven", preset, seed=seed, device=str(device), eval_samples=128, cuda_graph=graphed)
        torch.manual_seed(seed)
        model = Transformer(mcfg).to(device)
        out = root / f"{variant}-{members}-{graphed}-{seed}"
        out.mkdir(parents=True)
        built.append(_Member(cfg=cfg, task=task, out=out, model=model, optimizer=build_optimizer(model, cfg, device),
                             record=RunRecorder.resumed(RunDirectory(out), cfg, task, None)))
    return _EnsembleLoop(mcfg, task, built, device, start=0)


def measure(variant: str, members: int, graphed: bool, *, preset: str, device: torch.device, warmup: int,
            window: float, chunk: int, root: Path) -> dict:
    row = {"variant": variant, "members": members, "form": "graphed" if graphed else "eager", "warmup_steps": warmup}
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    loop = _loop(variant, members, graphed, preset, device, root)
    step_fn = loop.graph_step if graphed else loop._train_step
    losses = []
    for step in range(1, warmup + 1):
        losses.append(step_fn(step))
    _sync(device)
    start, step = time.perf_counter(), warmup
    while True:
        for _ in range(chunk):
            step += 1
            losses.append(step_fn(step))
        _sync(device)
        elapsed = time.perf_counter() - start
        if elapsed >= window:
            break
    if not torch.isfinite(torch.stack(losses)).all():
        raise FloatingPointError(f"{variant} K={members} {row['form']}: a non-finite loss")
    steps_s = (step - warmup) / elapsed
    row.update(timed_steps=step - warmup, window_s=round(elapsed, 3), steps_s=round(steps_s, 2),
               run_steps_s=round(members * steps_s, 2),
               grid_min=round(GRID_RUN_STEPS / (members * steps_s) / 60, 1),
               peak_mib=round(torch.cuda.max_memory_allocated(device) / 2**20, 1) if device.type == "cuda" else "")
    return row


def markdown(rows: list[dict], device_name: str) -> str:
    lines = [f"SRAVEN training rate on {device_name} (bench/gpu_bench_table.py)", "",
             "| variant | K | form | steps/s | run-steps/s | 9-run grid, min | peak MiB | timed steps |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['variant']} | {r['members']} | {r['form']} | failed: {r['error']} | | | | |")
        else:
            lines.append(f"| {r['variant']} | {r['members']} | {r['form']} | {r['steps_s']} | {r['run_steps_s']} | "
                         f"{r['grid_min']} | {r['peak_mib']} | {r['timed_steps']} |")
    return "\n".join(lines) + "\n"


def fastest(rows: list[dict], members: int = 3) -> dict:
    """The step form with the highest run-steps/s at `members` summed over variants (eager when unmeasured)."""
    totals = {}
    for form in ("eager", "graphed"):
        picked = [r for r in rows if r["form"] == form and r["members"] == members and not r.get("error")]
        if picked and len(picked) == len({r["variant"] for r in rows}):
            totals[form] = sum(r["run_steps_s"] for r in picked)
    form = max(totals, key=totals.get) if totals else "eager"
    return {"form": form, "cuda_graph": form == "graphed", "members": members, "run_steps_s": totals}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--variants", nargs="+", default=["softmax", "linear", "hyla"])
    parser.add_argument("--members", nargs="+", type=int, default=[1, 3, 9])
    parser.add_argument("--forms", nargs="+", choices=("eager", "graphed"), default=["eager", "graphed"])
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (default: 20)")
    parser.add_argument("--window", type=float, default=4.0, help="seconds timed per row (default: 4)")
    parser.add_argument("--chunk", type=int, default=10, help="steps between device synchronisations (default: 10)")
    parser.add_argument("--budget", type=float, default=math.inf, help="start no row after this many seconds")
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--fastest", type=Path, help="write the fastest step form at K=3 as JSON")
    args = parser.parse_args()
    if any(k <= 0 for k in args.members) or args.warmup < 0 or args.window <= 0 or args.chunk <= 0:
        parser.error("--members and --chunk must be positive, --warmup >= 0 and --window > 0")
    t0 = time.perf_counter()
    device = resolve_device(args.device)
    allow_tf32(device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{device.type} " \
        f"({torch.get_num_threads()} threads)"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants:
            for members in args.members:
                for form in args.forms:
                    if time.perf_counter() - t0 > args.budget:
                        print(f"budget of {args.budget} s spent; {variant} K={members} {form} not measured")
                        continue
                    try:
                        row = measure(variant, members, form == "graphed", preset=args.preset, device=device,
                                      warmup=args.warmup, window=args.window, chunk=args.chunk, root=Path(tmp))
                    except Exception as e:  # a failed form is reported and the table goes on
                        row = {"variant": variant, "members": members, "form": form,
                               "error": f"{type(e).__name__}: {e}".replace("|", "/")[:200]}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    table = markdown(rows, device_name)
    print(table)
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows([{k: r.get(k, "") for k in FIELDS} for r in rows])
    if args.md:
        args.md.write_text(table)
    if args.fastest:
        choice = fastest(rows)
        args.fastest.write_text(json.dumps(choice) + "\n")
        print("fastest at K=3:", json.dumps(choice))
    print(f"benchmark table took {time.perf_counter() - t0:.0f} s")
    return 0 if rows and not all(r.get("error") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
