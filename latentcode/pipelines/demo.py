"""`latentcode demo`: probe the latent codes of softmax, linear and HYLA models end to end and write a report.

By default it analyses every shipped seed of the fuzzy-logic checkpoints (copied first, never written into);
`train=True` trains small SRAVEN models instead. The steps are the public analyses of
`latentcode.pipelines.analysis` (extract, decode, report); this module only chains them and hands their results to
`latentcode.pipelines.demo_table`, which condenses them into one table per seed and the mean ± s.e. over seeds
(`SeedTable`, `DemoResult`), each score beside its floors, the input-only control and the value-network live
fraction. torch and the analyses are imported when `demo` runs, so the command line reads `DEMO_SETTINGS` for its
--help without loading them.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from latentcode.pipelines.demo_table import (
    DemoResult,
    SeedTable,
    dead_layer_notes,
    row_scores,
    seed_row,
    seed_section,
    skipped_note,
)
from probes.degenerate import check_constant_codes

__all__ = [
    "DEMO_PRETRAINED_TASK",
    "DEMO_SETTINGS",
    "DEMO_VARIANTS",
    "demo",
    "demo_out_dir",
    "shipped_seed_dirs",
    "shipped_seed_runs",
]

logger = logging.getLogger(__name__)


def shipped_seed_dirs(name: str, seeds: Sequence[int] | None = None) -> dict[int, Path]:
    """Every shipped seed of a short name, each folder checked: seed -> folder (`<name>` and `<name>-s<k>`).

    Each folder is opened and its weights loaded once to check it (`shipped_seed_runs` returns those open runs).
    """
    return {seed: run.path for seed, run in shipped_seed_runs(name, seeds).items()}


def shipped_seed_runs(name: str, seeds: Sequence[int] | None = None) -> dict[int, Any]:
    """Every shipped seed of a short name, each folder checked and opened once: seed -> `OpenRun` (read in place,
    its weights loaded; nothing is copied).

    Args:
        name: a short name such as `fuzzy_logic-hyla` (see `latentcode.rundir.pretrained.pretrained_seeds`).
        seeds: only these seeds (None: every shipped one).

    Raises:
        ValueError: no checkpoint named `name` (the available ones are listed), a seed in `seeds` that is not
            shipped, or a broken folder: a file missing, a shipped.json or config.json that cannot be read, a seed
            recorded in shipped.json that differs from the folder's `-s<k>` or from its config, two folders
            holding one seed, or weights that do not load. The message names the folder and the fix.
    """
    from latentcode.constants import CONFIG_FILE, MODEL_FILE, SHIPPED_FILE
    from latentcode.rundir.pretrained import checkpoints_dir, pretrained_path, shipped_info

    pretrained_path(name)  # raises, listing the names there are
    folder = checkpoints_dir()
    pattern = re.compile(rf"{re.escape(name)}(?:-s(\d+))?")
    found: dict[int, Path] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_dir() and pattern.fullmatch(p.name)):
        def broken(why: str, path: Path = path) -> ValueError:
            return ValueError(f"shipped checkpoint {path} is broken: {why}. Export it again (`latentcode export RUN "
                              f"{path}`) or move it out of {folder}")

        missing = [f for f in (CONFIG_FILE, MODEL_FILE, SHIPPED_FILE) if not (path / f).is_file()]
        if missing:
            raise broken(f"no {', '.join(missing)}")
        try:
            seed = shipped_info(path)["evaluation"]["seed"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise broken(f"{SHIPPED_FILE} does not record the evaluation seed ({err!r})") from err
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise broken(f"{SHIPPED_FILE} records seed {seed!r}, not an integer")
        suffix = pattern.fullmatch(path.name)[1]
        if suffix is not None and int(suffix) != seed:
            raise broken(f"the folder is named for seed {suffix} but {SHIPPED_FILE} records seed {seed}")
        if seed in found:
            raise broken(f"{found[seed].name} holds seed {seed} too")
        found[seed] = path
    if seeds is not None:
        absent = [s for s in seeds if s not in found]
        if absent:
            raise ValueError(f"seed {', '.join(map(str, absent))} of {name!r} is not shipped; shipped seeds: "
                             f"{', '.join(map(str, sorted(found))) or 'none'}")
        found = {s: found[s] for s in seeds}
    return {seed: _open_checked(path, seed, folder, name) for seed, path in sorted(found.items())}


def _open_checked(path: Path, seed: int, folder: Path, name: str | None = None) -> Any:
    """Open a shipped seed's folder once (config parsed, weights loaded), as an `OpenRun`; any failure names the
    folder and the fix."""
    from latentcode.constants import SHIPPED_FILE
    from latentcode.pipelines.opened_run import OpenRun

    def broken(why: str) -> ValueError:
        return ValueError(f"shipped checkpoint {path} is broken: {why}. Export it again (`latentcode export RUN "
                          f"{path}`) or move it out of {folder}")

    try:
        run = OpenRun(path, name=name)
        run.model  # noqa: B018 (loads the weights now, so that a truncated file is named before anything is written)
    except Exception as err:  # a truncated weights file or a config of another version: say which folder
        raise broken(f"it does not load ({err})") from err
    if run.config.train.seed != seed:
        raise broken(f"its config was trained with seed {run.config.train.seed} but {SHIPPED_FILE} records seed {seed}")
    return run


DEMO_VARIANTS = ("softmax", "linear", "hyla")
"""The variants `demo` analyses (shipped checkpoints `<task>-<variant>`) or trains, in table order."""
DEMO_PRETRAINED_TASK = "fuzzy_logic"
"""The task of the shipped checkpoints `demo` analyses by default."""
DEMO_SETTINGS: dict[str, Any] = {
    "task": "sraven",
    "preset": "small",
    "steps": 600,
    "batch_size": 128,
    "lr": 3e-3,
}
"""What `demo` trains by default, sized for about five minutes on a 2-core CPU, with the task's own demo parameters
(`presets.demo_params`: SRAVEN's column permutation is off, so small models learn the rules within minutes). The
instances per split whose codes are probed are the task's default, as in every command
(`latentcode.pipelines.opened_run.N_SAMPLES`)."""


def demo_out_dir(task: str | None = None, train: bool = False) -> Path:
    """The demo's default folder, one per task: `runs/demo/<task>` for the shipped checkpoints and
    `runs/demo/<task>-trained` with `train` (so the demos of different tasks never share a folder).

    >>> demo_out_dir().as_posix(), demo_out_dir("sraven", train=True).as_posix()
    ('runs/demo/fuzzy_logic', 'runs/demo/sraven-trained')
    """
    if task is None:
        task = DEMO_SETTINGS["task"] if train else DEMO_PRETRAINED_TASK
    return Path("runs") / "demo" / (f"{task}-trained" if train else task)


def demo(
    out_dir: str | os.PathLike | None = None,
    *,
    train: bool = False,
    variants: Sequence[str] | None = None,
    task: str | None = None,
    task_params: dict[str, Any] | None = None,
    preset: str = DEMO_SETTINGS["preset"],
    steps: int = DEMO_SETTINGS["steps"],
    lr: float = DEMO_SETTINGS["lr"],
    n_samples: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    embed_method: str = "umap",
    threads: int | None = 1,
    force: bool = False,
    progress: bool | None = None,
    inputs: str | None = None,
    seeds: Sequence[int] | None = None,
) -> DemoResult:
    """Probe the latent codes of softmax, linear and HYLA models and write a report.

    By default the models are the shipped checkpoints `<task>-<variant>`, every shipped seed of each (fuzzy logic
    at the paper's Table A1 setting, see `latentcode.rundir.pretrained`): each is opened once where it lies
    (`open_run`; nothing is copied and the checkpoints are not touched), its codes are extracted in memory, and
    every probe runs on them; nothing is trained.
    The table shows every seed, then the mean ± s.e. over each variant's seeds, with the value-network live fraction
    beside each. With `train=True`, small models are trained instead (`DEMO_SETTINGS`, SRAVEN by default; finished
    runs in `out_dir` are reused unless `force=True`). Codes are read at the task's default reading, the paper's
    (fuzzy logic: the query's self-code on instances sharing one query input; SRAVEN: the reference's dump
    positions on unpermuted instances), unless `inputs` names another; SRAVEN codes are also read at
    `all_features` positions (every feature: balanced labels), shown in extra columns. Every score is shown
    beside its floors and the input-only control, and the headline is the score minus the best of them.

    Args:
        out_dir: folder for report.html, summary.json and demo.json, and with `train` the trained runs
            (`out_dir/<variant>`); None: `demo_out_dir(task, train)`, one folder per task.
        train: train small models instead of analysing the shipped checkpoints.
        variants: model variants (None: softmax, linear and HYLA, and of the shipped checkpoints those the task
            has; a variant named here that is not shipped is an error).
        task: the task (default: fuzzy_logic for the shipped checkpoints, `DEMO_SETTINGS["task"]` with `train`).
        task_params: task parameters when training (default: the task's `presets.demo_params`).
        preset: model preset when training.
        steps: training steps per model when training.
        lr: peak learning rate when training.
        n_samples: instances per split whose codes are extracted (None: the task's default, `N_SAMPLES`, as in
            every command; recorded in demo.json and summary.json).
        seed: seed of the task split, initialisation and data when training, and of the extraction batches.
        device: where to train and extract.
        embed_method: 'umap' or 'pca' for the report's embedding section.
        threads: torch CPU threads while the demo runs (restored afterwards; None keeps torch's setting).
        force: retrain runs that already exist in `out_dir`.
        progress: progress bars (None: only on a terminal).
        inputs: the input choice the codes are read at (None: the task's default, the paper's reading).
        seeds: the shipped seeds to analyse (None: every seed shipped for each variant; see `shipped_seed_dirs`).
            With `train`, use `seed`.

    Returns:
        A `DemoResult`; `table()` is the comparison the CLI prints.

    Raises:
        ValueError: unknown variants, task, preset or inputs, a missing shipped checkpoint or seed (the message
            lists those there are), a broken shipped checkpoint folder (the message names it), `seeds` with
            `train`, or an existing run in `out_dir` trained with other settings (pass `force=True`).
    """
    import torch

    from latentcode.tasks import TASKS, get_task

    if threads is not None and threads <= 0:
        raise ValueError(f"threads={threads} (CLI: --threads) must be a positive integer, or None to keep torch's")
    if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples <= 0):
        raise ValueError(f"n_samples={n_samples} (CLI: --n-samples) must be a positive integer")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        raise ValueError(f"steps={steps} (CLI: --steps) must be a positive integer")
    if embed_method not in ("umap", "pca"):
        raise ValueError(f"embed_method={embed_method!r} (CLI: --embed) is not one of umap, pca")
    if task is None:
        task = DEMO_SETTINGS["task"] if train else DEMO_PRETRAINED_TASK
    if task not in TASKS:
        get_task(task)  # raises, listing the valid tasks
    if out_dir is None:
        out_dir = demo_out_dir(task, train)
    TASKS[task].code_reading.choice(inputs, f"task {task!r}")  # checked before anything is copied or trained
    if seeds is not None:
        if train:
            raise ValueError(f"seeds={list(seeds)} (CLI: --seeds) selects shipped checkpoints; to train (train=True, "
                             "CLI: --train) with another seed, pass seed= (CLI: --seed) instead")
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
            raise ValueError(f"seeds={list(seeds)} (CLI: --seeds) must be a non-empty list of integers (or None: every "
                             "shipped seed)")
    unshipped: list[str] = []
    if variants is None:
        variants, unshipped = _default_variants(task, train)
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _demo(out_dir, train, variants, task, task_params, preset, steps, lr, n_samples, seed, device,
                     embed_method, force, progress, inputs, seeds, unshipped)
    finally:
        torch.set_num_threads(previous)


def _default_variants(task: str, train: bool) -> tuple[list[str], list[str]]:
    """The variants a demo without `variants` analyses, and the core variants left out because the task has no
    shipped checkpoint of them (logged). Training: all of `DEMO_VARIANTS`."""
    from latentcode.rundir.pretrained import checkpoints_dir, list_pretrained

    if train:
        return list(DEMO_VARIANTS), []
    shipped = set(list_pretrained())
    variants = [v for v in DEMO_VARIANTS if f"{task}-{v}" in shipped]
    unshipped = [f"{task}-{v}" for v in DEMO_VARIANTS if v not in variants]
    if not variants:
        raise ValueError(f"no shipped checkpoint of task {task!r} in {checkpoints_dir()} (looked for "
                         f"{', '.join(unshipped)}; shipped: {', '.join(sorted(shipped)) or 'none'}). Pass --train "
                         "(train=True) to train small models instead, or another --task")
    if unshipped:
        logger.warning("demo: %s not shipped yet; analysing %s only", ", ".join(unshipped),
                       ", ".join(f"{task}-{v}" for v in variants))
    return variants, unshipped


def _demo_runs(out: Path, train: bool, variants: Sequence[str], task: str, task_params: dict[str, Any] | None,
               preset: str, steps: int, lr: float, seed: int, device: str, force: bool,
               progress: bool | None, seeds: Sequence[int] | None) -> list[tuple[str, Any]]:
    """The demo's (variant, `OpenRun`) pairs: every shipped seed's checkpoint opened once where it lies, or freshly
    trained small models."""
    from latentcode.pipelines.opened_run import OpenRun

    if not train:
        found = {variant: shipped_seed_runs(f"{task}-{variant}", seeds) for variant in variants}  # checked first
        pairs = [(variant, run) for variant, by_seed in found.items() for run in by_seed.values()]
        logger.info("demo: %d shipped checkpoints (%s), read in place", len(pairs),
                    "; ".join(f"{v} seeds {', '.join(map(str, by_seed))}" for v, by_seed in found.items()))
        return pairs
    from latentcode.config import model_config, train_config
    from latentcode.tasks import get_task, task_presets
    from latentcode.training.train import train as train_model

    if task_params is None:
        task_params = dict(task_presets(task).demo_params)
    the_task = get_task(task, **{"seed": seed, **task_params})
    train_cfg = train_config(task, preset, steps=steps, warmup=max(1, steps // 10), lr=lr, eval_every=steps,
                             eval_samples=2048, log_every=max(1, steps // 20), checkpoint_every=steps, seed=seed,
                             device=device, batch_size=DEMO_SETTINGS["batch_size"])
    configs = [model_config(the_task, variant, preset) for variant in variants]  # fails early on a bad variant
    runs = []
    for variant, config in zip(variants, configs, strict=True):
        logger.info("demo: training %s on %s (%s preset, %d steps)", variant, task, preset, steps)
        train_model(config, the_task, train_cfg, out / variant, resume=not force, force=force, progress=progress)
        runs.append((variant, OpenRun(out / variant, device=device)))
    return runs


def _extra_positions(task: Any) -> list[str]:
    """Named positions other than the paper's that the task declares (SRAVEN: all_features)."""
    from latentcode.codes.extract import POSITIONS, code_reading

    return [name for name in code_reading(task).positions[1:] if name in POSITIONS]


def _demo(out: str | os.PathLike, train: bool, variants: Sequence[str], task: str,
          task_params: dict[str, Any] | None, preset: str, steps: int, lr: float, n_samples: int | None, seed: int,
          device: str, embed_method: str, force: bool, progress: bool | None, inputs: str | None,
          seeds: Sequence[int] | None, unshipped: Sequence[str] = ()) -> DemoResult:
    from latentcode.pipelines.opened_run import check_reading, default_n_samples
    from latentcode.pipelines.run_codes import codes_for
    from latentcode.pipelines.run_report import report_with_notes
    from latentcode.rundir.directory import atomic_write_json
    from latentcode.rundir.pretrained import check_out_folder, check_writable
    from probes.decoding.decode import decode_rules

    start = time.perf_counter()
    out = Path(out)
    check_out_folder(out, demo_out_dir(task, train).as_posix())  # never inside checkpoints/, before anything is read
    check_writable(out)
    pairs = _demo_runs(out, train, variants, task, task_params, preset, steps, lr, seed, device, force, progress,
                       seeds)
    runs = [run for _, run in pairs]
    timings = {"train" if train else "load": time.perf_counter() - start}
    first = runs[0]
    metric = first.task.metric_name
    inputs = check_reading(first.config, "paper", inputs)
    n_samples = default_n_samples(first.task) if n_samples is None else n_samples
    extra = _extra_positions(first.task)
    tick = time.perf_counter()
    for i, run in enumerate(runs, 1):
        logger.info("demo: [%d/%d] extracting %s codes (%s)", i, len(runs), run.label, ", ".join(["paper", *extra]))
        for where in ["paper", *extra]:
            run.codes(where, inputs, n_samples=n_samples, seed=seed, progress=progress)  # kept by the run
    timings["extract"] = time.perf_counter() - tick
    tick = time.perf_counter()
    logger.info("demo: running the probes on %d runs and writing the report", len(runs))
    if train:
        source = f"{preset} models trained {steps} steps"
    else:
        shown = sorted({run.seed for run in runs})
        source = f"shipped checkpoints (seeds {', '.join(map(str, shown))})"
    # each run is named by its variant, and a seed other than the one its short name holds by `-s<seed>`
    names = [variant if train or run.path.name == f"{task}-{variant}" else f"{variant}-s{run.seed}"
             for variant, run in pairs]
    extra_decodings = {}
    for run in runs:
        for where in extra:
            codes, _ = codes_for(run, None if run.shipped else run.path, positions=where, inputs=inputs,
                                 n_samples=n_samples, seed=seed, save=not run.shipped)
            check_constant_codes(codes, what=str(run.name or run.path))
            extra_decodings[run.path, where] = decode_rules(codes, progress=progress)
    built: dict[str, Any] = {}

    def seed_sections(analyses: dict[str, Any]) -> list[Any]:
        """The table over seeds, from the report's own analyses (their typed decodings), as its first section."""
        rows, decodings = [], []
        for (variant, run), name in zip(pairs, names, strict=True):
            decoding = analyses[name].decoding
            decodings.append(decoding)
            row = {**seed_row(run, decoding, variant=variant), "run": run.path, "n_per_split": n_samples}
            for where in extra:
                scores = row_scores(extra_decodings[run.path, where])
                row[f"decode_ood_last_{where}"] = scores.get("decode_ood_last")
                row[f"codes_minus_control_{where}"] = scores.get("codes_minus_control")
            rows.append(row)
        reading = next((a.run.codes.reading for a in analyses.values() if a.run.codes is not None), None)
        built.update(table=SeedTable(rows, metric=metric, reading=reading), decodings=decodings)
        return [seed_section(built["table"])]

    report, notes = report_with_notes(runs, out, positions="paper", inputs=inputs, embed_method=embed_method,
                                      device=device, progress=progress, n_samples=n_samples, seed=seed, names=names,
                                      explorer=False, sections=seed_sections,
                                      title=f"latentcode demo: {', '.join(variants)} on {task}, {source}")
    table, decodings = built["table"], built["decodings"]
    rows, reading = table.rows, table.reading
    for decoding in decodings:
        notes += [note for note in (decoding.notes if decoding is not None else ()) if note not in notes]
    skipped = skipped_note(decodings)
    timings["report"] = time.perf_counter() - tick
    result = DemoResult(rows=rows, report=report.path, seconds=time.perf_counter() - start, metric=metric,
                        positions="paper", timings=timings, reading=reading,
                        notes=[*([f"not shipped yet, so not in this demo: {', '.join(unshipped)}"] if unshipped else []),
                               *([skipped] if skipped else []), *dead_layer_notes(rows), *notes])
    atomic_write_json(out / "demo.json", {**result.to_dict(), "n_per_split": n_samples})
    return result

