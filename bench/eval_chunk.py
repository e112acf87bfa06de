"""How many instances per forward pass should evaluation take on a CPU? CPU seconds of `evaluate()`'s forward
passes over one fixed held-out set of a shipped checkpoint, one thread, for several chunk sizes, with the metric
each gives (it must not change with the chunk). This is the measurement behind `EVAL_CHUNK`. Not a test: nothing
here asserts a timing.

    python bench/eval_chunk.py --names sraven-hyla sraven-softmax fuzzy_logic-hyla --samples 8192
"""

from __future__ import annotations

import argparse
import time

import torch

import latentcode.training.evaluate as evaluation
from latentcode.rundir.pretrained import load_pretrained, shipped_info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", nargs="+", default=["sraven-hyla", "sraven-softmax", "fuzzy_logic-hyla"])
    parser.add_argument("--samples", type=int, default=8192, help="held-out (ood) instances per measurement")
    parser.add_argument("--chunks", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("| checkpoint | instances per pass | CPU s | instances per CPU-s | ood metric |")
    print("|---|---:|---:|---:|---:|")
    for name in args.names:
        run = load_pretrained(name)
        recorded = shipped_info(run.path)["evaluation"]
        metric = recorded["metric"]
        sets = evaluation.eval_sets(run.task, args.samples, recorded["seed"], torch.device("cpu"), "ood")
        for chunk in args.chunks:
            evaluation._chunk = lambda device, chunk=chunk: chunk
            start = time.process_time()
            value = evaluation._evaluate(run.model, run.task, sets)["ood"][metric]
            seconds = time.process_time() - start
            print(f"| {name} | {chunk} | {seconds:.2f} | {args.samples / seconds:.0f} | {metric} {value:.6f} |",
                  flush=True)


if __name__ == "__main__":
    main()
