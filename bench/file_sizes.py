"""How much a user's disk gets from `latentcode figures` and `latentcode demo`: the size of every file they write,
with the one `plotly.min.js` their html pages share (4.6 MB, once per folder) counted apart.

Runs the command line (`python -m latentcode`, from the current directory) on a shipped checkpoint and on the
shipped fuzzy-logic seeds, into a temporary folder, and prints a markdown table per command. Nothing here is
asserted in tests (`tests/project/test_file_sizes.py` checks a tiny run stays under 2 MB).

    .venv/bin/python bench/file_sizes.py [--checkpoint checkpoints/sraven-hyla] [--demo-seeds 0,1,2]
        [--only figures|demo]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUNDLE = "plotly.min.js"


def _run(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "latentcode", *argv, "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def _table(title: str, files: list[Path], seconds: float) -> str:
    shared = [f for f in files if f.name == BUNDLE]
    own = [f for f in files if f.name != BUNDLE]
    lines = [f"{title} ({seconds:.0f} s)", "", "| file | kB |", "|---|---:|"]
    lines += [f"| {f.name} | {f.stat().st_size / 1e3:,.0f} |" for f in sorted(own, key=lambda f: f.name)]
    total = sum(f.stat().st_size for f in own)
    lines.append(f"| **total, without {BUNDLE}** | **{total / 1e3:,.0f}** |")
    lines += [f"| {BUNDLE} (shared by the folder's html pages) | {f.stat().st_size / 1e3:,.0f} |" for f in shared]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="checkpoints/sraven-hyla", help="run the figures call on this")
    parser.add_argument("--demo-seeds", default=None, help="the demo's --seeds (default: every shipped seed)")
    parser.add_argument("--only", choices=("figures", "demo"), default=None, help="measure one command only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "demo":
            out = Path(tmp) / "figures-run"
            seconds = _run(["figures", args.checkpoint, "--out", str(out)])
            files = sorted((out / "figures").iterdir())
            print(_table(f"`latentcode figures {args.checkpoint} --out DIR`: DIR/figures/", files, seconds), "\n")
        if args.only == "figures":
            return 0
        demo = Path(tmp) / "demo"
        seeds = ["--seeds", args.demo_seeds] if args.demo_seeds else []
        seconds = _run(["demo", "--out", str(demo), *seeds])
        files = [demo / name for name in ("report.html", "summary.json", "demo.json", BUNDLE)]
        print(_table(f"`latentcode demo --out DIR {' '.join(seeds)}`: its report, beside the runs",
                     [f for f in files if f.exists()], seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
