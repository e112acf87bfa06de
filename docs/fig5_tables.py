"""Docs generators for the SRAVEN Fig. 5 results: Markdown tables and figures from the committed files only.

    python docs/fig5_tables.py table KIND [--from DIR] NAME...   # one Markdown table (docs/gen_tables.py runs it)
    python docs/fig5_tables.py figure NAME --out PNG              # the emergence figure of one model
    python docs/fig5_tables.py accuracy NAME... --out PNG         # held-out accuracy of several models over training

The tables read results/fig5/NAME-stepN/ (written by `python sweeps/fig5.py run`, with
`latentcode.pipelines.fig5`) and results/emergence/NAME/emergence.csv (`latentcode emergence`); each model is
shown at its latest step. Nothing here imports torch; the figures use matplotlib through probes.figures.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("results/fig5")
PAPER_OOD_ACC = {"softmax": 56.56, "linear": 56.30, "hyla": 69.13}
"""Table A1's SRAVEN OOD accuracy (%), mean over 3 seeds (`latentcode.pipelines.fig5.PAPER_OOD_ACC`)."""
PAIR = ("addition", "subtraction")
"""Fig. 5E's pair: the paper's rules F (addition) and G (difference)."""


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def latest(base: str, name: str) -> Path | None:
    """The results folder of model `name` under `base` at its latest step (`NAME-stepNNNNNN`), or None."""
    found = sorted((ROOT / base).glob(f"{name}-step[0-9]*"), key=lambda p: int(p.name.rsplit("-step", 1)[1]))
    found = [p for p in found if (p / "fig5.json").is_file()]
    return found[-1] if found else None


def _models(base: str, names: list[str]) -> list[tuple[dict, Path]]:
    """(fig5.json, folder) of each named model that has results, at its latest step."""
    folders = [latest(base, name) for name in names]
    return [(json.loads((f / "fig5.json").read_text()), f) for f in folders if f is not None]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _f(value: float | str | None, digits: int = 3) -> str:
    if value is None or value == "":
        return "n/a"
    value = float(value)
    return "–" if math.isnan(value) else f"{value:.{digits}f}"


def _who(summary: dict) -> str:
    """The model's column or row label: its variant, the seed its name carries (`sraven-hyla-s1-step156250`) and the
    step, so two seeds of one variant stay apart."""
    seed = re.search(r"-s(\d+)(?:-|$)", summary.get("name", ""))
    return f"{summary['variant']}{f' seed {seed[1]}' if seed else ''}, {summary['label']}"


def table_snapshots(base: str, names: list[str]) -> list[str]:
    lines = ["| model | analysed at | results | held-out (OOD) accuracy at this step | paper, final (156,250 steps) "
             "| value network live (layers 0–3) |", "|---|---|---|---|---|---|"]
    for name in names:
        folder = latest(base, name)
        if folder is None:
            lines.append(f"| {name} | not analysed yet | – | – | – | – |")
            continue
        s = json.loads((folder / "fig5.json").read_text())
        live = s["model"].get("value_live_fraction")
        live = ", ".join(f"{v:.1%}" for v in live) if live else "n/a"
        acc, paper = s["model"].get("ood_acc"), s["paper_ood_acc"]
        lines.append(f"| {name} | {s['label']} | `{_rel(folder)}` | "
                     f"{_f(acc * 100, 1) + '%' if acc is not None else 'n/a'} | "
                     f"{_f(paper, 1) + '%' if paper is not None else 'n/a'} | {live} |")
    return lines


def table_decode(base: str, names: list[str]) -> list[str]:
    lines = ["| model | layer | OOD decoding | uniform | majority | input-only | control task | selectivity | "
             "codes − best floor |", "|---|---|---|---|---|---|---|---|---|"]
    for s, folder in _models(base, names):
        d = json.loads((folder / "decode.json").read_text())
        ood = d["headline"]["accuracy"]["ood"]
        control = d["controls"]["control_task"]["ood"]
        for i, layer in enumerate(ood["layers"]):
            acc = ood["codes"][i]
            lines.append(f"| {_who(s)} | {layer} | {_f(acc)} | {_f(ood['floors']['chance'])} | "
                         f"{_f(ood['floors']['majority'])} | {_f(ood['control'])} | {_f(control[i])} | "
                         f"{acc - control[i]:+.3f} | {ood['codes_minus_best'][i]:+.3f} |")
    return lines


