"""A run's latent codes on disk: where they live (`codes_path`), reading them back checked against the run
(`load_codes`), extracting them when missing (`ensure_codes`), and where an analysis may write (`analysis_dir`).

What the analysis commands (`analysis.py`) and the report (`run_report.py`) share: each reads codes at one reading,
positions plus inputs, by default the task's own, and checks every argument before it copies, extracts or writes
anything. The numbers come from `latentcode.codes.extract`; nothing here decodes or draws.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

from latentcode.codes.extract import LatentCodes, check_extraction, code_reading, extract_latent_codes
from latentcode.constants import CODES_DIR, CONFIG_FILE, MODEL_FILE
from latentcode.rundir.checkpoint import RunConfig, load_run
from latentcode.rundir.directory import record_outputs
from latentcode.rundir.pretrained import require_writable_run
from latentcode.rundir.weights import file_hash
from probes.codes import meta_reading, meta_reading_inputs

__all__ = ["EXTRACT_DEFAULTS", "analysis_dir", "codes_path", "ensure_codes", "load_codes"]

logger = logging.getLogger(__name__)

EXTRACT_DEFAULTS: dict[str, Any] = {"splits": ("train", "test", "ood"), "n_samples": 2048, "batch_size": 512,
                                    "seed": 0}
"""What `extract_run` uses unless told otherwise, and what `ensure_codes` extracts missing codes with."""


def codes_path(run_dir: str | os.PathLike, positions: str = "paper", inputs: str | None = None) -> Path:
    """Where `latentcode extract` writes a run's codes: `RUN/codes/<positions>.npz` (+ `.json`) at the task's
    default inputs, `RUN/codes/<positions>-<inputs>.npz` at other inputs.

    Args:
        run_dir: the run directory (read only when `inputs` is given, to tell the task's default).
        positions: a named position of the run's task ('paper', 'all_features', or one the task declares in
            `code_reading.positions`; checked against the task by the analyses, see `check_reading`).
        inputs: an input choice of the run's task (None: its default).

    >>> codes_path("runs/demo/hyla").as_posix()
    'runs/demo/hyla/codes/paper.npz'
    """
    check_positions(positions)
    name = positions
    if inputs is not None and inputs != code_reading(run_config(run_dir).task).default_inputs:
        name = f"{positions}-{inputs}"
    return Path(run_dir) / CODES_DIR / f"{name}.npz"


def check_positions(positions: str, task: Any = None) -> None:
    """Raise a ValueError unless `positions` names positions: a plain name (it names the codes' files), and, given
    the run's task, one the task declares (`code_reading.positions`; the message lists them)."""
    if not isinstance(positions, str) or not positions or positions.startswith(".") \
            or any(c in positions for c in "/\\"):
        raise ValueError(f"positions={positions!r} is not a name of positions; the analyses read codes at named "
                         "positions (e.g. 'paper'); pass explicit positions to `extract_latent_codes` instead")
    if task is not None:
        names = code_reading(task).positions
        if positions not in names:
            raise ValueError(f"positions={positions!r} is not defined for task {task.name!r}; valid: "
                             f"{', '.join(names)} (the task's named positions, `code_reading.positions`)")


def run_config(run_dir: str | os.PathLike) -> RunConfig:
    path = Path(run_dir)
    if not (path / CONFIG_FILE).is_file():
        raise FileNotFoundError(
            f"{path} is not a run directory (no {CONFIG_FILE}); train one with "
            "`latentcode train TASK --model VARIANT --out DIR`"
        )
    return RunConfig.load(path)


def check_reading(config: RunConfig, positions: str, inputs: str | None) -> str:
    """Check positions and inputs against the run's task; return the input choice's name (None: the default)."""
    task = config.task
    check_positions(positions, task)
    _, choice = check_extraction(task, positions=positions, inputs=inputs)
    return choice.name


def check_out_dir(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None) -> Path:
    """Where an analysis of `run_dir` will write (see `analysis_dir`), checked without writing anything."""
    run_config(run_dir)
    if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
        require_writable_run(run_dir, "write codes, figures or reports into")
        return Path(run_dir)
    out = Path(out_dir)
    require_writable_run(out, "write into")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose a new or empty folder")
    if (out / CONFIG_FILE).is_file():
        source_hash = file_hash(Path(run_dir) / MODEL_FILE)
        if not (out / MODEL_FILE).is_file() or file_hash(out / MODEL_FILE) != source_hash:
            raise ValueError(f"--out {out} already holds another run than {run_dir}; choose another --out")
    elif out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out} is not empty and holds no copy of {run_dir}; choose a new or empty folder")
    check_writable(out)
    return out


