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
from latentcode.pipelines.run_codes import check_reading, check_writable, ensure_codes, find_codes, run_config
from latentcode.rundir.checkpoint import load_run, read_metrics
from latentcode.rundir.pretrained import is_shipped, require_writable_run
from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction, run_value_live_fraction
from probes._compat import renamed_kwargs
from probes.report import Report, RunInput, build_report

__all__ = ["EVALUATED_STEP", "LIVE_SUMMARY", "report_runs", "run_summary"]

logger = logging.getLogger(__name__)


LIVE_SUMMARY = "value network live"
"""Summary key of the value-network live fraction (`latentcode.training.diagnostics`) in reports."""
EVALUATED_STEP = "last evaluated step"
"""Summary key of the step of the final test/OOD metrics, given only when it is not the run's last step."""


def run_summary(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Final metrics of a run from its metrics.jsonl: `steps` (trained), `test_<metric>`/`ood_<metric>` (acc or r2),
    the step they were evaluated at when it is not the last (`EVALUATED_STEP`), and the value-network live fraction
    (`LIVE_SUMMARY`, "n/a (no ReLU value network)" for a model without one)."""
    config = run_config(run_dir)
    metric = config.task.metric_name
    summary: dict[str, Any] = {"steps": config.train.steps}
    evaluated = None
    for record in read_metrics(run_dir):
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


def run_names(run_dirs: Sequence[Path]) -> list[str]:
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
    `summary.json` entry (`meta.reading`, `decoding.reading`). A run with a rule-emergence table
    (RUN/emergence/emergence.csv, which `latentcode emergence RUN` writes) gets a section on rule decoding over
    training. Repeated probe warnings (`collect_probe_warnings`) are
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
    report, notes = report_with_notes(run_dirs, out_dir, positions=positions, inputs=inputs, title=title,
                                      embed_method=embed_method, device=device, progress=progress)
    for note in notes:
        logger.warning("report: %s", note)
    return report.path


def _emergence_rows(run_dir: Path) -> list[Any]:
    """The run's rule-emergence table (`latentcode emergence RUN` writes RUN/emergence/emergence.csv), or []."""
    from latentcode.constants import EMERGENCE_DIR, EMERGENCE_FILE

    table = run_dir / EMERGENCE_DIR / EMERGENCE_FILE
    if not table.is_file():
        return []
    from latentcode.pipelines.emergence import read_emergence

    return read_emergence(table)


def report_with_notes(
    run_dirs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike | None,
    *,
    positions: str,
    inputs: str | None,
    title: str | None,
    embed_method: str,
    device: str,
    progress: bool | None,
) -> tuple[Report, list[str]]:
    """`report_runs`, returning the whole `Report` (its `summary` is what summary.json holds) and the warnings it
    collected, as summary lines, instead of logging them."""
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
    configs = [run_config(path) for path in paths]
    readings = [check_reading(config, positions, inputs) for config in configs]
    out = Path(out_dir) if out_dir is not None else paths[0]
    require_writable_run(out, "write a report into")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; choose a folder")
    check_writable(out)
    for path, reading in zip(paths, readings, strict=True):
        _, mismatch = find_codes(path, positions, reading)
        if mismatch:
            raise ValueError(mismatch)

    run_inputs: list[RunInput] = []
    for path, name, config, reading in zip(paths, run_names(paths), configs, readings, strict=True):
        codes, _ = ensure_codes(path, positions=positions, inputs=reading, device=device, progress=progress,
                                save=not is_shipped(path))
        summary = run_summary(path)
        if LIVE_SUMMARY not in summary and config.model.value_net == "mlp":  # a run trained before the diagnostic
            summary[LIVE_SUMMARY] = format_live_fraction(run_value_live_fraction(load_run(path)))
        run_inputs.append(RunInput(name=name, codes=codes, metrics=read_metrics(path), summary=summary,
                                   variant=config.model.variant, emergence=_emergence_rows(path)))
    if title is None:
        shown = sorted({run.codes.reading or "reading not recorded" for run in run_inputs})
        title = f"latentcode report: {', '.join(run.name for run in run_inputs)} (codes read at {'; '.join(shown)})"
    with collect_probe_warnings() as notes:
        report = build_report(run_inputs, out, title=title, embed_method=embed_method, progress=progress)
    return report, notes
