"""The Markdown table of HYLA's lr probe (docs/campaign-log.md) from results/hyla_lr_probe.csv.

    python docs/hyla_lr_probe_table.py [results/hyla_lr_probe.csv] [--every 1000]

The CSV is `python sweeps/hyla_lr_probe.py collect`'s: per step, each lr's held-out loss, accuracy (all four
features right, and per feature) and live value units per layer, the probes' rows beside the campaign run's.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("results/hyla_lr_probe.csv")
LRS = ("1e-3", "3e-4")
CAMPAIGN = "sraven-hyla-s0"
"""The campaign run whose evaluations `collect` adds (its `run` column)."""


def _live(cell: str) -> str:
    from probes.figures.emergence import format_live_percent

    return format_live_percent([float(v) for v in cell.split(";")]) if cell else "n/a"


def cmd_table(args: argparse.Namespace) -> int:
    """Markdown: per step, each lr's held-out loss, accuracy (all four features right, and per feature) and live
    value units per layer (probes every `--every` steps, and the campaign run's evaluations)."""
    with (ROOT / args.results).open() as f:
        rows = list(csv.DictReader(f))
    cells = {(r["lr"], int(r["step"])): r for r in rows if int(r["step"]) % args.every == 0}
    steps = sorted({step for _, step in cells})
    print("| step | lr 1e-3: OOD loss | OOD accuracy (per feature) | live value units (L0/L1/L2/L3) "
          "| lr 3e-4: OOD loss | OOD accuracy (per feature) | live value units (L0/L1/L2/L3) |")
    print("|---|---|---|---|---|---|---|")
    for step in steps:
        line = [f"{step:,}"]
        for lr in LRS:
            r = cells.get((lr, step))
            tag = " (campaign run)" if r and r["run"] == CAMPAIGN else ""
            line += ([f"{float(r['ood_loss']):.3f}", f"{float(r['ood_acc']):.3f} ({float(r['ood_acc_per_feature']):.3f}){tag}",
                      _live(r["live_fraction"])] if r else ["–", "–", "–"])
        print("| " + " | ".join(line) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=RESULTS)
    parser.add_argument("--every", type=int, default=1000, help="show every this many steps (default: 1,000)")
    return cmd_table(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
