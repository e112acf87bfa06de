"""A run's latent codes on disk and in memory: where they live (`codes_path`), reading them back checked against
the run (`load_codes`), extracting them when missing (`ensure_codes`, `codes_for`), and where an analysis may
write (`check_out_dir`).

What the analysis commands (`analysis.py`) and the report (`run_report.py`) share: each takes an `OpenRun`
(`opened_run.py`; a path or a shipped name is opened once), reads codes at one reading, positions plus inputs, by
default the task's own, and checks every argument before it extracts or writes anything. Codes extracted once are
kept by the run object; a shipped checkpoint is never copied, and its codes are written only under `--out`. The
numbers come from `latentcode.codes.extract`; nothing here decodes or draws.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from latentcode.codes.extract import LatentCodes, code_reading
from latentcode.pipelines.opened_run import (
    EXTRACT_DEFAULTS,
    OpenRun,
    check_positions,
    check_reading,
    open_run,
)
from latentcode.rundir.checkpoint import RunConfig
from latentcode.rundir.directory import record_outputs
from latentcode.rundir.files import RunFiles
from latentcode.rundir.pretrained import analysis_out_dir, check_out_folder
from probes.metadata import meta_reading, meta_reading_inputs

__all__ = ["EXTRACT_DEFAULTS", "analysis_dir", "codes_path", "ensure_codes", "load_codes"]

logger = logging.getLogger(__name__)


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
    default = None if inputs is None else code_reading(run_config(run_dir).task).default_inputs
    return _codes_file(run_dir, positions, inputs, default)


def _codes_file(where: str | os.PathLike, positions: str, inputs: str | None, default_inputs: str | None) -> Path:
    name = positions if inputs is None or inputs == default_inputs else f"{positions}-{inputs}"
    return RunFiles(where).codes(name)


def run_config(run_dir: str | os.PathLike) -> RunConfig:
    """The config of a run directory (raises FileNotFoundError naming the fix when there is none)."""
    path = Path(run_dir)
    if not RunFiles(path).config.is_file():
        from latentcode.rundir.pretrained import resolve_run

        resolve_run(path)  # raises, suggesting shipped names and run folders close to it
    return RunConfig.load(path)


def shipped_out_hint(run: OpenRun) -> str:
    """`runs/analysis/<label>`: the folder the command line writes an analysis of a shipped checkpoint to."""
    return analysis_out_dir(run.path).as_posix()


def check_out_dir(run: OpenRun | str | os.PathLike, out_dir: str | os.PathLike | None) -> Path:
    """Where an analysis of `run` writes, checked without writing anything: the run itself (None), or `out_dir`.

    Nothing is copied into `out_dir`: the analysis writes its codes (`codes/`), decodings and figures there, each
    recording the checkpoint it came from.

    Raises:
        ValueError: no `out_dir` for a shipped checkpoint (never written into), an `out_dir` inside the shipped
            checkpoints, one that is a file, holds another run, or cannot be written.
    """
    run = open_run(run)
    if out_dir is None or Path(out_dir).resolve() == run.path.resolve():
        if run.shipped:
            raise ValueError(
                f"{run.path} is a shipped checkpoint, read in place and never written into; pass an output folder: "
                f"--out DIR (Python: out_dir=...), e.g. {shipped_out_hint(run)}")
        return run.path
    out = check_out_folder(out_dir, shipped_out_hint(run))
    if RunFiles(out).config.is_file() and RunConfig.load(out).to_dict() != run.config.to_dict():
        # a folder that an analysis before 0.3 filled with a copy of this run is fine; another run is not
        raise ValueError(f"--out {out} is another run directory than {run.path}; choose another --out")
    return out


def analysis_dir(run_dir: OpenRun | str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Where an analysis of `run_dir` writes (`check_out_dir`); nothing is copied (before 0.3 `out_dir` received a
    copy of the run)."""
    return check_out_dir(run_dir, out_dir)


