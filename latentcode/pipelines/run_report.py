"""`report_runs`: every probe on one or more run directories, written as `report.html` and `summary.json` (the page
itself is `probes.report.build_report`; this module finds the runs' codes, metrics and summaries and hands them
over).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from latentcode.pipelines.analysis import collect_probe_warnings
from latentcode.pipelines.opened_run import OpenRun, check_reading, open_run
from latentcode.pipelines.run_analyses import run_analyses
from latentcode.pipelines.run_codes import check_out_dir, codes_for, find_codes
from latentcode.rundir.pretrained import check_writable
from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction, run_value_live_fraction
from probes.report import Report, RunInput, SectionsArg, build_report

__all__ = ["CAUSAL_DIR", "EVALUATED_STEP", "EXPLORER_CODES", "LIVE_SUMMARY", "find_causal", "report_runs", "run_summary"]

logger = logging.getLogger(__name__)


LIVE_SUMMARY = "value network live"
"""Summary key of the value-network live fraction (`latentcode.training.diagnostics`) in reports."""
EVALUATED_STEP = "last evaluated step"
"""Summary key of the step of the final test/OOD metrics, given only when it is not the run's last step."""
EXPLORER_CODES = 1024
"""Codes in each run's explorer in the report (half from training rule sets, half held out), which keeps a report's
explorer near 1 MB."""
CAUSAL_DIR = Path("runs") / "causal"
"""Where the report looks for causal results by default: where `latentcode causal` writes them."""
_CAUSAL_FILES = {"alignment": ("alignment.json", "align"), "erasure": ("erasure.json", "erase")}


