"""`latentcode demo`: probe the latent codes of softmax, linear and HYLA models end to end and write a report.

By default it analyses the shipped fuzzy-logic checkpoints (copied first, never written into); `train=True`
trains small SRAVEN models instead. The steps are the public analyses of `latentcode.analysis` (extract,
decode, report); this module only chains them and condenses their results into one table (`DemoResult`), each
score beside its floors and the input-only control. torch and the analyses are imported when `demo` runs, so the
command line reads `DEMO_SETTINGS` for its --help without loading them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes._compat import renamed_kwargs
from probes.codes import _jsonable
from probes.decoding.results import HEADLINE, NA, UNDEFINED
from probes.degenerate import ConstantCodesWarning

__all__ = ["DEMO_PRETRAINED_TASK", "DEMO_SETTINGS", "DEMO_VARIANTS", "DemoResult", "demo"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoResult:
    """What `demo` did: one row per variant, the report, and the time it took.

    Attributes:
        rows: per variant: `variant`, `test` and `ood` (the task metric on those splits), `run` (the run
            directory), and the last single layer's decoding of held-out (OOD) compositions beside its floors and
            the input-only control, at the default reading. Every task: `decode_ood_last` (accuracy, exact-set
            accuracy for fuzzy-logic terms), `chance`, `majority_ood`, `input_only_ood` (None: not fitted) and
            `codes_minus_control` (the accuracy minus the best of those). Fuzzy logic also: `term_f1_ood_last`
            (mean per-term F1), `always_present_f1_ood` (its floor), `input_only_f1_ood`, `term_f1_minus_best`
            (the headline) and `codes_minus_input_only`. SRAVEN also the accuracy and headline at `all_features`
            positions (`decode_ood_last_all_features`, `codes_minus_control_all_features`). NaN: undefined.
        report: path of report.html.
        seconds: wall time of the whole demo.
        metric: the task metric in `test`/`ood` (`acc` for SRAVEN, `r2` for fuzzy logic).
        positions: the positions the report (and the headline columns) analyse.
        timings: seconds per phase (train or copy, extract, report).
        reading: the reading of the codes, in words (`LatentCodes.reading`).
        notes: one line each: classes without a probe, warnings collected while probing.
    """

    rows: list[dict[str, Any]]
    report: Path
    seconds: float
    metric: str = "acc"
    positions: str = "paper"
    timings: dict[str, float] = field(default_factory=dict)
    reading: str | None = None
    notes: list[str] = field(default_factory=list)

    def table(self) -> str:
        """The comparison as aligned text: a title line with the reading, then one row per variant."""
        columns = [("variant", "variant"), ("test", f"test {self.metric}"), ("ood", f"OOD {self.metric}")]
        if any("term_f1_ood_last" in row for row in self.rows):  # fuzzy logic: per-term probes, mean F1
            columns += [("term_f1_ood_last", "term F1 OOD (last layer)"),
                        ("always_present_f1_ood", "always-present F1"), ("input_only_f1_ood", "input-only F1"),
                        ("term_f1_minus_best", HEADLINE)]
        else:
            columns += [("decode_ood_last", "decode OOD (last layer)"), ("chance", "chance"),
                        ("majority_ood", "majority"), ("input_only_ood", "input-only"),
                        ("codes_minus_control", HEADLINE)]
        if any("decode_ood_last_all_features" in row for row in self.rows):
            columns += [("decode_ood_last_all_features", "decode OOD (all_features)"),
                        ("codes_minus_control_all_features", f"{HEADLINE} (all_features)")]
        cells = [[title for _, title in columns]]
        signed = {"term_f1_minus_best", "codes_minus_control", "codes_minus_control_all_features"}
        for row in self.rows:
            cells.append([row[key] if isinstance(row.get(key), str) else _fmt(row.get(key), key in signed)
                          for key, _ in columns])
        widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
        grid = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
        title = f"codes read at {self.reading or 'a reading not recorded'}; held-out (OOD) compositions"
        return "\n".join([title, *grid])

    def to_dict(self) -> dict[str, Any]:
        return _jsonable({"rows": [{**r, "run": str(r["run"])} for r in self.rows], "report": str(self.report),
                          "seconds": self.seconds, "metric": self.metric, "positions": self.positions,
                          "timings": self.timings, "reading": self.reading, "notes": self.notes})


def _fmt(value: Any, signed: bool = False) -> str:
    """`n/a` for a number not computed (None), `–` for an undefined one (NaN)."""
    if value is None:
        return NA
    if not math.isfinite(value):
        return UNDEFINED
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _number(value: Any) -> float:
    """A score read back from JSON, where null stands for NaN (undefined)."""
    return float("nan") if value is None else float(value)


def _last_layer(headline: dict[str, Any] | None) -> dict[str, Any] | None:
    """The last single layer's entry of a `Headline.to_dict()` (layers are (0, ..., last, "all"))."""
    if not headline:
        return None
    layers = headline["layers"]
    index = max(i for i, name in enumerate(layers) if name != "all") if any(n != "all" for n in layers) else -1
    return {"codes": _number(headline["codes"][index]), "floors": headline["floors"],
            "control": headline.get("control"), "over_best": _number(headline["codes_minus_best"][index])}


