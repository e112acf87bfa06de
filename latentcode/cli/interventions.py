"""The `transfer` and `ablate` subcommands: thin shells over `latentcode.causal.experiments.run_experiment`.

RUN is a run directory or a shipped checkpoint's name (`--seed K` for another shipped seed), checked before torch
is imported. Each prints the experiment's table and writes `<name>.csv`, `<name>.json` and `<name>.png` under
`--out` (default: `RUN/interventions` for a run directory, `runs/analysis/NAME[-sSEED]/interventions` for a shipped
checkpoint, which is read in place and never written into). No experiment logic lives here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latentcode.cli.util import _add_progress, _add_run, _echo, _subparser, _where


def _layers(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--layers={text!r}: give model layer numbers, e.g. 0,1,2") from None


def _common(parser: argparse.ArgumentParser, split: str) -> None:
    _add_run(parser)
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="folder for the CSV, JSON and figure (default: RUN/interventions). A shipped "
                        "checkpoint's is runs/analysis/NAME[-sSEED]/interventions: it is read in place and never "
                        "written into")
    parser.add_argument("--n-samples", dest="n_samples", type=int, default=1024, metavar="N",
                        help="instances drawn (default: 1024)")
    parser.add_argument("--split", default=split, help=f"split drawn from (default: {split})")
    parser.add_argument("--layers", type=_layers, default=None,
                        help="model layers, comma-separated (default: each layer, then all at once)")
    parser.add_argument("--batch-seed", dest="batch_seed", type=int, default=0,
                        help="seed of the instances drawn (default: 0)")
    parser.add_argument("--device", default="cpu", help="device for the model (default: cpu)")
    _add_progress(parser)


def _add_transfer_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "transfer",
        help="transplant a donor's latent codes, layer by layer: does the answer follow the donor?",
        description="SRAVEN runs: rule transfer. Pairs whose rules differ in one feature; the donor's codes at "
        "that feature's query are transplanted; prints how often the answer becomes what the donor's rule gives "
        "on the recipient's panels, beside its control (the same count with a donor that has the recipient's own "
        "rules), against how often it stays the recipient's. Fuzzy-logic runs: function "
        "transfer. Donor and recipient share every x and differ in their terms; prints R² of the output against "
        "the donor's function and the recipient's.",
        example="latentcode transfer sraven-hyla --n-samples 256",
    )
    _common(parser, "test")
    parser.add_argument("--positions", choices=("row", "paper"), default="row",
                        help="row: the query's whole row (default); paper: the paper's positions. Which codes of "
                        "the query are transplanted: row, those of every key; paper, only the paper's (query, key) "
                        "positions")
    return parser


def _cmd_transfer(args: argparse.Namespace) -> int:
    run_dir, _, out = _where(args, args.run, "interventions")
    from latentcode.causal.experiments import run_experiment

    result, paths = run_experiment(
        run_dir, "transfer", out_dir=out, device=args.device, n_samples=args.n_samples, split=args.split,
        seed=args.batch_seed, layers=args.layers, whole_row=args.positions == "row", progress=args.progress,
    )
    _echo(result.table())
    _echo("written: " + ", ".join(str(p) for p in paths))
    return 0


def _add_ablate_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "ablate",
        help="ablate each layer's codes and print the drop of the task metric",
        description="Replace every latent code of one layer at a time (then of all layers at once) by its mean "
        "over reference instances (or zero, or another instance's codes) and print the task metric with and "
        "without, on the chosen split (default ood).",
        example="latentcode ablate fuzzy_logic-hyla --seed 1 --method mean --out runs/ablation",
    )
    _common(parser, "ood")
    parser.add_argument("--method", choices=("mean", "zero", "resample"), default="mean",
                        help="replacement (default: mean)")
    parser.add_argument("--reference-split", default="train", metavar="SPLIT",
                        help="split whose codes give the mean or resample (default: train)")
    return parser


def _cmd_ablate(args: argparse.Namespace) -> int:
    run_dir, _, out = _where(args, args.run, "interventions")
    from latentcode.causal.experiments import run_experiment

    result, paths = run_experiment(
        run_dir, "ablate", out_dir=out, device=args.device, n_samples=args.n_samples, split=args.split,
        reference_split=args.reference_split, seed=args.batch_seed, layers=args.layers, method=args.method,
        progress=args.progress,
    )
    _echo(result.table())
    _echo("written: " + ", ".join(str(p) for p in paths))
    return 0


COMMANDS: list[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = [
    (_add_transfer_parser, _cmd_transfer),
    (_add_ablate_parser, _cmd_ablate),
]
"""The intervention subcommands: (adds its parser, runs it)."""
