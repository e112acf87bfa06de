"""Pack run directories into a few size-capped archives for the trip back from the GPU machine, and unpack them.

The device tool returns at most 8 files of at most 16 MiB each (docs/gpu.md). `pack` puts whole run directories
(weights, optimizer state, metrics: everything `--resume` needs) into gzip'd tar archives `runs-N.tar.gz` of at
most `--max-mib` each, first fit by decreasing size; a run directory too big for one archive is split into parts
`runs-N.tar.gz.partK` that `unpack` joins again. It refuses to write more than `--max-files` files. `unpack`
extracts every archive of a folder under a root, replacing run directories of the same name. Not a test.

    python bench/gpu_pack.py pack gpu_runs $OUT --max-files 6
    python bench/gpu_pack.py unpack gpu_carry gpu_runs
    python bench/gpu_pack.py seed sweeps/gpu_sraven_seeds12.yaml checkpoints/in-progress

`seed` copies the resume state of a grid's runs from a folder of run directories named as the grid's points (the CPU
campaign's stash, `checkpoints/in-progress/<run>/`) into the grid's run directories, where the copy is further on,
so a call continues the campaign's runs.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tarfile
from pathlib import Path

MIB = 1024 * 1024


def _run_dirs(root: Path) -> list[Path]:
    """Every run directory (a folder holding config.json) below `root`."""
    return sorted({p.parent for p in root.rglob("config.json")})


def _tar_gz(root: Path, dirs: list[Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for d in dirs:
            tar.add(d, arcname=str(d.relative_to(root)))
    return buffer.getvalue()


def pack(root: Path, out: Path, *, max_mib: float = 15.5, max_files: int = 8) -> list[Path]:
    """Write the run directories below `root` into archives under `out`; returns the files written.

    Raises:
        ValueError: no run directory, or more than `max_files` files would be needed.
    """
    dirs = _run_dirs(root)
    if not dirs:
        raise ValueError(f"no run directory (a folder with config.json) below {root}")
    limit = int(max_mib * MIB)
    blobs = {d: _tar_gz(root, [d]) for d in dirs}  # compressed size of each run alone
    bins: list[list[Path]] = []
    sizes: list[int] = []
    for d in sorted(dirs, key=lambda d: -len(blobs[d])):
        for i, size in enumerate(sizes):
            if size + len(blobs[d]) <= limit:
                bins[i].append(d)
                sizes[i] += len(blobs[d])
                break
        else:
            bins.append([d])
            sizes.append(len(blobs[d]))
    payloads = [(f"runs-{i}.tar.gz", _tar_gz(root, sorted(b)) if len(b) > 1 else blobs[b[0]])
                for i, b in enumerate(bins)]
    files = [(f"{name}.part{k}" if len(data) > limit else name, data[k * limit:(k + 1) * limit])
             for name, data in payloads for k in range(max(1, -(-len(data) // limit)))]
    if len(files) > max_files:
        raise ValueError(f"{len(dirs)} run directories need {len(files)} files of at most {max_mib} MiB, more than "
                         f"--max-files={max_files}; bring back fewer runs per call")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files:
        (out / name).write_bytes(data)
        written.append(out / name)
    return written


def unpack(folder: Path, root: Path) -> list[Path]:
    """Extract every `runs-*.tar.gz` (or its parts) in `folder` under `root`; returns the run directories.

    A run directory already under `root` with the same name is replaced (the archive holds its later state).
    """
    archives: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("runs-*.tar.gz*")):
        name = path.name.split(".part")[0]
        archives.setdefault(name, []).append(path)
    if not archives:
        raise ValueError(f"no runs-*.tar.gz archive in {folder}")
    root.mkdir(parents=True, exist_ok=True)
    extracted = []
    for _, parts in sorted(archives.items()):
        parts = sorted(parts, key=lambda p: int(p.name.split(".part")[1]) if ".part" in p.name else 0)
        data = b"".join(p.read_bytes() for p in parts)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tops = sorted({Path(m.name).parent for m in tar.getmembers() if m.isfile()})  # the run directories
            for top in tops:
                if (root / top).exists():
                    shutil.rmtree(root / top)
            tar.extractall(root, filter="data")
            extracted += [root / t for t in tops]
    return extracted


def _step(run: Path) -> int:
    path = run / "train_state.json"
    return json.loads(path.read_text()).get("step", 0) if path.is_file() else 0


def seed(grid: Path, stash: Path) -> list[Path]:
    """Copy the resume state of each of `grid`'s points found in `stash/<name>/` into the point's run directory
    when the stash is further on; returns the run directories written."""
    from latentcode.rundir.files import RunFiles
    from latentcode.training.sweep_grid import expand_grid, load_grid

    if not stash.is_dir():
        raise ValueError(f"{stash} is not a folder of run directories")
    written = []
    for point in expand_grid(load_grid(grid)):
        source, target = stash / point.name, Path(point.run_dir)
        if not (source / "train_state.json").is_file() or _step(source) <= _step(target):
            continue
        files = RunFiles(source).resume_state
        missing = [path.name for path in files if not path.is_file()]
        if missing:
            raise ValueError(f"{source} lacks {', '.join(missing)}: not a whole resume state")
        target.mkdir(parents=True, exist_ok=True)
        for path in files:
            shutil.copy2(path, target / path.name)
        written.append(target)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="run directories below ROOT -> archives in OUT")
    p.add_argument("root", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--max-mib", type=float, default=15.5, help="largest file (default: 15.5 MiB)")
    p.add_argument("--max-files", type=int, default=8, help="most files (default: 8)")
    u = sub.add_parser("unpack", help="archives in FOLDER -> run directories below ROOT")
    u.add_argument("folder", type=Path)
    u.add_argument("root", type=Path)
    s = sub.add_parser("seed", help="resume state in STASH/<run>/ -> the run directories of GRID, where further on")
    s.add_argument("grid", type=Path)
    s.add_argument("stash", type=Path)
    args = parser.parse_args()
    try:
        if args.command == "seed":
            for path in seed(args.grid, args.stash):
                print(f"seeded {path} at step {_step(path)}")
        elif args.command == "pack":
            for path in pack(args.root, args.out, max_mib=args.max_mib, max_files=args.max_files):
                print(f"{path}  {path.stat().st_size / MIB:.2f} MiB")
        else:
            for path in unpack(args.folder, args.root):
                print(f"unpacked {path}")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
