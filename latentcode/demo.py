"""`latentcode demo`: probe the latent codes of softmax, linear and HYLA models end to end and write a report.

By default it analyses every shipped seed of the fuzzy-logic checkpoints (copied first, never written into);
`train=True` trains small SRAVEN models instead. The steps are the public analyses of `latentcode.analysis`
(extract, decode, report); this module only chains them and condenses their results into one table per seed and
the mean ± s.e. over seeds (`SeedTable`, `DemoResult`), each score beside its floors, the input-only control and
the value-network live fraction. torch and the analyses are imported when `demo` runs, so the command line reads
`DEMO_SETTINGS` for its --help without loading them.
"""

from __future__ import annotations

import html
import logging
import math
import os
import re
import statistics
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes._compat import renamed_kwargs
from probes.codes import _jsonable
from probes.decoding.results import HEADLINE
from probes.degenerate import ConstantCodesWarning
from probes.tables import NA
from probes.tables import align_columns as _aligned
from probes.tables import format_score as _fmt

if TYPE_CHECKING:
    from probes.report import Report

__all__ = [
    "DEMO_PRETRAINED_TASK",
    "DEMO_SETTINGS",
    "DEMO_VARIANTS",
    "DemoResult",
    "SeedTable",
    "demo",
    "run_live_fraction",
    "seed_row",
    "shipped_seed_dirs",
]

