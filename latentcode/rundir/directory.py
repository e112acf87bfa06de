"""The run directory's files: atomic writes, the manifest of what latentcode wrote, and what `--force` may delete.

Every write is atomic (a temp file in the same directory, then `os.replace`). `--force` deletes only a run's own
files: the fixed ones (`RUN_FILES`) and what its manifest lists (older runs: latentcode's known names), never a
folder that holds no run or a checkpoint shipped with latentcode (`require_writable_run`, the guard every writer
calls). Saving and loading models, optimizer state and metrics is `checkpoint.py`'s job.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from latentcode.constants import (
    CODES_DIR,
    CONFIG_FILE,
    EMERGENCE_DIR,
    FIGURE_NAMES,
    FIGURE_SUFFIXES,
    FIGURES_DIR,
    INTERVENTIONS_DIR,
    MANIFEST_FILE,
    MANIFEST_KIND,
    METRICS_FILE,
    MODEL_FILE,
    POSITIONS,
    REPORT_FILE,
    RUN_KIND,
    SHIPPED_FILE,
    SNAPSHOTS_DIR,
    SUMMARY_FILE,
    TRAIN_STATE_FILE,
    TRAIN_STATE_META_FILE,
)
from latentcode.rundir.files import RunFiles

RUN_FILES = (CONFIG_FILE, MODEL_FILE, TRAIN_STATE_FILE, TRAIN_STATE_META_FILE, METRICS_FILE, REPORT_FILE,
             SUMMARY_FILE)
"""The fixed files of a run directory; `--force` removes these and what the run's manifest lists."""
TRAIN_HINT = "train one with `latentcode train TASK --model VARIANT --out DIR`"


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


class CheckpointError(ValueError):
    """A run directory or one of its files is missing, corrupt, or does not match its config."""


# --------------------------------------------------------------------------------------------------- file helpers
def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically: a temp file in the same directory, fsync, then `os.replace`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the permissions open() would
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, data: Any, *, indent: int | None = 2) -> None:
    """Write `data` as JSON, atomically. `indent=None`: one top-level key per line, each value on one line."""
    if indent is None and isinstance(data, dict):
        text = "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()) + "\n}"
    else:
        text = json.dumps(data, indent=indent)
    atomic_write_bytes(path, (text + "\n").encode())


def remove_stale_temp_files(run_dir: str | os.PathLike) -> None:
    """Delete temp files that a killed process left behind mid-write."""
    for tmp in Path(run_dir).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def _manifest_path(run_dir: Path) -> Path:
    return RunFiles(run_dir).manifest


def read_manifest(run_dir: str | os.PathLike) -> list[str]:
    """Files (relative to the run) that latentcode recorded writing into `run_dir`, besides the fixed `RUN_FILES`."""
    path = _manifest_path(Path(run_dir))
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the file is corrupt") from e
    if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND or not isinstance(data.get("files"), list):
        raise CheckpointError(f"{path} is not a latentcode manifest (kind {MANIFEST_KIND!r} with a 'files' list)")
    return [str(name) for name in data["files"]]


def record_outputs(run_dir: str | os.PathLike, paths: Sequence[str | os.PathLike]) -> None:
    """Add files latentcode just wrote inside `run_dir` to its manifest, so `--force` may remove them later.

    Paths outside `run_dir` are ignored (they belong to no run).
    """
    run_dir = Path(run_dir)
    root = run_dir.resolve()
    files = set(read_manifest(run_dir))
    for path in paths:
        try:
            files.add(Path(path).resolve().relative_to(root).as_posix())
        except ValueError:
            continue
    atomic_write_json(_manifest_path(run_dir), {"kind": MANIFEST_KIND, "files": sorted(files)})


def _legacy_outputs() -> list[str]:
    """What latentcode 0.1.0 wrote into a run besides `RUN_FILES`, for runs without a manifest."""
    codes = [f"{CODES_DIR}/{name}{ext}" for name in POSITIONS for ext in (".npz", ".json", ".decode.json")]
    figures = [f"{FIGURES_DIR}/{stem}{suffix}.{fmt}" for stem in FIGURE_NAMES for suffix in ("", "_all_features")
               for fmt in FIGURE_SUFFIXES]
    return codes + figures