def _row_scores(decoding: dict[str, Any] | None, split: str = "ood") -> dict[str, Any]:
    """The demo's columns from one run's decoding (`DecodingResult.to_dict()`), at the last single layer."""
    headline = (decoding or {}).get("headline") or {}
    row: dict[str, Any] = {}
    accuracy = _last_layer((headline.get("accuracy") or {}).get(split))
    if accuracy is not None:
        row.update(decode_ood_last=accuracy["codes"], chance=_number(accuracy["floors"].get("chance")),
                   majority_ood=_number(accuracy["floors"].get("majority")), input_only_ood=accuracy["control"],
                   codes_minus_control=accuracy["over_best"])
    terms = _last_layer((headline.get("term_f1") or {}).get(split))
    if terms is not None:
        control = terms["control"]
        row.update(term_f1_ood_last=terms["codes"],
                   always_present_f1_ood=_number(terms["floors"].get("always_present")),
                   input_only_f1_ood=control, term_f1_minus_best=terms["over_best"],
                   codes_minus_input_only=None if control is None else terms["codes"] - control)
    return row


def _skipped_note(decodings: Sequence[dict[str, Any] | None]) -> str | None:
    """One line for the classes without a probe, over every run (they are the same when the runs share a task)."""
    skipped: dict[str, str] = {}
    for decoding in decodings:
        terms = (decoding or {}).get("terms") or {}
        names = terms.get("class_names") or []
        for c, why in (terms.get("skipped") or {}).items():
            skipped.setdefault(names[int(c)] if int(c) < len(names) else str(c), why)
    if not skipped:
        return None
    reasons = sorted(set(skipped.values()))
    return (f"no probe for {len(skipped)} terms ({', '.join(skipped)}: {', '.join(reasons)}); their F1 is {NA} "
            "and left out of the means")


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
    inputs: str | None = None,
) -> DemoResult:
    """Probe the latent codes of softmax, linear and HYLA models and write a report.

    By default the models are the shipped checkpoints `<task>-<variant>` (fuzzy logic at the paper's Table A1
    setting, see `latentcode.pretrained`): each is copied (weights, config, metrics) to `out_dir/<variant>`, its
    codes are extracted there, and every probe runs on them; nothing is trained and the checkpoints are not
    touched. With `train=True`, small models are trained instead (`DEMO_SETTINGS`, SRAVEN by default; finished
    runs in `out_dir` are reused unless `force=True`). Codes are read at the task's default reading, the paper's
    (fuzzy logic: the query's self-code on instances sharing one query input; SRAVEN: the reference's dump
    positions on unpermuted instances), unless `inputs` names another; SRAVEN codes are also read at
    `all_features` positions (every feature: balanced labels), shown in extra columns. Every score is shown
    beside its floors and the input-only control, and the headline is the score minus the best of them.

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
        inputs: the input choice the codes are read at (None: the task's default, the paper's reading).

    Returns:
        A `DemoResult`; `table()` is the comparison the CLI prints.

    Raises:
        ValueError: unknown variants, task, preset or inputs, a missing shipped checkpoint (the message lists
            those there are), or an existing run in `out_dir` trained with other settings (pass `force=True`).
    """
    import torch

    from latentcode.tasks import TASKS, get_task

    if threads is not None and threads <= 0:
        raise ValueError(f"threads={threads} must be a positive integer or None")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples <= 0:
        raise ValueError(f"n_samples={n_samples} must be a positive integer")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps={steps} must be a positive integer")
    if embed_method not in ("umap", "pca"):
        raise ValueError(f"embed_method={embed_method!r} is not one of umap, pca")
    if task is None:
        task = DEMO_SETTINGS["task"] if train else DEMO_PRETRAINED_TASK
    if task not in TASKS:
        get_task(task)  # raises, listing the valid tasks
    TASKS[task].code_reading.choice(inputs, f"task {task!r}")  # checked before anything is copied or trained
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _demo(out_dir, train, variants, task, task_params, preset, steps, lr, n_samples, seed, device,
                     embed_method, force, progress, inputs)
    finally:
        torch.set_num_threads(previous)


