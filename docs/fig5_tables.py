"""Docs generators for the SRAVEN Fig. 5 results: Markdown tables and figures from the committed files only.

    python docs/fig5_tables.py table KIND [--from DIR] [NAME...] # one Markdown table (docs/gen_tables.py runs it);
                                                                  # no NAME: every model analysed in DIR
    python docs/fig5_tables.py figure NAME --out PNG              # the emergence figure of one model
    python docs/fig5_tables.py accuracy NAME... --out PNG         # held-out accuracy of several models over training

The tables read results/fig5/NAME-stepN/ (written by `python sweeps/fig5.py run`, with
`latentcode.pipelines.fig5`) and results/emergence/NAME/emergence.csv (`latentcode emergence`); each model is
shown at its latest step; the tables are built in docs/fig5_markdown.py. Nothing here imports torch; the
figures use matplotlib through probes.figures.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
if str(DOCS) not in sys.path:  # the table builders beside this script, also when it is loaded by file path
    sys.path.append(str(DOCS))

from fig5_markdown import (  # noqa: E402
    PAIR,
    PAPER_OOD_ACC,
    ROOT,
    TABLES,
    _csv,
    latest,
    table_claims,
    table_cluster,
    table_decode,
    table_emergence,
    table_similarity,
    table_snapshots,
    table_transfer,
    transfer_difference,
)

__all__ = [
    "PAIR", "PAPER_OOD_ACC", "RESULTS", "ROOT", "TABLES", "accuracy_figure", "accuracy_series", "latest", "main",
    "record_accuracy", "table_claims", "table_cluster", "table_decode", "table_emergence", "table_similarity",
    "table_snapshots", "table_transfer", "transfer_difference",
]

RESULTS = Path("results/fig5")


def cmd_figure(args: argparse.Namespace) -> int:
    """The emergence figure of one model from its committed table (matplotlib PNG), e.g. for the docs."""
    from probes.figures import emergence_figure, save_figure

    rows = _csv(ROOT / args.base / args.name / "emergence.csv")
    steps = sorted({int(r["step"]) for r in rows})
    span = f"step {steps[0]:,}" if len(steps) == 1 else f"steps {steps[0]:,}–{steps[-1]:,}"
    figure = emergence_figure(rows, title=f"When do rule codes appear? {args.name}, {span} "
                                          "of 156,250 (held-out rule combinations)")
    out = Path(args.out)
    save_figure(figure, out.with_suffix(""), formats=(out.suffix.lstrip(".") or "png",))
    print(f"written: {out}")
    return 0


TRAINING_STEPS = 156_250
"""Table A1's SRAVEN training length (issue 19), where the accuracy figure ends."""
VARIANT_ORDER = ("softmax", "linear", "hyla")
SEED_STYLES = ("-", "--", "-.", ":")


def accuracy_series(base: str, name: str) -> tuple[list[int], list[float]]:
    """(steps, the model's own held-out accuracy) of one model, from its committed emergence table (one point per
    snapshot)."""
    path = ROOT / base / name / "emergence.csv"
    if not path.is_file():
        found = sorted(p.parent.name for p in (ROOT / base).glob("*/emergence.csv"))
        raise SystemExit(f"{base}/{name}/emergence.csv does not exist; models with a committed emergence table: "
                         f"{', '.join(found) or 'none'} (`latentcode emergence RUN --out {base}/NAME` makes one)")
    by_step = {int(r["step"]): float(r["model_accuracy"]) for r in _csv(path)}
    return sorted(by_step), [by_step[step] for step in sorted(by_step)]


def record_accuracy(records: Path, name: str) -> dict[int, float]:
    """{step: held-out accuracy} from a run's committed training record (`metrics.jsonl`, the `ood` rows): its
    shipped checkpoint's (`checkpoints/sraven-<variant>` for seed 0, `...-s<seed>` for the others), else its
    in-progress resume state's (`checkpoints/in-progress/<name>`); {} when neither is committed. The emergence
    tables' `model_accuracy` is read from the same rows."""
    from latentcode.pipelines.emergence import model_accuracy
    from latentcode.rundir.checkpoint import read_metrics
    from latentcode.rundir.pretrained import pretrained_name

    task, variant, seed = name.split("-")[:3]
    shipped = pretrained_name(f"{task}-{variant}", int(seed.removeprefix("s")))

    for folder in (records / shipped, records / "in-progress" / name):
        if (folder / "metrics.jsonl").is_file():
            return model_accuracy(read_metrics(folder), "acc")
    return {}


