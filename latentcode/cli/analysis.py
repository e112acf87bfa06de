"""The analysis subcommands of `latentcode`: `extract`, `decode`, `figures`, `report` and `demo`.

Each is a pair (adds its parser, runs it) in `COMMANDS`, which `app.py` appends to its own; the work
is one call into `latentcode.pipelines.analysis`, which checks every argument before it copies, extracts or writes
anything. Errors are raised (ValueError, FileNotFoundError) for the CLI's `main` to print as one `error: ...` line
with exit code 2, and a `ConstantCodesWarning` (`probes.degenerate`) is logged as one `warning: ...` line. Nothing
here computes anything.
"""

from __future__ import annotations

import argparse
import functools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latentcode.cli.util import LazyHelp, _add_progress, _add_run, _csv, _echo, _int_csv, _subparser, _where

__all__ = ["COMMANDS"]


def _constant_codes_as_log_lines(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run `command` with each `ConstantCodesWarning` shown as one log line (`log_constant_warnings`) instead of
    Python's `file:line: Category: message` and source line; the warning machinery is restored afterwards."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        from probes.degenerate import log_constant_warnings

        with warnings.catch_warnings():
            log_constant_warnings()
            return command(args)

    return run


def _add_positions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--positions", default="paper", metavar="NAME",
                        help="which codes: paper (default), all_features (SRAVEN: one row per feature) or another "
                             "position the task declares. paper is the paper's reading (spec §4.1) of every task; the "
                             "names are the task's Task.code_reading.positions, checked once the run is loaded")


class _InputsAction(argparse.Action):
    """Stores `--inputs NAME`; its help lists each task's input choices (`Task.code_reading`), read from the task
    classes only when that help is printed, so building the parser loads no task module (and no torch)."""

    @property
    def help(self) -> str:
        return LazyHelp(_inputs_help)

    @help.setter
    def help(self, value: str | None) -> None:  # argparse sets it; the property computes it
        pass

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None):
        setattr(namespace, self.dest, values)


def _inputs_help() -> str:
    from latentcode.tasks import TASKS

    per_task = ", ".join(
        f"{name} {_or(TASKS[name].code_reading.input_names)}" for name in sorted(TASKS)
        if getattr(TASKS[name], "code_reading", None) is not None
    )
    return (f"inputs to read the codes at: {per_task} (default: the first). The first is the paper's reading "
            "(spec §4.1)")


def _or(names: Any) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", metavar="NAME", default=None, action=_InputsAction)


def _add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu",
                        help="device for the model (default: cpu). Used only where codes must be extracted")


def _add_out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder (default: RUN). A shipped checkpoint's is runs/analysis/NAME[-sSEED]: "
                             "it is read in place and never written into; nothing is copied from RUN")


def _add_n_samples(parser: argparse.ArgumentParser, *, reuses: bool = True, what: str = "") -> None:
    default = "the codes already extracted, else the task's" if reuses else "the task's"
    parser.add_argument("--n-samples", "--n", dest="n_samples", type=int, default=None, metavar="N",
                        help=f"instances per split{what} (default: {default}). The task's is 2048 for sraven and "
                             "fuzzy_logic; the count is recorded in every result file; --n is the old spelling")


def _open(path: Path, name: str | None, device: str) -> Any:
    from latentcode.pipelines.opened_run import OpenRun

    return OpenRun(path, name=name, device=device)


# ----------------------------------------------------------------------------------------------------- extract
def _add_extract_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "extract",
        help="extract a run's latent codes (attention patterns at the analysed positions)",
        description="Run a trained model on fresh instances of its splits and save its latent codes (the "
        "normalized attention scores, hook_pattern) at the analysed query/key positions, with the ground-truth "
        "labels, to RUN/codes/<positions>.npz + .json (RUN/codes/<positions>-<inputs>.npz for inputs other than "
        "the default). By default codes are read as the paper reads them: fuzzy-logic instances share one query "
        "input, SRAVEN instances are drawn unpermuted. Every argument is checked before anything is copied.",
        example="latentcode extract runs/demo/hyla --splits train,test,ood --n-samples 2048 --positions all_features",
    )
    _add_run(parser)
    parser.add_argument("--splits", type=_csv, default=["train", "test", "ood"],
                        help="comma-separated splits (default: train,test,ood)")
    _add_n_samples(parser, reuses=False)
    _add_positions(parser)
    parser.add_argument("--batch-size", type=int, default=512, help="instances per forward pass (default: 512)")
    parser.add_argument("--device", default="cpu", help="device for the model (default: cpu)")
    parser.add_argument("--batch-seed", type=int, default=0, help="seed of the instances drawn (default: 0)")
    _add_inputs(parser)
    _add_progress(parser)
    _add_out(parser)
    return parser


