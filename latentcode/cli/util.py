"""Parser helpers every `latentcode` subcommand module uses (`app.py`, `analysis.py`, ...), so that those
modules import this one instead of each other: among them RUN and --seed (`_add_run`) and their check, with
--out's, before torch is imported (`_where`). Nothing else lives here."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from pathlib import Path
from typing import Any


def _wrap(text: str, indent: int = 0) -> str:
    return textwrap.fill(text, width=100, initial_indent="  ", subsequent_indent=" " * indent)


def _subparser(subparsers: Any, name: str, *, help: str, description: str, example: str,
               epilog: str = "") -> argparse.ArgumentParser:
    """A subcommand parser whose --help ends with an example invocation."""
    return subparsers.add_parser(
        name,
        help=help,
        description=textwrap.fill(description, width=100),
        epilog=f"{epilog}\n\nexample:\n  {example}" if epilog else f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )


def _field_names(cls: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls))


def _echo(text: str = "") -> None:
    """Print a line of command output to stdout (the library itself never prints)."""
    sys.stdout.write(text + "\n")


def _warn(text: str) -> None:
    """Print a line of command diagnostics (a warning, an error) to stderr."""
    sys.stderr.write(text + "\n")


class LazyHelp(str):
    """A help text computed when argparse expands it (`help % params`, for --help), not when it only looks at it
    (a usage line, an error): a help that lists the registered tasks then imports no task module (and no torch)."""

    def __new__(cls, compute: Any) -> LazyHelp:
        text = super().__new__(cls, "(listed by --help)")
        text._compute = compute
        return text

    def __mod__(self, params: Any) -> str:
        return self._compute() % params


def _task_help() -> str:
    from latentcode.tasks import TASKS

    return f"task: {', '.join(sorted(TASKS))}"


class _TaskAction(argparse.Action):
    """Stores the TASK argument; its help lists the registered tasks (`latentcode.tasks.TASKS`), read only when
    that help is printed, so building the parser loads no task module (and no torch)."""

    @property
    def help(self) -> str:
        return LazyHelp(_task_help)

    @help.setter
    def help(self, value: str | None) -> None:  # argparse sets it; the property computes it
        pass

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None):
        setattr(namespace, self.dest, values)


def _csv(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; give comma-separated names")
    return items


def _int_csv(text: str) -> list[int]:
    try:
        return [int(part) for part in _csv(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None


def _add_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bars (default: only on a terminal)")


RUN_HELP = "a run directory, or a shipped checkpoint's name such as sraven-hyla (`latentcode pretrained` lists them)"
SEED_HELP = ("with a shipped name: open its seed K (default: 0). Seed 0 is the name's own checkpoint; "
             "`latentcode pretrained` lists the seeds")


def _add_run(parser: argparse.ArgumentParser, *, several: bool = False, what: str = "") -> None:
    """RUN (a path or a shipped name) and --seed (the shipped seed to open). `what` ends RUN's help (". It needs
    snapshots/", say)."""
    if several:
        parser.add_argument("runs", metavar="RUN", nargs="+", help=RUN_HELP + ". Give several to compare them" + what)
    else:
        parser.add_argument("run", metavar="RUN", help=RUN_HELP + what)
    parser.add_argument("--seed", type=int, default=None, metavar="K", help=SEED_HELP)


def _where(args: argparse.Namespace, target: str, sub: str = "", *,
           default_out: bool = True) -> tuple[Path, str | None, Path | None]:
    """Check RUN, --seed, --n-samples and --out before torch is imported: (the run directory, the shipped name it
    was given by, the output folder: --out, else runs/analysis/<folder>[/<sub>] for a shipped checkpoint, else None,
    which leaves the command's default inside the run directory). `default_out=False`, for a command that writes
    nothing unless told: None without --out, for a shipped checkpoint too."""
    from latentcode.rundir.pretrained import analysis_out_dir, check_out_folder, is_shipped, resolve_run

    n_samples = getattr(args, "n_samples", None)
    if n_samples is not None and n_samples <= 0:
        raise ValueError(f"--n-samples={n_samples} must be positive (instances per split)")
    if args.seed is not None and hasattr(args, "batch_seed") and resolve_run(target)[1] is None:
        raise ValueError(f"--seed {args.seed} picks a seed of a shipped checkpoint by name; {target} is a run "
                         f"directory. The seed of the instances drawn is --batch-seed {args.seed} (--seed before 0.3.0)")
    path, name = resolve_run(target, args.seed)
    out = getattr(args, "out", None)
    default = analysis_out_dir(path) / sub if sub else analysis_out_dir(path)
    if out is None and default_out and is_shipped(path):
        out = default
    if out is not None and (is_shipped(path) or out.resolve() != path.resolve()):
        check_out_folder(out, default.as_posix())
    return path, name, out