def accuracy_figure(base: str, names: list[str], records: Path | None = None):
    """Held-out accuracy over training of several SRAVEN models (`sraven-<variant>-s<seed>`), one colour per
    variant and one line style per seed, each variant's final Table A1 value from the paper as a dotted line of
    its colour, and the end of training marked: how far each run is, and whether one variant passes another.

    The points come from the committed emergence tables. Where a snapshot was lost before it was analysed, the
    model's accuracy at that step is read from the run's committed training record (`records`, default
    checkpoints/: see `record_accuracy`) and drawn as a hollow marker; a step in neither breaks the line."""
    import matplotlib.pyplot as plt

    from probes.figures.emergence import missing_steps, with_gaps

    records = ROOT / "checkpoints" if records is None else records
    fig, ax = plt.subplots(figsize=(7.0, 4.3))
    variants = sorted({name.split("-")[1] for name in names},
                      key=lambda v: VARIANT_ORDER.index(v) if v in VARIANT_ORDER else len(VARIANT_ORDER))
    colors = {variant: f"C{i}" for i, variant in enumerate(variants)}
    for name in names:
        variant, seed = name.split("-")[1], name.split("-")[2]
        steps, accuracy = accuracy_series(base, name)
        style = SEED_STYLES[int(seed.removeprefix("s")) % len(SEED_STYLES)] if seed[1:].isdigit() else "-"
        missing = missing_steps(steps)  # a snapshot lost before it was analysed
        record = record_accuracy(records, name) if missing else {}
        filled = [s for s in missing if s in record]
        unknown = [s for s in missing if s not in record]  # in no record either: break the line there
        notes = []
        if filled:
            notes.append(f"{', '.join(f'{s:,}' for s in filled)} from the training record")
        if unknown:
            notes.append(f"no snapshot analysed at {', '.join(f'{s:,}' for s in unknown)}")
        gap = f" ({'; '.join(notes)})" if notes else ""
        points = dict(zip(steps, accuracy, strict=True)) | {s: record[s] for s in filled}
        x, y = with_gaps(sorted(points), [points[s] for s in sorted(points)])
        ax.plot(x, y, style, marker="o", ms=3, color=colors[variant],
                label=f"{name}: {accuracy[-1]:.3f} at step {steps[-1]:,}{gap}")
        if filled:
            ax.plot(filled, [record[s] for s in filled], "o", ms=6, mfc="white", color=colors[variant], zorder=3,
                    label="_nolegend_")
    for variant in variants:
        if variant in PAPER_OOD_ACC:
            ax.axhline(PAPER_OOD_ACC[variant] / 100, color=colors[variant], ls=":", lw=1.2,
                       label=f"paper, {variant}: {PAPER_OOD_ACC[variant] / 100:.3f} (final, mean of 3 seeds)")
    ax.axvline(TRAINING_STEPS, color="0.6", lw=1, ls="--", label=f"end of training ({TRAINING_STEPS:,} steps)")
    ax.set(xlim=(0, TRAINING_STEPS * 1.03), ylim=(0, 0.8), xlabel="training step",
           ylabel="model accuracy on held-out rule combinations",
           title="SRAVEN, Table A1 setting: held-out accuracy over training")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False, handlelength=3.5)
    return fig


def cmd_accuracy(args: argparse.Namespace) -> int:
    """The accuracy-over-training figure of several models from their committed emergence tables, a lost
    snapshot's accuracy from the run's committed training record (PNG)."""
    figure = accuracy_figure(args.base, args.names)
    out = Path(args.out)
    figure.savefig(out, dpi=150, bbox_inches="tight")
    print(f"written: {out}")
    return 0


def analysed_models(base: str) -> list[str]:
    """Every model with Fig. 5 results under `base` (a folder `NAME-stepN` holding fig5.json), softmax, linear
    attention, HYLA, then any other variant, each by seed."""
    names = {p.name.rsplit("-step", 1)[0] for p in (ROOT / base).glob("*-step[0-9]*") if (p / "fig5.json").is_file()}

    def order(name: str) -> tuple[int, str, int]:
        _, variant, seed = (name.split("-") + ["", ""])[:3]
        rank = VARIANT_ORDER.index(variant) if variant in VARIANT_ORDER else len(VARIANT_ORDER)
        return rank, variant, int(seed.removeprefix("s")) if seed.removeprefix("s").isdigit() else -1

    return sorted(names, key=order)


def cmd_table(args: argparse.Namespace) -> int:
    names = args.names or analysed_models(args.base)
    if not names:
        raise SystemExit(f"{args.base} holds no Fig. 5 results (folders NAME-stepN with a fig5.json); "
                         "`python sweeps/fig5.py run CHECKPOINT --name NAME-stepN` writes one")
    sys.stdout.write("\n".join(TABLES[args.kind](args.base, names)) + "\n")
    return 0



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="a Markdown table from the committed results, each model at its latest step")
    table.add_argument("kind", choices=sorted(TABLES))
    table.add_argument("--from", dest="base", default=str(RESULTS),
                       help="folder of the results, relative to the repository root (default: results/fig5)")
    table.add_argument("names", nargs="*", help="models, e.g. sraven-softmax-s0 (their folders NAME-stepN); "
                       "default: every model analysed there, softmax, linear, HYLA, each by seed")
    table.set_defaults(func=cmd_table)
    figure = sub.add_parser("figure", help="the emergence figure of one model from its committed table")
    figure.add_argument("name", help="a model with results/emergence/NAME/emergence.csv, e.g. sraven-softmax-s0")
    figure.add_argument("--from", dest="base", default="results/emergence",
                        help="folder of the tables, relative to the repository root (default: results/emergence)")
    figure.add_argument("--out", required=True, help="image file, e.g. docs/images/sraven_softmax_s0_emergence.png")
    figure.set_defaults(func=cmd_figure)
    accuracy = sub.add_parser("accuracy", help="held-out accuracy over training of several models, from their "
                              "committed emergence tables, beside the paper's final values")
    accuracy.add_argument("names", nargs="+", help="models with results/emergence/NAME/emergence.csv, e.g. "
                          "sraven-softmax-s0 sraven-hyla-s0")
    accuracy.add_argument("--from", dest="base", default="results/emergence",
                          help="folder of the tables, relative to the repository root (default: results/emergence)")
    accuracy.add_argument("--out", required=True, help="image file, e.g. docs/images/sraven_accuracy.png")
    accuracy.set_defaults(func=cmd_accuracy)
    # argparse gives a `*` positional its (empty) value before an option that follows the one before it: the names
    # after `table KIND --from DIR` come back unparsed
    args, rest = parser.parse_known_args(argv)
    if rest and (args.command != "table" or any(arg.startswith("-") for arg in rest)):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if rest:
        args.names = [*args.names, *rest]
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
