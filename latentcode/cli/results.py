"""The result subcommands of `latentcode`: `table` (per-seed CSV and the mean ± s.e. Markdown table beside the
paper's Table A1), `export` (a finished run as a shippable checkpoint), `pretrained` (the shipped checkpoints) and `emergence`
(rule decoding over a run's snapshots).

Each is a pair (adds its parser, runs it) in `COMMANDS`, which `app.py` appends to its own; the work
is a call into `latentcode.pipelines.results` or `latentcode.rundir.pretrained`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latentcode.cli.util import SEED_HELP, _add_progress, _add_run, _echo, _int_csv, _subparser, _where

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
        epilog="shipped checkpoints:\n  latentcode table fuzzy_logic-hyla fuzzy_logic-hyla-s1 fuzzy_logic-hyla-s2",
    )
    parser.add_argument("runs", metavar="RUN", nargs="*",
                        help="run directories or shipped checkpoints' names, a shipped seed as NAME-sSEED. "
                        "`latentcode pretrained` lists the names")
    parser.add_argument("--from", dest="from_csv", metavar="CSV", type=Path,
                        help="read the per-seed rows from a --csv file, not runs")
    parser.add_argument("--csv", metavar="FILE", type=Path, help="write the per-seed rows (test and ood) here")
    parser.add_argument("--split", default="ood", help="split of the table (default: ood)")
    parser.add_argument("--include-unfinished", action="store_true",
                        help="also show runs short of their last step. They are marked by their step count; a "
                        "variant with a finished seed averages its finished seeds only and lists the others beside")
    parser.add_argument("--per-seed", action="store_true",
                        help="one line per run, not the mean ± s.e. per variant. The line holds the metric and the "
                        "value network's live fraction per layer")
    return parser


def _cmd_table(args: argparse.Namespace) -> int:
    from latentcode.rundir.pretrained import resolve_run

    if bool(args.runs) == bool(args.from_csv):
        raise ValueError("give run directories or --from CSV (exactly one of the two)")
    if args.from_csv and args.csv:
        raise ValueError("--csv writes rows collected from run directories; with --from the rows are already a CSV")
    run_dirs = [resolve_run(target)[0] for target in args.runs]
    from latentcode.pipelines.results import (
        collect_results,
        markdown_table,
        read_results_csv,
        seed_table,
        summarize,
        write_results_csv,
    )

    rows = read_results_csv(args.from_csv) if args.from_csv else collect_results(run_dirs)
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
    parser.add_argument("run", metavar="RUN",
                        help="a finished run directory (or a shipped checkpoint's name, with --seed K for its seed K)")
    parser.add_argument("dest", metavar="DEST", type=Path, help="the new checkpoint directory")
    parser.add_argument("--seed", type=int, default=None, metavar="K", help=SEED_HELP)
    parser.add_argument("--command", default="", help="the training command, recorded in shipped.json")
    return parser


def _cmd_export(args: argparse.Namespace) -> int:
    from latentcode.rundir.pretrained import export_checkpoint, resolve_run

    run_dir, _ = resolve_run(args.run, args.seed)
    _echo(f"wrote {export_checkpoint(run_dir, args.dest, command=args.command)}")
    return 0


def _add_pretrained_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "pretrained",
        help="list the shipped checkpoints and their recorded held-out metric",
        description="List the checkpoints that ship with latentcode (`latentcode.load_pretrained(NAME)`), with "
        "their folder and the held-out metric recorded when they were shipped. The folder is "
        "$LATENTCODE_CHECKPOINTS, else the copy a regular install carries, else the checkpoints/ folder of "
        "the source tree (a clone or an editable install).",
        example="latentcode pretrained",
    )
    return parser


def _cmd_pretrained(args: argparse.Namespace) -> int:
    from latentcode.rundir.pretrained import checkpoints_dir, list_pretrained, shipped_info

    folder = checkpoints_dir()
    _echo(f"shipped checkpoints in {folder}:")
    for name in list_pretrained():
        evaluation = shipped_info(folder / name)["evaluation"]
        metric = evaluation["metric"]
        cells = [f"{split} {metric} {record[metric]:.4f}" for split, record in evaluation["results"].items()]
        _echo(f"  {name:<24} seed {evaluation['seed']}  {', '.join(cells)}")
    return 0


def _shown(path: Path) -> str:
    """A path as a recorded command shows it: relative to the working directory when inside it, so the record
    does not name this machine's folders."""
    resolved = path.resolve()
    return str(resolved.relative_to(Path.cwd())) if resolved.is_relative_to(Path.cwd()) else str(path)


def _same_run(recorded: str | None, run: Path) -> bool:
    """Whether the run an emergence table records is `run`: the same folder where the recorded path exists here,
    else (a table made on another machine) a folder of the same name. A table that records no run passes."""
    if not recorded:
        return True
    path = Path(recorded)
    return path.resolve() == run.resolve() if path.exists() else path.name == run.resolve().name


