"""Does `latentcode sweep --ensemble` help on a CPU? The same seeds of one variant, once as one process per run and
once as one ensemble process, both through `run_sweep` with one thread per process and one process at a time.

Prints a markdown table (the one in docs/benchmarks.md): the sweep's wall-clock time (process start-ups, which
the ensemble pays once, included) and the training throughput in run-steps per second, i.e. steps times runs
over the summed train time of the metrics' train lines (evaluation and checkpoints excluded). Not a test.

    python bench/ensemble_cpu.py --preset small --variants softmax hyla --seeds 0 1 2 --steps 60
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from latentcode.config import train_config
from latentcode.rundir.checkpoint import RunConfig, read_metrics
from latentcode.training.sweep import Grid, run_sweep


def measure(variant: str, args: argparse.Namespace, root: Path, ensemble: bool) -> dict:
    out = root / f"{variant}-{'ensemble' if ensemble else 'single'}"
    grid = Grid.from_dict({"task": "sraven", "preset": args.preset, "out": str(out), "variants": [variant],
                           "seeds": args.seeds, "train": {"steps": args.steps, "warmup": 1, "log_every": 10,
                                                          "eval_every": args.steps, "eval_samples": 256,
                                                          "checkpoint_every": args.steps}})
    start = time.perf_counter()
    results = run_sweep(grid, jobs=1, threads=1, ensemble=ensemble)
    wall = time.perf_counter() - start
    assert all(r.status == "done" for r in results), [r.log.read_text() for r in results if r.log]
    train_s = 0.0
    for r in results:
        lines = [m for m in read_metrics(r.point.run_dir) if m["split"] == "train"]
        batch = RunConfig.load(r.point.run_dir).train.batch_size
        # each line covers log_every = 10 steps; the first holds the warm-up, skip it. An ensemble's members
        # share one train time: count it once
        if not ensemble or r is results[0]:
            train_s += sum(10 * batch / m["samples_per_s"] for m in lines[1:])
    steps = (args.steps - 10) * len(results)
    return {"variant": variant, "mode": "ensemble" if ensemble else "one process per run", "wall_s": wall,
            "run_steps_per_s": steps / train_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--variants", nargs="+", default=["softmax", "hyla"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, one thread per process; "
          f"sraven {args.preset}, {len(args.seeds)} seeds, {args.steps} steps of "
          f"{train_config('sraven', args.preset).batch_size}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants:
            for ensemble in (False, True):
                rows.append(measure(variant, args, Path(tmp), ensemble))
    print("| variant | mode | sweep wall s | run-steps/s (train time) |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['mode']} | {r['wall_s']:.1f} | {r['run_steps_per_s']:.1f} |")


if __name__ == "__main__":
    main()
