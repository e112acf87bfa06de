"""How long the package takes to import, the command line to answer `--version`, `--help` and a rejected
`decode NAME`, and a shipped checkpoint to open (`load_pretrained`, `open_run` with its model loaded).

Each command runs in a fresh interpreter `--repeats` times; the table gives the median and the fastest wall time
(the fastest is the least disturbed by other jobs on the machine), the median CPU time (user + system, which
other jobs disturb less) and whether torch, matplotlib, scikit-learn, umap or plotly got loaded. The command line runs as the installed console script (`.venv/bin/latentcode`), as a
user types it. Nothing here is asserted in tests (`tests/project/test_imports.py` checks the module sets instead).

    .venv/bin/python bench/import_time.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("torch", "transformer_lens", "datasets", "matplotlib", "sklearn", "umap", "plotly")
"""Top-level packages whose loading the table reports."""

# Prepended to a probe: at exit it prints the heavy packages loaded, as the last line of stderr.
_REPORT = (
    "import atexit, sys\n"
    f"atexit.register(lambda: print('loaded:', ','.join(m for m in {HEAVY!r} if m in sys.modules), "
    "file=sys.stderr))\n"
)


def _commands(module: bool = False) -> dict[str, tuple[list[str], str]]:
    """label -> (the command timed, the same work as Python code for the module report). `module`: run the command
    line as `python -m latentcode` (the package of the working directory) instead of the console script."""
    script = Path(sys.executable).with_name("latentcode")
    cli = [sys.executable, str(script)] if script.exists() and not module else [sys.executable, "-m", "latentcode"]
    run_cli = "import sys; sys.argv = ['latentcode', {!r}]; from latentcode.cli import main; main()"
    reject = "import sys; sys.argv = ['latentcode', 'decode', 'sraven-hyal']; from latentcode.cli import main; main()"
    pretrained = "import latentcode as lc; lc.load_pretrained('sraven-hyla')"
    opened = "import latentcode as lc; lc.open_run('sraven-hyla').model"
    return {
        'python -c "import latentcode"': ([sys.executable, "-c", "import latentcode"], "import latentcode"),
        "latentcode --version": ([*cli, "--version"], run_cli.format("--version")),
        "latentcode --help": ([*cli, "--help"], run_cli.format("--help")),
        "latentcode decode sraven-hyal (rejected)": ([*cli, "decode", "sraven-hyal"], reject),
        "import torch": ([sys.executable, "-c", "import torch"], "import torch"),
        "import transformer_lens.hook_points": ([sys.executable, "-c", "import transformer_lens.hook_points"],
                                                "import transformer_lens.hook_points"),
        "load_pretrained('sraven-hyla')": ([sys.executable, "-c", pretrained], pretrained),
        "open_run('sraven-hyla').model": ([sys.executable, "-c", opened], opened),
    }


def _loaded(code: str) -> str:
    """The heavy packages that running `code` in a fresh interpreter loads."""
    out = subprocess.run([sys.executable, "-c", _REPORT + code], capture_output=True, text=True)
    lines = [line for line in out.stderr.splitlines() if line.startswith("loaded:")]
    return (lines[-1].removeprefix("loaded:").strip() or "none") if lines else "?"


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(argv: list[str], repeats: int) -> tuple[list[float], list[float]]:
    """(wall times, CPU times) of `repeats` runs of `argv`."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), _cpu_seconds()
        subprocess.run(argv, capture_output=True, check=False)  # a rejected command exits with 2
        wall.append(time.perf_counter() - start)
        cpu.append(_cpu_seconds() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs per command (default: 7)")
    parser.add_argument("--module", action="store_true",
                        help="run the command line as `python -m latentcode` (a checkout other than the installed one)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| command | wall, median (s) | wall, fastest (s) | CPU, median (s) | heavy packages loaded |")
    print("|---|---|---|---|---|")
    for label, (argv, code) in _commands(args.module).items():
        _time(argv, 1)  # warm the file cache
        wall, cpu = _time(argv, args.repeats)
        print(f"| `{label}` | {statistics.median(wall):.2f} | {min(wall):.2f} | {statistics.median(cpu):.2f} | "
              f"{_loaded(code)} |")


if __name__ == "__main__":
    main()
