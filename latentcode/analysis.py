"""Run-directory analyses behind the CLI: extract codes, decode them, draw figures and write reports (`demo`, which
chains them on the shipped checkpoints, lives in `latentcode.demo`).

Each public function takes run directories and writes into them (`codes/`, `figures/`, `report.html`); the
numbers come from `latentcode.extract` and the torch-free `probes` package. Every function reads codes at one
reading, positions plus inputs, by default the task's own (the paper's, spec §4.1), checks every argument before
it copies, extracts or writes anything, and extracts missing codes itself (`ensure_codes`). Constant codes
(`probes.degenerate`) get one `ConstantCodesWarning` per run and reading, where the codes are made or loaded, never
again from the analyses that follow. Argument parsing and printing live in `_cli_analysis.py`; training in `train.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from latentcode.checkpoint import (
    RunConfig,
    atomic_write_json,
    file_hash,
    load_run,
    read_metrics,
    record_outputs,
)
from latentcode.constants import CODES_DIR, CONFIG_FILE, FIGURES_DIR, MODEL_FILE
from latentcode.diagnostics import LIVE_KEY, format_live_fraction, run_value_live_fraction
from latentcode.extract import POSITIONS, LatentCodes, check_extraction, code_reading, extract_latent_codes
from latentcode.pretrained import is_shipped, require_writable_run
from probes._compat import renamed_kwargs
from probes.codes import meta_reading, meta_reading_inputs
from probes.decoding.decode import decode_rules
from probes.decoding.results import DecodingResult
from probes.degenerate import ConstantCodesWarning, check_constant_codes
from probes.report import RunInput, build_report

__all__ = [
    "analysis_dir",
    "codes_path",
    "decode_run",
    "ensure_codes",
    "extract_run",
    "figures_run",
    "load_codes",
    "report_runs",
    "run_summary",
]

logger = logging.getLogger(__name__)

FIGURE_FORMATS = ("png", "html")
EXTRACT_DEFAULTS: dict[str, Any] = {"splits": ("train", "test", "ood"), "n_samples": 2048, "batch_size": 512,
                                    "seed": 0}
"""What `extract_run` uses unless told otherwise, and what `ensure_codes` extracts missing codes with."""


def codes_path(run_dir: str | os.PathLike, positions: str = "paper", inputs: str | None = None) -> Path:
    """Where `latentcode extract` writes a run's codes: `RUN/codes/<positions>.npz` (+ `.json`) at the task's
    default inputs, `RUN/codes/<positions>-<inputs>.npz` at other inputs.

    Args:
        run_dir: the run directory (read only when `inputs` is given, to tell the task's default).
        positions: 'paper' or 'all_features'.
        inputs: an input choice of the run's task (None: its default).

    >>> codes_path("runs/demo/hyla").as_posix()
    'runs/demo/hyla/codes/paper.npz'
    """
    _check_positions(positions)
    name = positions
    if inputs is not None and inputs != code_reading(_run_config(run_dir).task).default_inputs:
        name = f"{positions}-{inputs}"
    return Path(run_dir) / CODES_DIR / f"{name}.npz"


def _check_positions(positions: str) -> None:
    if positions not in POSITIONS:
        raise ValueError(f"unknown positions {positions!r}; valid: {', '.join(POSITIONS)}")


def _run_config(run_dir: str | os.PathLike) -> RunConfig:
    path = Path(run_dir)
    if not (path / CONFIG_FILE).is_file():
        raise FileNotFoundError(
            f"{path} is not a run directory (no {CONFIG_FILE}); train one with "
            "`latentcode train TASK --model VARIANT --out DIR`"
        )
    return RunConfig.load(path)


def _check_reading(config: RunConfig, positions: str, inputs: str | None) -> str:
    """Check positions and inputs against the run's task; return the input choice's name (None: the default)."""
    _check_positions(positions)
    task = config.task
    _, choice = check_extraction(task, positions=positions, inputs=inputs)
    return choice.name


def _check_out(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None) -> Path:
    """Where an analysis of `run_dir` will write (see `analysis_dir`), checked without writing anything."""
    _run_config(run_dir)
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
    _check_writable(out)
    return out


def _check_writable(path: Path) -> None:
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
    out = _check_out(run_dir, out_dir)
    if out != Path(run_dir) and not (out / CONFIG_FILE).is_file():
        load_run(run_dir).save(out)
        logger.info("copied %s (config, weights, metrics) to %s; results go there", run_dir, out)
    return out


def _find_codes(run_dir: str | os.PathLike, positions: str, inputs: str | None) -> tuple[Path, str | None]:
    """(the file holding the run's codes at this reading, None | why the file found there does not fit).

    Codes at the default inputs live at `<positions>.npz`; other inputs at `<positions>-<inputs>.npz`, or at
    `<positions>.npz` in files written before readings were recorded (which hold `LEGACY_INPUTS`)."""
    config = _run_config(run_dir)
    default = code_reading(config.task).default_inputs
    inputs = inputs or default
    path = codes_path(run_dir, positions, inputs)
    plain = codes_path(run_dir, positions)
    if path != plain and not path.is_file() and plain.is_file():
        legacy = _read_meta(plain)
        if legacy is not None and "reading" not in legacy and meta_reading_inputs(legacy) == inputs:
            return plain, None
    meta = _read_meta(path) if path.is_file() else None
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


def _read_meta(npz_path: Path) -> dict[str, Any] | None:
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
        positions: which extraction ('paper' or 'all_features').
        inputs: the input choice they were read at (None: the task's default, the paper's reading).

    Returns:
        The `LatentCodes` from `RUN/codes/<positions>[-<inputs>].npz`.

    Raises:
        FileNotFoundError: no run there, or no codes at this reading yet (the message names the command that makes
            them).
        ValueError: codes of another task or at another reading than asked, or a corrupt or NaN-holding file.
    """
    config = _run_config(run_dir)
    inputs = _check_reading(config, positions, inputs)
    path, mismatch = _find_codes(run_dir, positions, inputs)
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
    config = _run_config(run_dir)
    inputs = _check_reading(config, positions, inputs)
    path, mismatch = _find_codes(run_dir, positions, inputs)
    if mismatch:
        raise ValueError(mismatch)
    if path.is_file():
        return load_codes(run_dir, positions, inputs), path
    where = "" if save else " (in memory only: this run is not written to)"
    logger.info("%s has no codes at %s positions, %s inputs yet; extracting them first%s", run_dir, positions,
                inputs, where)
    if save:
        path, _ = _extract(run_dir, positions, inputs, device, progress)
        return load_codes(run_dir, positions, inputs), path
    run = load_run(run_dir, device=device)
    codes = extract_latent_codes(run.model, run.task, EXTRACT_DEFAULTS["splits"], EXTRACT_DEFAULTS["n_samples"],
                                 positions=positions, inputs=inputs, batch_size=EXTRACT_DEFAULTS["batch_size"],
                                 seed=EXTRACT_DEFAULTS["seed"], checkpoint=run.checkpoint_hash, progress=progress)
    return dataclasses.replace(codes, meta={**codes.meta, "run": str(run_dir), "step": run.step}), path


def _extract(run_dir: Path | str | os.PathLike, positions: str, inputs: str, device: str,
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


@renamed_kwargs(n="n_samples")
def extract_run(
    run_dir: str | os.PathLike,
    *,
    splits: Sequence[str] = EXTRACT_DEFAULTS["splits"],
    n_samples: int = EXTRACT_DEFAULTS["n_samples"],
    positions: str = "paper",
    batch_size: int = EXTRACT_DEFAULTS["batch_size"],
    device: str = "cpu",
    seed: int = EXTRACT_DEFAULTS["seed"],
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
    inputs: str | None = None,
) -> Path:
    """Extract a trained run's latent codes and save them to `RUN/codes/<positions>[-<inputs>].npz` (+ `.json`),
    or under `out_dir` (see `analysis_dir`; required for a shipped checkpoint). Every argument is checked before
    anything is copied or extracted.

    Args:
        run_dir: the run directory.
        splits: splits to draw instances from (decoding needs `train` and at least one other).
        n_samples: instances per split.
        positions: 'paper' or 'all_features' (SRAVEN); see `latentcode.extract.resolve_positions`.
        batch_size: instances per forward pass.
        device: where the model runs.
        seed: batch seed.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).
        inputs: an input choice of the run's task (None: its default, the paper's reading: fuzzy logic
            `fixed_query`, SRAVEN `unpermuted`; see `latentcode.tasks.base.CodeReading`).

    Returns:
        The path of the written `.npz`.

    Raises:
        FileNotFoundError: no run there.
        ValueError: unknown splits, positions or inputs, positions the task does not have, a bad `out_dir`.

    Warns:
        ConstantCodesWarning: some layers' codes barely vary across instances (`probes.degenerate`).
    """
    config = _run_config(run_dir)
    check_extraction(config.task, tuple(splits), n_samples, positions=positions, inputs=inputs,
                     batch_size=batch_size)
    inputs = _check_reading(config, positions, inputs)
    source, run_dir = run_dir, analysis_dir(run_dir, out_dir)
    path, codes = _extract(run_dir, positions, inputs, device, progress, splits=splits, n_samples=n_samples,
                           batch_size=batch_size, seed=seed)
    check_constant_codes(codes, what=str(source))
    return path


def _check_label(config: RunConfig, label: str | None, codes_file: Path | None) -> None:
    """Refuse a label the codes will not have, before anything is extracted (existing codes decide for themselves)."""
    decodable = code_reading(config.task).labels
    if label is None or not decodable or label in decodable or (codes_file is not None and codes_file.is_file()):
        return
    raise ValueError(
        f"label={label!r} cannot be decoded from {config.task.name} codes; available labels: {', '.join(decodable)} "
        f"(default: {decodable[0]})"
    )


def decode_run(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    label: str | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> tuple[DecodingResult, Path]:
    """Fit linear decoders on a run's train-split codes and score them on its other splits, per layer, beside
    their floors and the input-only control.

    Writes the result as JSON next to the codes: `RUN/codes/<positions>[-<inputs>].decode.json`. A run without
    codes at this reading gets them extracted first, with `extract_run`'s defaults (said once at INFO level).
    Every argument is checked before anything is copied or extracted.

    Args:
        run_dir: the run directory.
        positions: which extraction to decode.
        inputs: the input choice of the reading (None: the task's default, the paper's).
        label: the label to decode (default: the codes' own, `rule` or `terms`).
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).

    Returns:
        (the `DecodingResult`, the JSON path).

    Raises:
        FileNotFoundError: no run there.
        ValueError: a label the codes cannot have, unknown positions or inputs, codes of another task or reading,
            NaN codes, no train rows or no evaluation rows, a single class in the train split.

    Warns:
        ConstantCodesWarning: some layers' codes barely vary across instances (once; the result names them in
            `constant_layers`, and the all-layers probe leaves them out).
    """
    config = _run_config(run_dir)
    inputs = _check_reading(config, positions, inputs)
    target = _check_out(run_dir, out_dir)
    _check_label(config, label, _find_codes(target, positions, inputs)[0] if (target / CONFIG_FILE).is_file() else None)
    source, run_dir = run_dir, analysis_dir(run_dir, out_dir)
    codes, path = ensure_codes(run_dir, positions=positions, inputs=inputs, device=device, progress=progress)
    check_constant_codes(codes, what=str(source))
    result = decode_rules(codes, label=label, progress=progress)
    out = path.with_suffix(".decode.json")
    atomic_write_json(out, result.to_dict())
    record_outputs(run_dir, [out])
    return result, out


def figures_run(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    formats: Sequence[str] = FIGURE_FORMATS,
    embed_method: str = "umap",
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Draw a run's figures into `RUN/figures/`: training curves, decoding per layer, rule similarity, mean
    code heatmaps and a 2-D embedding of the last layer (plus per-term F1 for fuzzy logic). Codes missing at this
    reading are extracted first, as `decode_run` does.

    Args:
        run_dir: the run directory.
        positions: which extraction to draw.
        inputs: the input choice of the reading (None: the task's default, the paper's).
        formats: any of png, svg, pdf (matplotlib) and html (plotly, self-contained).
        embed_method: 'umap' or 'pca'.
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).

    Returns:
        The written files (`figures/<name>[_<positions>][_<inputs>].<format>`, the suffixes for a reading other
        than the default).

    Raises:
        FileNotFoundError: no run there.
        ValueError: unknown formats, positions or inputs, codes of another task or reading, or codes the probes
            cannot use.

    Warns:
        ConstantCodesWarning: some layers' codes barely vary across instances (once, before any figure; the
            figures of those layers say "constant codes").
    """
    from probes.embed import embed_codes
    from probes.figures import (
        STATIC_FORMATS,
        code_heatmap_figure,
        decoding_figure,
        embedding_figure,
        save_figure,
        similarity_figure,
        term_f1_figure,
        training_curves_figure,
    )
    from probes.similarity import rule_similarity

    valid = (*STATIC_FORMATS, "html")
    bad = sorted(set(formats) - set(valid))
    if bad or not formats:
        raise ValueError(f"formats {bad or list(formats)} not understood; valid formats: {', '.join(valid)}")
    if embed_method not in ("umap", "pca"):
        raise ValueError(f"embed_method={embed_method!r} is not one of umap, pca")
    config = _run_config(run_dir)
    inputs = _check_reading(config, positions, inputs)
    default_inputs = code_reading(config.task).default_inputs
    source, run_dir = run_dir, analysis_dir(run_dir, out_dir)
    codes, _ = ensure_codes(run_dir, positions=positions, inputs=inputs, device=device, progress=progress)
    check_constant_codes(codes, what=str(source))
    out = Path(run_dir) / FIGURES_DIR
    suffix = ("" if positions == "paper" else f"_{positions}") + ("" if inputs == default_inputs else f"_{inputs}")
    with collect_probe_warnings() as notes, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantCodesWarning)  # said once above; each figure says it again
        decoding = decode_rules(codes, progress=progress)
        figures: dict[str, Any] = {
            "decoding": decoding_figure(decoding, constant_layers=decoding.constant_layers),
            "similarity": similarity_figure(rule_similarity(codes, layer="last")),
            "code_heatmap": code_heatmap_figure(codes),
            embed_method: embedding_figure(embed_codes(codes, embed_method, "last", max_points=2000)),
        }
        if decoding.terms is not None:
            split = "ood" if "ood" in decoding.terms.f1 else next(iter(decoding.terms.f1))
            figures["term_f1"] = term_f1_figure(decoding.terms, split=split)
    for note in notes:
        logger.warning("figures: %s", note)
    metrics = read_metrics(run_dir)
    if metrics:
        figures["training_curves"] = training_curves_figure(metrics)
    written: list[Path] = []
    for name, figure in figures.items():
        written += save_figure(figure, out / f"{name}{suffix}", formats=tuple(formats))
        record_outputs(run_dir, written)
    return written


@contextlib.contextmanager
def collect_probe_warnings() -> Iterator[list[str]]:
    """Condense sklearn's ConvergenceWarnings (k-means, a probe at max_iter) and the probes' ConstantCodesWarnings
    (`probes.degenerate`) raised inside into one summary line per class, appended to the yielded list on exit,
    instead of one warning (two lines) each; other warnings pass through.

    >>> import warnings
    >>> from sklearn.exceptions import ConvergenceWarning
    >>> with collect_probe_warnings() as notes:
    ...     for _ in range(3):
    ...         warnings.warn("k-means found 1 distinct cluster: constant codes", ConvergenceWarning)
    >>> notes
    ['ConvergenceWarning ×3: k-means found 1 distinct cluster: constant codes']
    """
    from sklearn.exceptions import ConvergenceWarning

    categories: list[type[Warning]] = [ConvergenceWarning, ConstantCodesWarning]
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        for category in categories:
            warnings.simplefilter("always", category)
        yield notes
    found: dict[str, dict[str, int]] = {}
    for warning in caught:
        name = warning.category.__name__
        if issubclass(warning.category, tuple(categories)):
            text = " ".join(str(warning.message).split())
            text = text.split(": across ")[0].split(". ")[0][:160]
            found.setdefault(name, {})
            found[name][text] = found[name].get(text, 0) + 1
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    for name, texts in found.items():
        total = sum(texts.values())
        shown = list(texts) if len(texts) == 1 else [f"{t} (×{n})" if n > 1 else t for t, n in texts.items()]
        notes.append(f"{name} ×{total}: " + "; ".join(shown))


LIVE_SUMMARY = "value network live"
"""Summary key of the value-network live fraction (`latentcode.diagnostics`) in reports."""


def run_summary(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Final metrics of a run from its metrics.jsonl: `step`, and `test_<metric>`/`ood_<metric>` (acc or r2)."""
    config = _run_config(run_dir)
    metric = config.task.metric_name
    summary: dict[str, Any] = {"steps": config.train.steps}
    for record in read_metrics(run_dir):
        split = record.get("split")
        if split in ("test", "ood") and metric in record:
            summary[f"{split}_{metric}"] = record[metric]
            summary["step"] = record.get("step")
        if split == "ood" and LIVE_KEY in record:
            summary[LIVE_SUMMARY] = format_live_fraction(record[LIVE_KEY])
    return summary


def _run_names(run_dirs: Sequence[Path]) -> list[str]:
    names = [p.name for p in run_dirs]
    if len(set(names)) == len(names):
        return names
    return [p.as_posix() for p in run_dirs]


@renamed_kwargs(out="out_dir")
def report_runs(
    run_dirs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike | None = None,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    title: str | None = None,
    embed_method: str = "umap",
    device: str = "cpu",
    progress: bool | None = None,
) -> Path:
    """Run every probe on one or more runs and write `report.html` and `summary.json`.

    Every run is read at one reading (positions plus inputs, by default each task's own, the paper's); codes
    missing at that reading are extracted first, as `decode_run` does: saved into the run, or kept in memory for a
    shipped checkpoint (never written into). The reading is in the default title and in each run's
    `summary.json` entry (`meta.reading`, `decoding.reading`). Repeated probe warnings (`collect_probe_warnings`) are
    logged as one line per kind.

    Args:
        run_dirs: run directories.
        out_dir: output folder (default: the run itself for one run; several runs need one).
        positions: which extraction to analyse.
        inputs: the input choice of the reading (None: each task's default).
        title: page title (default: the runs and the reading).
        embed_method: 'umap' or 'pca'.
        device: where the models run if codes must be extracted first.
        progress: progress bar (None: only on a terminal).

    Returns:
        The path of report.html.

    Raises:
        FileNotFoundError: a path is not a run.
        ValueError: no runs, the same run twice, several runs without `out_dir`, a shipped checkpoint as the
            output folder, unknown positions or inputs, or codes of another task or reading.
    """
    path, notes = _report(run_dirs, out_dir, positions=positions, inputs=inputs, title=title,
                          embed_method=embed_method, device=device, progress=progress)
    for note in notes:
        logger.warning("report: %s", note)
    return path


def _report(
    run_dirs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike | None,
    *,
    positions: str,
    inputs: str | None,
    title: str | None,
    embed_method: str,
    device: str,
    progress: bool | None,
) -> tuple[Path, list[str]]:
    """`report_runs`, returning the warnings it collected as summary lines instead of logging them."""
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise ValueError("no runs given; pass one or more run directories")
    if len({p.resolve() for p in paths}) != len(paths):
        raise ValueError(f"a run is given twice: {[str(p) for p in paths]}")
    if out_dir is None and len(paths) > 1:
        raise ValueError(
            f"{len(paths)} runs given but no output folder; pass out_dir= (CLI: --out DIR), e.g. --out . for "
            "the current directory (latentcode writes only where it is told or into the one run it was given)"
        )
    if embed_method not in ("umap", "pca"):
        raise ValueError(f"embed_method={embed_method!r} is not one of umap, pca")
    configs = [_run_config(path) for path in paths]
    readings = [_check_reading(config, positions, inputs) for config in configs]
    out = Path(out_dir) if out_dir is not None else paths[0]
    require_writable_run(out, "write a report into")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose a folder")
    _check_writable(out)
    for path, reading in zip(paths, readings, strict=True):
        _, mismatch = _find_codes(path, positions, reading)
        if mismatch:
            raise ValueError(mismatch)

    run_inputs: list[RunInput] = []
    for path, name, config, reading in zip(paths, _run_names(paths), configs, readings, strict=True):
        codes, _ = ensure_codes(path, positions=positions, inputs=reading, device=device, progress=progress,
                                save=not is_shipped(path))
        summary = run_summary(path)
        if LIVE_SUMMARY not in summary and config.model.value_net == "mlp":  # a run trained before the diagnostic
            summary[LIVE_SUMMARY] = format_live_fraction(run_value_live_fraction(load_run(path)))
        run_inputs.append(RunInput(name=name, codes=codes, metrics=read_metrics(path), summary=summary,
                                   variant=config.model.variant))
    if title is None:
        shown = sorted({run.codes.reading or "reading not recorded" for run in run_inputs})
        title = f"latentcode report: {', '.join(run.name for run in run_inputs)} (codes read at {'; '.join(shown)})"
    with collect_probe_warnings() as notes:
        path = build_report(run_inputs, out, title=title, embed_method=embed_method, progress=progress)
    return path, notes


_MOVED_TO_DEMO = ("DEMO_PRETRAINED_TASK", "DEMO_SETTINGS", "DEMO_VARIANTS", "DemoResult", "demo")


def __getattr__(name: str) -> Any:
    """`demo` and its settings moved to `latentcode.demo`; importing them from here keeps working."""
    if name in _MOVED_TO_DEMO:
        import importlib

        return getattr(importlib.import_module("latentcode.demo"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
