"""Markdown tables of docs/probes.md and results/probing/README.md from the committed probe-suite results (`docs/gen_tables.py` runs it):

    python docs/probing_table.py suite results/probing SPLIT PREFIX     # per model and layer (suite_summary)
    python docs/probing_table.py correlations results/probing/across_runs/correlations.csv
"""

from __future__ import annotations

import csv
import math
import sys

from latentcode.pipelines.across_runs import suite_summary


def correlations(path: str) -> str:
    lines = ["| task | layer | rows | points | runs | Spearman ρ | p | 95% CI (bootstrap) | ρ, decoding − floor |",
             "|---|---|---|---:|---:|---:|---:|---|---:|"]
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            low, high = (float(r[k]) if r[k] not in ("", "None") else math.nan for k in ("low", "high"))
            ci = "–" if math.isnan(low) else f"[{low:+.2f}, {high:+.2f}]"
            p = "–" if r["p_value"] in ("", "None") or math.isnan(float(r["p_value"])) else f"{float(r['p_value']):.2g}"
            lines.append(f"| {r['task']} | {r['layer']} | {r['rows']} | {r['n']} | {r['n_runs']} | "
                         f"{float(r['rho']):+.2f} | {p} | {ci} | {float(r['rho_above_floor']):+.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    sys.stdout.write((suite_summary(*args) if kind == "suite" else correlations(*args)) + "\n")
