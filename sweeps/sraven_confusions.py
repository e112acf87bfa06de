"""Where the SRAVEN last-layer decoding ceiling comes from: confusions and the merged-rule score of the three shipped
SRAVEN checkpoints (issue 36).

    nice -n 10 python sweeps/sraven_confusions.py            # -> results/ceiling/sraven_confusions.csv
    nice -n 10 python sweeps/sraven_confusions.py --n-samples 1024 --out /tmp/x.csv

For each of `sraven-softmax`, `sraven-linear` and `sraven-hyla` (`latentcode.load_pretrained`), codes are extracted
as `latentcode decode` extracts them (paper positions, unpermuted inputs, `--n-samples` instances per split, seed
0), the last layer's rule probe is fitted on the train rows (`probes.decode_rules(layers="last")`, no controls), and
one row per held-out split records its accuracy beside the majority floor, its three largest confusions, how many
of its errors are addition <-> subtraction confusions (the two rules SRAVEN declares share a code,
`SRaven.shared_codes`), and the accuracy with those two merged beside the merged label's majority floor.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("results/ceiling/sraven_confusions.csv")
CHECKPOINTS = ("sraven-softmax", "sraven-linear", "sraven-hyla")
COLUMNS = [
    "checkpoint", "step", "layer", "split", "n_samples", "accuracy", "chance", "majority", "majority_class",
    "n_errors", "merged_group", "errors_within_group", "share_of_errors_within_group", "merged_accuracy",
    "merged_majority", "top_confusion_1", "top_confusion_2", "top_confusion_3",
]


def rows_of(name: str, n_samples: int) -> list[dict[str, object]]:
    """The CSV rows of one shipped checkpoint: its last-layer probe on each held-out split."""
    import numpy as np

    from latentcode import load_pretrained
    from latentcode.codes.extract import extract_latent_codes
    from probes import decode_rules

    run = load_pretrained(name)
    task = run.task
    codes = extract_latent_codes(run.model, task, n_samples=n_samples, checkpoint=run.checkpoint_hash,
                                 progress=False)
    merge = type(task).shared_codes["rule"]
    result = decode_rules(codes, layers="last", controls=False, progress=False, merge=merge)
    ((group,),) = (result.merged.groups,)
    members = [result.class_names.index(c) for c in group]
    out = []
    for split in result.splits:
        matrix = result.confusion(split)
        errors = int(matrix.sum() - np.trace(matrix))
        within = int(matrix[np.ix_(members, members)].sum() - np.trace(matrix[np.ix_(members, members)]))
        top = [f"{c.true} -> {c.predicted} {c.count}" for c in result.top_confusions(3, split)]
        out.append({
            "checkpoint": name,
            "step": run.step,
            "layer": result.last_layer,
            "split": split,
            "n_samples": result.baselines[split].n_samples,
            "accuracy": round(float(result.accuracy(split)[0]), 4),
            "chance": round(result.baselines[split].chance, 4),
            "majority": round(result.baselines[split].majority, 4),
            "majority_class": result.majority_class,
            "n_errors": errors,
            "merged_group": "+".join(group),
            "errors_within_group": within,
            "share_of_errors_within_group": round(within / errors, 4) if errors else "",
            "merged_accuracy": round(float(result.merged_accuracy(split)[0]), 4),
            "merged_majority": round(result.merged.baselines[split].majority, 4),
            **{f"top_confusion_{i + 1}": text for i, text in enumerate(top)},
        })
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-samples", type=int, default=2048, help="instances per split (default 2048, as decode)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"CSV to write (default {RESULTS})")
    parser.add_argument("--checkpoints", nargs="+", default=list(CHECKPOINTS), choices=CHECKPOINTS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy
    import torch

    torch.set_num_threads(1)
    rows = []
    for name in args.checkpoints:
        print(f"{name}: extracting {args.n_samples} instances per split and decoding the last layer", file=sys.stderr)
        rows += rows_of(name, args.n_samples)
    out = args.out if args.out.is_absolute() else ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(f"{row['checkpoint']:<15} {row['split']:<5} acc {row['accuracy']:.3f} (majority {row['majority']:.3f}) "
              f"errors {row['n_errors']}, {row['errors_within_group']} {row['merged_group']} "
              f"({row['share_of_errors_within_group']}); merged {row['merged_accuracy']:.3f} "
              f"(majority {row['merged_majority']:.3f})")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
