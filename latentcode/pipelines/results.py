"""Result tables from run directories: collect each run's final evaluation into per-seed rows (a small CSV that
gets committed), and summarize the rows per variant as mean ± standard error beside the paper's Table A1. The
documentation's tables are generated from the committed CSV by `latentcode table --from FILE`. Nothing here
trains or evaluates a model; the one measurement is the value-network live fraction of a run whose metrics
predate that diagnostic (`latentcode.training.diagnostics`).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from latentcode.config import VARIANTS, ModelConfig
from latentcode.constants import SHIPPED_FILE
from latentcode.rundir.checkpoint import RunConfig, read_metrics
from latentcode.training.diagnostics import (
    DEAD_REGION_ACTIVATIONS,
    LIVE_KEY,
    format_live_fraction,
    run_value_live_fraction,
)

__all__ = [
    "PAPER_TABLE_A1",
    "ResultRow",
    "VariantSummary",
    "collect_results",
    "markdown_table",
    "read_results_csv",
    "seed_table",
    "summarize",
    "variant_label",
    "write_results_csv",
]

PAPER_TABLE_A1: dict[str, dict[str, tuple[float, float]]] = {
    "fuzzy_logic": {
        "softmax": (63.28, 2.31),
        "linear": (59.89, 5.22),
        "hyla": (81.13, 7.77),
        "linear_rmshead": (68.93, 5.10),
        "hyla_no_rmshead": (81.27, 7.88),
        "hyla_linear": (84.54, 5.32),
        "hyla_linear_no_rmshead": (79.42, 7.43),
        "softmax_hyla": (70.98, 7.08),
        "softmax+moe": (63.83, 6.07),
        "linear+moe": (60.09, 6.16),
        "hyla+moe": (82.37, 6.55),
    },
    "sraven": {
        "softmax": (56.56, 1.05),
        "linear": (56.30, 1.11),
        "hyla": (69.13, 1.90),
        "linear_rmshead": (59.01, 2.50),
        "hyla_no_rmshead": (62.53, 5.73),
        "hyla_linear": (56.54, 0.21),
        "hyla_linear_no_rmshead": (56.33, 1.41),
        "softmax_hyla": (38.21, 2.98),
        "softmax+moe": (57.68, 1.31),
        "linear+moe": (64.34, 4.3),
        "hyla+moe": (66.94, 3.94),
    },
}
"""The paper's Table A1 (spec §5.1), mean ± s.e. over 3 seeds, ×100: fuzzy logic OOD R², SRAVEN OOD accuracy."""


_TABLE_ORDER = {name: i for i, name in enumerate(PAPER_TABLE_A1["fuzzy_logic"])}
"""Row order of the tables: the paper's Table A1 (both columns list the variants in the same order)."""


@dataclass(frozen=True, kw_only=True)
class ResultRow:
    """One run's final evaluation on one split (a line of the results CSV)."""

    task: str
    variant: str
    seed: int
    split: str
    metric: str
    """`r2` (fuzzy logic) or `acc` (SRAVEN), as a fraction (not ×100)."""
    value: float
    step: int
    """Optimizer steps behind the evaluation."""
    steps: int
    """Steps the run was configured for (value is final when step == steps)."""
    lr: float
    weight_decay: float
    live_fraction: str = ""
    """Per-layer live fraction of the generated value network, `;`-separated ("" where not applicable)."""
    run: str = ""
    """The run directory's name."""

    @property
    def finished(self) -> bool:
        return self.step >= self.steps


@dataclass(frozen=True, kw_only=True)
class VariantSummary:
    """Mean ± standard error of one variant's metric over its seeds (×100)."""

    task: str
    variant: str
    split: str
    n_seeds: int
    mean: float
    sem: float
    """Standard error of the mean: sample standard deviation (ddof=1) / sqrt(n); nan for one seed."""
    seeds: tuple[int, ...]
    paper: tuple[float, float] | None
    unfinished: tuple[tuple[int, int, int], ...] = ()
    """(seed, step, steps) of each counted run that has not reached its last step (`--include-unfinished`, for a
    variant none of whose seeds has finished)."""
    still_training: tuple[tuple[int, int, int, float], ...] = ()
    """(seed, step, steps, value ×scale) of each run left out of the mean because it has not finished while another
    seed of the variant has (`--include-unfinished`): shown beside the finished seeds' mean, never averaged with it."""


def _live_cell(fractions: Sequence[float | None] | None) -> str:
    if not fractions or all(f is None for f in fractions):
        return ""
    return ";".join("" if f is None else f"{f:.4f}" for f in fractions)