def find_codes(run: OpenRun | str | os.PathLike, positions: str, inputs: str | None,
               where: str | os.PathLike | None = None) -> tuple[Path, str | None]:
    """(the file holding the run's codes at this reading under `where` (default: the run), None | why the file
    found there does not fit).

    Codes at the default inputs live at `<positions>.npz`; other inputs at `<positions>-<inputs>.npz`, or at
    `<positions>.npz` in files written before readings were recorded (which hold `LEGACY_INPUTS`)."""
    run = open_run(run)
    where = run.path if where is None else Path(where)
    default = code_reading(run.task).default_inputs
    inputs = inputs or default
    path = _codes_file(where, positions, inputs, default)
    plain = _codes_file(where, positions, None, default)
    if path != plain and not path.is_file() and plain.is_file():
        legacy = read_codes_meta(plain)
        if legacy is not None and "reading" not in legacy and meta_reading_inputs(legacy) == inputs:
            return plain, None
    meta = read_codes_meta(path) if path.is_file() else None
    found = None if meta is None else meta_reading_inputs(meta)
    if found is not None and found != inputs:
        source = run.name or run.path
        return path, (
            f"{path} holds codes read at {meta_reading(meta)}, not at {inputs} inputs"
            + (f" ({run.task.name}'s default, the paper's reading)" if inputs == default else "")
            + f"; use them with --inputs {found} (Python: inputs={found!r}), or "
            f"re-extract them with `latentcode extract {source} --positions {positions}`"
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


def _read_codes(run: OpenRun, path: Path, positions: str, in_run: bool) -> LatentCodes:
    """Codes from a file, checked to belong to `run`: the task always; the checkpoint with a warning inside the run
    (the run's weights changed since), as an error in an output folder (it holds another run's codes)."""
    codes = LatentCodes.load(path)
    source = run.name or run.path
    if codes.task != run.task.name:
        raise ValueError(
            f"{path} holds codes of task {codes.task!r}, but {source} is a {run.task.name!r} run; "
            f"re-extract them with `latentcode extract {source} --positions {positions}`"
        )
    recorded = codes.meta.get("checkpoint")
    if recorded and run.files.model.is_file() and recorded != run.weights_hash():
        if not in_run:
            raise ValueError(f"{path} holds codes of checkpoint {recorded}, not of {source} ({run.weights_hash()}); "
                             "choose another --out for this run")
        logger.warning("%s were extracted from checkpoint %s, but %s now holds another; re-run `latentcode "
                       "extract %s` to refresh them", path, recorded, run.files.model, source)
    return codes


def load_codes(run_dir: OpenRun | str | os.PathLike, positions: str = "paper", inputs: str | None = None
               ) -> LatentCodes:
    """Read a run's extracted codes at one reading, checking that they belong to this run.

    Args:
        run_dir: the run directory (or an `OpenRun`).
        positions: which extraction (a named position of the run's task: 'paper', 'all_features', ...).
        inputs: the input choice they were read at (None: the task's default, the paper's reading).

    Returns:
        The `LatentCodes` from `RUN/codes/<positions>[-<inputs>].npz`.

    Raises:
        FileNotFoundError: no run there, or no codes at this reading yet (the message names the command that makes
            them).
        ValueError: codes of another task or at another reading than asked, or a corrupt or NaN-holding file.
    """
    run = open_run(run_dir)
    inputs = check_reading(run.config, positions, inputs)
    path, mismatch = find_codes(run, positions, inputs)
    if mismatch:
        raise ValueError(mismatch)
    if not path.is_file():
        extra = "" if inputs == code_reading(run.task).default_inputs else f" --inputs {inputs}"
        raise FileNotFoundError(
            f"no latent codes at {path}; make them with `latentcode extract {run_dir} --positions {positions}{extra}`"
        )
    return _read_codes(run, path, positions, in_run=True)


def codes_for(
    run: OpenRun,
    where: Path | None,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    n_samples: int | None = None,
    progress: bool | None = None,
    save: bool = True,
    seed: int = EXTRACT_DEFAULTS["seed"],
) -> tuple[LatentCodes, Path | None]:
    """A run's codes at one reading: held by `run` already, else read from `where/codes/` (when the file there
    holds this reading and, if `n_samples` is given, that many instances per split), else extracted (with
    `EXTRACT_DEFAULTS` and the task's `N_SAMPLES` unless `n_samples` says otherwise; said once at INFO level) and,
    with `save`, written there. `where` None: nothing is read or written.

    Returns:
        (the codes, the path of their file under `where`, or None).
    """
    inputs = check_reading(run.config, positions, inputs)
    held = run.cached_codes(positions, inputs, n_samples=n_samples, seed=seed)
    path = None
    if where is not None:
        path, mismatch = find_codes(run, positions, inputs, where)
        if mismatch:
            raise ValueError(mismatch)
        if held is None and path.is_file():
            codes = _read_codes(run, path, positions, in_run=where.resolve() == run.path.resolve())
            if n_samples is None or codes.meta.get("n_per_split") == n_samples:
                run.keep_codes(codes)
                return codes, path
            logger.info("%s holds %s instances per split, not %d; extracting them again", path,
                        codes.meta.get("n_per_split"), n_samples)
    if held is not None:
        if save and path is not None and not path.is_file():  # extracted earlier, in memory only: write them now
            _save_codes(held, path, where)
        return held, path
    where_text = "" if save and where is not None else " (in memory only: this run is not written to)"
    logger.info("%s has no codes at %s positions, %s inputs yet; extracting them first%s", run.name or run.path,
                positions, inputs, where_text)
    codes = run.codes(positions, inputs, n_samples=n_samples, seed=seed, progress=progress)
    if save and where is not None:
        path = _save_codes(codes, _codes_file(where, positions, inputs, code_reading(run.task).default_inputs), where)
    return codes, path


def _save_codes(codes: LatentCodes, path: Path, where: Path) -> Path:
    path = codes.save(path)
    record_outputs(where, [path, path.with_suffix(".json")])
    return path


def ensure_codes(
    run_dir: OpenRun | str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    save: bool = True,
    n_samples: int | None = None,
) -> tuple[LatentCodes, Path]:
    """A run's codes at one reading, extracted first (said once at INFO level) when the run has none: what
    `decode`, `figures` and `report` share.

    Args:
        run_dir: the run directory, a shipped name, or an `OpenRun` (written into when codes are extracted and
            `save`).
        positions, inputs: the reading (None inputs: the task's default).
        device: where the model runs if codes must be extracted (a path or name is opened on it).
        progress: progress bar (None: only on a terminal).
        save: save extracted codes to the run (False: keep them in memory, for runs that must not be written).
        n_samples: instances per split (None: what the run's codes file holds, else the task's `N_SAMPLES`).

    Returns:
        (the codes, the path they are (or would be) saved at).

    Raises:
        FileNotFoundError: no run there.
        ValueError: the file there holds another reading or another task's codes, or is corrupt.
    """
    run = run_dir if isinstance(run_dir, OpenRun) else open_run(run_dir, device=device)
    inputs = check_reading(run.config, positions, inputs)
    codes, path = codes_for(run, run.path, positions=positions, inputs=inputs, n_samples=n_samples,
                            progress=progress, save=save and not run.shipped)
    if path is None:
        path = _codes_file(run.path, positions, inputs, code_reading(run.task).default_inputs)
    return codes, path