@_constant_codes_as_log_lines
def _cmd_extract(args: argparse.Namespace) -> int:
    run_dir, name, out = _where(args, args.run)
    from latentcode.pipelines.analysis import extract_run

    run = _open(run_dir, name, args.device)
    path = extract_run(run, splits=args.splits, n_samples=args.n_samples, positions=args.positions,
                       batch_size=args.batch_size, seed=args.batch_seed, progress=args.progress, out_dir=out,
                       inputs=args.inputs)
    codes = run.cached_codes(args.positions, args.inputs, n_samples=args.n_samples, splits=args.splits,
                             seed=args.batch_seed)
    counts = ", ".join(f"{s} {int((codes.split == s).sum())}" for s in codes.splits)
    _echo(f"codes: {path} {list(codes.codes.shape)} ({counts}); labels: {', '.join(sorted(codes.labels))}")
    _echo(f"reading: {codes.reading}")
    return 0


# ------------------------------------------------------------------------------------------------------ decode
def _add_decode_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "decode",
        help="decode rules (or terms) from a run's codes with linear probes, per layer",
        description="Fit a linear probe (standardize + logistic regression) on the train-split codes of each layer "
        "(and of all layers together) and score it on the other splits, beside its floors on the same rows "
        "(uniform chance and the majority class; for fuzzy-logic terms, answering 'present' for every term) and "
        "the input-only control (the same probe on the raw tokens); the headline 'codes − best' is the score minus "
        "the best of those. Prints the table with the codes' reading and writes "
        "<out>/codes/<positions>[-<inputs>].decode.json (<out>: RUN itself, or --out), with the instances per split "
        "it was computed on. A run without codes at the reading gets them extracted first, as `latentcode extract "
        "RUN` would (it says so). RUN may be a shipped checkpoint's name (`latentcode pretrained`), read in place: "
        "its results go to --out, by default runs/analysis/NAME[-sSEED].",
        example="latentcode decode sraven-hyla --n-samples 2048",
    )
    _add_run(parser)
    _add_positions(parser)
    _add_inputs(parser)
    parser.add_argument("--label", help="label to decode (default: rule for SRAVEN, terms for fuzzy logic)")
    _add_n_samples(parser)
    _add_device(parser)
    _add_progress(parser)
    _add_out(parser)
    return parser


@_constant_codes_as_log_lines
def _cmd_decode(args: argparse.Namespace) -> int:
    run_dir, name, out = _where(args, args.run)
    from latentcode.pipelines.analysis import decode_run

    result, path = decode_run(_open(run_dir, name, args.device), positions=args.positions, inputs=args.inputs,
                              label=args.label, n_samples=args.n_samples, progress=args.progress, out_dir=out)
    _echo(result.table())
    _echo(f"\nwritten: {path}")
    return 0


# ----------------------------------------------------------------------------------------------------- figures
def _add_figures_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "figures",
        help="draw a run's figures (decoding, similarity, code heatmaps, UMAP, training curves)",
        description="Draw the figures of one run into RUN/figures/: training curves, decoding accuracy per layer "
        "with chance and majority lines, rule-by-rule similarity of mean codes, mean code heatmaps and a "
        "2-D embedding of the last layer's codes. png/svg/pdf come from matplotlib, html from plotly "
        "(the html files share one plotly.min.js in figures/ and work offline). A run without codes at the reading gets them extracted first, as `latentcode decode` "
        "does.",
        example="latentcode figures sraven-linear --format png,html",
    )
    _add_run(parser)
    _add_positions(parser)
    parser.add_argument("--format", dest="formats", type=_csv, default=["png", "html"],
                        help="comma-separated: png, svg, pdf, html (default: png,html)")
    parser.add_argument("--embed", choices=("umap", "pca"), default="umap", help="embedding (default: umap)")
    _add_inputs(parser)
    _add_n_samples(parser)
    _add_device(parser)
    _add_progress(parser)
    _add_out(parser)
    return parser