def check_writable(path: Path) -> None:
    """Raise unless `path`, or the nearest folder above it that exists, may be written to."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not os.access(existing, os.W_OK):
        raise ValueError(f"cannot write to {path}: {existing} is not writable; choose another output folder")


def analysis_dir(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Where an analysis of `run_dir` writes: the run itself, or `out_dir`, which then receives a copy of the
    run's config, weights and metrics (no optimizer state) so that later commands can read it as a run.

    Raises:
        FileNotFoundError: `run_dir` is not a run.
        ValueError: no `out_dir` for a shipped checkpoint (never written into), or `out_dir` holds another run,
            is not empty or cannot be written.
    """
    out = check_out_dir(run_dir, out_dir)
    if out != Path(run_dir) and not (out / CONFIG_FILE).is_file():
        load_run(run_dir).save(out)
        logger.info("copied %s (config, weights, metrics) to %s; results go there", run_dir, out)
    return out


def find_codes(run_dir: str | os.PathLike, positions: str, inputs: str | None) -> tuple[Path, str | None]:
    """(the file holding the run's codes at this reading, None | why the file found there does not fit).

    Codes at the default inputs live at `<positions>.npz`; other inputs at `<positions>-<inputs>.npz`, or at
    `<positions>.npz` in files written before readings were recorded (which hold `LEGACY_INPUTS`)."""
    config = run_config(run_dir)
    default = code_reading(config.task).default_inputs
    inputs = inputs or default
    path = codes_path(run_dir, positions, inputs)
    plain = codes_path(run_dir, positions)
    if path != plain and not path.is_file() and plain.is_file():
        legacy = read_codes_meta(plain)
        if legacy is not None and "reading" not in legacy and meta_reading_inputs(legacy) == inputs:
            return plain, None
    meta = read_codes_meta(path) if path.is_file() else None
    found = None if meta is None else meta_reading_inputs(meta)
    if found is not None and found != inputs:
        return path, (
            f"{path} holds codes read at {meta_reading(meta)}, not at {inputs} inputs"
            + (f" ({config.task.name}'s default, the paper's reading)" if inputs == default else "")
            + f"; use them with --inputs {found} (Python: inputs={found!r}), or "
            f"re-extract them with `latentcode extract {run_dir} --positions {positions}`"
            + ("" if inputs == default else f" --inputs {inputs}")
        )
    return path, None