def _demo_runs(out: Path, train: bool, variants: Sequence[str], task: str, task_params: dict[str, Any] | None,
               preset: str, steps: int, lr: float, seed: int, device: str, force: bool,
               progress: bool | None) -> list[Path]:
    """The demo's run directories: copies of the shipped checkpoints, or freshly trained small models."""
    from latentcode.analysis import analysis_dir

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
    configs = [model_config(the_task, variant, preset) for variant in variants]  # fails early on a bad variant
    run_dirs = []
    for variant, config in zip(variants, configs, strict=True):
        logger.info("demo: training %s on %s (%s preset, %d steps)", variant, task, preset, steps)
        train_model(config, the_task, train_cfg, out / variant, resume=not force, force=force, progress=progress)
        run_dirs.append(out / variant)
    return run_dirs


def _extra_positions(task: Any) -> list[str]:
    """Named positions other than the paper's that the task has (SRAVEN: all_features)."""
    from latentcode.extract import POSITIONS, resolve_positions

    extra = []
    for positions in POSITIONS:
        if positions == "paper":
            continue
        try:
            resolve_positions(task, positions)
        except ValueError:
            continue
        extra.append(positions)
    return extra


def _demo(out: str | os.PathLike, train: bool, variants: Sequence[str], task: str,
          task_params: dict[str, Any] | None, preset: str, steps: int, lr: float, n_samples: int, seed: int,
          device: str, embed_method: str, force: bool, progress: bool | None, inputs: str | None) -> DemoResult:
    from latentcode.analysis import _check_reading, _report, _run_config, _run_names, decode_run, extract_run
    from latentcode.checkpoint import atomic_write_json

    start = time.perf_counter()
    out = Path(out)
    run_dirs = _demo_runs(out, train, variants, task, task_params, preset, steps, lr, seed, device, force, progress)
    timings = {"train" if train else "copy": time.perf_counter() - start}
    config = _run_config(run_dirs[0])
    metric = config.task.metric_name
    inputs = _check_reading(config, "paper", inputs)
    extra = _extra_positions(config.task)
    tick = time.perf_counter()
    for run_dir in run_dirs:
        logger.info("demo: extracting %s codes (%s)", run_dir.name, ", ".join(["paper", *extra]))
        for where in ["paper", *extra]:
            with warnings.catch_warnings():
                # constant codes are said once per run and reading: by the report (paper positions, in the
                # notes) and by decode_run below (the extra positions), not here as well
                warnings.simplefilter("ignore", ConstantCodesWarning)
                extract_run(run_dir, n_samples=n_samples, positions=where, device=device, seed=seed,
                            progress=progress, inputs=inputs)
    timings["extract"] = time.perf_counter() - tick
    tick = time.perf_counter()
    logger.info("demo: running the probes and writing the report")
    source = "shipped checkpoints" if not train else f"{preset} models trained {steps} steps"
    report, notes = _report(run_dirs, out, positions="paper", inputs=inputs, embed_method=embed_method,
                            device=device, progress=progress,
                            title=f"latentcode demo: {', '.join(variants)} on {task}, {source}")
    extra_decodings = {(run_dir, where): decode_run(run_dir, positions=where, inputs=inputs, progress=progress)[0]
                       for run_dir in run_dirs for where in extra}
    timings["report"] = time.perf_counter() - tick
    summary = json.loads((report.parent / "summary.json").read_text())["runs"]
    rows = []
    decodings = []
    for variant, run_dir, name in zip(variants, run_dirs, _run_names(run_dirs), strict=True):
        run = summary[name]
        decodings.append(run.get("decoding"))
        row = {"variant": variant, "test": run["summary"].get(f"test_{metric}"),
               "ood": run["summary"].get(f"ood_{metric}"), **_row_scores(run.get("decoding")), "run": run_dir}
        for where in extra:
            scores = _row_scores(extra_decodings[run_dir, where].to_dict())
            row[f"decode_ood_last_{where}"] = scores.get("decode_ood_last")
            row[f"codes_minus_control_{where}"] = scores.get("codes_minus_control")
        rows.append(row)
        notes += [note for note in (run.get("decoding") or {}).get("notes") or [] if note not in notes]
    skipped = _skipped_note(decodings)
    reading = next((r["meta"].get("reading") for r in summary.values() if r.get("meta")), None)
    result = DemoResult(rows=rows, report=report, seconds=time.perf_counter() - start, metric=metric,
                        positions="paper", timings=timings, reading=reading,
                        notes=[skipped, *notes] if skipped else notes)
    atomic_write_json(out / "demo.json", result.to_dict())
    return result
