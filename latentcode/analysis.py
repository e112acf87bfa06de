"""Run-directory analyses behind the CLI: extract codes, decode them, draw figures, write reports, and `demo`.

Each public function takes run directories and writes into them (`codes/`, `figures/`, `report.html`); the
numbers come from `latentcode.extract` and the torch-free `probes` package. Argument parsing and printing
live in `_cli_analysis.py`; training lives in `train.py`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latentcode.checkpoint import (
    RunConfig,
    atomic_write_json,
    file_hash,
    load_run,
    read_metrics,
    record_outputs,
)
from latentcode.constants import CODES_DIR, CONFIG_FILE, FIGURES_DIR, MODEL_FILE
from latentcode.diagnostics import LIVE_KEY, format_live_fraction
from latentcode.extract import POSITIONS, LatentCodes, extract_latent_codes
from latentcode.pretrained import require_writable_run
from probes._compat import renamed_kwargs
from probes.decode import DecodingResult, decode_rules
from probes.report import RunInput, build_report

__all__ = [
    "DEMO_SETTINGS",
    "DEMO_VARIANTS",
    "DemoResult",
    "codes_path",
    "decode_run",
    "demo",
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


def _measure_live_fraction(run_dir: Path, config: RunConfig) -> list[float | None]:
    """The live fraction of a run whose metrics do not record it, on the batch training would have used."""
    from latentcode.diagnostics import value_live_fraction
    from latentcode.train import live_fraction_inputs

    run = load_run(run_dir)
    return value_live_fraction(run.model, live_fraction_inputs(run.task, config.train.seed))


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
            summary[LIVE_SUMMARY] = format_live_fraction(_measure_live_fraction(path, config))
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


# ----------------------------------------------------------------------------------------------------------- demo
def _last_layer(decoding: DecodingResult | dict[str, Any] | None, split: str = "ood") -> tuple[Any, Any, Any]:
    """(accuracy of the last single-layer probe on `split`, majority rate, chance) from a result or its dict."""
    if decoding is None:
        return None, None, None
    data = decoding.to_dict() if isinstance(decoding, DecodingResult) else decoding
    layers = [row for row in data.get("layers") or [] if row["layer"] != "all"]
    baseline = (data.get("baselines") or {}).get(split) or {}
    accuracy = layers[-1]["accuracy"].get(split) if layers else None
    return accuracy, baseline.get("majority"), baseline.get("chance")


@dataclass(frozen=True)
class DemoResult:
    """What `demo` did: one row per variant, the report, and the time it took.

    Attributes:
        rows: per variant: `variant`, `test` and `ood` (the task metric on those splits); for fuzzy logic
            `term_f1_ood_last` (mean F1 of the last layer's per-term probes on OOD compositions), `input_only_f1_ood`
            (the same probes on the raw tokens) and `codes_minus_input_only`; and `decode_ood_last`
            (rule decoding accuracy from the last layer's OOD codes at the report's positions), `majority_ood`
            (the majority-class rate on those rows), `chance`, the same two for the paper's positions
            (`decode_ood_last_paper`, `majority_ood_paper`) where they differ, and `run` (the run directory).
        report: path of report.html.
        seconds: wall time of the whole demo.
        metric: the task metric in `test`/`ood` (`acc` for SRAVEN, `r2` for fuzzy logic).
        positions: the positions the report (and `decode_ood_last`) analyses.
        timings: seconds per phase (train, extract, report).
    """

    rows: list[dict[str, Any]]
    report: Path
    seconds: float
    metric: str = "acc"
    positions: str = "paper"
    timings: dict[str, float] = field(default_factory=dict)

    def table(self) -> str:
        """The comparison as aligned text."""
        columns = [("variant", "variant"), ("test", f"test {self.metric}"), ("ood", f"OOD {self.metric}")]
        if any("term_f1_ood_last" in row for row in self.rows):  # fuzzy logic: per-term probes, mean F1
            columns += [("term_f1_ood_last", "term F1 OOD (last layer)"), ("input_only_f1_ood", "input-only F1"),
                        ("codes_minus_input_only", "codes − input-only")]
        else:
            columns += [("decode_ood_last", "decode OOD (last layer)"), ("majority_ood", "majority")]
        if any(row.get("input_only_ood") is not None for row in self.rows) and \
                not any("term_f1_ood_last" in row for row in self.rows):
            columns += [("input_only_ood", "input-only control"), ("codes_minus_control", "codes − best control")]
        if any("decode_ood_last_paper" in row for row in self.rows):
            columns += [("decode_ood_last_paper", "decode OOD (paper positions)"),
                        ("majority_ood_paper", "majority (paper)")]
        cells = [[title for _, title in columns]]
        for row in self.rows:
            cells.append([row[key] if isinstance(row.get(key), str) else _fmt(row.get(key)) for key, _ in columns])
        widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [{**r, "run": str(r["run"])} for r in self.rows], "report": str(self.report),
                "seconds": self.seconds, "metric": self.metric, "positions": self.positions,
                "timings": self.timings}


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _term_f1(decoding: dict[str, Any] | None, split: str = "ood") -> dict[str, Any]:
    """Fuzzy logic: mean F1 of the last single layer's per-term probes on `split`, the input-only control's mean
    F1 and their difference; {} for decodings without per-term probes."""
    terms = (decoding or {}).get("terms")
    if not terms:
        return {}
    with np.errstate(all="ignore"):
        f1 = np.array(terms["f1"][split][-2], dtype=np.float64)  # layers are (0, ..., last, "all")
        ours = float(np.nanmean(f1)) if np.isfinite(f1).any() else None
    control = (terms.get("input_only_f1") or {}).get(split)
    return {"term_f1_ood_last": ours, "input_only_f1_ood": control,
            "codes_minus_input_only": None if ours is None or control is None else ours - control}


def _input_only(decoding: DecodingResult | dict[str, Any] | None, split: str = "ood") -> float | None:
    """The input-only control's accuracy on `split` (`probes.controls`), or None when it was not fitted."""
    if decoding is None:
        return None
    data = decoding.to_dict() if isinstance(decoding, DecodingResult) else decoding
    return ((data.get("controls") or {}).get("input_only") or {}).get(split)


DEMO_VARIANTS = ("softmax", "linear", "hyla")
"""The variants `demo` analyses (shipped checkpoints `<task>-<variant>`) or trains, in table order."""
DEMO_PRETRAINED_TASK = "fuzzy_logic"
"""The task of the shipped checkpoints `demo` analyses by default."""
DEMO_SETTINGS: dict[str, Any] = {
    "task": "sraven",
    "task_params": {"permute_features": False},
    "preset": "small",
    "steps": 600,
    "batch_size": 128,
    "lr": 3e-3,
    "n_samples": 1024,
}
"""What `demo` trains by default, sized for about five minutes on a 2-core CPU. SRAVEN's column permutation is
off, so small models learn the rules within minutes (with it, they sit on a plateau for thousands of steps);
the analyses draw unpermuted instances either way, as the paper's do."""


@renamed_kwargs(out="out_dir", n_codes="n_samples")
def demo(
    out_dir: str | os.PathLike = "runs/demo",
    *,
    train: bool = False,
    variants: Sequence[str] = DEMO_VARIANTS,
    task: str | None = None,
    task_params: dict[str, Any] | None = None,
    preset: str = DEMO_SETTINGS["preset"],
    steps: int = DEMO_SETTINGS["steps"],
    lr: float = DEMO_SETTINGS["lr"],
    n_samples: int = DEMO_SETTINGS["n_samples"],
    seed: int = 0,
    device: str = "cpu",
    embed_method: str = "umap",
    threads: int | None = 1,
    force: bool = False,
    progress: bool | None = None,
) -> DemoResult:
    """Probe the latent codes of softmax, linear and HYLA models and write a report.

    By default the models are the shipped checkpoints `<task>-<variant>` (fuzzy logic at the paper's Table A1
    setting, see `latentcode.pretrained`): each is copied (weights, config, metrics) to `out_dir/<variant>`, its
    codes are extracted there, and every probe runs on them; nothing is trained and the checkpoints are not
    touched. With `train=True`, small models are trained instead (`DEMO_SETTINGS`, SRAVEN by default; finished
    runs in `out_dir` are reused unless `force=True`). For SRAVEN, codes are extracted at both the paper's
    positions (last feature only: its rule label is skewed towards high rule indices) and `all_features` (every
    feature: balanced labels); the report analyses `all_features`, and the table shows both. Fuzzy-logic codes are
    read on instances that share one query input (`inputs="fixed_query"`), as the reference's latent analyses do.

    Args:
        out_dir: folder for the runs (`out_dir/<variant>`), report.html, summary.json and demo.json.
        train: train small models instead of analysing the shipped checkpoints.
        variants: model variants.
        task: the task (default: fuzzy_logic for the shipped checkpoints, `DEMO_SETTINGS["task"]` with `train`).
        task_params: task parameters when training (default: `DEMO_SETTINGS["task_params"]` for SRAVEN).
        preset: model preset when training.
        steps: training steps per model when training.
        lr: peak learning rate when training.
        n_samples: instances per split whose codes are extracted.
        seed: seed of the task split, initialisation and data when training, and of the extraction batches.
        device: where to train and extract.
        embed_method: 'umap' or 'pca' for the report's embedding section.
        threads: torch CPU threads while the demo runs (restored afterwards; None keeps torch's setting).
        force: retrain runs that already exist in `out_dir`.
        progress: progress bars (None: only on a terminal).

    Returns:
        A `DemoResult`; `table()` is the comparison the CLI prints.

    Raises:
        ValueError: unknown variants, task or preset, a missing shipped checkpoint (the message lists those
            there are), or an existing run in `out_dir` trained with other settings (pass `force=True`).
    """
    if threads is not None and threads <= 0:
        raise ValueError(f"threads={threads} must be a positive integer or None")
    if task is None:
        task = DEMO_SETTINGS["task"] if train else DEMO_PRETRAINED_TASK
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _demo(out_dir, train, variants, task, task_params, preset, steps, lr, n_samples, seed, device,
                     embed_method, force, progress)
    finally:
        torch.set_num_threads(previous)


def _demo_runs(out: Path, train: bool, variants: Sequence[str], task: str, task_params: dict[str, Any] | None,
               preset: str, steps: int, lr: float, seed: int, device: str, force: bool,
               progress: bool | None) -> list[Path]:
    """The demo's run directories: copies of the shipped checkpoints, or freshly trained small models."""
    if not train:
        from latentcode.pretrained import pretrained_path

        sources = [pretrained_path(f"{task}-{variant}") for variant in variants]  # fails early on a missing one
        return [analysis_dir(source, out / variant) for source, variant in zip(sources, variants, strict=True)]
    from latentcode.config import model_config, train_config
    from latentcode.tasks import get_task
    from latentcode.train import train as train_model

    if task_params is None:
        task_params = DEMO_SETTINGS["task_params"] if task == DEMO_SETTINGS["task"] else {}
    the_task = get_task(task, **{"seed": seed, **task_params})
    train_cfg = train_config(task, preset, steps=steps, warmup=max(1, steps // 10), lr=lr, eval_every=steps,
                             eval_samples=2048, log_every=max(1, steps // 20), checkpoint_every=steps, seed=seed,
                             device=device, batch_size=DEMO_SETTINGS["batch_size"])
    run_dirs = []
    for variant in variants:
        logger.info("demo: training %s on %s (%s preset, %d steps)", variant, task, preset, steps)
        train_model(model_config(the_task, variant, preset), the_task, train_cfg, out / variant, resume=not force,
                    force=force, progress=progress)
        run_dirs.append(out / variant)
    return run_dirs


def _demo(out: str | os.PathLike, train: bool, variants: Sequence[str], task: str,
          task_params: dict[str, Any] | None, preset: str, steps: int, lr: float, n_samples: int, seed: int,
          device: str, embed_method: str, force: bool, progress: bool | None) -> DemoResult:
    start = time.perf_counter()
    out = Path(out)
    run_dirs = _demo_runs(out, train, variants, task, task_params, preset, steps, lr, seed, device, force, progress)
    timings = {"train" if train else "copy": time.perf_counter() - start}
    metric = _run_config(run_dirs[0]).task.metric_name
    positions = ("all_features", "paper") if task == "sraven" else ("paper",)
    tick = time.perf_counter()
    for run_dir in run_dirs:
        logger.info("demo: extracting %s codes (%s)", run_dir.name, ", ".join(positions))
        for where in positions:
            extract_run(run_dir, n_samples=n_samples, positions=where, device=device, seed=seed, progress=progress,
                        inputs="fixed_query" if task == "fuzzy_logic" else None)
    timings["extract"] = time.perf_counter() - tick
    tick = time.perf_counter()
    logger.info("demo: running the probes and writing the report")
    source = "shipped checkpoints" if not train else f"{preset} models trained {steps} steps"
    report = report_runs(run_dirs, out, positions=positions[0], embed_method=embed_method, progress=progress,
                         title=f"latentcode demo: {', '.join(variants)} on {task}, {source} ({positions[0]} codes)")
    paper = {run_dir: decode_run(run_dir, positions="paper", progress=progress)[0]
             for run_dir in run_dirs} if positions[0] != "paper" else {}
    timings["report"] = time.perf_counter() - tick
    summary = json.loads((report.parent / "summary.json").read_text())["runs"]
    rows = []
    for variant, run_dir, name in zip(variants, run_dirs, _run_names(run_dirs), strict=True):
        run = summary[name]
        accuracy, majority, chance = _last_layer(run.get("decoding"))
        control = _input_only(run.get("decoding"))
        best = None if control is None or accuracy is None else max(c for c in (control, majority, chance)
                                                                     if c is not None)
        row = {"variant": variant, "test": run["summary"].get(f"test_{metric}"),
               "ood": run["summary"].get(f"ood_{metric}"), "decode_ood_last": accuracy, "majority_ood": majority,
               "chance": chance, "input_only_ood": control,
               "codes_minus_control": None if best is None else accuracy - best, "run": run_dir}
        row.update(_term_f1(run.get("decoding")))
        if run_dir in paper:
            row["decode_ood_last_paper"], row["majority_ood_paper"], _ = _last_layer(paper[run_dir])
        rows.append(row)
    result = DemoResult(rows=rows, report=report, seconds=time.perf_counter() - start, metric=metric,
                        positions=positions[0], timings=timings)
    atomic_write_json(out / "demo.json", result.to_dict())
    return result