def variant_label(model: ModelConfig) -> str:
    """The variant's name, plus every field its `VARIANTS` entry fixes that the run overrode.

    A HYLA run trained with `--model.value_act=silu` is labelled `hyla (value_act=silu)`, so that its row is
    neither averaged with nor compared to the paper's HYLA (relu) row.

    >>> from latentcode.config import model_config
    >>> variant_label(model_config("fuzzy_logic", "hyla", "tiny", value_act="silu"))
    'hyla (value_act=silu)'
    >>> variant_label(model_config("fuzzy_logic", "softmax", "tiny", value_act="silu"))  # ignored by linear values
    'softmax'
    """
    fixed = VARIANTS.get(model.variant)
    if fixed is None:
        return model.variant
    changed = [f"{name}={getattr(model, name)}" for name, value in fixed.items() if getattr(model, name) != value]
    return f"{model.variant} ({', '.join(changed)})" if changed else model.variant


def _measured_live_fraction(path: Path, step: int) -> list[float | None] | None:
    """The live fraction of a run trained before the diagnostic, measured on its checkpoint when that is the
    model of its last evaluation (else None: unknown)."""
    from latentcode.rundir.checkpoint import load_run

    run = load_run(path)
    return run_value_live_fraction(run) if run.step == step else None


def collect_results(run_dirs: Iterable[str | os.PathLike], splits: Sequence[str] = ("test", "ood")) -> list[ResultRow]:
    """The last evaluation of each run directory on each split, as rows.

    A shipped checkpoint (`latentcode export`) counts as its source run: it carries the run's config and metrics,
    and its rows name the run it came from, so a machine without the run directory writes the same rows.

    Raises:
        FileNotFoundError: a path holds no run (no config.json).
        ValueError: a run has no evaluation of a requested split yet.
    """
    rows = []
    for run_dir in run_dirs:
        path = Path(run_dir)
        config = RunConfig.load(path)
        metric = config.task.metric_name
        records = read_metrics(path)
        for split in splits:
            found = [r for r in records if r.get("split") == split and metric in r]
            if not found:
                raise ValueError(
                    f"run {path} has no {split!r} evaluation yet (its metrics.jsonl has none); wait for its first "
                    f"evaluation (every {config.train.eval_every} steps) or leave it out"
                )
            last = found[-1]
            live = last.get(LIVE_KEY)
            if live is None and split == "ood" and config.model.value_act in DEAD_REGION_ACTIVATIONS \
                    and config.model.value_net == "mlp":
                live = _measured_live_fraction(path, int(last["step"]))
            rows.append(ResultRow(
                task=config.task.name, variant=variant_label(config.model), seed=config.train.seed, split=split,
                metric=metric, value=float(last[metric]), step=int(last["step"]), steps=config.train.steps,
                lr=config.train.lr, weight_decay=config.train.weight_decay,
                live_fraction=_live_cell(live), run=_run_name(path),
            ))
    return rows


def _run_name(path: Path) -> str:
    """The run a folder's rows name: its own name, or for a shipped checkpoint the run it was exported from."""
    shipped = path / SHIPPED_FILE
    return Path(json.loads(shipped.read_text())["source_run"]).name if shipped.is_file() else path.name


_COLUMNS = [f.name for f in fields(ResultRow)]


