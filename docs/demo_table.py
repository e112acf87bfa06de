"""Print the table `latentcode demo` printed, from the demo.json it wrote, as a Markdown text block.

    python docs/demo_table.py results/demo/fuzzy_logic.json

README.md quotes the committed result through a generated block (docs/gen_tables.py), so its numbers are the
committed file's. To refresh them: `latentcode demo --out runs/demo`, copy runs/demo/demo.json to
results/demo/fuzzy_logic.json, then `python docs/gen_tables.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from latentcode.pipelines.demo_table import DemoResult


def render(path: str | Path) -> str:
    """The demo's table, its notes line and its wall time, fenced as ```text."""
    result = DemoResult.from_dict(json.loads(Path(path).read_text()))
    lines = ["```text", result.table()]
    if result.notes:
        lines.append("notes: " + "; ".join(result.notes))
    lines.append(f"done in {result.seconds:.0f} s ({len(result.rows)} checkpoints)")
    return "\n".join([*lines, "```"]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_json", help="a demo.json written by `latentcode demo`")
    args = parser.parse_args(argv)
    sys.stdout.write(render(args.demo_json))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
