"""The `latentcode` command's entry point: `build_parser` gathers the subcommands of the topic modules
(`training.py`: train, eval, info, sweep; `analysis.py`, `results.py`, `interventions.py`, `causal.py`) and `main`
parses, checks and dispatches them.

Each subcommand is a pair (adds its parser, runs it) in its topic module's `COMMANDS`; a new subcommand is one more
pair there. `main` splits off the `--model.KEY=VALUE`, `--task.KEY=VALUE` and `--train.KEY=VALUE` config overrides
(refused by a command that takes none) and names the closest option of a misspelt one. User errors print one
`error: ...` line on stderr and exit with code 2. No training, model or probe logic lives here. The library modules
that load torch are imported inside the commands, so `latentcode --help` and `--version` answer at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import yaml
from safetensors import SafetensorError

from latentcode._version import __version__
from latentcode.cli.util import _warn
from latentcode.training.build import SECTIONS, split_overrides

USER_ERRORS = (ValueError, OSError, SafetensorError, yaml.YAMLError)
"""Exceptions shown as one `error: ...` line with exit code 2 (NonFiniteLossError exits with 1). OSError covers
missing files, read-only folders and a full disk: each names the path."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `latentcode` with every subcommand of the topic modules' `COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="latentcode",
        description="Train softmax, linear and HYLA transformers on compositional tasks and read their latent "
        "codes.",
        epilog="example:\n  latentcode train fuzzy_logic --model hyla --preset tiny",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"latentcode {__version__}",
                        help="print the version and exit")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from latentcode.cli.analysis import COMMANDS as ANALYSIS_COMMANDS
    from latentcode.cli.causal import COMMANDS as CAUSAL_COMMANDS
    from latentcode.cli.interventions import COMMANDS as INTERVENTION_COMMANDS
    from latentcode.cli.results import COMMANDS as RESULTS_COMMANDS
    from latentcode.cli.training import COMMANDS as TRAINING_COMMANDS

    for add_parser, command in [*TRAINING_COMMANDS, *ANALYSIS_COMMANDS, *RESULTS_COMMANDS, *INTERVENTION_COMMANDS,
                                *CAUSAL_COMMANDS]:
        add_parser(subparsers).set_defaults(func=command)
    return parser


REMOVED_OPTIONS: dict[str, dict[str, str]] = {"transfer": {"--pairs": "--positions"}}
"""Option spellings a command no longer takes: command -> {old: new}, named in the usage error."""


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Refuse arguments no parser took with the subcommand's own usage and, for a flag, the closest ones it has
    ("did you mean --format?"). Exits with code 2, as argparse does."""
    import difflib

    command = getattr(args, "command", None)
    sub = _subparsers(parser).get(command, parser)
    options = [o for action in sub._actions for o in action.option_strings if o.startswith("--")]
    hints = []
    for arg in extra:
        if arg.startswith("-"):
            flag = arg.split("=", 1)[0]
            if flag in REMOVED_OPTIONS.get(command, {}):
                hints.append(f"{flag} was removed in 0.3.0; use {REMOVED_OPTIONS[command][flag]}")
                continue
            close = difflib.get_close_matches(flag, options, n=2, cutoff=0.6)
            if close:
                hints.append(f"did you mean {' or '.join(close)} (not {flag})?")
    where = f"`latentcode {command} --help`" if command else "`latentcode --help`"
    sub.error(f"unrecognized arguments: {' '.join(extra)}" + (f"; {' '.join(hints)}" if hints else "")
              + f" (see {where})")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _error(message: object) -> None:
    _warn(f"error: {' '.join(str(message).split())}")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 for user errors, 130 after Ctrl-C)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        argv, overrides = split_overrides(argv)
    except ValueError as e:
        _error(e)
        return 2
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            _unrecognized(parser, args, extra)
    except SystemExit as e:  # argparse: --help, --version, or a usage error (already printed)
        return e.code if isinstance(e.code, int) else 0
    args.overrides = overrides
    if any(overrides.values()) and not getattr(args, "accepts_overrides", False):
        given = [f"--{s}.{k}" for s in SECTIONS for k in overrides[s]]
        _error(f"`latentcode {args.command}` takes no config overrides ({', '.join(given)})")
        return 2
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    if "RANK" in os.environ or "WORLD_SIZE" in os.environ:  # torchrun: rank 0 tells the story (torch loaded only here)
        from latentcode.training import distributed

        if not distributed.env_info().is_main:
            level = max(level, logging.WARNING)
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:  # `latentcode ... | head`: the reader left; exit quietly (Python docs' recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except USER_ERRORS as e:
        _error(e)
        return 1 if _diverged(e) else 2


def _diverged(error: Exception) -> bool:
    """Whether `error` is a NonFiniteLossError (exit code 1). Only a training raises one, and a training has loaded
    torch: other errors, from commands that may never load it, do not import torch just to be told apart."""
    if "torch" not in sys.modules:
        return False
    from latentcode.training.record import NonFiniteLossError

    return isinstance(error, NonFiniteLossError)
