"""The Markdown tables of the SRAVEN Fig. 5 results, built from the committed files only: one function per table
(`table_snapshots`, `table_decode`, `table_cluster`, `table_similarity`, `table_transfer`, `table_claims`,
`table_emergence`, all in `TABLES` by kind), each taking the results folder (relative to the repository root) and the
models' names and returning the table's lines. docs/fig5_tables.py is the command line that prints them.

The tables read results/fig5/NAME-stepN/ (written by `python sweeps/fig5.py run`, with
`latentcode.pipelines.fig5`) and results/emergence/NAME/emergence.csv (`latentcode emergence`); each model is
shown at its latest step. Nothing here imports torch.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
             "(control) | difference (95%) | keeps the recipient's answer | recipient's answer unpatched | pairs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s, folder in _models(base, names):
        for suffix, split in (("", "test"), ("_ood", "ood")):
            for r in _csv(folder / f"rule_transfer{suffix}.csv"):
                control, difference = "–", "–"  # results written before the control
                if r.get("control"):
                    diff, half = transfer_difference(r)
                    control, difference = _f(r["control"]), f"{diff:+.3f} ± {half:.3f}"
                lines.append(f"| {_who(s)} | {split} | {r['layer']} | {_f(r['transfer'])} | {control} | "
                             f"{difference} | {_f(r['keep'])} | {_f(r['clean_keep'])} | {r['n_pairs']} |")
    return lines


def _similarity_rank(folder: Path, layer: str, centered: bool) -> tuple[float, int]:
    """cos(addition, subtraction) and its rank among the 28 rule pairs (1 = the most similar)."""
    pairs = sorted((r for r in _csv(folder / "similarity.csv") if r["layer"] == layer
                    and r["centered"] == str(centered)), key=lambda r: -float(r["cosine"]))
    at = next(i for i, r in enumerate(pairs) if (r["rule_a"], r["rule_b"]) == PAIR)
    return float(pairs[at]["cosine"]), at + 1


def transfer_difference(row: dict[str, str]) -> tuple[float, float]:
    """Transfer minus control for one row of `rule_transfer*.csv` and the half-width of its 95% interval: the paired
    one `rule_transfer` records (`difference`, `difference_ci`: both shares over the same recipients); for results
    written before it, 1.96 standard errors with the two shares taken as independent binomials over their pairs
    (`n_pairs`, `n_control_pairs`), which ignores their covariance."""
    if row.get("difference_ci"):
        return float(row["difference"]), float(row["difference_ci"])
    p, q = float(row["transfer"]), float(row["control"])
    n, m = int(row["n_pairs"]), int(row["n_control_pairs"])
    return p - q, 1.96 * math.sqrt(p * (1 - p) / n + q * (1 - q) / m)


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
         "yes if > 0.1; ± is the difference's 95% interval, paired over the recipients that have a control "
         "(results written before it: the two shares as independent binomials), and a verdict whose interval "
         "holds the bar is marked close"),
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
            diff, half = transfer_difference(row)
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