def write_results_csv(rows: Sequence[ResultRow], path: str | os.PathLike) -> Path:
    """Write rows as CSV (one line per run and split), sorted by task, variant, seed and split."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ordered = sorted(rows, key=lambda r: (r.task, r.variant, r.seed, r.split, r.lr, r.weight_decay))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in ordered:
            writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in asdict(row).items()})
    os.replace(tmp, path)
    return path


def read_results_csv(path: str | os.PathLike) -> list[ResultRow]:
    """Read a CSV written by `write_results_csv`.

    Raises:
        ValueError: a column is missing or a value does not parse (the message names the line and column).
    """
    path = Path(path)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path} lacks the column(s) {missing}; is it a file written by `latentcode table`?")
        rows = []
        types = {f.name: f.type for f in fields(ResultRow)}
        for line, record in enumerate(reader, start=2):
            values = {}
            for name in _COLUMNS:
                text = record[name]
                try:
                    values[name] = int(text) if types[name] == "int" else float(text) if types[name] == "float" \
                        else text
                except ValueError:
                    raise ValueError(f"{path}:{line}: column {name}={text!r} is not a number") from None
            rows.append(ResultRow(**values))
    return rows


def summarize(
    rows: Sequence[ResultRow], *, split: str = "ood", finished_only: bool = True, scale: float = 100.0
) -> list[VariantSummary]:
    """Mean ± s.e. of the metric per (task, variant, lr, weight decay) over seeds, ×`scale`, in table order.

    With `finished_only=False`, a variant with at least one finished seed is still the mean of its finished seeds:
    its unfinished seeds go to `still_training`, since averaging a final number with one from early in training
    would describe neither. Only a variant with no finished seed is the mean of its unfinished ones (`unfinished`).
    """
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if row.split == split and (row.finished or not finished_only):
            groups.setdefault((row.task, row.variant), []).append(row)
    order = _TABLE_ORDER
    summaries = []
    for (task, variant), members in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99),
                                                                          kv[0][1])):
        still_training = ()
        if any(r.finished for r in members) and not all(r.finished for r in members):
            still_training = tuple(sorted((r.seed, r.step, r.steps, scale * r.value) for r in members
                                          if not r.finished))
            members = [r for r in members if r.finished]
        seeds = [r.seed for r in members]
        if len(set(seeds)) != len(seeds):
            raise ValueError(
                f"{task} {variant} has several rows for seed(s) {sorted({s for s in seeds if seeds.count(s) > 1})} "
                "on one split (different lr or weight decay?); summarize one setting at a time"
            )
        values = [scale * r.value for r in members]
        n = len(values)
        mean = math.fsum(values) / n
        sem = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else math.nan
        summaries.append(VariantSummary(task=task, variant=variant, split=split, n_seeds=n, mean=mean, sem=sem,
                                        seeds=tuple(sorted(seeds)), paper=PAPER_TABLE_A1.get(task, {}).get(variant),
                                        unfinished=tuple(sorted((r.seed, r.step, r.steps) for r in members
                                                                if not r.finished)),
                                        still_training=still_training))
    return summaries


def _pm(mean: float, sem: float) -> str:
    return f"{mean:.2f}" if math.isnan(sem) else f"{mean:.2f} ± {sem:.2f}"


def markdown_table(summaries: Sequence[VariantSummary]) -> str:
    """A Markdown table: variant, seeds, ours (mean ± s.e.), the paper's, the difference of the means, and that
    difference in the paper's standard errors (how far from the paper's mean, in its own uncertainty)."""
    lines = ["| task | variant | seeds | ours | paper | ours − paper | in paper s.e. |", "|---|---|---|---|---|---|---|"]
    for s in summaries:
        paper = "–" if s.paper is None else _pm(*s.paper)
        diff = "–" if s.paper is None else f"{s.mean - s.paper[0]:+.2f}"
        in_sem = "–" if s.paper is None or not s.paper[1] else f"{(s.mean - s.paper[0]) / s.paper[1]:+.1f}"
        seeds = ", ".join(str(x) for x in s.seeds)
        ours = _pm(s.mean, s.sem)
        if s.unfinished:  # an intermediate evaluation must never read as a final one
            ours += " (unfinished: " + ", ".join(f"seed {seed} at step {step} of {steps}"
                                                 for seed, step, steps in s.unfinished) + ")"
        if s.still_training:  # nor be averaged with one
            ours += " (not in the mean, still training: " + ", ".join(
                f"seed {seed} {value:.2f} at step {step} of {steps}" for seed, step, steps, value in s.still_training
            ) + ")"
        lines.append(f"| {s.task} | {s.variant} | {seeds} | {ours} | {paper} | {diff} | {in_sem} |")
    return "\n".join(lines)


def _live_text(cell: str) -> str:
    if not cell:
        return "n/a"
    return format_live_fraction([float(text) if text else None for text in cell.split(";")]).replace("  ", ", ")


def seed_table(rows: Sequence[ResultRow], *, split: str = "ood", finished_only: bool = True,
               scale: float = 100.0) -> str:
    """A Markdown table with one line per run: variant, seed, the metric ×`scale` and the per-layer live fraction
    of the generated value network (`n/a` for linear value networks; "dead" marks a layer at 0%).

    Lines follow the summary's variant order, then seed.
    """
    order = _TABLE_ORDER
    chosen = [r for r in rows if r.split == split and (r.finished or not finished_only)]
    chosen.sort(key=lambda r: (r.task, order.get(r.variant, 99), r.variant, r.seed))
    lines = ["| task | variant | seed | ours | value network live | run |", "|---|---|---|---|---|---|"]
    for r in chosen:
        steps = "" if r.finished else f" (step {r.step} of {r.steps})"
        lines.append(f"| {r.task} | {r.variant} | {r.seed} | {scale * r.value:.2f}{steps} | "
                     f"{_live_text(r.live_fraction)} | {r.run} |")
    return "\n".join(lines)
