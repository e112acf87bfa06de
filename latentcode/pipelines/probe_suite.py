"""How well is the rule read? Conditional, MDL and baseline probes on one run's codes, written to a folder.

`probe_suite` loads a run directory or a shipped checkpoint, extracts its codes at the task's paper reading (and the
untrained model's, same seed and instances), and runs `probes.conditional.conditional_probe`,
`probes.mdl.mdl_probe` and `probes.baselines.baseline_probes` on them for the task's default label (SRAVEN: `rule`;
fuzzy logic: `terms`). Nothing is written into the run. Run it as

    python -m latentcode.pipelines.probe_suite sraven-softmax --out results/probing/sraven-softmax
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from latentcode.codes.extract import LatentCodes, extract_latent_codes
from latentcode.codes.readings import task_code_meta
from latentcode.codes.untrained import untrained_codes
from latentcode.constants import CONFIG_FILE
from latentcode.rundir.checkpoint import Run, load_run
from latentcode.rundir.pretrained import load_pretrained
from probes.baselines import BaselineResult, baseline_probes
from probes.conditional import ConditionalResult, conditional_probe
from probes.mdl import PORTIONS, MDLResult, block_ends, mdl_probe

__all__ = ["SUITE_SPLITS", "ProbeSuite", "load_suite_run", "main", "probe_suite"]

logger = logging.getLogger(__name__)

SUITE_SPLITS = ("train", "test", "ood")
"""The splits the suite extracts: probes fit on train and score on test (held-out instances) and ood (held-out
compositions: SRAVEN's rule sets, fuzzy logic's term pairs)."""


@dataclass(frozen=True)
class ProbeSuite:
    """What `probe_suite` returns (and writes).

    Attributes:
        run: the run directory or shipped name it read.
        step: the run's training step.
        model_accuracy: split -> the model's own held-out score from its metrics (SRAVEN: accuracy; fuzzy logic:
            R²), what the across-runs table plots the codes' decodability against.
        conditional, mdl, baselines: the three results.
        seconds: stage -> wall-clock seconds.
    """

    run: str
    task: str
    step: int
    model_accuracy: dict[str, float]
    conditional: ConditionalResult
    mdl: MDLResult
    baselines: BaselineResult
    seconds: dict[str, float]

    def table(self) -> str:
        return "\n\n".join([self.baselines.table(), self.conditional.table(), self.mdl.table()])


def load_suite_run(run: str | os.PathLike, seed: int | None = None) -> Run:
    """A run directory (with config.json) or a shipped checkpoint's name (`load_pretrained(name, seed=seed)`).

    Raises:
        ValueError: neither a run directory nor a shipped name (the message lists the shipped names).
    """
    path = Path(run)
    if (path / CONFIG_FILE).is_file():
        if seed is not None:
            raise ValueError(f"seed={seed} selects a shipped checkpoint's seed; {run} is a run directory already")
        return load_run(path)
    return load_pretrained(str(run), seed=seed)


def _check_request(run: Run, label: str | None, layers: Any) -> None:
    """Refuse a label the task's codes do not carry as classes, or a layer the model does not have, before any
    extraction."""
    kinds = task_code_meta(run.task).get("label_kinds") or {}
    fitting = sorted(k for k, v in kinds.items() if v in ("class", "class_set"))
    if label is not None and kinds and label not in fitting:
        raise ValueError(f"label={label!r} is not a class label of task {run.task.name!r}; pass one of {fitting}")
    n_layers = run.config.model.n_layers
    if isinstance(layers, str):
        if layers not in ("each", "all", "each+all", "last"):
            raise ValueError(f"layers={layers!r} is not a layer choice; use each, all, each+all, last or layer numbers")
        return
    wanted = [layers] if isinstance(layers, int) else list(layers)
    bad = [layer for layer in wanted if isinstance(layer, bool) or not isinstance(layer, int)
           or not 0 <= layer < n_layers]
    if bad or not wanted:
        raise ValueError(f"layers={layers!r}: the model has layers 0..{n_layers - 1}; pass layer numbers among them")


def _model_scores(run: Run) -> dict[str, float]:
    out = {}
    for split in ("test", "ood"):
        record = run.eval_metrics(split) or {}
        for key in ("acc", "r2"):
            if key in record:
                out[split] = float(record[key])
                break
    return out


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})


def probe_suite(
    run: str | os.PathLike | Run,
    out_dir: str | os.PathLike | None = None,
    *,
    seed: int | None = None,
    n_samples: int = 2048,
    label: str | None = None,
    layers: Any = "each",
    n_resamples: int = 1000,
    stages: tuple[str, ...] = ("baselines", "conditional", "mdl"),
    progress: bool | None = None,
    command: str | None = None,
) -> ProbeSuite | MDLResult:
    """Conditional, MDL and baseline probes (with the untrained model's codes) on one run, both tasks.

    Args:
        run: a run directory, a shipped checkpoint's name, or a loaded `Run`.
        out_dir: where to write `conditional.csv/.json`, `mdl.csv/.json`, `baselines.csv/.json`, `suite.json` and
            `tables.txt` (None: write nothing).
        seed: the shipped seed of `run` when it is a name.
        n_samples: instances per split (train, test, ood); the MDL blocks need at least 1,000 train rows.
        label: the label probed (default: the task's default label).
        layers: the layer choice of every probe (default: each layer).
        n_resamples: bootstrap resamples of the conditional probe's interval.
        stages: ("mdl",) runs MDL alone: it extracts the train split only (the same instances) and rewrites
            `mdl.csv/.json` in `out_dir`, updating `suite.json`; the default runs all three.
        progress: progress bars (None: only on a terminal).
        command: the command line to record in suite.json.

    Returns:
        `ProbeSuite` (with stages=("mdl",): the `MDLResult`).

    Raises:
        ValueError: an unknown run or stage, too few samples for the MDL blocks, or an unknown layer or label, before
            anything is extracted.
    """
    block_ends(n_samples, PORTIONS)  # too few rows: one clear error before any extraction
    if tuple(stages) not in (("baselines", "conditional", "mdl"), ("mdl",)):
        raise ValueError(f"stages={stages!r}: pass ('baselines', 'conditional', 'mdl') (all) or ('mdl',)")
    loaded = run if isinstance(run, Run) else load_suite_run(run, seed)
    _check_request(loaded, label, layers)
    if tuple(stages) == ("mdl",):
        return _mdl_only(loaded, out_dir, n_samples, label, layers, progress, command)
    name = str(run.path if isinstance(run, Run) else run) + ("" if seed is None else f" (seed {seed})")
    extract = {"splits": SUITE_SPLITS, "n_samples": n_samples, "seed": 0, "progress": progress}
    seconds = {}
    start = time.perf_counter()
    codes: LatentCodes = extract_latent_codes(loaded.model, loaded.task, checkpoint=loaded.checkpoint_hash, **extract)
    untrained = untrained_codes(loaded.config.model, loaded.task, loaded.config.train.seed, **extract)
    seconds["extract"] = time.perf_counter() - start
    start = time.perf_counter()
    baselines = baseline_probes(codes, label, layers, untrained=untrained, progress=progress)
    seconds["baselines"] = time.perf_counter() - start
    start = time.perf_counter()
    conditional = conditional_probe(codes, label, layers, n_resamples=n_resamples, progress=progress)
    seconds["conditional"] = time.perf_counter() - start
    start = time.perf_counter()
    mdl = mdl_probe(codes, label, layers, progress=progress)
    seconds["mdl"] = time.perf_counter() - start
    suite = ProbeSuite(run=name, task=loaded.task.name, step=int(loaded.step), model_accuracy=_model_scores(loaded),
                       conditional=conditional, mdl=mdl, baselines=baselines, seconds=seconds)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for stem, result in (("conditional", conditional), ("mdl", mdl), ("baselines", baselines)):
            _write_csv(out / f"{stem}.csv", result.to_rows())
            (out / f"{stem}.json").write_text(json.dumps(result.to_dict(), indent=1) + "\n")
        (out / "tables.txt").write_text(suite.table() + "\n")
        info = {"kind": "latentcode.probe_suite", "run": name, "task": suite.task, "step": suite.step,
                "checkpoint": loaded.checkpoint_hash, "n_samples": n_samples, "splits": list(SUITE_SPLITS),
                "reading": codes.reading, "model_accuracy": suite.model_accuracy,
                "untrained": f"seed {loaded.config.train.seed}, initial weights", "seconds": seconds,
                "command": command}
        (out / "suite.json").write_text(json.dumps(info, indent=1) + "\n")
        logger.info("wrote %s", out)
    return suite


def _mdl_only(loaded: Run, out_dir, n_samples, label, layers, progress, command) -> MDLResult:
    start = time.perf_counter()
    codes = extract_latent_codes(loaded.model, loaded.task, splits=("train",), n_samples=n_samples, seed=0,
                                 progress=progress, checkpoint=loaded.checkpoint_hash)
    mdl = mdl_probe(codes, label, layers, progress=progress)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _write_csv(out / "mdl.csv", mdl.to_rows())
        (out / "mdl.json").write_text(json.dumps(mdl.to_dict(), indent=1) + "\n")
        tables = out / "tables.txt"
        if tables.is_file():  # the other probes' tables stay, the MDL table is replaced
            kept = tables.read_text().split("\n\nMDL probing")[0].rstrip("\n")
            tables.write_text(f"{kept}\n\n{mdl.table()}\n")
        info_path = out / "suite.json"
        info = json.loads(info_path.read_text()) if info_path.is_file() else {"kind": "latentcode.probe_suite"}
        info.setdefault("seconds", {})["mdl (with its own train-split extraction)"] = time.perf_counter() - start
        info["mdl_command"] = command
        info_path.write_text(json.dumps(info, indent=1) + "\n")
    return mdl


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m latentcode.pipelines.probe_suite",
        description="Conditional, MDL and baseline probes (and the untrained model's codes) on one run.",
        epilog="example: python -m latentcode.pipelines.probe_suite fuzzy_logic-hyla --seed 1 "
               "--out results/probing/fuzzy_logic-hyla-s1",
    )
    parser.add_argument("run", help="a run directory or a shipped checkpoint's name (e.g. sraven-softmax)")
    parser.add_argument("--seed", type=int, default=None, help="the shipped seed (with a checkpoint name)")
    parser.add_argument("--out", required=True, help="folder for the results (created)")
    parser.add_argument("--n-samples", type=int, default=2048, help="instances per split (default 2048)")
    parser.add_argument("--label", default=None, help="label probed (default: the task's)")
    parser.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--mdl-only", action="store_true",
                        help="run MDL alone (train split only) and rewrite mdl.csv/.json in --out")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    command = "python -m latentcode.pipelines.probe_suite " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        suite = probe_suite(args.run, args.out, seed=args.seed, n_samples=args.n_samples, label=args.label,
                            n_resamples=args.n_resamples, progress=False if args.no_progress else None,
                            stages=("mdl",) if args.mdl_only else ("baselines", "conditional", "mdl"),
                            command=command)
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"error: {err}\n")
    sys.stdout.write(suite.table() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
