"""The demo's tables: one row per seed (`seed_row`, `run_live_fraction`), the mean ± s.e. over each variant's seeds
(`SeedTable`), what `demo` returns (`DemoResult`), and the notes and report section built from them.

Plain data in, text and JSON out; running the pipeline (copying checkpoints, training, extracting, probing) is
`latentcode.pipelines.demo`'s. Imports no torch: a run's live fraction is measured only when asked for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.codes_io import jsonable
from probes.decoding.headline import HEADLINE, Headline
from probes.tables import NA
from probes.tables import align_columns as _aligned
from probes.tables import format_score as _fmt

if TYPE_CHECKING:
    from probes.decoding.results import DecodingResult
    from probes.report import ReportSection

__all__ = [
    "LIVE_TITLE",
    "SEED_LEGEND",
    "SUMMARY_TITLE",
    "DemoResult",
    "SeedTable",
    "dead_layer_notes",
    "table_legend",
    "row_scores",
    "run_live_fraction",
    "seed_row",
    "seed_section",
    "skipped_note",
]


@dataclass(frozen=True)
class SeedTable:
    """Decoding of every seed of every variant, then the mean ± s.e. over each variant's seeds.

    `rows` hold one seed each (`seed_row`, or `DemoResult.rows`): `variant`, `seed`, `test` and `ood` (the task
    metric), the last single layer's decoding of held-out compositions beside its floors and the input-only
    control (the columns `DemoResult` documents), and `live_fraction` (per layer, the share of HYLA's generated
    value-network units that fire on held-out instances; None for variants without a ReLU value network). The
    standard error is the sample standard deviation (n − 1 in the denominator) over √n; one seed has none.

    >>> rows = [{"variant": "hyla", "seed": s, "test": 0.9, "ood": v, "live_fraction": [0.0, 0.5]}
    ...         for s, v in enumerate([0.8, 0.9])]
    >>> mean, se = SeedTable(rows, metric="r2").summary()[0]["ood"]
    >>> print(f"{mean:.3f} ± {se:.3f}")
    0.850 ± 0.050
    """

    rows: list[dict[str, Any]]
    metric: str = "acc"
    reading: str | None = None

    def columns(self) -> list[tuple[str, str]]:
        """(row key, column title) of the per-seed table after `variant` and `seed`."""
        columns = [("test", f"test {self.metric}"), ("ood", f"OOD {self.metric}")]
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
        return [*columns, ("live_fraction", LIVE_TITLE)]

    def variants(self) -> list[str]:
        """The variants in row order, each once."""
        return list(dict.fromkeys(row["variant"] for row in self.rows))

    def summary(self) -> list[dict[str, Any]]:
        """Per variant: `variant`, `seeds`, `n`, and for each column of `columns()` a (mean, s.e.) pair (s.e. None
        for one seed; (None, None) where no seed has the number; NaN where some seed's is missing or undefined).
        `live_fraction` is a list of such pairs, one per layer (None for variants without a ReLU value network)."""
        out = []
        for variant in self.variants():
            rows = [row for row in self.rows if row["variant"] == variant]
            entry: dict[str, Any] = {"variant": variant, "seeds": [row.get("seed") for row in rows], "n": len(rows)}
            for key, _ in self.columns():
                if key == "live_fraction":
                    entry[key] = _layer_mean_sem([row.get(key) for row in rows])
                else:
                    entry[key] = _mean_sem([row.get(key) for row in rows])
            out.append(entry)
        return out

    def table(self) -> str:
        """The per-seed table (title line with the reading, header, one row per seed), a blank line, then the
        mean ± s.e. per variant."""
        columns = self.columns()
        cells = [["variant", "seed", *(title for _, title in columns)]]
        for row in self.rows:
            cells.append([row["variant"], _seed_cell(row.get("seed")),
                          *(_cell(row.get(key), key) for key, _ in columns)])
        title = f"codes read at {self.reading or 'a reading not recorded'}; held-out (OOD) compositions"
        means = [["variant", "seeds", *(title for _, title in columns)]]
        for entry in self.summary():
            seeds = ", ".join(_seed_cell(s) for s in entry["seeds"])
            n = entry["n"]
            means.append([entry["variant"], f"{seeds} (n={n}{', no s.e.' if n == 1 else ''})",
                          *(_summary_cell(entry[key], key) for key, _ in columns)])
        return "\n".join([title, *_aligned(cells), "", SUMMARY_TITLE, *_aligned(means)])

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"rows": [{k: (str(v) if isinstance(v, Path) else v) for k, v in r.items()}
                                   for r in self.rows],
                          "metric": self.metric, "reading": self.reading, "summary": self.summary()})


LIVE_TITLE = "live fraction (per layer)"
"""Column title of the value-network live fraction: HYLA's share of generated ReLU units that fire, per layer."""
SUMMARY_TITLE = "mean ± s.e. over seeds (s.e. = sample std / √n)"
"""Title line of the table of means in `SeedTable.table()`."""
_SIGNED = {"term_f1_minus_best", "codes_minus_control", "codes_minus_control_all_features"}


def _seed_cell(seed: Any) -> str:
    return NA if seed is None else str(seed)


def _cell(value: Any, key: str) -> str:
    if key == "live_fraction":
        if value is None or all(v is None for v in value):
            return NA
        return " / ".join(_fmt(v) for v in value)
    return value if isinstance(value, str) else _fmt(value, key in _SIGNED)


def _summary_cell(value: Any, key: str) -> str:
    if key == "live_fraction":
        if value is None:
            return NA
        return " / ".join(_fmt_mean(pair, False) for pair in value)
    return _fmt_mean(value, key in _SIGNED)


def _fmt_mean(pair: tuple[float | None, float | None], signed: bool) -> str:
    """`mean ± s.e.`, the mean alone for one seed, `n/a` when no seed has the number, `–` when it is undefined."""
    mean, sem = pair
    text = _fmt(mean, signed)
    if mean is None or not math.isfinite(mean) or sem is None:
        return text
    return f"{text} ± {sem:.3f}"


def _mean_sem(values: Sequence[Any]) -> tuple[float | None, float | None]:
    """(mean, s.e. = stdev with n − 1 / √n) over seeds; s.e. None for one seed; (None, None) when no seed has a
    number; (NaN, NaN) when some have none or an undefined one."""
    if all(v is None for v in values):
        return None, None
    if any(v is None or isinstance(v, str) or not math.isfinite(v) for v in values):
        return math.nan, math.nan
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def _layer_mean_sem(values: Sequence[list[float | None] | None]) -> list[tuple[float | None, float | None]] | None:
    """`_mean_sem` per layer of the live fractions; None when no seed has a ReLU value network."""
    if all(v is None or all(f is None for f in v) for v in values):
        return None
    depth = {len(v) for v in values if v is not None}
    if len(depth) != 1 or any(v is None for v in values):
        return [(math.nan, math.nan)]
    return [_mean_sem([v[i] for v in values]) for i in range(depth.pop())]


@dataclass(frozen=True)
class DemoResult:
    """What `demo` did: one row per variant and seed, the report, and the time it took.

    Attributes:
        rows: per variant and seed (variants in order, seeds ascending): `variant`, `seed`, `test` and `ood` (the
            task metric on those splits), `run` (the run directory), `live_fraction` (per layer, the share of
            HYLA's generated value-network ReLU units that fire on held-out instances, 0 = a dead layer; None for
            variants without one), and the last single layer's decoding of held-out (OOD) compositions beside its
            floors and the input-only control, at the default reading. Every task: `decode_ood_last` (accuracy,
            exact-set accuracy for fuzzy-logic terms), `chance`, `majority_ood`, `input_only_ood` (None: not
            fitted) and `codes_minus_control` (the accuracy minus the best of those). Fuzzy logic also:
            `term_f1_ood_last` (mean per-term F1), `always_present_f1_ood` (its floor), `input_only_f1_ood`,
            `term_f1_minus_best` (the headline) and `codes_minus_input_only`. SRAVEN also the accuracy and
            headline at `all_features` positions (`decode_ood_last_all_features`,
            `codes_minus_control_all_features`). NaN: undefined.
        report: path of report.html.
        seconds: wall time of the whole demo.
        metric: the task metric in `test`/`ood` (`acc` for SRAVEN, `r2` for fuzzy logic).
        positions: the positions the report (and the headline columns) analyse.
        timings: seconds per phase (train or copy, extract, report).
        reading: the reading of the codes, in words (`LatentCodes.reading`).
        notes: one line each: classes without a probe, dead value-network layers, warnings collected while
            probing.
    """

    rows: list[dict[str, Any]]
    report: Path
    seconds: float
    metric: str = "acc"
    positions: str = "paper"
    timings: dict[str, float] = field(default_factory=dict)
    reading: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def seeds(self) -> SeedTable:
        """The rows as a `SeedTable`: per seed, and the mean ± s.e. over each variant's seeds."""
        return SeedTable(self.rows, metric=self.metric, reading=self.reading)

    def table(self) -> str:
        """The comparison as aligned text: a title line with the reading, one row per variant and seed, then the
        mean ± s.e. over each variant's seeds (`SeedTable.table()`)."""
        return self.seeds.table()

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"rows": [{**r, "run": str(r["run"])} for r in self.rows], "report": str(self.report),
                          "seconds": self.seconds, "metric": self.metric, "positions": self.positions,
                          "timings": self.timings, "reading": self.reading, "notes": self.notes,
                          "summary": self.seeds.summary()})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DemoResult:
        """The result `to_dict()` wrote (demo.json). JSON has no NaN, so an undefined number reads back as None
        (`n/a` in tables)."""
        try:
            rows = [{**row, "run": Path(row["run"])} for row in data["rows"]]
            return cls(rows=rows, report=Path(data["report"]), seconds=float(data["seconds"]),
                       metric=data["metric"], positions=data["positions"], timings=dict(data["timings"]),
                       reading=data["reading"], notes=list(data["notes"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a demo result (demo.json written by `latentcode demo`): {err!r}") from err


def _number(value: Any) -> float:
    """A score that may be missing (None) as a float: NaN for undefined."""
    return float("nan") if value is None else float(value)


def _last_layer(headline: Headline | None) -> dict[str, Any] | None:
    """The last single layer's score, floors, control and headline of a `Headline` (layers are (0, ..., last,
    "all"))."""
    if headline is None:
        return None
    layers = headline.layers
    index = max(i for i, name in enumerate(layers) if name != "all") if any(n != "all" for n in layers) else -1
    return {"codes": float(headline.codes[index]), "floors": headline.floors,
            "control": None if headline.control is None else float(headline.control),
            "over_best": float(headline.over_best[index])}


def row_scores(decoding: DecodingResult | None, split: str = "ood") -> dict[str, Any]:
    """The demo's columns from one run's decoding (its `headlines()`), at the last single layer."""
    headline = decoding.headlines() if decoding is not None else {}
    row: dict[str, Any] = {}
    accuracy = _last_layer(headline.get("accuracy", {}).get(split))
    if accuracy is not None:
        row.update(decode_ood_last=accuracy["codes"], chance=_number(accuracy["floors"].get("chance")),
                   majority_ood=_number(accuracy["floors"].get("majority")), input_only_ood=accuracy["control"],
                   codes_minus_control=accuracy["over_best"])
    terms = _last_layer(headline.get("term_f1", {}).get(split))
    if terms is not None:
        control = terms["control"]
        row.update(term_f1_ood_last=terms["codes"],
                   always_present_f1_ood=_number(terms["floors"].get("always_present")),
                   input_only_f1_ood=control, term_f1_minus_best=terms["over_best"],
                   codes_minus_input_only=None if control is None else terms["codes"] - control)
    return row


def skipped_note(decodings: Sequence[DecodingResult | None]) -> str | None:
    """One line for the classes without a probe, over every run (they are the same when the runs share a task)."""
    skipped: dict[str, str] = {}
    for decoding in decodings:
        for extra in (decoding.extras.values() if decoding is not None else ()):
            for c, why in getattr(extra, "skipped", {}).items():
                skipped.setdefault(extra.class_names[c] if c < len(extra.class_names) else str(c), why)
    if not skipped:
        return None
    reasons = sorted(set(skipped.values()))
    return (f"no probe for {len(skipped)} terms ({', '.join(skipped)}: {', '.join(reasons)}); their F1 is {NA} "
            "and left out of the means")


def seed_row(run: Any, decoding: DecodingResult | None = None, *, variant: str | None = None) -> dict[str, Any]:
    """One row of a `SeedTable`: a run's task metric, live fraction and last-layer OOD decoding.

    Args:
        run: a `latentcode.Run` (`load_pretrained(name, seed=k)`, `load_run(path)`).
        decoding: the decoding of the run's codes (`decode_rules(codes)`), or None for a row without decoding
            columns.
        variant: the row's variant (default: the run's `config.model.variant`).

    Returns:
        `variant`, `seed` (the run's training seed), `test` and `ood` (the task metric of the run's last
        evaluation), `live_fraction` (`run_live_fraction`) and the decoding columns `DemoResult.rows` documents.
    """
    metric = run.task.metric_name
    test, ood = run.eval_metrics("test") or {}, run.eval_metrics("ood") or {}
    return {"variant": variant or run.config.model.variant, "seed": run.config.train.seed,
            "test": test.get(metric), "ood": ood.get(metric), **row_scores(decoding),
            "live_fraction": run_live_fraction(run)}


def run_live_fraction(run: Any) -> list[float | None] | None:
    """Per layer, the share of a run's generated value-network ReLU units that fire on held-out instances (0: a
    dead layer): its last recorded value (`value_live_fraction` in metrics.jsonl), measured on the same batch for
    runs trained before the diagnostic; None for a model without a ReLU value network (softmax, linear)."""
    from latentcode.training.diagnostics import LIVE_KEY, run_value_live_fraction

    fractions = (run.eval_metrics("ood") or {}).get(LIVE_KEY)
    if fractions is None and run.config.model.value_net == "mlp":
        fractions = run_value_live_fraction(run)
    if not fractions or all(f is None for f in fractions):
        return None
    return [None if f is None else float(f) for f in fractions]


def dead_layer_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per variant with a dead value-network layer (live fraction 0) in some seed."""
    notes = []
    for variant in dict.fromkeys(row["variant"] for row in rows):
        seeds = [row for row in rows if row["variant"] == variant]
        dead = [row for row in seeds if any(f == 0 for f in row.get("live_fraction") or [])]
        if dead:
            layers = sorted({i for row in dead for i, f in enumerate(row["live_fraction"]) if f == 0})
            notes.append(f"{variant}: a dead value-network layer (live fraction 0; layer "
                         f"{', '.join(map(str, layers))}) in {len(dead)} of {len(seeds)} seeds "
                         f"({', '.join(_seed_cell(row.get('seed')) for row in dead)})")
    return notes


def table_legend(rows: Sequence[dict[str, Any]]) -> str:
    """What the score columns of the demo's table mean: per-term F1 (fuzzy logic) or rule decoding (SRAVEN). The
    console prints it under the table and the report shows it under the same table."""
    if any("term_f1_ood_last" in row for row in rows):
        return ("term F1: per-term logistic probes fit on train-split codes of the last layer, mean F1 on held-out "
                "(OOD) compositions; always-present = the F1 of answering 'present' for every term on those rows; "
                "input-only = the same probes on the raw context tokens; codes − best = term F1 minus the best of "
                "the two")
    return ("decode: a linear probe fit on train-split codes of the last layer, accuracy on held-out (OOD) "
            "compositions; chance = uniform guessing, majority = the train-majority class's rate on those rows, "
            "input-only = the same probe on the raw tokens; codes − best = accuracy minus the best of the three")


def seed_section(table: SeedTable) -> ReportSection:
    """The per-seed table, its legend and its means as the report's first section ("Every seed"), with the table's
    `to_dict()` under `seeds` in summary.json (`probes.report.build_report(sections=)`)."""
    from probes.report import ReportSection

    return ReportSection("Every seed", text=table.table(), notes=(table_legend(table.rows), SEED_LEGEND),
                         key="seeds", summary=table.to_dict(), place="top")


SEED_LEGEND = (
    "live fraction: per layer, the share of HYLA's generated value-network ReLU units that fire on held-out "
    f"instances (0 = a dead layer; {NA}: no ReLU value network); mean ± s.e.: over the seeds shown, s.e. = sample "
    "standard deviation (n − 1) / √n"
)
"""What the live-fraction column and the table of means say, printed under `SeedTable.table()`."""
