"""Wall time of the probe suite on synthetic SRAVEN-shaped codes (the paper's shape: 4 layers x 16 heads x 1 query x
2 keys = 128 features, 8 rules), 20,000 rows by default. Not a test; prints a markdown table for docs/benchmarks.md.

    .venv/bin/python bench/bench_probes.py [--n 20000] [--repeats 3] [--umap-full]

Each figure is the median of `--repeats` calls (UMAP: the first call, which pays numba's JIT, is shown apart).
Needs no torch: the probes package works on numpy arrays.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np

from probes import (
    LatentCodes,
    cluster_codes,
    decode_rules,
    embed_codes,
    rule_similarity,
    topographic_similarity,
)


def synthetic_codes(n: int, seed: int = 0, planted: bool = True) -> LatentCodes:
    """SRAVEN-shaped codes: rule clusters in layers 2-3 (unless not `planted`) plus noise, 82 of 330 rule
    combinations held out."""
    rng = np.random.default_rng(seed)
    combos = np.array(list(itertools.combinations_with_replacement(range(8), 4)))
    order = rng.permutation(len(combos))
    split = rng.choice(["train", "test", "ood"], size=n, p=[0.5, 0.25, 0.25])
    held_out, trained = combos[order[:82]], combos[order[82:]]
    rules = np.where(
        (split == "ood")[:, None],
        held_out[rng.integers(82, size=n)],
        trained[rng.integers(len(trained), size=n)],
    )
    rule = rules[:, -1]
    codes = rng.normal(size=(n, 4, 16, 1, 2))
    for layer in (2, 3) if planted else ():
        codes[:, layer] += rng.normal(size=(8, 16, 1, 2))[rule]
    return LatentCodes(
        codes=codes.astype(np.float32),
        labels={"rule": rule, "rules": rules, "target": rng.integers(8, size=n)},
        split=split,
        meta={
            "task": "sraven",
            "label": "rule",
            "n_classes": 8,
            "layers": [0, 1, 2, 3],
            "score_norm": "softmax",
        },
    )


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20000, help="rows of synthetic codes (default 20000)")
    parser.add_argument("--repeats", type=int, default=3, help="calls per measurement; the median is shown")
    parser.add_argument(
        "--umap-full", action="store_true", help="also time UMAP on every row (about a minute)"
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", ImportWarning)
    codes = synthetic_codes(args.n)
    groups = "each+all (4 layers + all)"
    rows: list[tuple[str, str, float]] = []

    def add(what: str, detail: str, fn, repeats: int = args.repeats) -> None:
        seconds = timed(fn, repeats)
        rows.append((what, detail, seconds))
        print(f"  {what}: {seconds:.2f} s", file=sys.stderr)

    add("decode_rules", f"{groups}; fit on train, score test + ood", lambda: decode_rules(codes))
    noise = synthetic_codes(args.n, planted=False)
    add(
        "decode_rules, structureless codes",
        "the same on pure noise (slowest convergence)",
        lambda: decode_rules(noise),
    )
    add(
        "cluster_codes",
        f"{groups}; k-means k=8, n_init=4, silhouettes on 2,000",
        lambda: cluster_codes(codes),
    )
    add("rule_similarity", "all layers", lambda: rule_similarity(codes))
    add("topographic_similarity", f"{groups}; 20,000 pairs", lambda: topographic_similarity(codes))
    add(
        "embed_codes pca",
        f"last layer, all {args.n:,} rows",
        lambda: embed_codes(codes, "pca", max_points=None),
    )
    add(
        "embed_codes umap, first call",
        "last layer, 3,000 rows; includes numba JIT",
        lambda: embed_codes(codes, "umap", max_points=3000),
        repeats=1,
    )
    add("embed_codes umap", "last layer, 3,000 rows (report default)", lambda: embed_codes(codes, "umap"))
    if args.umap_full:
        add(
            "embed_codes umap",
            f"last layer, all {args.n:,} rows",
            lambda: embed_codes(codes, "umap", max_points=None),
            repeats=1,
        )

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"`.venv/bin/python bench/bench_probes.py{' '.join([''] + (argv or sys.argv[1:]))}` on "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load average {load:.1f} at the end; {args.n:,} rows x 128 features, "
        f"median of {args.repeats}\n"
    )
    print("| analysis | what | seconds |")
    print("|---|---|---:|")
    for what, detail, seconds in rows:
        print(f"| {what} | {detail} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