logger = logging.getLogger(__name__)


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
        return _jsonable({"rows": [{k: (str(v) if isinstance(v, Path) else v) for k, v in r.items()}
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
        return _jsonable({"rows": [{**r, "run": str(r["run"])} for r in self.rows], "report": str(self.report),
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


def seed_row(run: Any, decoding: Any = None, *, variant: str | None = None) -> dict[str, Any]:
    """One row of a `SeedTable`: a run's task metric, live fraction and last-layer OOD decoding.

    Args:
        run: a `latentcode.Run` (`load_pretrained(name, seed=k)`, `load_run(path)`).
        decoding: the decoding of the run's codes (`decode_rules(codes)`, a `DecodingResult` or its `to_dict()`),
            or None for a row without decoding columns.
        variant: the row's variant (default: the run's `config.model.variant`).

    Returns:
        `variant`, `seed` (the run's training seed), `test` and `ood` (the task metric of the run's last
        evaluation), `live_fraction` (`run_live_fraction`) and the decoding columns `DemoResult.rows` documents.
    """
    metric = run.task.metric_name
    decoded = decoding if decoding is None or isinstance(decoding, dict) else decoding.to_dict()
    test, ood = run.eval_metrics("test") or {}, run.eval_metrics("ood") or {}
    return {"variant": variant or run.config.model.variant, "seed": run.config.train.seed,
            "test": test.get(metric), "ood": ood.get(metric), **_row_scores(decoded),
            "live_fraction": run_live_fraction(run)}


def run_live_fraction(run: Any) -> list[float | None] | None:
    """Per layer, the share of a run's generated value-network ReLU units that fire on held-out instances (0: a
    dead layer): its last recorded value (`value_live_fraction` in metrics.jsonl), measured on the same batch for
    runs trained before the diagnostic; None for a model without a ReLU value network (softmax, linear)."""
    from latentcode.diagnostics import LIVE_KEY, run_value_live_fraction

    fractions = (run.eval_metrics("ood") or {}).get(LIVE_KEY)
    if fractions is None and run.config.model.value_net == "mlp":
        fractions = run_value_live_fraction(run)
    if not fractions or all(f is None for f in fractions):
        return None
    return [None if f is None else float(f) for f in fractions]


def _dead_note(rows: Sequence[dict[str, Any]]) -> list[str]:
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


def shipped_seed_dirs(name: str, seeds: Sequence[int] | None = None) -> dict[int, Path]:
    """Every shipped seed of a short name, each folder checked: seed -> folder (`<name>` and `<name>-s<k>`).

    Args:
        name: a short name such as `fuzzy_logic-hyla` (see `latentcode.pretrained.pretrained_seeds`).
        seeds: only these seeds (None: every shipped one).

    Raises:
        ValueError: no checkpoint named `name` (the available ones are listed), a seed in `seeds` that is not
            shipped, or a broken folder: a file missing, a shipped.json or config.json that cannot be read, a seed
            recorded in shipped.json that differs from the folder's `-s<k>` or from its config, two folders
            holding one seed, or weights that do not load. The message names the folder and the fix.
    """
    from latentcode.checkpoint import load_run
    from latentcode.constants import CONFIG_FILE, MODEL_FILE, SHIPPED_FILE
    from latentcode.pretrained import checkpoints_dir, pretrained_path, shipped_info

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
    for seed, path in found.items():
        try:
            run = load_run(path)
        except Exception as err:  # a truncated weights file or a config of another version: say which folder
            raise ValueError(f"shipped checkpoint {path} is broken: it does not load ({err}). Export it again "
                             f"(`latentcode export RUN {path}`) or move it out of {folder}") from err
        if run.config.train.seed != seed:
            raise ValueError(f"shipped checkpoint {path} is broken: its config was trained with seed "
                             f"{run.config.train.seed} but {SHIPPED_FILE} records seed {seed}. Export it again "
                             f"(`latentcode export RUN {path}`) or move it out of {folder}")
    return dict(sorted(found.items()))


def _add_seed_section(report: Report, table: SeedTable) -> None:
    """Put the per-seed table and its means at the top of report.html and under `seeds` in summary.json."""
    from latentcode.rundir import atomic_write_bytes, atomic_write_json

    page = report.path.read_text()
    section = (f'<h2 id="every-seed">Every seed</h2><pre>{html.escape(table.table())}</pre>'
               f'<p class="note">{html.escape(SEED_LEGEND)}</p>')
    anchor = page.find("</nav>")
    at = anchor + len("</nav>") if anchor >= 0 else page.find("</body>")
    page = page[:at] + section + page[at:] if at >= 0 else page + section
    atomic_write_bytes(report.path, page.encode("utf-8"))
    atomic_write_json(report.summary_path, {**report.summary, "seeds": table.to_dict()})


SEED_LEGEND = (
    "live fraction: per layer, the share of HYLA's generated value-network ReLU units that fire on held-out "
    f"instances (0 = a dead layer; {NA}: no ReLU value network); mean ± s.e.: over the seeds shown, s.e. = sample "
    "standard deviation (n − 1) / √n"
)
"""What the live-fraction column and the table of means say, printed under `SeedTable.table()`."""


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
    "n_samples": 1024,
}
"""What `demo` trains by default, sized for about five minutes on a 2-core CPU, with the task's own demo parameters
(`presets.demo_params`: SRAVEN's column permutation is off, so small models learn the rules within minutes)."""


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
    seeds: Sequence[int] | None = None,
) -> DemoResult:
    """Probe the latent codes of softmax, linear and HYLA models and write a report.

    By default the models are the shipped checkpoints `<task>-<variant>`, every shipped seed of each (fuzzy logic
    at the paper's Table A1 setting, see `latentcode.pretrained`): each is copied (weights, config, metrics) to
    `out_dir/<variant>` (the seed the short name holds) or `out_dir/<variant>-s<seed>` (every other one), its codes
    are extracted there, and every probe runs on them; nothing is trained and the checkpoints are not touched. The
    table shows every seed, then the mean ± s.e. over each variant's seeds, with the value-network live fraction
    beside each. With `train=True`, small models are trained instead (`DEMO_SETTINGS`, SRAVEN by default; finished
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
        task_params: task parameters when training (default: the task's `presets.demo_params`).
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
    if seeds is not None:
        if train:
            raise ValueError(f"seeds={list(seeds)} selects shipped checkpoints; with train=True pass seed= instead")
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
            raise ValueError(f"seeds={list(seeds)} must be a non-empty list of integers (or None: every shipped seed)")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _demo(out_dir, train, variants, task, task_params, preset, steps, lr, n_samples, seed, device,
                     embed_method, force, progress, inputs, seeds)
    finally:
        torch.set_num_threads(previous)


def _demo_runs(out: Path, train: bool, variants: Sequence[str], task: str, task_params: dict[str, Any] | None,
               preset: str, steps: int, lr: float, seed: int, device: str, force: bool,
               progress: bool | None, seeds: Sequence[int] | None) -> list[tuple[str, Path]]:
    """The demo's (variant, run directory) pairs: copies of every shipped seed's checkpoint, or freshly trained
    small models."""
    from latentcode.run_codes import analysis_dir

    if not train:
        found = {variant: shipped_seed_dirs(f"{task}-{variant}", seeds) for variant in variants}  # checked first
        plan = [(variant, source, out / (variant if source.name == f"{task}-{variant}" else f"{variant}-s{s}"))
                for variant, by_seed in found.items() for s, source in by_seed.items()]
        logger.info("demo: %d shipped checkpoints (%s)", len(plan),
                    "; ".join(f"{v} seeds {', '.join(map(str, by_seed))}" for v, by_seed in found.items()))
        pairs = []
        for i, (variant, source, dest) in enumerate(plan, 1):
            logger.info("demo: [%d/%d] copying %s to %s", i, len(plan), source, dest)
            pairs.append((variant, analysis_dir(source, dest)))
        return pairs
    from latentcode.config import model_config, train_config
    from latentcode.tasks import get_task, task_presets
    from latentcode.train import train as train_model

    if task_params is None:
        task_params = dict(task_presets(task).demo_params)
    the_task = get_task(task, **{"seed": seed, **task_params})
    train_cfg = train_config(task, preset, steps=steps, warmup=max(1, steps // 10), lr=lr, eval_every=steps,
                             eval_samples=2048, log_every=max(1, steps // 20), checkpoint_every=steps, seed=seed,
                             device=device, batch_size=DEMO_SETTINGS["batch_size"])
    configs = [model_config(the_task, variant, preset) for variant in variants]  # fails early on a bad variant
    run_dirs = []
    for variant, config in zip(variants, configs, strict=True):
        logger.info("demo: training %s on %s (%s preset, %d steps)", variant, task, preset, steps)
        train_model(config, the_task, train_cfg, out / variant, resume=not force, force=force, progress=progress)
        run_dirs.append((variant, out / variant))
    return run_dirs


def _extra_positions(task: Any) -> list[str]:
    """Named positions other than the paper's that the task declares (SRAVEN: all_features)."""
    from latentcode.extract import POSITIONS, code_reading

    return [name for name in code_reading(task).positions[1:] if name in POSITIONS]


def _demo(out: str | os.PathLike, train: bool, variants: Sequence[str], task: str,
          task_params: dict[str, Any] | None, preset: str, steps: int, lr: float, n_samples: int, seed: int,
          device: str, embed_method: str, force: bool, progress: bool | None, inputs: str | None,
          seeds: Sequence[int] | None) -> DemoResult:
    from latentcode.analysis import decode_run, extract_run
    from latentcode.checkpoint import load_run
    from latentcode.run_codes import check_reading, run_config
    from latentcode.run_report import report_with_notes, run_names
    from latentcode.rundir import atomic_write_json

    start = time.perf_counter()
    out = Path(out)
    pairs = _demo_runs(out, train, variants, task, task_params, preset, steps, lr, seed, device, force, progress,
                       seeds)
    run_dirs = [run_dir for _, run_dir in pairs]
    timings = {"train" if train else "copy": time.perf_counter() - start}
    config = run_config(run_dirs[0])
    metric = config.task.metric_name
    inputs = check_reading(config, "paper", inputs)
    extra = _extra_positions(config.task)
    tick = time.perf_counter()
    for i, run_dir in enumerate(run_dirs, 1):
        logger.info("demo: [%d/%d] extracting %s codes (%s)", i, len(run_dirs), run_dir.name,
                    ", ".join(["paper", *extra]))
        for where in ["paper", *extra]:
            with warnings.catch_warnings():
                # constant codes are said once per run and reading: by the report (paper positions, in the
                # notes) and by decode_run below (the extra positions), not here as well
                warnings.simplefilter("ignore", ConstantCodesWarning)
                extract_run(run_dir, n_samples=n_samples, positions=where, device=device, seed=seed,
                            progress=progress, inputs=inputs)
    timings["extract"] = time.perf_counter() - tick
    tick = time.perf_counter()
    logger.info("demo: running the probes on %d runs and writing the report", len(run_dirs))
    if train:
        source = f"{preset} models trained {steps} steps"
    else:
        shown = sorted({load_run(run_dir).config.train.seed for run_dir in run_dirs})
        source = f"shipped checkpoints (seeds {', '.join(map(str, shown))})"
    report, notes = report_with_notes(run_dirs, out, positions="paper", inputs=inputs, embed_method=embed_method,
                                      device=device, progress=progress,
                                      title=f"latentcode demo: {', '.join(variants)} on {task}, {source}")
    extra_decodings = {(run_dir, where): decode_run(run_dir, positions=where, inputs=inputs, progress=progress)[0]
                       for run_dir in run_dirs for where in extra}
    summary = report.summary["runs"]
    rows = []
    decodings = []
    for (variant, run_dir), name in zip(pairs, run_names(run_dirs), strict=True):
        decoding = summary[name].get("decoding")
        decodings.append(decoding)
        row = {**seed_row(load_run(run_dir), decoding, variant=variant), "run": run_dir}
        for where in extra:
            scores = _row_scores(extra_decodings[run_dir, where].to_dict())
            row[f"decode_ood_last_{where}"] = scores.get("decode_ood_last")
            row[f"codes_minus_control_{where}"] = scores.get("codes_minus_control")
        rows.append(row)
        notes += [note for note in (decoding or {}).get("notes") or [] if note not in notes]
    skipped = _skipped_note(decodings)
    reading = next((r["meta"].get("reading") for r in summary.values() if r.get("meta")), None)
    table = SeedTable(rows, metric=metric, reading=reading)
    _add_seed_section(report, table)
    timings["report"] = time.perf_counter() - tick
    result = DemoResult(rows=rows, report=report.path, seconds=time.perf_counter() - start, metric=metric,
                        positions="paper", timings=timings, reading=reading,
                        notes=[*([skipped] if skipped else []), *_dead_note(rows), *notes])
    atomic_write_json(out / "demo.json", result.to_dict())
    return result
