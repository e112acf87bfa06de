"""Decodability against generalisation across every run with results: one table and one figure.

SRAVEN's rows are the emergence tables (`latentcode emergence`, `results/emergence/<run>/emergence.csv`: every
snapshot, held-out rule sets); fuzzy logic's runs keep no snapshots, so their rows are the last step of each shipped
seed, from the probe suite (`results/probing/fuzzy_logic-*/`: the linear probe's exact-set accuracy on held-out term
pairs, beside the model's held-out R²). The statistics are `probes.across_runs`'. Run it as

    python -m latentcode.pipelines.across_runs --out results/probing/across_runs
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
from pathlib import Path

from probes.across_runs import AcrossRuns, RunPoint, across_runs, read_emergence
from probes.figures.save import save_figure

__all__ = ["collect_points", "main", "suite_summary", "write_across_runs"]

logger = logging.getLogger(__name__)


def _variant(run: str) -> str:
    return run.split("-")[1]


def collect_points(emergence: str | os.PathLike = "results/emergence",
                   probing: str | os.PathLike = "results/probing") -> list[RunPoint]:
    """Every emergence row under `emergence/<run>/emergence.csv`, and the last-step rows of the probe-suite folders
    under `probing/` of runs that have no emergence table (the fuzzy-logic seeds).

    Raises:
        FileNotFoundError: neither folder holds any rows.
    """
    points: list[RunPoint] = []
    for path in sorted(Path(emergence).glob("*/emergence.csv")):
        run = path.parent.name
        points += read_emergence(path, run, _variant(run), task=run.split("-")[0])
    for suite in sorted(Path(probing).glob("*/suite.json")):
        info = json.loads(suite.read_text())
        if info["task"] == "sraven":  # SRAVEN's rows are the emergence tables'
            continue
        name = suite.parent.name
        run = name if name.rsplit("-", 1)[-1].startswith("s") and name.rsplit("-", 1)[-1][1:].isdigit() \
            else f"{name}-s0"
        with (suite.parent / "baselines.csv").open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row["split"] == "ood":
                    points.append(RunPoint(run, info["task"], _variant(run), int(info["step"]), row["layer"],
                                           float(info["model_accuracy"]["ood"]), float(row["linear"]),
                                           float(row["majority"]), float(row["input_only"])))
    if not points:
        raise FileNotFoundError(f"no emergence tables under {emergence} and no probe-suite results under {probing}; "
                                "run `latentcode emergence RUN` or `python -m latentcode.pipelines.probe_suite RUN`")
    return points


def suite_summary(probing: str | os.PathLike = "results/probing", split: str = "ood", prefix: str = "") -> str:
    """One markdown table of every probe-suite folder under `probing` whose name starts with `prefix`, on `split`:
    per model and layer, the majority
    floor, each probe on the codes with the same probe on the inputs in brackets, the untrained model's linear
    probe, the conditional difference with its interval and its V-information, and the MDL compressions (codes,
    raw inputs, no features)."""
    lines = ["| model | layer | majority | linear (inputs) | PCA-k (inputs) | kNN (inputs) | MLP (inputs) | untrained "
             "linear | conditional Δ [95% CI] | I_V bits/row | MDL compression: codes / inputs / prior only |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]

    def read(path: Path) -> list[dict[str, str]]:
        with path.open(newline="") as fh:
            return list(csv.DictReader(fh))

    for folder in sorted(p.parent for p in Path(probing).glob(f"{prefix}*/suite.json")):
        baselines = [r for r in read(folder / "baselines.csv") if r["split"] == split]
        conditional = {r["layer"]: r for r in read(folder / "conditional.csv") if r["split"] == split}
        mdl = {r["layer"]: r for r in read(folder / "mdl.csv")}
        for row in baselines:
            pca = next(k for k in row if k.startswith("pca") and not k.endswith(" inputs"))
            c, m = conditional[row["layer"]], mdl[row["layer"]]
            pair = [f"{float(row[k]):.3f} ({float(row[k + ' inputs']):.3f})" for k in ("linear", pca, "knn", "mlp")]
            lines.append(
                f"| {folder.name} | {row['layer']} | {float(row['majority']):.3f} | {' | '.join(pair)} | "
                f"{float(row['untrained linear']):.3f} | {float(c['difference']):+.3f} [{float(c['difference_low']):+.3f}, "
                f"{float(c['difference_high']):+.3f}] | {float(c['information']):+.2f} | "
                f"{float(m['compression']):.2f} / {float(m['inputs_compression']):.2f} / "
                f"{float(m['prior_compression']):.2f} |")
    return "\n".join(lines)


def write_across_runs(out_dir: str | os.PathLike, emergence: str | os.PathLike = "results/emergence",
                      probing: str | os.PathLike = "results/probing", command: str | None = None) -> AcrossRuns:
    """Write `points.csv`, `correlations.csv`, `across_runs.json`, `table.txt`, `across_runs.png` and
    `summary_<split>.md` (`suite_summary` on test and ood) to `out_dir`."""
    result = across_runs(collect_points(emergence, probing))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("points.csv", result.to_rows()),
                       ("correlations.csv", [{k: v for k, v in c.items() if k != "interval"}
                                             | {"low": c["interval"][0], "high": c["interval"][1]}
                                             for c in result.to_dict()["correlations"]])):
        with (out / name).open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in r.items()} for r in rows)
    (out / "across_runs.json").write_text(json.dumps(result.to_dict() | {"command": command}, indent=1) + "\n")
    (out / "table.txt").write_text(result.table() + "\n")
    save_figure(result.plot(), out / "across_runs", formats=("png",))
    for split in ("test", "ood"):
        (out / f"summary_{split}.md").write_text(suite_summary(probing, split) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m latentcode.pipelines.across_runs",
        description="Decodability against the model's held-out score over every run with results.",
        epilog="example: python -m latentcode.pipelines.across_runs --out results/probing/across_runs",
    )
    parser.add_argument("--out", required=True, help="folder for the table and figure")
    parser.add_argument("--emergence", default="results/emergence", help="folder of emergence tables")
    parser.add_argument("--probing", default="results/probing", help="folder of probe-suite results")
    args = parser.parse_args(argv)
    command = "python -m latentcode.pipelines.across_runs " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        result = write_across_runs(args.out, args.emergence, args.probing, command)
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"error: {err}\n")
    sys.stdout.write(result.table() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
