"""The result subcommands of `latentcode`: `table` (per-seed CSV and the mean ± s.e. Markdown table beside the
paper's Table A1), `export` (a finished run as a shippable checkpoint) and `pretrained` (the shipped checkpoints).

Each is a pair (adds its parser, runs it) in `COMMANDS`, which `latentcode/cli.py` appends to its own; the work
is a call into `latentcode.results` or `latentcode.pretrained`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latentcode._cli_util import _echo, _subparser

__all__ = ["COMMANDS"]



def _add_table_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "table",
        help="per-variant mean ± s.e. over seeds beside the paper's Table A1",
        description="Collect the final evaluation of each run directory (or read a results CSV written before) and "
        "print a Markdown table of the metric ×100, mean ± standard error over seeds per variant, beside the "
        "paper's Table A1 numbers. --csv writes the per-seed rows; unfinished runs are left out unless "
        "--include-unfinished.",
        example="latentcode table runs/table_a1_fuzzy_logic/*/ --csv results/table_a1_fuzzy_logic.csv",
    )
    parser.add_argument("runs", metavar="RUN", nargs="*", type=Path, help="run directories")
    parser.add_argument("--from", dest="from_csv", metavar="CSV", type=Path,
                        help="read the per-seed rows from a CSV written by --csv instead of run directories")
    parser.add_argument("--csv", metavar="FILE", type=Path, help="write the per-seed rows (test and ood) here")
    parser.add_argument("--split", default="ood", help="split of the table (default: ood)")
    parser.add_argument("--include-unfinished", action="store_true",
                        help="also count runs that have not reached their last step (marked by their step count)")
    parser.add_argument("--per-seed", action="store_true",
                        help="print one line per run (metric and value network live fraction per layer) instead "
                        "of the mean ± s.e. per variant")
    return parser


def _cmd_table(args: argparse.Namespace) -> int:
    from latentcode.results import (
        collect_results,
        markdown_table,
        read_results_csv,
        seed_table,
        summarize,
        write_results_csv,
    )

    if bool(args.runs) == bool(args.from_csv):
        raise ValueError("give run directories or --from CSV (exactly one of the two)")
    if args.from_csv and args.csv:
        raise ValueError("--csv writes rows collected from run directories; with --from the rows are already a CSV")
    rows = read_results_csv(args.from_csv) if args.from_csv else collect_results(args.runs)
    if args.csv:
        _echo(f"wrote {write_results_csv(rows, args.csv)} ({len(rows)} rows)")
    unfinished = sorted({r.run or f"{r.variant} seed {r.seed}" for r in rows if not r.finished})
    if unfinished and not args.include_unfinished:
        _echo(f"left out (unfinished): {', '.join(unfinished)}")
    if args.per_seed:
        table = seed_table(rows, split=args.split, finished_only=not args.include_unfinished)
        if table.count("\n") < 2:
            raise ValueError(f"no finished run has a {args.split!r} evaluation; pass --include-unfinished to see "
                             "the partial numbers")
        _echo(table)
        return 0
    summaries = summarize(rows, split=args.split, finished_only=not args.include_unfinished)
    if not summaries:
        raise ValueError(f"no finished run has a {args.split!r} evaluation; pass --include-unfinished to see the "
                         "partial numbers")
    _echo(markdown_table(summaries))
    return 0


def _add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "export",
        help="copy a finished run as a shippable checkpoint (no optimizer state)",
        description="Write a finished run's config.json, model.safetensors and metrics.jsonl to DEST, with "
        "shipped.json recording the source run, the git commit and the evaluation to reproduce. DEST must not "
        "exist; nothing is overwritten.",
        example="latentcode export runs/table_a1_fuzzy_logic/fuzzy_logic-hyla-s0-frac0.7 checkpoints/fuzzy_logic-hyla",
    )
    parser.add_argument("run", metavar="RUN", type=Path, help="a finished run directory")
    parser.add_argument("dest", metavar="DEST", type=Path, help="the new checkpoint directory")
    parser.add_argument("--command", default="", help="the training command, recorded in shipped.json")
    return parser


def _cmd_export(args: argparse.Namespace) -> int:
    from latentcode.pretrained import export_checkpoint

    _echo(f"wrote {export_checkpoint(args.run, args.dest, command=args.command)}")
    return 0


def _add_pretrained_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "pretrained",
        help="list the shipped checkpoints and their recorded held-out metric",
        description="List the checkpoints that ship with latentcode (`latentcode.load_pretrained(NAME)`), with "
        "their folder and the held-out metric recorded when they were shipped. The folder is "
        "$LATENTCODE_CHECKPOINTS, else the checkpoints/ folder of the source tree.",
        example="latentcode pretrained",
    )
    return parser


def _cmd_pretrained(args: argparse.Namespace) -> int:
    from latentcode.pretrained import checkpoints_dir, list_pretrained, shipped_info

    folder = checkpoints_dir()
    _echo(f"shipped checkpoints in {folder}:")
    for name in list_pretrained():
        evaluation = shipped_info(folder / name)["evaluation"]
        metric = evaluation["metric"]
        cells = [f"{split} {metric} {record[metric]:.4f}" for split, record in evaluation["results"].items()]
        _echo(f"  {name:<24} {', '.join(cells)}")
    return 0


COMMANDS: list[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = [
    (_add_table_parser, _cmd_table),
    (_add_export_parser, _cmd_export),
    (_add_pretrained_parser, _cmd_pretrained),
]
"""The result subcommands: (adds its parser, runs it), for `latentcode/cli.py` to append to its own."""