def table_cluster(base: str, names: list[str]) -> list[str]:
    lines = ["| model | layer | AMI rule | ARI rule | AMI rule (OOD rows) | AMI target | ARI target |",
             "|---|---|---|---|---|---|---|"]
    for s, folder in _models(base, names):
        rows = {(r["label"], r["rows"], r["layer"]): r for r in _csv(folder / "clustering.csv")}
        for layer in dict.fromkeys(r[2] for r in rows):
            rule, rule_ood, target = (rows[(label, split, layer)] for label, split in
                                      (("rule", "all"), ("rule", "ood"), ("target", "all")))
            lines.append(f"| {_who(s)} | {layer} | {_f(rule['ami'])} | {_f(rule['ari'])} | {_f(rule_ood['ami'])} | "
                         f"{_f(target['ami'])} | {_f(target['ari'])} |")
    return lines


def table_similarity(base: str, names: list[str]) -> list[str]:
    lines = ["| model | layer | cos(addition, subtraction) | its rank of 28 pairs | median of the other 27 | "
             "most similar other pair | centred cos(addition, subtraction) | its rank (centred) |",
             "|---|---|---|---|---|---|---|---|"]
    for s, folder in _models(base, names):
        rows = _csv(folder / "similarity.csv")
        for layer in dict.fromkeys(r["layer"] for r in rows):
            cells = []
            for centered in ("False", "True"):
                pairs = sorted((r for r in rows if r["layer"] == layer and r["centered"] == centered),
                               key=lambda r: -float(r["cosine"]))
                at = next(i for i, r in enumerate(pairs) if (r["rule_a"], r["rule_b"]) == PAIR)
                others = sorted(float(r["cosine"]) for i, r in enumerate(pairs) if i != at)
                best = next(r for i, r in enumerate(pairs) if i != at)
                cells.append((_f(pairs[at]["cosine"]), f"{at + 1}", _f(others[len(others) // 2]),
                              f"{best['rule_a']}–{best['rule_b']} {_f(best['cosine'])}"))
            raw, centred = cells
            lines.append(f"| {_who(s)} | {layer} | {raw[0]} | {raw[1]} | {raw[2]} | {raw[3]} | {centred[0]} | "
                         f"{centred[1]} |")
    return lines


def table_transfer(base: str, names: list[str]) -> list[str]:
    lines = ["| model | split | layer transplanted | follows the donor's rule | same, from a same-rule donor "
             "(control) | keeps the recipient's answer | recipient's answer unpatched | pairs |",
             "|---|---|---|---|---|---|---|---|"]
    for s, folder in _models(base, names):
        for suffix, split in (("", "test"), ("_ood", "ood")):
            for r in _csv(folder / f"rule_transfer{suffix}.csv"):
                control = _f(r["control"]) if r.get("control") else "–"  # results written before the control
                lines.append(f"| {_who(s)} | {split} | {r['layer']} | {_f(r['transfer'])} | {control} | "
                             f"{_f(r['keep'])} | {_f(r['clean_keep'])} | {r['n_pairs']} |")
    return lines


def _similarity_rank(folder: Path, layer: str, centered: bool) -> tuple[float, int]:
    """cos(addition, subtraction) and its rank among the 28 rule pairs (1 = the most similar)."""
    pairs = sorted((r for r in _csv(folder / "similarity.csv") if r["layer"] == layer
                    and r["centered"] == str(centered)), key=lambda r: -float(r["cosine"]))
    at = next(i for i, r in enumerate(pairs) if (r["rule_a"], r["rule_b"]) == PAIR)
    return float(pairs[at]["cosine"]), at + 1


def transfer_interval(row: dict[str, str]) -> float:
    """Half-width of the 95% interval of transfer minus control for one row of `rule_transfer*.csv`: 1.96 standard
    errors, each share a binomial proportion over its own pairs (`n_pairs`, `n_control_pairs`), taken as
    independent. The two shares come from the same recipients, so this ignores their covariance."""
    p, q = float(row["transfer"]), float(row["control"])
    n, m = int(row["n_pairs"]), int(row["n_control_pairs"])
    return 1.96 * math.sqrt(p * (1 - p) / n + q * (1 - q) / m)


def table_claims(base: str, names: list[str]) -> list[str]:
    """The paper's Fig. 5 claims, each checked by a stated criterion on each model's committed results."""
    models = _models(base, names)
    if not models:
        return ["| paper's claim | result |", "|---|---|", f"| every claim | no results for {', '.join(names)} yet |"]
    claims = [
        ("5A/B: final-layer codes cluster by rule", "k-means (k = 8) AMI with the rule, last layer, every row; "
         "chance = 0; yes if ≥ 0.3"),
        ("5A/B: in early layers the target explains the clusters better than the rule",
         "layer 0: AMI with the target vs AMI with the rule; yes if target > rule"),
        ("5E: addition and difference share a code", "cosine of the two rule-average codes, all layers, centred "
         "(the grand mean removed); yes if it is the most similar of the 28 rule pairs"),
        ("5F: the rule of held-out rule sets decodes from the codes", "best layer's OOD accuracy minus the best "
         "of uniform, majority and input-only; yes if > 0.05"),
        ("5F: best in later layers", "layer with the best OOD accuracy; yes if in the second half"),
        ("5F: and not because the probe memorises inputs", "that layer's control-task selectivity; yes if > 0.05"),
        ("Rule transfer: the donor's codes carry the donor's rule", "share of OOD pairs whose answer becomes the "
         "donor rule's, all layers transplanted, minus the same share with a same-rule donor (the control); "
         "yes if > 0.1; ± is the difference's 95% interval (1.96 standard errors, the two shares taken as "
         "independent binomials over their pairs), and a verdict whose interval holds the bar is marked close"),
    ]
    lines = ["| paper's claim | criterion | " + " | ".join(_who(s) for s, _ in models) + " |",
             "|---|---|" + "---|" * len(models)]
    cells: list[list[str]] = [[] for _ in claims]
    for s, folder in models:
        cluster = {(r["label"], r["rows"], r["layer"]): float(r["ami"]) for r in _csv(folder / "clustering.csv")}
        last = s["codes"]["layers"][-1]
        ami = cluster[("rule", "all", last)]
        cells[0].append(f"{'yes' if ami >= 0.3 else 'no'} ({ami:.3f})")
        target, rule = cluster[("target", "all", "0")], cluster[("rule", "all", "0")]
        cells[1].append(f"{'yes' if target > rule else 'no'} (target {target:.3f}, rule {rule:.3f})")
        cosine, rank = _similarity_rank(folder, "all", True)
        raw, raw_rank = _similarity_rank(folder, "input-only", True)
        cells[2].append(f"{'yes' if rank == 1 else 'no'} ({cosine:.3f}, rank {rank} of 28; the raw key values "
                        f"alone: {raw:.3f}, rank {raw_rank})")
        d = json.loads((folder / "decode.json").read_text())
        ood = d["headline"]["accuracy"]["ood"]
        single = [i for i, layer in enumerate(ood["layers"]) if layer != "all"]
        best = max(single, key=lambda i: ood["codes"][i])
        margin = ood["codes_minus_best"][best]
        cells[3].append(f"{'yes' if margin > 0.05 else 'no'} (layer {ood['layers'][best]}: {ood['codes'][best]:.3f}, "
                        f"{margin:+.3f} over {ood['best_of']} {ood['best']:.3f})")
        cells[4].append(f"{'yes' if best >= len(single) / 2 else 'no'} (layer {ood['layers'][best]} of "
                        f"{len(single)})")
        selectivity = ood["codes"][best] - d["controls"]["control_task"]["ood"][best]
        cells[5].append(f"{'yes' if selectivity > 0.05 else 'no'} ({selectivity:+.3f})")
        row = {r["layer"]: r for r in _csv(folder / "rule_transfer_ood.csv")}["all"]
        transfer, control = float(row["transfer"]), float(row.get("control") or "nan")
        if math.isnan(control):  # results written before the control: no verdict without it
            cells[6].append(f"n/a ({transfer:.3f}; no control in these results: run them again)")
        else:
            diff, half = transfer - control, transfer_interval(row)
            close = ", close: the bar is inside the interval" if abs(diff - 0.1) < half else ""
            cells[6].append(f"{'yes' if diff > 0.1 else 'no'} ({transfer:.3f}, control {control:.3f}; "
                            f"{diff:+.3f} ± {half:.3f}{close})")
    for (claim, criterion), row in zip(claims, cells, strict=True):
        lines.append(f"| {claim} | {criterion} | " + " | ".join(row) + " |")
    return lines


def _live_cell(cells: dict[str, dict[str, str]]) -> str:
    """Live value-network units per layer ("19/3/5/27%"), or "n/a" for a model without them (softmax, linear)."""
    values = [float(r["live_fraction"]) if r.get("live_fraction") else math.nan
              for layer, r in cells.items() if layer != "all"]
    if all(math.isnan(v) for v in values):
        return "n/a"
    from probes.figures.emergence import format_live_percent

    return format_live_percent(values)


def table_emergence(base: str, names: list[str]) -> list[str]:
    """`latentcode emergence`'s tables (BASE/NAME/emergence.csv): per snapshot, held-out rule decoding per layer
    beside the input-only control and the majority floor, the selectivity of the layer that decodes best, the
    model's accuracy and the percentage of live value-network units per layer (HYLA; n/a for linear value
    networks)."""
    tables = {name: _csv(ROOT / base / name / "emergence.csv") for name in names
              if (ROOT / base / name / "emergence.csv").is_file()}
    layers = list(dict.fromkeys(r["layer"] for rows in tables.values() for r in rows)) or ["all"]
    after_step = len(layers) + 5  # the columns after model and step
    per_layer = "/".join(f"L{x}" for x in layers if x != "all")
    lines = ["| model | step | " + " | ".join("all layers" if x == "all" else f"layer {x}" for x in layers)
             + f" | input-only | majority | selectivity, best-decoding layer | model OOD accuracy | live value units ({per_layer}) |",
             "|---" * (after_step + 2) + "|"]
    for name in names:
        if name not in tables:
            lines.append(f"| {name} | not measured yet |" + " – |" * after_step)
            continue
        rows = tables[name]
        for step in dict.fromkeys(r["step"] for r in rows):
            cells = {r["layer"]: r for r in rows if r["step"] == step}
            best = max(cells, key=lambda x: float(cells[x]["decoding"]))
            first = next(iter(cells.values()))
            lines.append(f"| {name} | {int(step):,} | " + " | ".join(_f(cells[x]["decoding"]) if x in cells else "–"
                                                                       for x in layers)
                         + f" | {_f(first['input_only'])} | {_f(first['majority'])} | "
                         f"{float(cells[best]['selectivity']):+.3f} ({'all layers' if best == 'all' else 'layer ' + best})"
                         f" | {_f(first['model_accuracy'])} | {_live_cell(cells)} |")
    return lines


TABLES = {"claims": table_claims, "emergence": table_emergence, "snapshots": table_snapshots, "decode": table_decode, "cluster": table_cluster,
          "similarity": table_similarity, "transfer": table_transfer}


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


def cmd_table(args: argparse.Namespace) -> int:
    sys.stdout.write("\n".join(TABLES[args.kind](args.base, args.names)) + "\n")
    return 0



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="a Markdown table from the committed results, each model at its latest step")
    table.add_argument("kind", choices=sorted(TABLES))
    table.add_argument("--from", dest="base", default=str(RESULTS),
                       help="folder of the results, relative to the repository root (default: results/fig5)")
    table.add_argument("names", nargs="+", help="models, e.g. sraven-softmax-s0 (their folders NAME-stepN)")
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
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
