"""Latent-code extraction: overhead over a bare forward pass, and codes per second.

The model is the paper's SRAVEN transformer (4 layers, 16 heads, d_model 128; randomly initialised: weights do
not change the cost). For each trial, on the same pre-sampled batches:
  bare     = model(x) under no_grad, per batch;
  extract  = model.run_with_cache(x, names_filter=<the pattern hooks>), slice the paper's positions, move to CPU
             and predict (what `extract_latent_codes` does per batch);
  pipeline = `extract_latent_codes` end to end (batch generation and labels included) against sample + forward.
Trials alternate so drifting machine load hits all alike; medians are reported. By default the clock is the
process's CPU time with one torch thread: on a shared machine it is what the work costs (wall time there mostly
measures the neighbours), and on an idle core it equals wall time. `--clock wall` times wall-clock instead.

    .venv/bin/python bench/bench_extract.py [--variant hyla] [--batch-size 512] [--batches 8] [--trials 7]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from latentcode.codes.extract import _slice_views, extract_latent_codes, pattern_hook_name, resolve_positions
from latentcode.model.transformer import build_model
from latentcode.tasks import get_task

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", default="hyla")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu", help="cpu (process time) or wall")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = CLOCKS[args.clock]

    def _timed(fn) -> float:
        start = clock()
        fn()
        return clock() - start

    task = get_task("sraven", seed=0)
    torch.manual_seed(0)
    model = build_model(task, args.variant, "paper").eval()
    n = args.batch_size * args.batches
    batches = [task.sample(args.batch_size, "test", seed=i, unpermuted=True).x for i in range(args.batches)]
    names = [pattern_hook_name(layer) for layer in range(model.cfg.n_layers)]
    spec = resolve_positions(task, "paper")
    query, key = torch.as_tensor(spec.query), torch.as_tensor(spec.key)

    def bare() -> None:
        with torch.no_grad():
            for x in batches:
                task.predict(model(x))

    def extract() -> None:
        with torch.no_grad():
            for x in batches:
                out, cache = model.run_with_cache(x, names_filter=names)
                torch.stack([_slice_views(cache[name], query, key) for name in names], dim=1).cpu().numpy()
                task.predict(out)

    def sample_and_forward() -> None:
        with torch.no_grad():
            x = task.sample(n, "test", seed=0, unpermuted=True).x
            for start in range(0, n, args.batch_size):
                task.predict(model(x[start : start + args.batch_size]))

    def pipeline(positions: str) -> None:
        extract_latent_codes(model, task, ("test",), n, positions=positions, batch_size=args.batch_size,
                             progress=False)

    bare(), extract(), pipeline("paper")  # warm-up
    times: dict[str, list[float]] = {k: [] for k in ("bare", "extract", "forward", "paper", "all_features")}
    for _ in range(args.trials):
        times["bare"].append(_timed(bare))
        times["extract"].append(_timed(extract))
        times["forward"].append(_timed(sample_and_forward))
        times["paper"].append(_timed(lambda: pipeline("paper")))
        times["all_features"].append(_timed(lambda: pipeline("all_features")))
    med = {k: statistics.median(v) for k, v in times.items()}

    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; model: SRAVEN paper preset, {args.variant}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters; {args.batches} batches of "
          f"{args.batch_size}; median of {args.trials} trials; {args.clock} time")
    print()
    print("| what | seconds | instances/s | overhead vs bare |")
    print("|---|---:|---:|---:|")
    rows = [
        ("bare forward (model(x), predict)", med["bare"], med["bare"]),
        ("extraction per batch (run_with_cache + slice + CPU)", med["extract"], med["bare"]),
        ("sample + forward", med["forward"], med["forward"]),
        ("extract_latent_codes, positions=paper", med["paper"], med["forward"]),
        ("extract_latent_codes, positions=all_features", med["all_features"], med["forward"]),
    ]
    for name, seconds, base in rows:
        print(f"| {name} | {seconds:.3f} | {n / seconds:,.0f} | {100 * (seconds / base - 1):+.1f}% |")
    print()
    print(f"codes/s: paper {n / med['paper']:,.0f} rows/s, all_features {4 * n / med['all_features']:,.0f} rows/s")


if __name__ == "__main__":
    main()
