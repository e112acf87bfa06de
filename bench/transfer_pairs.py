"""Memory and time of rule transfer's pair search (`latentcode.causal.transfer`: a one-feature donor and a same-rule
partner for each of N SRAVEN instances), in row chunks (the default, `_CHUNK` recipients at once) and as one
N × N block (chunk = N). Each setting runs in its own process, so its peak resident memory is its own; printed
above the memory of the sampled batch alone. Not a test: nothing here asserts a size or a time.

    .venv/bin/python bench/transfer_pairs.py [--n 1024 8192] [--chunk 1024 0]     # chunk 0: one N × N block
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
import torch
from latentcode.causal import transfer
from latentcode.tasks import SRaven

n, chunk = int(sys.argv[1]), int(sys.argv[2])
transfer._CHUNK = chunk or n
rules = SRaven().sample(n, "ood", seed=0, unpermuted=True).labels["rules"]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
generator = torch.Generator().manual_seed(0)
recipient, donor = transfer._one_feature_pairs(rules, generator)
transfer._same_rule_partners(rules, recipient, generator)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"extra_mb": (peak - before) / 1024, "seconds": seconds, "recipients": len(recipient)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1024, 8192], help="instances drawn (default: 1024 8192)")
    parser.add_argument("--chunk", type=int, nargs="+", default=[1024, 0],
                        help="recipients compared at once; 0: all N (default: 1024 0)")
    args = parser.parse_args()
    print("| instances | chunk | memory above the batch (MB) | seconds | recipients |")
    print("|---:|---|---:|---:|---:|")
    for n in args.n:
        for chunk in args.chunk:
            done = subprocess.run([sys.executable, "-c", CHILD, str(n), str(chunk)], capture_output=True, text=True,
                                  check=True)
            found = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {n:,} | {'all' if chunk == 0 else f'{chunk:,}'} | {found['extra_mb']:,.0f} | "
                  f"{found['seconds']:.2f} | {found['recipients']:,} |")


if __name__ == "__main__":
    main()
