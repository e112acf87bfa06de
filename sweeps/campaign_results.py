"""The `results` routine of sweeps/cpu_campaign.py: bring the committed results (results/emergence/, Table A1's CSVs,
results/fig2b/, the docs' tables and figures) up to the campaign's runs on this machine.

Every routine takes the campaign module itself (`campaign`) and reads its paths, queue and settings (`ROOT`,
`RUNS`, `SRAVEN`, `EMERGENCE`, `DECODE_ARGS`, `run_dir`, ...) from it when it runs, so a value patched there is the
value used here. Nothing here imports the campaign: it is handed in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType


def committed_steps(campaign: ModuleType, name: str, root: Path | None = None) -> set[int]:
    """The snapshot steps of a run whose emergence rows are committed in the checkout `root` (by default the
    campaign's)."""
    table = (root or campaign.ROOT) / campaign.EMERGENCE / name / "emergence.csv"
    if not table.is_file():
        return set()
    with table.open() as f:
        return {int(line.split(",", 1)[0]) for line in list(f)[1:] if line.strip()}


def snapshot_steps(run: Path) -> set[int]:
    """The steps of the snapshots a run directory holds."""
    return {int(p.name.removeprefix("step-")) for p in (run / "snapshots").glob("step-*") if p.is_dir()}


def results(campaign: ModuleType) -> list[str]:
    """Bring the committed results up to the runs here (issue 19's routine after each snapshot, issue 31's after each
    finished run); returns the runs whose results changed.

    - SRAVEN: for every queued run with a snapshot its committed emergence table lacks, `latentcode emergence
      --update` into results/emergence/<run>/ (CSV and JSON only; the figure files it also writes there are
      removed) and its docs figure (`docs/fig5_tables.py figure`); then the accuracy-over-training figure of every
      run with a table (`docs/fig5_tables.py accuracy`) and Table A1's SRAVEN CSV (`latentcode table
      --include-unfinished`, of each run directory here, else of the run's shipped checkpoint).
    - Ablation rows: each finished one's test and OOD rows into results/table_a1_fuzzy_logic.csv (replacing rows of
      the same variant and seed, keeping every other row).
    - Fig. 2B: `latentcode decode` of each shipped `fuzzy_logic_latent-<variant>` checkpoint without a file in
      results/fig2b/, copied there as `fuzzy_logic_latent-<variant>.decode.json`.

    Then, if anything changed, the generated docs tables (`docs/gen_tables.py`)."""
    updated = emergence_rows(campaign) + ablation_rows(campaign) + fig2b_decodes(campaign)
    if updated:
        _call(campaign, "docs/gen_tables.py")
    return updated


def _call(campaign: ModuleType, *args: str) -> None:
    subprocess.run([sys.executable, *args], cwd=campaign.ROOT, check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})


def emergence_rows(campaign: ModuleType) -> list[str]:
    """The SRAVEN part of `results`: emergence rows of new snapshots, their figures, Table A1's SRAVEN CSV."""
    c = campaign
    updated = []
    for name in c.SRAVEN:
        run = c.run_dir(name)
        if not snapshot_steps(run) - committed_steps(c, name):
            continue
        out = c.EMERGENCE / name
        _call(c, "-m", "latentcode", "emergence", str(run.relative_to(c.ROOT)), "--out", str(out), "--update",
              "--no-progress")
        for figure in ("emergence.png", "emergence.html", "plotly.min.js"):
            (c.ROOT / out / figure).unlink(missing_ok=True)  # the docs draw their own (below); only data is committed
        drawn = f"docs/images/{name.replace('-', '_')}_emergence.png"
        _call(c, "docs/fig5_tables.py", "figure", name, "--out", drawn)
        updated.append(name)
    if updated:
        tables = [name for name in c.SRAVEN if (c.ROOT / c.EMERGENCE / name / "emergence.csv").is_file()]
        _call(c, "docs/fig5_tables.py", "accuracy", *tables, "--out", c.ACCURACY_FIGURE)
        _call(c, "-m", "latentcode", "table", *table_runs(c), "--include-unfinished", "--csv", str(c.TABLE_A1))
    return updated


def ablation_rows(campaign: ModuleType) -> list[str]:
    """The ablation part of `results`: each finished row not yet in the fuzzy-logic table joins it."""
    from latentcode.pipelines.results import collect_results, read_results_csv, write_results_csv

    c = campaign
    finished = [name for name in c.ABLATIONS
                if c._state(c.run_dir(name)).get("finished") and not c._in_fuzzy_table(name)]
    if not finished:
        return []
    new = collect_results(c.run_dir(name) for name in finished)
    replaced = {(r.variant, r.seed) for r in new}
    table = c.ROOT / c.FUZZY_TABLE
    kept = [r for r in (read_results_csv(table) if table.is_file() else []) if (r.variant, r.seed) not in replaced]
    write_results_csv(kept + new, table)
    return finished


def fig2b_decodes(campaign: ModuleType) -> list[str]:
    """The Fig. 2B part of `results`: the decode file of each shipped Fig. 2B checkpoint that results/ lacks."""
    c = campaign
    updated = []
    for name in c.FIG2B:
        shipped = c.shipped_name(name)
        checkpoint, found = c.ROOT / "checkpoints" / shipped, c.ROOT / c.FIG2B_RESULTS / f"{shipped}.decode.json"
        if not checkpoint.is_dir() or found.is_file():
            continue
        work = c.RUNS / "analysis" / shipped
        _call(c, "-m", "latentcode", "decode", str(checkpoint.relative_to(c.ROOT)), "--out", str(work),
              *c.DECODE_ARGS)
        found.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(work / "codes" / "paper.decode.json", found)
        updated.append(name)
    return updated


def table_runs(campaign: ModuleType) -> list[str]:
    """What Table A1's SRAVEN CSV is made from, relative to the repository root: each queued SRAVEN run's directory
    where it has evaluated here, else its shipped checkpoint (a run finished on another machine: the checkpoint
    carries its config and metrics and gives the same rows), else nothing (not started, or no evaluation yet)."""
    c = campaign
    runs = []
    for name in c.SRAVEN:
        run, shipped = c.run_dir(name), c.ROOT / "checkpoints" / c.shipped_name(name)
        if _evaluated(run):
            runs.append(str(run.relative_to(c.ROOT)))
        elif shipped.is_dir():
            runs.append(str(shipped.relative_to(c.ROOT)))
    return runs


def _evaluated(run: Path) -> bool:
    """Whether a run has evaluated at least once (`latentcode table` refuses a run that has not: one just started
    by a lane has a metrics.jsonl of training lines only)."""
    from latentcode.rundir.checkpoint import read_metrics

    return (run / "metrics.jsonl").is_file() and any(r.get("split") == "test" for r in read_metrics(run))
