"""Trained checkpoints that ship with latentcode, found by name: `load_pretrained("fuzzy_logic-hyla")`.

A shipped checkpoint is a run directory without optimizer state (config.json, model.safetensors, metrics.jsonl)
plus `shipped.json`, which records where it came from and the held-out metric it must reproduce. Names resolve
to `<folder>/<name>/`, where the folder is `$LATENTCODE_CHECKPOINTS` when set, else the copy an installed wheel
carries (`latentcode/_checkpoints/`), else the `checkpoints/` folder of the source tree (a clone or an editable
install). Shipped checkpoints are read-only to latentcode: analyses of them write under `--out`, and `--force`
never deletes one.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from latentcode.constants import CONFIG_FILE, SHIPPED_FILE
from latentcode.rundir.directory import TRAIN_HINT, atomic_write_json, is_shipped, require_writable_run

if TYPE_CHECKING:
    import torch

    from latentcode.rundir.checkpoint import Run

__all__ = [
    "CHECKPOINTS_ENV",
    "analysis_out_dir",
    "check_out_folder",
    "checkpoints_dir",
    "export_checkpoint",
    "is_shipped",
    "list_pretrained",
    "load_pretrained",
    "pretrained_name",
    "pretrained_path",
    "pretrained_seeds",
    "require_writable_run",
    "resolve_run",
    "shipped_info",
]

CHECKPOINTS_ENV = "LATENTCODE_CHECKPOINTS"
"""Environment variable naming a folder of shipped checkpoints, used before the installed or source-tree copy."""

_INSTALLED_CHECKPOINTS = Path(__file__).resolve().parents[1] / "_checkpoints"
"""Where a wheel install carries the checkpoints (setup.py maps `checkpoints/` to `latentcode._checkpoints`)."""

_SOURCE_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
"""The source tree's folder: a clone, or an editable install (whose `latentcode/` has no `_checkpoints`)."""


def checkpoints_dir() -> Path:
    """The folder holding the shipped checkpoints: `$LATENTCODE_CHECKPOINTS`, else the copy a wheel install
    carries, else the source tree's `checkpoints/` (a clone or an editable install).

    Raises:
        FileNotFoundError: `$LATENTCODE_CHECKPOINTS` is not a folder, or none of the three exists.
    """
    env = os.environ.get(CHECKPOINTS_ENV)
    if env:
        folder = Path(env).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"${CHECKPOINTS_ENV}={env} is not a directory; point it at a folder of "
                                    f"shipped checkpoints (a clone's checkpoints/), or unset it")
        return folder
    for folder in (_INSTALLED_CHECKPOINTS, _SOURCE_CHECKPOINTS):
        if folder.is_dir():
            return folder
    raise FileNotFoundError(
        f"no shipped checkpoints: neither {_INSTALLED_CHECKPOINTS} (a wheel install) nor {_SOURCE_CHECKPOINTS} "
        f"(a clone) exists; reinstall latentcode with `pip install .` from a clone, or set "
        f"{CHECKPOINTS_ENV}=/path/to/latentcode/checkpoints"
    )


def list_pretrained() -> list[str]:
    """Names of the shipped checkpoints, sorted (e.g. `fuzzy_logic-hyla`)."""
    folder = checkpoints_dir()
    return sorted(p.name for p in folder.iterdir() if (p / SHIPPED_FILE).is_file() and (p / CONFIG_FILE).is_file())


