"""GPU smoke test, the first step of bench/gpu_runbook.sh: does the paper-size SRAVEN training run here, how fast?

Trains softmax, linear and HYLA (paper preset: 4 layers, width 1, batch 128) for `--steps` steps each in fp32
eager through `latentcode.training.train`, then HYLA as a 3-seed `train_ensemble`, then HYLA once more with
`--compile`, then the compiled 3-seed ensemble, and prints steps/s of each (the last logged window, so compilation
and warm-up are not counted). Stops starting new parts once `--budget` seconds have passed. Writes the numbers as
JSON with `--json`. Not a test: no timing is asserted. It exits with 1 if an eager part fails (an import
failure or a non-finite loss, say), which stops the runbook before training; a failing compiled part is
reported and training goes on in eager mode.

    python bench/gpu_smoke.py --json $OUT/smoke.json                          # on the GPU (<= 2 minutes)
    python bench/gpu_smoke.py --device cpu --steps 4 --preset tiny            # rehearsal on a CPU
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

import latentcode
from latentcode.config import model_config, train_config
from latentcode.tasks import get_task
from latentcode.training.ensemble import train_ensemble
from latentcode.training.train import train
from latentcode.training.train_step import resolve_device


def _steps_per_s(metrics: list[dict], batch_size: int) -> float:
    """Steps/s of the last train window (evaluation and checkpoint time excluded by the trainer)."""
    lines = [r for r in metrics if r["split"] == "train"]
    return lines[-1]["samples_per_s"] / batch_size


def _part(name: str, fn, budget_end: float, results: list[dict]) -> bool:
    """Run one part; False if it raised (the error is printed and recorded)."""
    if time.monotonic() > budget_end:
        print(f"{name:<30} skipped: over the time budget", flush=True)
        results.append({"part": name, "skipped": True})
        return True
    start = time.monotonic()
    try:
        record = {"part": name, **fn(), "wall_s": round(time.monotonic() - start, 1)}
    except Exception as e:  # report every part, then decide on the exit code
        traceback.print_exc()
        results.append({"part": name, "error": f"{type(e).__name__}: {e}"})
        print(f"{name:<30} FAILED: {type(e).__name__}: {e}", flush=True)
        return False
    results.append(record)
    print(f"{name:<30} {record['steps_per_s']:8.1f} steps/s   final train loss {record['loss']:.4f}   "
          f"wall {record['wall_s']:.1f} s", flush=True)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200, help="steps per run (default: 200)")
    parser.add_argument("--preset", default="paper", help="model and training preset (default: paper)")
    parser.add_argument("--device", default="auto", help="device (default: auto)")
    parser.add_argument("--budget", type=float, default=110.0, help="seconds after which no part starts")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args()
    budget_end = time.monotonic() + args.budget
    device = resolve_device(args.device)
    import transformer_lens  # noqa: F401  (the point: the carried wheels import)

    env = {"python": platform.python_version(), "torch": torch.__version__, "latentcode": latentcode.__version__,
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"}
    print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    task = get_task("sraven")
    log_every = max(1, args.steps // 4)
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:

        def cfg(seed: int = 0, compile: bool = False):
            return train_config("sraven", args.preset, steps=args.steps, warmup=min(10, args.steps - 1), seed=seed,
                                log_every=log_every, eval_every=args.steps, checkpoint_every=args.steps,
                                eval_samples=512, device=str(device), compile=compile)

        def single(variant: str, compile: bool = False):
            def fn() -> dict:
                tcfg = cfg(compile=compile)
                out = Path(tmp) / f"{variant}-{'compiled' if compile else 'eager'}"
                run = train(model_config(task, variant, args.preset), task, tcfg, out, progress=False)
                train_lines = [r for r in run.metrics if r["split"] == "train"]
                return {"steps_per_s": _steps_per_s(run.metrics, tcfg.batch_size), "loss": train_lines[-1]["loss"],
                        "ood_acc": run.eval_metrics("ood").get("acc")}
            return fn

        def ensemble(compile: bool = False):
            def fn() -> dict:
                cfgs = [cfg(seed=s, compile=compile) for s in (0, 1, 2)]
                outs = [Path(tmp) / f"ensemble-{'compiled' if compile else 'eager'}-s{s}" for s in (0, 1, 2)]
                runs = train_ensemble(model_config(task, "hyla", args.preset), task, cfgs, outs, progress=False)
                return {"steps_per_s": _steps_per_s(runs[0].metrics, cfgs[0].batch_size),
                        "loss": max([r for r in run.metrics if r["split"] == "train"][-1]["loss"] for run in runs),
                        "members": 3}
            return fn

        eager_ok = all([_part(f"{variant} eager", single(variant), budget_end, results)
                        for variant in ("softmax", "linear", "hyla")])
        eager_ok &= _part("hyla eager, 3-seed ensemble", ensemble(), budget_end, results)
        _part("hyla compiled", single("hyla", compile=True), budget_end, results)
        _part("hyla compiled, 3-seed ensemble", ensemble(compile=True), budget_end, results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"env": env, "steps": args.steps, "preset": args.preset,
                                         "results": results}, indent=1) + "\n")
    return 0 if eager_ok else 1


if __name__ == "__main__":
    sys.exit(main())
