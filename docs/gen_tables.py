"""Regenerate the result tables in README.md, docs/*.md and results/*/README.md from the committed results files:
`python docs/gen_tables.py`.

A generated table sits between two markers that name its command:

    <!-- table: results/FILE.csv (latentcode table --from results/FILE.csv [OPTIONS]) -->
    | ... the command's Markdown output ... |
    <!-- /table -->

The command runs from the repository root and its table lines replace the block's body; nothing else on the page
changes.

A generated block of any other kind runs a script of the repository that renders Markdown from committed results
(for example `docs/fig5_tables.py table ...`), and its whole output replaces the body:

    <!-- generated: results/DIR [results/OTHER ...] (python SCRIPT.py ARGS) -->
    ... the script's stdout ...
    <!-- /generated -->

Every path named before the command must exist and appear among its arguments, so the marker says which committed
files the numbers come from. The script runs as `sys.executable SCRIPT.py ARGS` from the repository root.

tests/pipelines/test_results.py fails when a block differs from its command's output. `--check` only reports the stale
blocks (exit status 1 when there are any).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(
    r"(?P<head><!-- table: (?P<csv>\S+) \((?P<command>latentcode table [^)]*)\) -->\n)(?P<body>.*?)(?P<tail><!-- /table -->)",
    re.DOTALL,
)
GENERATED = re.compile(
    r"(?P<head><!-- generated: (?P<sources>[^(]+?) \((?P<command>python [^)]*)\) -->\n)(?P<body>.*?)"
    r"(?P<tail><!-- /generated -->)",
    re.DOTALL,
)


def pages() -> list[Path]:
    """The pages whose generated blocks are kept current: README.md, docs/*.md and results/*/README.md (the full
    reference tables, which the docs pages link)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "results").glob("*/README.md"))]


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


def script_output(command: str) -> str:
    """What `command` (`python SCRIPT.py ARGS`, SCRIPT.py a file of the repository) prints, run from the repository
    root with this interpreter."""
    script, *args = shlex.split(command)[1:]
    path = (ROOT / script).resolve()
    if not path.is_relative_to(ROOT) or path.suffix != ".py" or not path.is_file():
        raise ValueError(f"`{command}`: {script} is not a Python script of the repository")
    done = subprocess.run([sys.executable, str(path), *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`{command}` failed with status {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout if done.stdout.endswith("\n") else done.stdout + "\n"


def render(page: str) -> str:
    """The page with every generated block (`table:` and `generated:`) replaced by its command's current output."""

    def replace(match: re.Match[str]) -> str:
        if match["csv"] not in shlex.split(match["command"]):
            raise ValueError(f"the marker names {match['csv']} but its command is `{match['command']}`")
        return match["head"] + table_output(match["command"]) + match["tail"]

    def replace_generated(match: re.Match[str]) -> str:
        arguments = shlex.split(match["command"])
        for source in match["sources"].split():
            if source not in arguments:
                raise ValueError(f"the marker names {source} but its command is `{match['command']}`")
            if not (ROOT / source).exists():
                raise FileNotFoundError(f"the marker names {source}, which is not in the repository")
        return match["head"] + script_output(match["command"]) + match["tail"]

    return GENERATED.sub(replace_generated, BLOCK.sub(replace, page))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale pages without writing them")
    args = parser.parse_args(argv)
    stale = []
    for path in pages():
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
