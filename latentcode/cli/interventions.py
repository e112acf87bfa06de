"""The `transfer` and `ablate` subcommands: thin shells over `latentcode.causal.experiments.run_experiment`.

Each prints the experiment's table and writes `<name>.csv`, `<name>.json` and `<name>.png` under `--out`
(default: `RUN/interventions`; a shipped checkpoint needs `--out`). No experiment logic lives here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latentcode.cli.util import _echo, _subparser


def _layers(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--layers={text!r}: give model layer numbers, e.g. 0,1,2") from None


class _DeprecatedAlias(argparse.Action):
    """An old option spelling: stores into the new option's `dest` and says, on stderr, which spelling to use."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None):
        sys.stderr.write(f"note: {option_string} is deprecated and will be removed; use {self.new} {values}\n")
        setattr(namespace, self.dest, values)


def _common(parser: argparse.ArgumentParser, split: str) -> None:
    parser.add_argument("run", metavar="RUN", type=Path, help="run directory")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where the CSV, JSON and figure go (default: RUN/interventions; required for a "
                        "shipped checkpoint)")
    parser.add_argument("--n-samples", dest="n_samples", type=int, default=1024,
                        help="instances drawn (default: 1024)")
    parser.add_argument("--split", default=split, help=f"split drawn from (default: {split})")
    parser.add_argument("--layers", type=_layers, default=None,
                        help="model layers, comma-separated (default: each layer, then all at once)")
    parser.add_argument("--seed", type=int, default=0, help="batch seed (default: 0)")
    parser.add_argument("--device", default="cpu", help="device for the model (default: cpu)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar (default: only on a terminal)")


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
        example="latentcode transfer runs/sraven-hyla-small-s0 --out results/transfer",
    )
    _common(parser, "test")
    parser.add_argument("--positions", choices=("row", "paper"), default="row",
                        help="which codes of the query are transplanted: its whole row, over every key (row, "
                        "default), or only the paper's (query, key) positions (paper)")
    parser.add_argument("--pairs", dest="positions", choices=("row", "paper"), action=_DeprecatedAlias,
                        new="--positions", help="deprecated spelling of --positions")
    return parser


def _cmd_transfer(args: argparse.Namespace) -> int:
    from latentcode.causal.experiments import run_experiment

    result, paths = run_experiment(
        args.run, "transfer", out_dir=args.out, device=args.device, n_samples=args.n_samples, split=args.split,
        seed=args.seed, layers=args.layers, whole_row=args.positions == "row", progress=args.progress,
    )
    _echo(result.table())
    _echo("written: " + ", ".join(str(p) for p in paths))
    return 0


def _add_ablate_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "ablate",
        help="ablate each layer's latent codes and print the drop of the task metric",
        description="Replace every latent code of one layer at a time (then of all layers at once) by its mean "
        "over reference instances (or zero, or another instance's codes) and print the task metric with and "
        "without, on the chosen split (default ood).",
        example="latentcode ablate runs/fuzzy_logic-hyla-small-s0 --method mean --out results/ablation",
    )
    _common(parser, "ood")
    parser.add_argument("--method", choices=("mean", "zero", "resample"), default="mean",
                        help="replacement (default: mean)")
    parser.add_argument("--reference-split", default="train",
                        help="split whose codes give the mean or the resampled codes (default: train)")
    return parser


def _cmd_ablate(args: argparse.Namespace) -> int:
    from latentcode.causal.experiments import run_experiment

    result, paths = run_experiment(
        args.run, "ablate", out_dir=args.out, device=args.device, n_samples=args.n_samples, split=args.split,
        reference_split=args.reference_split, seed=args.seed, layers=args.layers, method=args.method,
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