def read_codes_meta(npz_path: Path) -> dict[str, Any] | None:
    """The `meta` of a codes file, or None when it cannot be read (loading the file then says why)."""
    try:
        meta = json.loads(npz_path.with_suffix(".json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) else None


def load_codes(run_dir: str | os.PathLike, positions: str = "paper", inputs: str | None = None) -> LatentCodes:
    """Read a run's extracted codes at one reading, checking that they belong to this run.

    Args:
        run_dir: the run directory.
        positions: which extraction (a named position of the run's task: 'paper', 'all_features', ...).
        inputs: the input choice they were read at (None: the task's default, the paper's reading).

    Returns:
        The `LatentCodes` from `RUN/codes/<positions>[-<inputs>].npz`.

    Raises:
        FileNotFoundError: no run there, or no codes at this reading yet (the message names the command that makes
            them).
        ValueError: codes of another task or at another reading than asked, or a corrupt or NaN-holding file.
    """
    config = run_config(run_dir)
    inputs = check_reading(config, positions, inputs)
    path, mismatch = find_codes(run_dir, positions, inputs)
    if mismatch:
        raise ValueError(mismatch)
    if not path.is_file():
        extra = "" if inputs == code_reading(config.task).default_inputs else f" --inputs {inputs}"
        raise FileNotFoundError(
            f"no latent codes at {path}; make them with `latentcode extract {run_dir} --positions {positions}{extra}`"
        )
    codes = LatentCodes.load(path)
    if codes.task != config.task.name:
        raise ValueError(
            f"{path} holds codes of task {codes.task!r}, but {run_dir} is a {config.task.name!r} run; "
            f"re-extract them with `latentcode extract {run_dir} --positions {positions}`"
        )
    recorded = codes.meta.get("checkpoint")
    model_file = Path(run_dir) / MODEL_FILE
    if recorded and model_file.is_file() and file_hash(model_file) != recorded:
        logger.warning("%s were extracted from checkpoint %s, but %s now holds another; re-run `latentcode "
                       "extract %s` to refresh them", path, recorded, model_file, run_dir)
    return codes


def ensure_codes(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    save: bool = True,
) -> tuple[LatentCodes, Path]:
    """A run's codes at one reading, extracted first (with `EXTRACT_DEFAULTS`, said once at INFO level) when the run
    has none: what `decode`, `figures` and `report` share.

    Args:
        run_dir: the run directory (written into when codes are extracted and `save`).
        positions, inputs: the reading (None inputs: the task's default).
        device: where the model runs if codes must be extracted.
        progress: progress bar (None: only on a terminal).
        save: save extracted codes to the run (False: keep them in memory, for runs that must not be written).

    Returns:
        (the codes, the path they are (or would be) saved at).

    Raises:
        FileNotFoundError: no run there.
        ValueError: the file there holds another reading or another task's codes, or is corrupt.
    """
    config = run_config(run_dir)
    inputs = check_reading(config, positions, inputs)
    path, mismatch = find_codes(run_dir, positions, inputs)
    if mismatch:
        raise ValueError(mismatch)
    if path.is_file():
        return load_codes(run_dir, positions, inputs), path
    where = "" if save else " (in memory only: this run is not written to)"
    logger.info("%s has no codes at %s positions, %s inputs yet; extracting them first%s", run_dir, positions,
                inputs, where)
    if save:
        path, _ = extract_codes(run_dir, positions, inputs, device, progress)
        return load_codes(run_dir, positions, inputs), path
    run = load_run(run_dir, device=device)
    codes = extract_latent_codes(run.model, run.task, EXTRACT_DEFAULTS["splits"], EXTRACT_DEFAULTS["n_samples"],
                                 positions=positions, inputs=inputs, batch_size=EXTRACT_DEFAULTS["batch_size"],
                                 seed=EXTRACT_DEFAULTS["seed"], checkpoint=run.checkpoint_hash, progress=progress)
    return dataclasses.replace(codes, meta={**codes.meta, "run": str(run_dir), "step": run.step}), path


def extract_codes(run_dir: Path | str | os.PathLike, positions: str, inputs: str, device: str,
             progress: bool | None, **options: Any) -> tuple[Path, LatentCodes]:
    """Extract and save codes into `run_dir` (arguments already checked); returns where, and the codes."""
    settings = {**EXTRACT_DEFAULTS, **options}
    run = load_run(run_dir, device=device)
    codes = extract_latent_codes(
        run.model, run.task, tuple(settings["splits"]), settings["n_samples"], positions=positions, inputs=inputs,
        batch_size=settings["batch_size"], seed=settings["seed"], checkpoint=run.checkpoint_hash, progress=progress,
    )
    meta = {**codes.meta, "run": str(run_dir), "step": run.step}
    codes = dataclasses.replace(codes, meta=meta)  # keeps every field, the raw `inputs` included
    path = codes.save(codes_path(run_dir, positions, inputs))
    record_outputs(run_dir, [path, path.with_suffix(".json")])
    return path, codes