def find_causal(name: str, causal_dir: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The causal results `latentcode causal align|erase` wrote for run `name`, as plain data for the report:
    `{"alignment": <alignment.json>, "erasure": <erasure.json>, "source": <folder>}` (each key only where its file
    is), or None when there are none.

    Looks in `<causal_dir>/<name>/` and in its `align/` and `erase/` subfolders (the command's default layout),
    `causal_dir` defaulting to `CAUSAL_DIR` (runs/causal). The committed results are in `results/causal`."""
    import json

    root = Path(causal_dir if causal_dir is not None else CAUSAL_DIR) / name
    found: dict[str, Any] = {}
    for key, (file, sub) in _CAUSAL_FILES.items():
        for path in (root / file, root / sub / file):
            if path.is_file():
                found[key] = json.loads(path.read_text())
                break
    if not found:
        return None
    found["source"] = root.as_posix()
    return found


def run_explorer(run: OpenRun, *, n_codes: int = EXPLORER_CODES, method: str = "umap", seed: int = 0) -> str:
    """The run's explorer (`latentcode.explore`) as the `<iframe srcdoc>` element the report embeds: `n_codes`
    codes, half from the training split and half from held-out rule sets."""
    from latentcode.explore.explorer import explore

    splits = ("train", "ood")
    return explore(run, method=method, n_samples=max(1, n_codes // len(splits)), splits=splits,
                   seed=seed).to_html(full=False)


def run_summary(run_dir: OpenRun | str | os.PathLike) -> dict[str, Any]:
    """Final metrics of a run from its metrics.jsonl: `steps` (trained), `test_<metric>`/`ood_<metric>` (acc or r2),
    the step they were evaluated at when it is not the last (`EVALUATED_STEP`), and the value-network live fraction
    (`LIVE_SUMMARY`, "n/a (no ReLU value network)" for a model without one)."""
    run = open_run(run_dir)
    config = run.config
    metric = run.task.metric_name
    summary: dict[str, Any] = {"steps": config.train.steps}
    evaluated = None
    for record in run.metrics:
        split = record.get("split")
        if split in ("test", "ood") and metric in record:
            summary[f"{split}_{metric}"] = record[metric]
            evaluated = record.get("step")
        if split == "ood" and LIVE_KEY in record:
            summary[LIVE_SUMMARY] = format_live_fraction(record[LIVE_KEY])
    if evaluated is not None and evaluated != config.train.steps:  # a run stopped early: say where it was scored
        summary[EVALUATED_STEP] = evaluated
    if LIVE_SUMMARY not in summary and config.model.value_net != "mlp":  # worded as for a run that records it
        summary[LIVE_SUMMARY] = format_live_fraction(None)
    return summary


def run_names(run_dirs: Sequence[Path | OpenRun]) -> list[str]:
    """How the report names each run: its folder's name (a shipped checkpoint's label), else its path."""
    names = [p.label if isinstance(p, OpenRun) else p.name for p in run_dirs]
    if len(set(names)) == len(names):
        return names
    return [(p.path if isinstance(p, OpenRun) else p).as_posix() for p in run_dirs]


def report_runs(
    run_dirs: Sequence[OpenRun | str | os.PathLike],
    out_dir: str | os.PathLike | None = None,
    *,
    positions: str = "paper",
    inputs: str | None = None,
    title: str | None = None,
    embed_method: str = "umap",
    n_samples: int | None = None,
    device: str = "cpu",
    progress: bool | None = None,
    explorer: bool = True,
    causal_dir: str | os.PathLike | None = None,
) -> Path:
    """Run every probe on one or more runs and write `report.html` and `summary.json`.

    Every run is read at one reading (positions plus inputs, by default each task's own, the paper's); codes
    missing at that reading are extracted first, as `decode_run` does: saved into the run, or kept in memory for a
    shipped checkpoint (read in place, never copied nor written into). Each run's `summary.json` entry records the
    instances per split its codes hold (`n_per_split`). The reading is in the default title and in each run's
    `summary.json` entry (`meta.reading`, `decoding.reading`). A run with a rule-emergence table
    (RUN/emergence/emergence.csv, which `latentcode emergence RUN` writes) gets a section on rule decoding over
    training. Each run gets an interactive explorer of `EXPLORER_CODES` codes (`latentcode.explore`; `explorer=False`
    leaves it out), and a section "Does the model use the code?" where `latentcode causal align|erase` results for
    it exist (`find_causal`: `<causal_dir>/<run name>/`). Repeated probe warnings (`collect_probe_warnings`) are
    logged as one line per kind.

    Args:
        run_dirs: `OpenRun`s (`open_run`), run directories or shipped checkpoints' names.
        out_dir: output folder (default: the run itself for one run; several runs need one).
        positions: which extraction to analyse.
        inputs: the input choice of the reading (None: each task's default).
        title: page title (default: the runs and the reading).
        embed_method: 'umap' or 'pca'.
        n_samples: instances per split (None: the codes already there, else each task's default, `N_SAMPLES`).
        device: where the models run if codes must be extracted first.
        progress: progress bar (None: only on a terminal).
        explorer: embed each run's explorer (about 1 MB per run).
        causal_dir: the folder holding causal results per run name (default runs/causal, where `latentcode causal`
            writes; the committed ones are in results/causal).

    Returns:
        The path of report.html.

    Raises:
        FileNotFoundError: a path is not a run.
        ValueError: no runs, the same run twice, several runs without `out_dir`, a shipped checkpoint as the
            output folder, unknown positions or inputs, or codes of another task or reading.
    """
    report, notes = report_with_notes(run_dirs, out_dir, positions=positions, inputs=inputs, title=title,
                                      embed_method=embed_method, device=device, progress=progress,
                                      n_samples=n_samples, explorer=explorer, causal_dir=causal_dir)
    for note in notes:
        logger.warning("report: %s", note)
    return report.path


def _emergence_rows(run: OpenRun) -> list[Any]:
    """The run's rule-emergence table (`latentcode emergence RUN` writes RUN/emergence/emergence.csv), or []."""
    from latentcode.constants import EMERGENCE_FILE

    table = run.files.emergence / EMERGENCE_FILE
    if not table.is_file():
        return []
    from latentcode.pipelines.emergence import read_emergence

    return read_emergence(table)


def report_with_notes(
    run_dirs: Sequence[OpenRun | str | os.PathLike],
    out_dir: str | os.PathLike | None,
    *,
    positions: str,
    inputs: str | None,
    title: str | None,
    embed_method: str,
    device: str,
    progress: bool | None,
    n_samples: int | None = None,
    seed: int = 0,
    names: Sequence[str] | None = None,
    explorer: bool = True,
    causal_dir: str | os.PathLike | None = None,
    sections: SectionsArg = (),
) -> tuple[Report, list[str]]:
    """`report_runs`, returning the whole `Report` (its `summary` is what summary.json holds) and the warnings it
    collected, as summary lines, instead of logging them. `names`: how the report names each run (default:
    `run_names`); `sections`: the caller's own sections (`probes.report.build_report(sections=)`)."""
    if not run_dirs:
        raise ValueError("no runs given; pass one or more run directories")
    runs = [r if isinstance(r, OpenRun) else open_run(r, device=device) for r in run_dirs]
    if len({r.path.resolve() for r in runs}) != len(runs):
        raise ValueError(f"a run is given twice: {[str(r.path) for r in runs]}")
    if out_dir is None and len(runs) > 1:
        raise ValueError(
            f"{len(runs)} runs given but no output folder; pass out_dir= (CLI: --out DIR), e.g. --out . for "
            "the current directory (latentcode writes only where it is told or into the one run it was given)"
        )
    if causal_dir is not None and not Path(causal_dir).is_dir():
        raise ValueError(f"causal_dir={str(causal_dir)!r} (CLI: --causal) is not a folder; give the folder of "
                         "`latentcode causal` results, e.g. results/causal")
    if embed_method not in ("umap", "pca"):
        raise ValueError(f"embed_method={embed_method!r} is not one of umap, pca")
    if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples <= 0):
        raise ValueError(f"n_samples={n_samples!r} (CLI: --n-samples) must be a positive integer")
    readings = [check_reading(run.config, positions, inputs) for run in runs]
    out = check_out_dir(runs[0], out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose a folder")
    check_writable(out)
    for run, reading in zip(runs, readings, strict=True):
        _, mismatch = find_codes(run, positions, reading)
        if mismatch:
            raise ValueError(mismatch)

    run_inputs: list[RunInput] = []
    skipped: list[str] = []
    for run, name, reading in zip(runs, names or run_names(runs), readings, strict=True):
        codes, _ = codes_for(run, run.path, positions=positions, inputs=reading, n_samples=n_samples,
                             progress=progress, save=not run.shipped, seed=seed)
        summary = run_summary(run)
        summary["n_per_split"] = codes.meta.get("n_per_split")
        if LIVE_SUMMARY not in summary and run.config.model.value_net == "mlp":  # a run trained before the diagnostic
            summary[LIVE_SUMMARY] = format_live_fraction(run_value_live_fraction(run))
        merge = getattr(run.task, "shared_codes", {}).get(codes.label) if codes is not None else None
        fragment = None
        if explorer:
            try:
                fragment = run_explorer(run, method=embed_method, seed=seed)
            except ValueError as err:  # e.g. a task without a renderer: the report goes on without the explorer
                skipped.append(f"{name}: no explorer: {err}")
        analysed, failed = run_analyses(run, codes)  # the registered analyses (`run_analyses.register_analysis`)
        skipped += [f"{name}: {note}" for note in failed]
        run_inputs.append(RunInput(name=name, codes=codes, metrics=run.metrics, summary=summary,
                                   variant=run.config.model.variant, emergence=_emergence_rows(run), merge=merge,
                                   explorer_html=fragment, causal=find_causal(run.path.name, causal_dir),
                                   analyses=analysed))
    if title is None:
        shown = sorted({run.codes.reading or "reading not recorded" for run in run_inputs})
        title = f"latentcode report: {', '.join(run.name for run in run_inputs)} (codes read at {'; '.join(shown)})"
    with collect_probe_warnings() as notes:
        report = build_report(run_inputs, out, title=title, embed_method=embed_method, progress=progress,
                              sections=sections)
    return report, skipped + notes
