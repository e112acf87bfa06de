"""The campaign's Fig. 5 (SRAVEN) of one trained run or snapshot: `latentcode.pipelines.fig5` on the campaign's folders.

    python sweeps/fig5.py run RUN [--name NAME] [--no-umap]   # every analysis of one model; one command per model

`run` opens RUN once (a run directory, a snapshot RUN/snapshots/step-N or a shipped name) and calls
`fig5_analysis`: the big outputs (codes, decoding, transfer figures, the per-layer figures) go to runs/fig5/NAME/,
the small ones (`FIG5_FILES`: decode.json, rule_transfer[_ood].csv/.json, clustering.csv, similarity.csv and
fig5.json with the command behind every file) to results/fig5/NAME/. NAME defaults to `RUN-stepNNNNNN`, the step
of the weights read. The docs' tables and figures from these files are docs/fig5_tables.py's (`table`, `figure`,
`accuracy`).
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("results/fig5")
ANALYSES = Path("runs/fig5")
TRANSFER_SAMPLES = 8192
"""Instances each rule transfer draws: 1,650 to 2,050 usable pairs in the five finished SRAVEN models (about two
draws in three pair with a donor rule that has no defined answer on the recipient's panels), so transfer minus
control carries a 95% interval of about ±0.02 (±0.05 from 1,024 instances)."""


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def commands(run: str, name: str, analysis: Path, transfer_samples: int = TRANSFER_SAMPLES) -> dict[str, str]:
    """The library call behind each file of results/fig5/NAME (recorded in its fig5.json)."""
    call = (f"latentcode.pipelines.fig5.fig5_analysis(open_run({run!r}), out_dir={_rel(analysis)!r}, "
            f"transfer_samples={transfer_samples})")

    def transfer(split: str) -> str:
        return f"{call}: rule_transfer(split={split!r}, n_samples={transfer_samples}, seed=0)"

    return {
        "all": f"python sweeps/fig5.py run {run} --name {name} --transfer-samples {transfer_samples}",
        "codes": f"{call}: the codes at the paper's reading, {_rel(analysis)}/codes/paper.npz",
        "decode.json": f"{call}: decode_run, {_rel(analysis)}/codes/paper.decode.json",
        "rule_transfer.csv": transfer("test"),
        "rule_transfer.json": transfer("test"),
        "rule_transfer_ood.csv": transfer("ood"),
        "rule_transfer_ood.json": transfer("ood"),
        "clustering.csv": "latentcode.pipelines.fig5.cluster_rows(codes): probes.cluster_codes(codes, label=LABEL, "
                          "split=None|'ood', k=8, random_state=0), LABEL in rule, target",
        "similarity.csv": "latentcode.pipelines.fig5.similarity_rows(codes): probes.rule_similarity(codes, layer=L, "
                          "center=False|True) on every row, L = each layer and all; layer input-only: "
                          "probes.input_similarity(codes, 'rule', center=False|True), the same cosines of the "
                          "rule-average one-hot of the pair of raw values at the key positions",
    }


def _at_least_two(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of at least 2 instances (e.g. 8192)")
    return value


def cmd_run(args: argparse.Namespace) -> int:
    from latentcode.pipelines.fig5 import fig5_analysis, fig5_figures, results_name
    from latentcode.pipelines.opened_run import open_run

    try:
        run = open_run(args.run)
        name = args.name or results_name(run)
        analysis, results = ROOT / ANALYSES / name, ROOT / RESULTS / name
        result = fig5_analysis(run, out_dir=analysis, name=name, transfer_samples=args.transfer_samples,
                               progress=False)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"error: {e}") from None
    shown = _rel(run.path)
    result.summary["run"] = shown
    result.save(results, commands(shown, name, analysis, args.transfer_samples))
    fig5_figures(result.codes, analysis / "figures", umap=not args.no_umap)
    print(f"written: {_rel(results)} (figures: {_rel(analysis / 'figures')})")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="every Fig. 5 analysis of one SRAVEN run or snapshot")
    run.add_argument("run", help="run directory, snapshot (RUN/snapshots/step-N) or shipped name")
    run.add_argument("--name", help="folder name under runs/fig5 and results/fig5 (default: RUN-stepNNNNNN, the step "
                     "of the weights read, so a run still training never reuses an older step's analysis)")
    run.add_argument("--transfer-samples", type=_at_least_two, default=TRANSFER_SAMPLES, metavar="N",
                     help=f"instances each rule transfer draws (default {TRANSFER_SAMPLES:,}: about 2,000 usable pairs)")
    run.add_argument("--no-umap", action="store_true", help="skip the per-layer UMAPs (the slow part)")
    args = parser.parse_args(argv)
    return cmd_run(args)


if __name__ == "__main__":
    raise SystemExit(main())
