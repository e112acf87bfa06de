"""Wall time of the probe suite (`latentcode.pipelines.probe_suite`) on one shipped SRAVEN model, stage by stage:
extraction of the trained and the untrained model's codes (train, test and ood, `--n-samples` each), the baseline
probes (linear, PCA-k, kNN, MLP, untrained linear, input-only), conditional probing (1,000 bootstrap resamples) and
MDL (11 blocks, codes of each layer and the inputs). Not a test; prints a markdown table for docs/benchmarks.md.

    .venv/bin/python bench/bench_probe_suite.py [--run sraven-hyla] [--n-samples 2048]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from latentcode.pipelines.probe_suite import probe_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="sraven-softmax", help="a shipped checkpoint or a run directory")
    parser.add_argument("--n-samples", type=int, default=2048)
    args = parser.parse_args()
    start = time.perf_counter()
    suite = probe_suite(args.run, None, n_samples=args.n_samples, progress=False)
    total = time.perf_counter() - start
    sys.stdout.write(f"{args.run}, {args.n_samples} instances per split; {platform.processor() or platform.machine()}, "
                     f"{os.cpu_count()} CPUs, python {platform.python_version()}\n\n")
    sys.stdout.write("| stage | seconds |\n|---|---|\n")
    for stage, seconds in suite.seconds.items():
        sys.stdout.write(f"| {stage} | {seconds:.1f} |\n")
    sys.stdout.write(f"| total (with loading the checkpoint) | {total:.1f} |\n")


if __name__ == "__main__":
    main()