@_constant_codes_as_log_lines
def _cmd_figures(args: argparse.Namespace) -> int:
    run_dir, name, out = _where(args, args.run)
    from latentcode.pipelines.analysis import figures_run

    written = figures_run(_open(run_dir, name, args.device), positions=args.positions, inputs=args.inputs,
                          formats=args.formats, embed_method=args.embed, n_samples=args.n_samples,
                          progress=args.progress, out_dir=out)
    _echo(f"{len(written)} files in {(out or run_dir) / 'figures'}:")
    for path in written:
        _echo(f"  {path.name}")
    return 0


# ------------------------------------------------------------------------------------------------------ report
def _add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = _subparser(
        subparsers,
        "report",
        help="probe one or more runs into report.html + summary.json",
        description="Decode, cluster, compare rules, embed and plot the codes of each run and write "
        "report.html (with plotly.min.js beside it; works offline) and summary.json, with the runs side by side and every "
        "decoding score beside its floors and the input-only control. Runs without codes at the reading get them "
        "extracted first (a shipped checkpoint's are kept in memory, never written into it). Each run gets an "
        "interactive explorer of its codes, and a section 'Does the model use the code?' where `latentcode causal` "
        "results for it exist.",
        example="latentcode report sraven-hyla --causal results/causal",
    )
    _add_run(parser, several=True)
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="output folder, required for several runs (default for one: RUN). A shipped "
                             "checkpoint's is runs/analysis/NAME[-sSEED]; --out . is the current directory")
    _add_positions(parser)
    _add_inputs(parser)
    parser.add_argument("--title", help="page title (default: the runs and the codes' reading)")
    parser.add_argument("--embed", choices=("umap", "pca"), default="umap", help="embedding (default: umap)")
    parser.add_argument("--no-explorer", dest="explorer", action="store_false",
                        help="leave out each run's interactive explorer. It holds 1,024 codes, about 1 MB per run")
    parser.add_argument("--causal", type=Path, default=None, metavar="DIR",
                        help="folder of `latentcode causal` results to show (default: runs/causal). One folder per "
                             "run name, DIR/NAME/ or DIR/NAME/align and DIR/NAME/erase, shown in the section 'Does "
                             "the model use the code?'; the committed results: --causal results/causal")
    _add_n_samples(parser)
    _add_device(parser)
    _add_progress(parser)
    return parser


@_constant_codes_as_log_lines
def _cmd_report(args: argparse.Namespace) -> int:
    if args.causal is not None and not args.causal.is_dir():
        raise ValueError(f"--causal {args.causal} is not a folder; give the folder of `latentcode causal` results, "
                         "e.g. --causal results/causal")
    found = [_where(args, target) for target in args.runs]
    out = found[0][2] if len(found) == 1 else args.out  # several runs: --out, checked by _where
    from latentcode.pipelines.run_report import report_runs

    runs = [_open(run_dir, name, args.device) for run_dir, name, _ in found]
    path = report_runs(runs, out, positions=args.positions, inputs=args.inputs, title=args.title,
                       embed_method=args.embed, n_samples=args.n_samples, progress=args.progress,
                       explorer=args.explorer, causal_dir=args.causal)
    _echo(f"report: {path}")
    _echo(f"summary: {path.with_name('summary.json')}")
    return 0


