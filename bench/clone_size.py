"""What a user's disk gets from cloning the repository: a plain `git clone` against README's cheapest clone (a
partial clone, `--filter=blob:none`, with `checkpoints/in-progress/` left out of a sparse checkout).

Clones a bare copy of the current repository's HEAD (made in a temporary folder, with partial clones allowed, the
way a hosting service serves them) both ways over `file://`, then prints each clone's size on disk (`du`), its
`.git` folder's and its work tree's, as a markdown table. With `--demo` it also runs `make demo`'s analysis from
the cheap clone (the installed `.venv` of the current repository runs it), to show the clone holds what the demo
reads. Nothing here is asserted in tests.

    .venv/bin/python bench/clone_size.py [--rev HEAD] [--demo]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPARSE = ["/*", "!/checkpoints/in-progress/"]


def _git(*argv: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _du(path: Path) -> int:
    """Bytes on disk under `path`: the blocks a disk gives its files (`du -sk`), as a clone costs a user."""
    return int(subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True,
                              text=True).stdout.split()[0]) * 1024


def plain(url: str, dest: Path) -> Path:
    _git("clone", "-q", url, str(dest))
    return dest


def cheapest(url: str, dest: Path) -> Path:
    """README's three commands."""
    _git("clone", "-q", "--filter=blob:none", "--no-checkout", url, str(dest))
    _git("sparse-checkout", "set", "--no-cone", *SPARSE, cwd=dest)
    _git("checkout", "-q", cwd=dest)
    return dest


def row(name: str, clone: Path) -> str:
    total, git = _du(clone), _du(clone / ".git")
    return f"| {name} | {total / 1e6:,.0f} | {git / 1e6:,.0f} | {(total - git) / 1e6:,.0f} |"


def demo(clone: Path) -> float:
    """`make demo`'s analysis (`latentcode demo`, the shipped checkpoints, no training) run from `clone`, importing
    the clone's package (so it reads the clone's checkpoints/); its seconds."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "latentcode", "demo", "--out", str(clone / "runs" / "demo"),
                           "--no-progress"], cwd=clone, capture_output=True, text=True,
                          env={"PYTHONPATH": str(clone), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    if done.returncode:
        sys.exit(f"the demo failed in the cheapest clone:\n{done.stderr[-4000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD)")
    parser.add_argument("--demo", action="store_true", help="also run the demo's analysis from the cheap clone")
    args = parser.parse_args()
    commit = _git("rev-parse", "--short", args.rev, cwd=ROOT)
    with tempfile.TemporaryDirectory(prefix="clone_size-") as tmp:
        bare = Path(tmp) / "origin.git"
        _git("init", "-q", "--bare", str(bare))
        _git("fetch", "-q", str(ROOT), f"{args.rev}:refs/heads/main", cwd=bare)
        _git("symbolic-ref", "HEAD", "refs/heads/main", cwd=bare)
        _git("config", "uploadpack.allowFilter", "true", cwd=bare)
        url = f"file://{bare}"
        lines = [f"clones of commit {commit} (MB on disk, `du`)", "",
                 "| clone | total | .git | work tree |", "|---|---:|---:|---:|",
                 row("`git clone URL`", plain(url, Path(tmp) / "plain")),
                 row("README's cheapest (`--filter=blob:none`, sparse without checkpoints/in-progress/)",
                     clone := cheapest(url, Path(tmp) / "cheapest"))]
        print("\n".join(lines))
        if args.demo:
            print(f"\n`latentcode demo` from the cheapest clone: {demo(clone):.0f} s")


if __name__ == "__main__":
    main()
