"""Training speed of a run over stretches of its history, read from its metrics.jsonl: for each step range, the
median steps per second between consecutive train rows (their `elapsed_s` counts training time across resumes),
as `cpu_campaign.py status` measures a run's speed. The median, so a row interval stretched by a pause or an
evaluation does not move it. Use it to compare how one run trained before and after a change of threads or
machine. Not a test: nothing here asserts a timing.

    python bench/train_rate.py checkpoints/sraven-hyla-s2 --range 106000 122482 --range 122482 156250
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import statistics
from pathlib import Path

from latentcode.rundir.checkpoint import step_rates, train_rows


def rates(run: Path, first: int, last: int) -> list[float]:
    """Steps per second between consecutive train rows of `run` whose steps lie in [first, last]."""
    return step_rates([r for r in train_rows(run) if first <= r["step"] <= last])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory or a shipped checkpoint (it has metrics.jsonl)")
    parser.add_argument("--range", nargs=2, type=int, action="append", metavar=("FIRST", "LAST"), required=True,
                        help="a step range to measure (repeat for several)")
    args = parser.parse_args()
    if not (args.run / "metrics.jsonl").is_file():
        raise SystemExit(f"{args.run} has no metrics.jsonl: give a run directory or a shipped checkpoint")
    print("| steps | intervals | median steps/s | quartiles |")
    print("|---|---:|---:|---|")
    for first, last in args.range:
        found = rates(args.run, first, last)
        if len(found) < 4:
            print(f"| {first:,}–{last:,} | {len(found)} | – | too few train rows in this range |")
            continue
        q1, q2, q3 = statistics.quantiles(found, n=4)
        print(f"| {first:,}–{last:,} | {len(found)} | {q2:.2f} | {q1:.2f}–{q3:.2f} |")


if __name__ == "__main__":
    main()
