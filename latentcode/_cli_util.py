"""Parser helpers every `latentcode` subcommand module uses (`cli.py`, `_cli_analysis.py`, ...), so that those
modules import this one instead of each other. Nothing else lives here."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
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