def _shipped_seed(folder: Path) -> int | None:
    try:
        return int(shipped_info(folder)["evaluation"]["seed"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def pretrained_name(name: str, seed: int) -> str:
    """The folder a checkpoint of `seed` ships under: the short name `name` itself for seed 0, the first seed
    trained (docs/checkpoints.md), and `<name>-s<seed>` for every other seed; `pretrained_seeds` reads it back.

    >>> pretrained_name("sraven-hyla", 0), pretrained_name("sraven-hyla", 2)
    ('sraven-hyla', 'sraven-hyla-s2')
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer")
    return name if seed == 0 else f"{name}-s{seed}"


def pretrained_seeds(name: str) -> dict[int, str]:
    """The seeds shipped under a short name: seed -> folder name. `<name>` itself holds one seed (the default,
    recorded in its shipped.json) and `<name>-s<seed>` each other one.

    >>> sorted(pretrained_seeds("fuzzy_logic-softmax"))[0]
    0
    """
    folder = checkpoints_dir()
    seeds: dict[int, str] = {}
    for candidate in list_pretrained():
        if candidate == name or (candidate.startswith(f"{name}-s") and candidate[len(name) + 2:].isdigit()):
            seed = _shipped_seed(folder / candidate)
            if seed is not None:
                seeds.setdefault(seed, candidate)
    return dict(sorted(seeds.items()))


def pretrained_path(name: str, seed: int | None = None) -> Path:
    """The directory of a shipped checkpoint: `name` itself, or with `seed` the checkpoint of that seed.

    Raises:
        ValueError: no checkpoint has that name (the message lists the available names and the closest ones), or
            that seed is not shipped (the message lists the seeds that are).
    """
    available = list_pretrained()
    if name not in available:
        close = difflib.get_close_matches(name, available, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"no shipped checkpoint named {name!r}{hint} Available: {', '.join(available) or 'none'} "
                         f"(in {checkpoints_dir()})")
    if seed is None:
        return checkpoints_dir() / name
    seeds = pretrained_seeds(name)
    if seed not in seeds:
        raise ValueError(f"no seed {seed} of {name!r} is shipped; shipped seeds: {', '.join(map(str, seeds)) or 'none'}")
    return checkpoints_dir() / seeds[seed]


def resolve_run(target: str | os.PathLike, seed: int | None = None) -> tuple[Path, str | None]:
    """Where a run is: a run directory's path, or a shipped checkpoint's name (with `seed`, that seed's folder).

    A path that holds a `config.json` wins over a name. Nothing is loaded and torch is not imported, so the
    command line checks its RUN argument at once.

    Args:
        target: a run directory, or a name from `list_pretrained()` (e.g. `sraven-hyla`).
        seed: with a name, a seed from `pretrained_seeds(name)` (None: the checkpoint `name` itself).

    Returns:
        (the run directory, the shipped name it was opened by, or None for a path).

    Raises:
        FileNotFoundError: neither a run directory nor a shipped name; the message lists the closest shipped names
            and folders and points to `latentcode pretrained`.
        ValueError: `seed` with a path, or a seed that is not shipped (the message lists those that are).
    """
    if not isinstance(seed, int | None) or isinstance(seed, bool) or (seed is not None and seed < 0):
        raise ValueError(f"seed={seed!r} must be a non-negative integer or None")
    path = Path(target)
    if (path / CONFIG_FILE).is_file():
        if seed is not None:
            if str(target) in _shipped_names():
                return pretrained_path(str(target), seed), str(target)
            raise ValueError(f"--seed {seed} (Python: seed=) picks a seed of a shipped checkpoint by name; {path} is a "
                             "run directory, which holds one seed. Pass the name (see `latentcode pretrained`)")
        return path, None
    name = str(target)
    if name in _shipped_names():
        return pretrained_path(name, seed), name
    raise FileNotFoundError(_not_a_run(path, name))


def _shipped_names() -> list[str]:
    try:
        return list_pretrained()
    except OSError:
        return []


def _not_a_run(path: Path, name: str) -> str:
    """Why `name` names no run, with the closest shipped names and sibling run folders."""
    if path.is_dir():
        what = f"{path} is not a run directory (no {CONFIG_FILE})"
    elif path.exists():
        what = f"{path} is a file, not a run directory"
    else:
        what = f"no run directory or shipped checkpoint named {name!r}"
    candidates = [*_shipped_names()]
    parent = path.parent if str(path.parent) not in ("", ".") or path.parent.is_dir() else Path(".")
    try:
        siblings = [p for p in parent.iterdir() if (p / CONFIG_FILE).is_file()] if parent.is_dir() else []
    except OSError:
        siblings = []
    candidates += [p.as_posix() for p in siblings[:200]]
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "."
    return f"{what}{hint} `latentcode pretrained` lists the shipped checkpoints; or {TRAIN_HINT}"


def analysis_out_dir(run_dir: str | os.PathLike) -> Path:
    """The command line's default output folder for an analysis of a shipped checkpoint: `runs/analysis/<folder>`,
    i.e. `runs/analysis/<name>` or `runs/analysis/<name>-s<seed>` (relative to the working directory).

    >>> analysis_out_dir("checkpoints/fuzzy_logic-hyla-s1").as_posix()
    'runs/analysis/fuzzy_logic-hyla-s1'
    """
    return Path("runs") / "analysis" / Path(run_dir).name


def _inside_checkpoints(path: Path) -> Path | None:
    """The shipped-checkpoints folder `path` lies in, or None."""
    try:
        root = checkpoints_dir().resolve()
    except OSError:
        return None
    resolved = path.resolve()
    return root if resolved == root or root in resolved.parents else None


def check_out_folder(out_dir: str | os.PathLike, example: str) -> Path:
    """An output folder, checked without writing anything: outside the shipped checkpoints, not a file, writable.
    `example` is the folder the message suggests instead. Imports no torch.

    Raises:
        ValueError: `out_dir` lies inside the shipped checkpoints (or a shipped checkpoint), is a file, or cannot
            be written.
    """
    out = Path(out_dir)
    root = _inside_checkpoints(out)
    if root is not None or is_shipped(out):
        where = f"inside the shipped checkpoints folder {root}" if root is not None else "inside a shipped checkpoint"
        raise ValueError(f"--out {out} is {where}, which latentcode never writes into; choose a folder outside it, "
                         f"e.g. --out {example}")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose a new or empty folder")
    check_writable(out)
    return out


def check_writable(path: Path) -> None:
    """Raise a ValueError unless `path`, or the nearest folder above it that exists, may be written to."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not os.access(existing, os.W_OK):
        raise ValueError(f"cannot write to {path}: {existing} is not writable; choose another output folder")


def load_pretrained(name: str, device: str | torch.device = "cpu", *, seed: int | None = None) -> Run:
    """Load a shipped checkpoint by name, e.g. `load_pretrained("fuzzy_logic-hyla")` or
    `load_pretrained("fuzzy_logic-hyla", seed=1)`.

    The short name `<task>-<variant>` is seed 0 of the paper's Table A1 setting: the first seed trained, never
    chosen for its score (docs/checkpoints.md); every other shipped seed is `<task>-<variant>-s<seed>`.

    Args:
        name: a name from `list_pretrained()`.
        device: where to put the model.
        seed: a seed from `pretrained_seeds(name)` (None: the checkpoint `name` itself).

    Returns:
        The `Run` (its `path` is the shipped directory: analyse it with an explicit `out_dir`).

    Raises:
        ValueError: unknown name or seed (the available ones are listed).
        FileNotFoundError: no checkpoints folder (see `checkpoints_dir`).
    """
    from latentcode.rundir.checkpoint import load_run

    if not isinstance(seed, int | None) or isinstance(seed, bool):
        raise ValueError(f"seed={seed!r} must be an integer (see pretrained_seeds({name!r})) or None")
    return load_run(pretrained_path(name, seed), device=device)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parents[2],
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def export_checkpoint(run_dir: str | os.PathLike, dest: str | os.PathLike, *, command: str = "") -> Path:
    """Copy a finished run as a shippable checkpoint: weights, config, metrics and `shipped.json`, no optimizer
    state (a shipped checkpoint is loaded and analysed, never resumed).

    `shipped.json` records the source run, the training command, the git commit, and the last evaluation of every
    split with the evaluation seed and sample count it was measured on, so a test can reproduce it.

    Raises:
        ValueError: the run is unfinished or has no evaluation, or `dest` already exists.
    """
    from latentcode.rundir.checkpoint import load_run

    run = load_run(run_dir)
    dest = Path(dest)
    if not run.finished:
        raise ValueError(f"{run_dir} is not finished (step {run.step} of {run.config.train.steps}); ship finished runs")
    if dest.exists():
        raise ValueError(f"{dest} already exists; latentcode never overwrites a shipped checkpoint. Remove it "
                         "yourself or choose another destination")
    metric = run.task.metric_name
    evaluations = {s: record for s in run.task.splits if s != "train"
                   and (record := run.eval_metrics(s)) is not None and metric in record}
    if not evaluations:
        raise ValueError(f"{run_dir} has no evaluation record in its metrics.jsonl")
    copy = run.save(dest)
    info: dict[str, Any] = {
        "name": dest.name,
        "source_run": str(Path(run_dir)),
        "command": command,
        "git_commit": _git_commit(),
        "step": run.step,
        "model_sha16": copy.checkpoint_hash,
        "evaluation": {"seed": run.config.train.seed, "n_samples": run.config.train.eval_samples,
                       "metric": run.task.metric_name, "results": evaluations},
    }
    atomic_write_json(dest / SHIPPED_FILE, info)
    return dest


def shipped_info(path: str | os.PathLike) -> dict[str, Any]:
    """The `shipped.json` of a shipped checkpoint directory."""
    return json.loads((Path(path) / SHIPPED_FILE).read_text())
