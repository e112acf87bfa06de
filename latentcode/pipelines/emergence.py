"""When do rule codes appear? Fig. 5F's rule decoding, with its controls, on every snapshot of a training run.

A run trained with `TrainConfig.snapshots` keeps the weights of each evaluation (`snapshots/step-NNNNNN/`).
`rule_emergence` reads the latent codes of every snapshot at the task's paper reading, fits the linear rule
decoder on the training rule sets and scores it on the held-out ones, beside the input-only control, the
control-task selectivity, the model's own held-out accuracy at that step and, for HYLA-style value networks, the
fraction of each layer's value-network units that are live (both from the run's metrics.jsonl). The table answers
whether rule codes appear before the model generalises, with it, or after, and whether a layer whose codes stay flat
has lost its value units.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from latentcode.codes.extract import extract_latent_codes
from latentcode.rundir.checkpoint import Run, read_metrics
from latentcode.rundir.weights import list_snapshots
from latentcode.training.diagnostics import LIVE_KEY

EMERGENCE_SPLIT = "ood"
"""Decoders fit on the train split and score on held-out rule combinations (Fig. 5F)."""


@dataclass(frozen=True)
class EmergenceRow:
    """One layer of one snapshot. Accuracies are fractions in [0, 1]; NaN where a value does not exist."""

    step: int
    """Training step of the snapshot."""
    layer: str
    """Model layer ("0", ...) or "all" (every layer's codes together)."""
    decoding: float
    """Rule-decoding accuracy of the linear probe on the codes, on held-out rule combinations."""
    input_only: float
    """The same probe on the raw tokens the codes are read at (one value per snapshot, repeated per layer)."""
    control_task: float
    """The probe on the codes, fit to a control task (fixed random labels per input type)."""
    selectivity: float
    """`decoding - control_task` (Hewitt & Liang 2019)."""
    chance: float
    """Uniform guessing: 1 / number of rules."""
    majority: float
    """Rate of the training split's most frequent rule on the held-out rows."""
    model_accuracy: float
    """The model's own held-out accuracy at this step (metrics.jsonl; NaN if the step has no evaluation)."""
    live_fraction: float = math.nan
    """Fraction of this layer's value-network hidden units that are active at this step, as training recorded it
    (`value_live_fraction` in metrics.jsonl). NaN for linear value networks (softmax, linear attention), for the
    "all" row, and in tables written before 0.2 had the column."""


def model_accuracy(metrics: list[dict[str, Any]], metric: str) -> dict[int, float]:
    """{step: the model's own held-out score} from a run's metrics records (`read_metrics`): the emergence
    table's `model_accuracy` column."""
    return {int(r["step"]): float(r[metric]) for r in metrics if r.get("split") == EMERGENCE_SPLIT and metric in r}


def _live_fractions(metrics: list[dict[str, Any]]) -> dict[int, list[float | None]]:
    return {int(r["step"]): r[LIVE_KEY] for r in metrics if r.get("split") == EMERGENCE_SPLIT and r.get(LIVE_KEY)}


def _live_cell(live: dict[int, list[float | None]], step: int, layer: str) -> float:
    values = live.get(step)
    if values is None or not layer.isdigit() or int(layer) >= len(values) or values[int(layer)] is None:
        return math.nan
    return float(values[int(layer)])


def with_live_fraction(rows: Sequence[EmergenceRow], run_dir: str | os.PathLike) -> list[EmergenceRow]:
    """`rows` with each missing `live_fraction` read from the run's metrics.jsonl (a table written before the column
    existed gets it on `latentcode emergence --update`); rows that have one keep it."""
    path = Path(run_dir)
    live = _live_fractions(read_metrics(path)) if (path / "metrics.jsonl").is_file() else {}
    return [replace(r, live_fraction=_live_cell(live, r.step, r.layer)) if math.isnan(r.live_fraction) else r
            for r in rows]


def rule_emergence(
    run_dir: Any,
    *,
    n_samples: int = 4096,
    steps: Sequence[int] | None = None,
    seed: int = 0,
    device: str = "cpu",
    progress: bool | None = None,
) -> list[EmergenceRow]:
    """Fig. 5F's decoding and its controls on every snapshot of a run (see the module docstring).

    Args:
        run_dir: a run trained with `snapshots=True` (its `snapshots/` folder), e.g. a SRAVEN run: its directory or
            an `OpenRun` (`open_run`; its config and metrics are read once). Each snapshot is loaded once.
        n_samples: instances per split (train and held-out) whose codes are read at each snapshot.
        steps: only these snapshot steps (default: all).
        seed: batch seed of the extraction (the same instances at every snapshot).
        device: where the snapshots run.
        progress: show a progress bar over snapshots (None: only on a terminal).

    Returns:
        Rows by step, then layer.

    Raises:
        FileNotFoundError: the run has no snapshots (train it with `--train.snapshots=true`).
        ValueError: a requested step has no snapshot, or the task has no `rule` label to decode.
    """
    from latentcode.pipelines.opened_run import OpenRun, open_run
    from probes import decode_rules  # torch-free and heavy (scikit-learn): loaded when used

    def no_snapshots(where: Any) -> FileNotFoundError:
        return FileNotFoundError(f"{where} has no snapshots/step-*/ folders; train it with `--train.snapshots=true` "
                                 "(TrainConfig.snapshots) to keep the weights of every evaluation")

    if not isinstance(run_dir, OpenRun) and Path(run_dir).is_dir() and not list_snapshots(run_dir):
        raise no_snapshots(run_dir)  # said first, for a folder that holds no run as for a run without snapshots
    parent = open_run(run_dir, device=device)
    run_dir = parent.path
    found = dict(list_snapshots(run_dir))
    if not found:
        raise no_snapshots(run_dir)
    if steps is not None:
        missing = sorted(set(steps) - set(found))
        if missing:
            raise ValueError(f"no snapshot of step(s) {missing} in {run_dir}; available: {sorted(found)}")
        found = {s: found[s] for s in sorted(steps)}
    metrics = parent.metrics
    own = model_accuracy(metrics, parent.task.metric_name)
    live = _live_fractions(metrics)
    rows: list[EmergenceRow] = []
    for step, folder in tqdm(sorted(found.items()), desc="snapshots", disable=None if progress is None else not progress):
        run = Run.load(folder, device=device)
        codes = extract_latent_codes(run.model, run.task, splits=("train", EMERGENCE_SPLIT), n_samples=n_samples,
                                     seed=seed, checkpoint=run.checkpoint_hash, progress=False)
        if "rule" not in codes.labels:
            raise ValueError(f"task {run.task.name!r} has no 'rule' label; rule emergence reads SRAVEN-like tasks")
        result = decode_rules(codes, "rule", layers="each+all", splits=[EMERGENCE_SPLIT], progress=False)
        accuracy = result.accuracy(EMERGENCE_SPLIT)
        base = result.baselines[EMERGENCE_SPLIT]
        controls = result.controls
        control = (controls.control_task[EMERGENCE_SPLIT] if controls is not None and controls.control_task is not None
                   else [math.nan] * len(accuracy))
        input_only = controls.input_only[EMERGENCE_SPLIT] if controls is not None else math.nan
        for layer, acc, ctrl in zip(result.layer_names, accuracy, control, strict=True):
            rows.append(EmergenceRow(step=step, layer=layer, decoding=float(acc), input_only=float(input_only),
                                     control_task=float(ctrl), selectivity=float(acc) - float(ctrl),
                                     chance=float(base.chance), majority=float(base.majority),
                                     model_accuracy=own.get(step, math.nan),
                                     live_fraction=_live_cell(live, step, layer)))
    return rows


COLUMNS = [f.name for f in fields(EmergenceRow)]


def write_emergence(rows: Sequence[EmergenceRow], path: str | os.PathLike, *, meta: dict[str, Any] | None = None) -> Path:
    """Write the table as CSV (one line per step and layer) and, beside it, `<stem>.json` with `meta` (the run,
    the command, the reading). Refuses to overwrite a file that exists.

    Raises:
        FileExistsError: the CSV or JSON is already there.
    """
    path = Path(path)
    side = path.with_suffix(".json")
    for target in (path, side):
        if target.exists():
            raise FileExistsError(f"{target} exists; choose another --out or delete it first")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in asdict(row).items()})
    side.write_text(json.dumps({"kind": "latentcode.emergence", "columns": COLUMNS, **(meta or {})}, indent=2) + "\n")
    return path


def read_emergence(path: str | os.PathLike) -> list[EmergenceRow]:
    """Rows of a CSV `write_emergence` wrote; `path` is the CSV or the folder holding `emergence.csv` (what
    `latentcode emergence --out` names). A table written before a column existed reads it as NaN.

    Raises:
        FileNotFoundError: no such CSV (the message names the command that writes one).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "emergence.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; write it with `latentcode emergence RUN --out FOLDER`")
    with path.open(newline="") as f:
        return [EmergenceRow(step=int(r["step"]), layer=r["layer"],
                             **{k: float(r[k]) for k in COLUMNS if k not in ("step", "layer") and r.get(k)})
                for r in csv.DictReader(f)]
