"""Regenerate the result tables in docs/*.md from the committed results files: `python docs/gen_tables.py`.

A generated table sits between two markers that name its command:

    <!-- table: results/FILE.csv (latentcode table --from results/FILE.csv [OPTIONS]) -->
    | ... the command's Markdown output ... |
    <!-- /table -->

The command runs from the repository root and its table lines replace the block's body; nothing else on the page
changes. tests/test_results.py fails when a block differs from its command's output. `--check` only reports the
stale blocks (exit status 1 when there are any).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"(?P<head><!-- table: (?P<csv>\S+) \((?P<command>latentcode table [^)]*)\) -->\n)(?P<body>.*?)(?P<tail><!-- /table -->)",
    re.DOTALL,
)


def table_output(command: str) -> str:
    """The Markdown table lines that `command` (a `latentcode table ...` line) prints, run from the repository
    root."""
    from latentcode.cli import main

    args = shlex.split(command)[1:]
    buffer = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(buffer):
            status = main(args)
    finally:
        os.chdir(cwd)
    if status != 0:
        raise RuntimeError(f"`{command}` failed with status {status}")
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith("|")]
    return "\n".join(lines) + "\n"


def render(page: str) -> str:
    """The page with every generated table block replaced by its command's current output."""

    def replace(match: re.Match[str]) -> str:
        if match["csv"] not in shlex.split(match["command"]):
            raise ValueError(f"the marker names {match['csv']} but its command is `{match['command']}`")
        return match["head"] + table_output(match["command"]) + match["tail"]

    return BLOCK.sub(replace, page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale pages without writing them")
    args = parser.parse_args(argv)
    stale = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        page = path.read_text()
        fresh = render(page)
        if fresh != page:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(fresh)
    verb = "stale" if args.check else "regenerated"
    sys.stdout.write((f"{verb}: {', '.join(map(str, stale))}" if stale else "every generated table is current") + "\n")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
