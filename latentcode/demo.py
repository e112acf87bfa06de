"""`latentcode demo`: probe the latent codes of softmax, linear and HYLA models end to end and write a report.

By default it analyses the shipped fuzzy-logic checkpoints (copied first, never written into); `train=True`
trains small SRAVEN models instead. The steps are the public analyses of `latentcode.analysis` (extract,
decode, report); this module only chains them and condenses their results into one table (`DemoResult`).
"""

from __future__ import annotations

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

from latentcode.analysis import _run_config, _run_names, analysis_dir, decode_run, extract_run, report_runs
from latentcode.checkpoint import atomic_write_json
from probes._compat import renamed_kwargs
from probes.decode import DecodingResult

__all__ = ["DEMO_PRETRAINED_TASK", "DEMO_SETTINGS", "DEMO_VARIANTS", "DemoResult", "demo"]

logger = logging.getLogger(__name__)


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
