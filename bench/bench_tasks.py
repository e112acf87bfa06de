"""Throughput of the task generators (train split, default parameters) and the SRAVEN ambiguity rate.

Prints a markdown table for docs/benchmarks.md: samples per second at each batch size, the median over
repeats of timed loops of `task.sample`, plus the ambiguity rate of SRAVEN on fixed seeds. Not a test.

    .venv/bin/python bench/bench_tasks.py [--device cpu] [--seconds 3] [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch

from latentcode.tasks import get_task


def samples_per_second(task, batch_size: int, device: str, seconds: float, repeats: int) -> float:
    """Median over `repeats` of (instances generated / wall time) in loops of about seconds / repeats each."""
    for _ in range(3):
        task.sample(batch_size, device=device)
    rates = []
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds / repeats:
            task.sample(batch_size, device=device)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            calls += 1
        rates.append(calls * batch_size / elapsed)
    return statistics.median(rates)


def ambiguity(device: str, n: int = 8192, seed: int = 2024) -> list[tuple[str, float, float]]:
    """(split, ambiguous rate, seconds for the check) for `n` SRAVEN instances per split."""
    task = get_task("sraven")
    rows = []
    for split in ("train", "ood"):
        batch = task.sample(n, split, seed=seed, device=device)
        start = time.perf_counter()
        flags = task.ambiguous(batch)
        rows.append((split, flags.float().mean().item(), time.perf_counter() - start))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="torch device to generate on (default: cpu)")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per task and batch size")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per measurement; the median is shown")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} intra-op threads, device {args.device}, "
        f"load average {os.getloadavg()[0]:.1f} at the start"
    )
    print()
    print("| task | batch | samples/s | batches/s |")
    print("|---|---:|---:|---:|")
    for name in ("fuzzy_logic", "sraven"):
        task = get_task(name)
        for batch_size in (128, 4096):
            rate = samples_per_second(task, batch_size, args.device, args.seconds, args.repeats)
            print(f"| {name} | {batch_size} | {rate:,.0f} | {rate / batch_size:,.0f} |")
    print()
    print("| SRAVEN split | instances | ambiguous | check time (s) |")
    print("|---|---:|---:|---:|")
    for split, rate, seconds in ambiguity(args.device):
        print(f"| {split} | 8192 | {rate:.2%} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