def is_shipped(path: str | os.PathLike) -> bool:
    """True for a checkpoint shipped with latentcode, or anything inside one: the `checkpoints/` folder of the
    source tree, `$LATENTCODE_CHECKPOINTS`, or a folder holding (or inside one holding) the `shipped.json` marker.
    latentcode never modifies these."""
    path = Path(path).resolve()
    roots = [Path(__file__).resolve().parents[2] / "checkpoints"]
    if os.environ.get("LATENTCODE_CHECKPOINTS"):
        roots.append(Path(os.environ["LATENTCODE_CHECKPOINTS"]).resolve())
    marked = any((folder / SHIPPED_FILE).exists() for folder in (path, *path.parents))
    return marked or any(path == root or root in path.parents for root in roots)


def is_run_dir(path: str | os.PathLike) -> bool:
    """True when `path` holds a `config.json` that latentcode wrote (kind `latentcode.run`), valid or not."""
    config = Path(path) / CONFIG_FILE
    try:
        return config.is_file() and json.loads(config.read_text()).get("kind") == RUN_KIND
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return False


def require_writable_run(path: str | os.PathLike, what: str = "write into") -> None:
    """Refuse to let a command write into (or delete from) a shipped checkpoint: the one guard every writer calls.

    Args:
        path: the folder about to be written into.
        what: the refused action, completing "refusing to {what} it" (e.g. "write a report into").

    Raises:
        ValueError: `path` is (inside) a shipped checkpoint (`is_shipped`); the message says to pass an output folder.
    """
    if is_shipped(path):
        raise ValueError(
            f"{path} is a shipped checkpoint (or inside one) and latentcode never changes it; refusing to {what} it. "
            "Pass --out DIR (Python: out_dir=...) to write elsewhere, or copy the checkpoint"
        )


def check_force_target(run_dir: str | os.PathLike) -> None:
    """Refuse `--force` on anything but a latentcode run (or an empty or missing folder).

    Raises:
        ValueError: `run_dir` is a shipped checkpoint, or a non-empty folder without a latentcode `config.json`.
    """
    run_dir = Path(run_dir)
    require_writable_run(run_dir, "let --force delete files from")
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return
    if not is_run_dir(run_dir):
        raise ValueError(
            f"--force refused: {run_dir} is not empty and holds no latentcode run (no {CONFIG_FILE} of kind "
            f"{RUN_KIND!r}); --force deletes only latentcode's own files inside a run. Choose another --out"
        )


def remove_run_files(run_dir: str | os.PathLike) -> list[Path]:
    """Delete the files latentcode wrote into a run (for `force=True`) and nothing else.

    Removes the fixed run files (`RUN_FILES`), the files the run's manifest lists (or, for a run written before
    manifests, latentcode's known code and figure names), the weights of `snapshots/step-*/`, and `codes/`,
    `figures/`, `interventions/`, `emergence/` and `snapshots/` only if that leaves them empty. Anything a user put into the run stays.

    Returns:
        The files removed.

    Raises:
        ValueError: `run_dir` is not a latentcode run or is a shipped checkpoint (see `check_force_target`).
    """
    run_dir = Path(run_dir)
    check_force_target(run_dir)
    root = run_dir.resolve()
    listed = read_manifest(run_dir) if _manifest_path(run_dir).is_file() else _legacy_outputs()
    removed = []
    for name in [*RUN_FILES, MANIFEST_FILE, *listed]:
        path = run_dir / name
        if root not in path.resolve().parents or not path.is_file():  # a manifest never points outside its run
            continue
        path.unlink()
        removed.append(path)
    snapshots = run_dir / SNAPSHOTS_DIR
    for folder in sorted(snapshots.glob("step-*")) if snapshots.is_dir() else ():
        for name in (CONFIG_FILE, MODEL_FILE):
            if (folder / name).is_file() and not (folder / name).is_symlink():
                (folder / name).unlink()
                removed.append(folder / name)
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    for name in (CODES_DIR, FIGURES_DIR, INTERVENTIONS_DIR, EMERGENCE_DIR, SNAPSHOTS_DIR):
        folder = run_dir / name
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    remove_stale_temp_files(run_dir)
    return removed


def _require_file(path: Path) -> None:
    if not path.parent.is_dir():
        raise FileNotFoundError(f"no run at {path.parent} (the directory does not exist); {TRAIN_HINT}")
    if not path.is_file():
        raise FileNotFoundError(f"no run at {path.parent} (missing {path.name}); {TRAIN_HINT}")


def _read_json(path: Path) -> Any:
    _require_file(path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); the file is corrupt") from e