# -------------------------------------------------------------------------------------------------------- demo
def _add_demo_parser(subparsers: Any) -> argparse.ArgumentParser:
    from latentcode.pipelines.demo import DEMO_SETTINGS

    parser = _subparser(
        subparsers,
        "demo",
        help="probe the shipped softmax, linear and HYLA checkpoints (or --train small ones) into a report",
        description="The whole analysis in a few minutes on a CPU: read every shipped seed of the fuzzy-logic "
        "checkpoints (softmax, linear, HYLA trained at the paper's Table A1 setting) where they lie (nothing is "
        "copied), extract their latent codes at the paper's reading, run every probe, write report.html, and print per seed the task metric "
        "beside decoding from the last layer's OOD codes, its floor, the input-only control, 'codes − best' (the "
        "score minus the best of those) and the value-network live fraction, then the mean ± s.e. over each "
        "variant's seeds. With --train, small models are trained "
        f"instead ({DEMO_SETTINGS['task']}, {DEMO_SETTINGS['preset']} preset, {DEMO_SETTINGS['steps']} steps "
        "each; finished runs in --out are reused).",
        example="latentcode demo --task sraven",
    )
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="folder for the report, and with --train the runs (default: runs/demo/TASK[-trained]). "
                             "It is runs/demo/TASK-trained with --train")
    parser.add_argument("--train", action="store_true",
                        help="train small models instead of reading the shipped ones")
    parser.add_argument("--task", default=None,
                        help=f"task (default: fuzzy_logic, or {DEMO_SETTINGS['task']} with --train)")
    parser.add_argument("--steps", type=int, default=DEMO_SETTINGS["steps"],
                        help=f"training steps per model (default: {DEMO_SETTINGS['steps']})")
    parser.add_argument("--variants", type=_csv, default=None,
                        help="comma-separated variants (default: softmax,linear,hyla). Of the shipped checkpoints, "
                             "those the task has")
    parser.add_argument("--preset", default=DEMO_SETTINGS["preset"], metavar="PRESET",
                        help=f"preset with --train: tiny, small or paper (default: {DEMO_SETTINGS['preset']}). "
                        "Those of the built-in tasks, another task has its own; tiny is a seconds-long smoke test")
    _add_n_samples(parser, reuses=False)
    parser.add_argument("--embed", choices=("umap", "pca"), default="umap", help="embedding (default: umap)")
    parser.add_argument("--seeds", type=_int_csv, default=None,
                        help="shipped seeds to analyse, comma-separated (default: all)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the extraction batches and of trained runs (default: 0). With --train it "
                             "seeds their split, initialisation and data")
    parser.add_argument("--device", default="cpu", help="device for the model (default: cpu)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="torch CPU threads (default: 1). These small models gain little from more, and on a "
                             "busy machine extra threads spin against other jobs")
    parser.add_argument("--force", action="store_true", help="retrain the runs already in --out")
    _add_inputs(parser)
    _add_progress(parser)
    return parser


@_constant_codes_as_log_lines
def _cmd_demo(args: argparse.Namespace) -> int:
    from latentcode.pipelines.demo import demo
    from latentcode.pipelines.demo_table import SEED_LEGEND, table_legend

    if args.steps <= 0 or (args.n_samples is not None and args.n_samples <= 0):
        raise ValueError(f"--steps={args.steps} and --n-samples={args.n_samples} must be positive integers")
    if args.out is not None:
        from latentcode.rundir.pretrained import check_out_folder

        check_out_folder(args.out, "runs/demo/TASK")
    result = demo(args.out, train=args.train, task=args.task, variants=args.variants, preset=args.preset,
                  steps=args.steps, n_samples=args.n_samples, seed=args.seed, device=args.device,
                  embed_method=args.embed, threads=args.threads, force=args.force, progress=args.progress,
                  inputs=args.inputs, seeds=args.seeds)
    _echo(result.table())
    _echo(table_legend(result.rows))
    _echo(SEED_LEGEND)
    if result.notes:
        _echo("notes: " + "; ".join(result.notes))
    _echo(f"report: {result.report}")
    _echo(f"done in {result.seconds:.0f} s")
    return 0


COMMANDS: list[tuple[Callable[[Any], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = [
    (_add_extract_parser, _cmd_extract),
    (_add_decode_parser, _cmd_decode),
    (_add_figures_parser, _cmd_figures),
    (_add_report_parser, _cmd_report),
    (_add_demo_parser, _cmd_demo),
]
"""The analysis subcommands: (adds its parser, runs it), for `latentcode/cli/app.py` to append to its own."""