def _add_emergence_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "emergence",
        help="rule decoding and its controls per snapshot of a run (--train.snapshots=true)",
        description="Read the latent codes of every snapshot a run kept (trained with --train.snapshots=true) at "
        "the task's paper reading, decode the rule from them (probes fit on training rule sets, scored on held-out "
        "ones), and write one table per layer and step: decoding accuracy, the input-only control, control-task "
        "selectivity, chance, majority, the model's own held-out accuracy and, for HYLA-style value networks, the "
        "fraction of live value units (emergence.csv + .json), with its figure (emergence.png, emergence.html), into RUN/emergence/ (where `latentcode report RUN` finds and shows "
        "it) or --out. The folder must not hold them yet; --update adds new snapshots to them.",
        example="latentcode emergence runs/table_a1_sraven/sraven-hyla-s0 --update",
    )
    _add_run(parser, what=". It needs snapshots/: train it with --train.snapshots=true")
    parser.add_argument("--out", metavar="DIR", type=Path,
                        help="folder for the table and figure (default: RUN/emergence). The report finds it there; "
                        "a shipped checkpoint's is runs/analysis/NAME[-sSEED]/emergence")
    parser.add_argument("--n-samples", "--n", dest="n_samples", type=int, default=4096, metavar="N",
                        help="instances per split read at each snapshot (default: 4096). Twice extract's and "
                        "decode's 2048, for more held-out rows per rule; --n is the short spelling")
    parser.add_argument("--steps", type=_int_csv,
                        help="snapshot steps to read, comma-separated (default: all)")
    parser.add_argument("--update", action="store_true",
                        help="add new snapshots to --out's table, for runs still training. Without "
                        "it an --out that holds emergence.csv is refused; with it the same --n-samples is used, a column "
                        "an older table lacks is filled and the figure redrawn")
    _add_progress(parser)
    return parser


def _cmd_emergence(args: argparse.Namespace) -> int:
    from latentcode.constants import EMERGENCE_DIR, EMERGENCE_FILE, MODEL_FILE
    from latentcode.rundir.directory import record_outputs, require_writable_run
    from latentcode.rundir.files import RunFiles

    args.run, _, out = _where(args, args.run, EMERGENCE_DIR)
    if not any(RunFiles(args.run).snapshots.glob(f"step-*/{MODEL_FILE}")):  # said before torch is imported
        raise ValueError(f"{args.run} has no snapshots/step-*/ folders; train it with --train.snapshots=true")
    args.out = out if out is not None else args.run / EMERGENCE_DIR
    require_writable_run(args.out, "write an emergence table into")
    import matplotlib.pyplot as plt

    from latentcode.pipelines.emergence import rule_emergence, write_emergence
    from latentcode.rundir.weights import list_snapshots
    from probes.figures import PLOTLY_JS, emergence_figure, save_figure

    table = args.out / EMERGENCE_FILE
    previous: list[Any] = []
    meta: dict[str, Any] = {"run": _shown(args.run), "n_samples": args.n_samples, "commands": [],
                            "reading": "the task's paper reading (spec §4.1); SRAVEN instances unpermuted"}
    if args.update and table.is_file():
        from latentcode.pipelines.emergence import read_emergence, with_live_fraction

        meta = json.loads(table.with_suffix(".json").read_text())
        if not _same_run(meta.get("run"), args.run):
            raise ValueError(f"{table} holds the emergence of run {meta.get('run')}, not of {args.run}; write this "
                             "run's table to another --out")
        if meta.get("n_samples") != args.n_samples:
            raise ValueError(f"{table} was made with --n-samples {meta.get('n_samples')}; update it with the same "
                             "--n-samples (or write a new table to another --out)")
        previous = with_live_fraction(read_emergence(table), args.run)
        meta.setdefault("commands", [meta.pop("command")] if "command" in meta else [])
    else:
        for target in (table, table.with_suffix(".json"), args.out / "emergence.png", args.out / "emergence.html"):
            if target.exists():
                raise ValueError(f"{target} exists; choose another --out, or pass --update to add new snapshots "
                                 "(nothing else is overwritten)")
    done = {row.step for row in previous}
    wanted = [step for step, _ in list_snapshots(args.run) if args.steps is None or step in args.steps]
    missing = sorted(set(args.steps or ()) - {step for step, _ in list_snapshots(args.run)})
    if missing:
        raise ValueError(f"no snapshot of step(s) {missing} in {args.run}")
    new_steps = [step for step in wanted if step not in done]
    rows = rule_emergence(args.run, n_samples=args.n_samples, steps=new_steps,
                          progress=args.progress) if new_steps else []
    rows = sorted([*previous, *rows], key=lambda r: r.step)  # each step's layers keep their order
    command = f"latentcode emergence {_shown(args.run)} --out {_shown(args.out)} --n-samples {args.n_samples}" + (
        f" --steps {','.join(map(str, args.steps))}" if args.steps else "") + (" --update" if args.update else "")
    meta["commands"] = [*meta.get("commands", []), command]
    meta.pop("note", None)
    if previous:
        for target in (table, table.with_suffix(".json")):
            target.unlink()
    write_emergence(rows, table, meta=meta)
    figure = emergence_figure(rows, title=f"When do rule codes appear? {args.run.name} (held-out rule combinations)")
    written = save_figure(figure, args.out / "emergence", formats=("png", "html"))
    plt.close("all")
    shared_js = [args.out / PLOTLY_JS] if (args.out / PLOTLY_JS).is_file() else []  # the html figure loads it
    if args.out.resolve().is_relative_to(args.run.resolve()):
        record_outputs(args.run, [table, table.with_suffix(".json"), *written, *shared_js])  # --force removes them
    _echo(f"wrote {table} ({len(rows)} rows, {len(new_steps)} new snapshot(s)) and its figure emergence.png / .html")
    for row in rows:
        if row.layer == "all":
            _echo(f"  step {row.step:>7}: codes {row.decoding:.3f}  input-only {row.input_only:.3f}  "
                  f"selectivity {row.selectivity:+.3f}  model {row.model_accuracy:.3f}  "
                  f"(chance {row.chance:.3f}, majority {row.majority:.3f})")
    return 0


COMMANDS: list[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = [
    (_add_table_parser, _cmd_table),
    (_add_export_parser, _cmd_export),
    (_add_pretrained_parser, _cmd_pretrained),
    (_add_emergence_parser, _cmd_emergence),
]
"""The result subcommands: (adds its parser, runs it), for `latentcode/cli/app.py` to append to its own."""
