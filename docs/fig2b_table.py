"""The Markdown table of results/fig2b/README.md: per decoded checkpoint, the mean per-term F1 of the codes on
held-out term pairs, per layer, beside the "always present" floor and the input-only control.

    python docs/fig2b_table.py [results/fig2b]

Each `<checkpoint>.decode.json` there is `latentcode decode` of a shipped fuzzy-logic checkpoint's codes (the
Table A1 runs at sequence length 32, and the Fig. 2B runs at the paper's setting, `fuzzy_logic_latent-<variant>`).
The setting column comes from `checkpoints/<checkpoint>/config.json` of the checkout the results folder is in.
Files written before the floor was stored get it from their per-term support, as
`probes.decoding.floors.always_present_f1` computes it.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's probes package, also when run as `python docs/fig2b_table.py`

RESULTS = Path("results/fig2b")
VARIANTS = ("softmax", "linear", "hyla")
SPLIT = "ood"
"""Held-out term pairs (the paper's Fig. 2B reads the codes on compositions not trained on)."""


def term_scores(decoding: dict[str, Any], split: str = SPLIT) -> dict[str, Any]:
    """Per layer the mean F1 over the probed terms with a defined F1, the "always present" floor and the
    input-only control of one `.decode.json`, on `split`."""
    from probes import extras_from_dict

    terms = extras_from_dict(decoding)["terms"]
    layers = {}
    for name, row in zip(terms["layers"], terms["f1"][split], strict=True):
        defined = [v for v in row if v is not None and not math.isnan(v)]
        layers[name] = sum(defined) / len(defined) if defined else math.nan
    floor = (terms.get("always_present_f1") or {}).get(split)
    if floor is None:  # written before the floor was stored: 2s / (n + s) per probed term, s of the split's n rows
        n, support = decoding["baselines"][split]["n_samples"], terms["support"][split]
        floor = sum(2 * support[c] / (n + support[c]) for c in terms["evaluated"]) / len(terms["evaluated"])
    return {"layers": layers, "always_present": floor, "input_only": (terms.get("input_only_f1") or {}).get(split),
            "constant": list(terms.get("constant_layers") or [])}


def _setting(name: str, checkpoints: Path) -> str:
    path = checkpoints / name / "config.json"
    if not path.is_file():
        return "–"
    params = json.loads(path.read_text())["task"]["params"]
    return f"{params['seq_len']}, {params['frac_ood']:.0%}"


def _order(path: Path) -> tuple:
    task, variant, *seed = path.name.removesuffix(".decode.json").split("-")
    return (task, VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS), variant, seed)


def _cell(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def cmd_table(args: argparse.Namespace) -> int:
    """Markdown: one row per decoded checkpoint (the Table A1 runs, then the Fig. 2B runs), then which layers'
    codes were constant."""
    folder = (ROOT / args.results).resolve()  # relative to the repository root, or absolute
    checkpoints = folder.parents[1] / "checkpoints"  # <checkout>/results/fig2b -> <checkout>/checkpoints
    files = sorted(folder.glob("*.decode.json"), key=_order)
    if not files:
        print(f"no .decode.json files in {args.results}", file=sys.stderr)
        return 1
    rows = [(path.name.removesuffix(".decode.json"), term_scores(json.loads(path.read_text()))) for path in files]
    layers = list(dict.fromkeys(layer for _, scores in rows for layer in scores["layers"]))
    print("| checkpoint | sequence length, pairs held out | "
          + " | ".join("all layers" if layer == "all" else f"layer {layer}" for layer in layers)
          + " | always present | input-only | codes − best, best layer |")
    print("|---|---|" + "---|" * (len(layers) + 3))
    for name, scores in rows:
        best_layer = max(scores["layers"], key=lambda layer: -math.inf if math.isnan(scores["layers"][layer])
                         else scores["layers"][layer])
        baseline = max(v for v in (scores["always_present"], scores["input_only"]) if v is not None)
        margin = scores["layers"][best_layer] - baseline
        where = "all layers" if best_layer == "all" else f"layer {best_layer}"
        best = "n/a" if math.isnan(margin) else f"{margin:+.3f} ({where})"
        cells = [_cell(scores["layers"].get(layer)) for layer in layers]
        print(f"| {name} | {_setting(name, checkpoints)} | " + " | ".join(cells)
              + f" | {_cell(scores['always_present'])} | {_cell(scores['input_only'])} | {best} |")
    constant = [f"{name} ({', '.join(scores['constant'])})" for name, scores in rows if scores["constant"]]
    if constant:
        print(f"\nConstant codes (their F1 reads rounding noise): {'; '.join(constant)}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=RESULTS)
    return cmd_table(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
