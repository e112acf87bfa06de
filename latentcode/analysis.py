"""Run-directory analyses behind the CLI: extract codes, decode them, draw figures and write reports (`demo`, which
chains them on the shipped checkpoints, lives in `latentcode.demo`).

Each public function takes run directories and writes into them (`codes/`, `figures/`, `report.html`); the
numbers come from `latentcode.extract` and the torch-free `probes` package. Argument parsing and printing
live in `_cli_analysis.py`; training lives in `train.py`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
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
from latentcode.extract import POSITIONS, LatentCodes, extract_latent_codes
from latentcode.pretrained import require_writable_run
from probes._compat import renamed_kwargs
from probes.decode import DecodingResult, decode_rules
from probes.report import RunInput, build_report

__all__ = [
    "codes_path",
    "decode_run",
    "extract_run",
    "figures_run",
    "load_codes",
    "report_runs",
    "run_summary",
]

logger = logging.getLogger(__name__)

FIGURE_FORMATS = ("png", "html")


def codes_path(run_dir: str | os.PathLike, positions: str = "paper") -> Path:
    """Where `latentcode extract` writes a run's codes: `RUN/codes/<positions>.npz` (+ `.json`).

    >>> codes_path("runs/demo/hyla").as_posix()
    'runs/demo/hyla/codes/paper.npz'
    """
    _check_positions(positions)
    return Path(run_dir) / CODES_DIR / f"{positions}.npz"


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


def analysis_dir(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> Path:
    """Where an analysis of `run_dir` writes: the run itself, or `out_dir`, which then receives a copy of the
    run's config, weights and metrics (no optimizer state) so that later commands can read it as a run.

    Raises:
        FileNotFoundError: `run_dir` is not a run.
        ValueError: no `out_dir` for a shipped checkpoint (never written into), or `out_dir` holds another run.
    """
    _run_config(run_dir)
    if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
        require_writable_run(run_dir, "write codes, figures or reports into")
        return Path(run_dir)
    out = Path(out_dir)
    require_writable_run(out, "write into")
    source_hash = file_hash(Path(run_dir) / MODEL_FILE)
    if (out / CONFIG_FILE).is_file():
        if not (out / MODEL_FILE).is_file() or file_hash(out / MODEL_FILE) != source_hash:
            raise ValueError(f"--out {out} already holds another run than {run_dir}; choose another --out")
        return out
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out} is not empty and holds no copy of {run_dir}; choose a new or empty folder")
    load_run(run_dir).save(out)
    logger.info("copied %s (config, weights, metrics) to %s; results go there", run_dir, out)
    return out


def load_codes(run_dir: str | os.PathLike, positions: str = "paper") -> LatentCodes:
    """Read a run's extracted codes, checking that they belong to this run.

    Args:
        run_dir: the run directory.
        positions: which extraction ('paper' or 'all_features').

    Returns:
        The `LatentCodes` from `RUN/codes/<positions>.npz`.

    Raises:
        FileNotFoundError: no run there, or no codes yet (the message names the command that makes them).
        ValueError: codes of another task than the run's, or a corrupt or NaN-holding file.
    """
    config = _run_config(run_dir)
    path = codes_path(run_dir, positions)
    if not path.is_file():
        raise FileNotFoundError(
            f"no latent codes at {path}; make them with `latentcode extract {run_dir} --positions {positions}`"
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


@renamed_kwargs(n="n_samples")
def extract_run(
    run_dir: str | os.PathLike,
    *,
    splits: Sequence[str] = ("train", "test", "ood"),
    n_samples: int = 2048,
    positions: str = "paper",
    batch_size: int = 512,
    device: str = "cpu",
    seed: int = 0,
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
    inputs: str | None = None,
) -> Path:
    """Extract a trained run's latent codes and save them to `RUN/codes/<positions>.npz` (+ `.json`), or under
    `out_dir` (see `analysis_dir`; required for a shipped checkpoint).

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
        inputs: fuzzy logic: 'uniform' (default) or 'fixed_query' (see `extract_latent_codes`).

    Returns:
        The path of the written `.npz`.

    Raises:
        FileNotFoundError: no run there.
        ValueError: unknown splits or positions, or positions the task does not have.
    """
    _check_positions(positions)
    run_dir = analysis_dir(run_dir, out_dir)
    run = load_run(run_dir, device=device)
    codes = extract_latent_codes(
        run.model, run.task, tuple(splits), n_samples, positions=positions, batch_size=batch_size, seed=seed,
        checkpoint=run.checkpoint_hash, progress=progress, inputs=inputs,
    )
    meta = {**codes.meta, "run": str(run_dir), "step": run.step}
    codes = dataclasses.replace(codes, meta=meta)  # keeps every field, the raw `inputs` included
    path = codes.save(codes_path(run_dir, positions))
    record_outputs(run_dir, [path, path.with_suffix(".json")])
    return path


def decode_run(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    label: str | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> tuple[DecodingResult, Path]:
    """Fit linear decoders on a run's train-split codes and score them on its other splits, per layer.

    Writes the result as JSON next to the codes: `RUN/codes/<positions>.decode.json`. A run without saved
    codes gets them extracted first, with `extract_run`'s defaults (logged at INFO level).

    Args:
        run_dir: the run directory.
        positions: which extraction to decode.
        label: the label to decode (default: the codes' own, `rule` or `terms`).
        device: where the model runs if the codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).

    Returns:
        (the `DecodingResult`, the JSON path).

    Raises:
        FileNotFoundError: no run there.
        ValueError: codes of another task, NaN codes, no train rows or no evaluation rows, a single class in
            the train split.
    """
    _check_positions(positions)
    run_dir = analysis_dir(run_dir, out_dir)
    if not codes_path(run_dir, positions).is_file():
        logger.info("%s has no %s codes yet; extracting them first (`latentcode extract %s --positions %s`)",
                    run_dir, positions, run_dir, positions)
        extract_run(run_dir, positions=positions, device=device, progress=progress)
    codes = load_codes(run_dir, positions)
    result = decode_rules(codes, label=label, progress=progress)
    path = codes_path(run_dir, positions).with_suffix(".decode.json")
    atomic_write_json(path, result.to_dict())
    record_outputs(run_dir, [path])
    return result, path


def figures_run(
    run_dir: str | os.PathLike,
    *,
    positions: str = "paper",
    formats: Sequence[str] = FIGURE_FORMATS,
    embed_method: str = "umap",
    progress: bool | None = None,
    out_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Draw a run's figures into `RUN/figures/`: training curves, decoding per layer, rule similarity, mean
    code heatmaps and a 2-D embedding of the last layer (plus per-term F1 for fuzzy logic).

    Args:
        run_dir: the run directory (with codes from `latentcode extract`).
        positions: which extraction to draw.
        formats: any of png, svg, pdf (matplotlib) and html (plotly, self-contained).
        embed_method: 'umap' or 'pca'.
        progress: progress bar (None: only on a terminal).
        out_dir: write under this folder instead of the run (see `analysis_dir`).

    Returns:
        The written files.

    Raises:
        FileNotFoundError: no run, or no codes yet.
        ValueError: unknown formats, codes of another task, or codes the probes cannot use.
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
    run_dir = analysis_dir(run_dir, out_dir)
    codes = load_codes(run_dir, positions)
    out = Path(run_dir) / FIGURES_DIR
    suffix = "" if positions == "paper" else f"_{positions}"
    decoding = decode_rules(codes, progress=progress)
    figures: dict[str, Any] = {
        "decoding": decoding_figure(decoding),
        "similarity": similarity_figure(rule_similarity(codes, layer="last")),
        "code_heatmap": code_heatmap_figure(codes),
        embed_method: embedding_figure(embed_codes(codes, embed_method, "last", max_points=2000)),
    }
    if decoding.terms is not None:
        split = "ood" if "ood" in decoding.terms.f1 else next(iter(decoding.terms.f1))
        figures["term_f1"] = term_f1_figure(decoding.terms, split=split)
    metrics = read_metrics(run_dir)
    if metrics:
        figures["training_curves"] = training_curves_figure(metrics)
    written: list[Path] = []
    for name, figure in figures.items():
        written += save_figure(figure, out / f"{name}{suffix}", formats=tuple(formats))
        record_outputs(run_dir, written)
    return written


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
    title: str | None = None,
    embed_method: str = "umap",
    progress: bool | None = None,
) -> Path:
    """Run every probe on one or more runs and write `report.html` and `summary.json`.

    Args:
        run_dirs: run directories (runs without codes appear with a note on how to make them).
        out_dir: output folder (default: the run itself for one run; several runs need one).
        positions: which extraction to analyse.
        title: page title.
        embed_method: 'umap' or 'pca'.
        progress: progress bar (None: only on a terminal).

    Returns:
        The path of report.html.

    Raises:
        FileNotFoundError: a path is not a run, or none of the runs has codes.
        ValueError: no runs, the same run twice, several runs without `out_dir`, or codes of another task.
    """
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
    inputs: list[RunInput] = []
    for path, name in zip(paths, _run_names(paths), strict=True):
        config = _run_config(path)
        try:
            codes = load_codes(path, positions)
        except FileNotFoundError:
            logger.warning("%s has no %s codes yet; run `latentcode extract %s`", path, positions, path)
            codes = None
        summary = run_summary(path)
        if LIVE_SUMMARY not in summary and config.model.value_net == "mlp":  # a run trained before the diagnostic
            summary[LIVE_SUMMARY] = format_live_fraction(run_value_live_fraction(load_run(path)))
        inputs.append(RunInput(name=name, codes=codes, metrics=read_metrics(path), summary=summary,
                               variant=config.model.variant))
    if all(run.codes is None for run in inputs):
        raise FileNotFoundError(
            f"none of the runs has {positions} codes; make them with `latentcode extract RUN --positions "
            f"{positions}` for each run first"
        )
    if out_dir is None:
        out_dir = paths[0]
    title = title or f"latentcode report: {', '.join(run.name for run in inputs)}"
    return build_report(inputs, out_dir, title=title, embed_method=embed_method, progress=progress)


_MOVED_TO_DEMO = ("DEMO_PRETRAINED_TASK", "DEMO_SETTINGS", "DEMO_VARIANTS", "DemoResult", "demo")


def __getattr__(name: str) -> Any:
    """`demo` and its settings moved to `latentcode.demo`; importing them from here keeps working."""
    if name in _MOVED_TO_DEMO:
        import importlib

        return getattr(importlib.import_module("latentcode.demo"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
