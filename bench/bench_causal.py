"""The whole causal analysis of one shipped SRAVEN model: alignment search at every layer and three k, then LEACE
erasure at every layer, with the `latentcode causal` defaults. Prints wall-clock and process CPU time of each part
(on a shared machine CPU time is what the work costs; wall time includes waiting for the neighbours).

    .venv/bin/python bench/bench_causal.py [--model sraven-hyla] [--threads 2] [--out results/causal/sraven-hyla]
        [--n-samples 256] [--n-train 512] [--steps 50] [--erase-n-samples 1024] [--n-fit 2048]

With --out, the results are saved there (`alignment.csv/json`, `rotations/`, `erasure.csv/json`), exactly as
`latentcode causal align/erase --out` writes them.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

import latentcode
from latentcode.causal.alignment import alignment_search
from latentcode.causal.erasure import erasure_experiment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="sraven-hyla")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--ks", default="1,4,8")
    parser.add_argument("--out", default=None, help="save the results here (default: not saved)")
    parser.add_argument("--n-samples", type=int, default=256, help="alignment: held-out pairs (default: 256)")
    parser.add_argument("--n-train", type=int, default=512, help="alignment: training pairs (default: 512)")
    parser.add_argument("--steps", type=int, default=50, help="alignment: steps per rotation (default: 50)")
    parser.add_argument("--erase-n-samples", type=int, default=1024, help="erasure: held-out instances (1024)")
    parser.add_argument("--n-fit", type=int, default=2048, help="erasure: fitting instances (default: 2048)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run = latentcode.load_pretrained(args.model)
    ks = [int(k) for k in args.ks.split(",")]
    times = {}
    start, cpu = time.perf_counter(), time.process_time()
    aligned = alignment_search(run.model, run.task, ks=ks, n_samples=args.n_samples, n_train=args.n_train,
                               steps=args.steps, progress=True)
    times["align"] = (time.perf_counter() - start, time.process_time() - cpu)
    start, cpu = time.perf_counter(), time.process_time()
    erased = erasure_experiment(run.model, run.task, n_samples=args.erase_n_samples, n_fit=args.n_fit,
                                progress=True)
    times["erase"] = (time.perf_counter() - start, time.process_time() - cpu)
    if args.out:
        for result in (aligned, erased):
            result.params.update(run=args.model, step=run.step)
            result.save(args.out)
    print(aligned.table())
    print(erased.table())
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{args.threads}, load average {os.getloadavg()[0]:.1f}; settings: {vars(args)}")
    for name, (wall, cpu_time) in times.items():
        print(f"{args.model} {name}: wall {wall:.0f} s, process CPU {cpu_time:.0f} s")
    total = [sum(t[i] for t in times.values()) for i in (0, 1)]
    print(f"{args.model} total: wall {total[0]:.0f} s, process CPU {total[1]:.0f} s")


if __name__ == "__main__":
    main()
