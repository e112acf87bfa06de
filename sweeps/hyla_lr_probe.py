"""HYLA's first SRAVEN steps at two learning rates (issue 19): does lr 1e-3 cost HYLA its value units?

    python sweeps/hyla_lr_probe.py run --time-limit 3600     # train both probes (resumable; one thread each)
    python sweeps/hyla_lr_probe.py collect                     # their evaluations -> results/hyla_lr_probe.csv
    python docs/hyla_lr_probe_table.py                         # the Markdown table docs/campaign-log.md shows

Each probe is HYLA seed 0 at the Table A1 SRAVEN setting (paper preset, 156,250-step schedule, warm-up 1,000), as
`sweeps/table_a1_sraven.yaml` trains it, but evaluated every 250 steps on 1,024 instances per split, at lr 1e-3 (the
campaign's lr: this probe repeats the first steps of `sraven-hyla-s0` bit for bit, since evaluation draws no
training randomness) and at lr 3e-4 (the other lr of the paper's `raven_ablation.yaml` grid). The probes stop at
their time limit, not at a step; `run` again continues them. Training records the fraction of live units of every
layer's generated value network at each evaluation, on a fixed batch of held-out instances
(`latentcode.training.evaluate.live_fraction_inputs`), so the probes' fractions and the campaign run's
(`runs/table_a1_sraven/sraven-hyla-s0`, evaluated every 10,000 steps) are measured on the same instances.
`collect` adds the campaign run's evaluations up to the probes' last step, labelled as its rows.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path("runs/hyla_lr_probe")
CAMPAIGN = Path("runs/table_a1_sraven/sraven-hyla-s0")
RESULTS = Path("results/hyla_lr_probe.csv")
LRS = ("1e-3", "3e-4")
COLUMNS = ["run", "lr", "step", "ood_loss", "ood_acc", "ood_acc_per_feature", "test_acc", "live_fraction"]


def probe_dir(lr: str) -> Path:
    return RUNS / f"lr{lr}"


def command(lr: str, time_limit: float) -> list[str]:
    """The `latentcode train` command of one probe (run from the repository root)."""
    return [sys.executable, "-m", "latentcode", "train", "sraven", "--model", "hyla", "--preset", "paper", "--seed",
            "0", "--out", str(probe_dir(lr)), "--resume", "--threads", "1", "--no-progress", "--time-limit",
            str(time_limit), f"--train.lr={lr}", "--train.eval_every=250", "--train.eval_samples=1024"]


def cmd_run(args: argparse.Namespace) -> int:
    """Train both probes side by side until the time limit (each checkpoints and exits; `run` again resumes)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    (ROOT / RUNS).mkdir(parents=True, exist_ok=True)
    jobs = []
    for lr in args.lrs:
        log = (ROOT / RUNS / f"lr{lr}.log").open("a")
        jobs.append(subprocess.Popen(["nice", "-n", "5", *command(lr, args.time_limit)], cwd=ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT))
    codes = [job.wait() for job in jobs]
    for lr, code in zip(args.lrs, codes, strict=True):
        print(f"lr {lr}: exit {code}; log {RUNS / f'lr{lr}.log'}")
    return max(codes)


def _evaluations(run: Path) -> dict[int, dict[str, dict]]:
    """{step: {split: record}} of a run's evaluations (metrics.jsonl)."""
    found: dict[int, dict[str, dict]] = {}
    with (ROOT / run / "metrics.jsonl").open() as f:
        for line in f:
            record = json.loads(line)
            if record.get("split") in ("test", "ood"):
                found.setdefault(int(record["step"]), {})[record["split"]] = record
    return found


def _row(name: str, lr: str, step: int, splits: dict[str, dict]) -> dict[str, str]:
    ood, test = splits["ood"], splits.get("test", {})
    live = ood.get("value_live_fraction") or []
    return {"run": name, "lr": lr, "step": str(step), "ood_loss": f"{ood['loss']:.6g}", "ood_acc": f"{ood['acc']:.6g}",
            "ood_acc_per_feature": f"{ood['acc_per_feature']:.6g}",
            "test_acc": f"{test['acc']:.6g}" if "acc" in test else "",
            "live_fraction": ";".join(f"{v:.4f}" for v in live)}


def cmd_collect(args: argparse.Namespace) -> int:
    """Every evaluation of both probes, plus the campaign run's evaluations up to the probes' last step."""
    rows = []
    last = 0
    for lr in LRS:
        evaluations = _evaluations(probe_dir(lr))
        last = max(last, max(evaluations))
        rows += [_row(probe_dir(lr).name, lr, step, splits) for step, splits in sorted(evaluations.items())]
    if (ROOT / CAMPAIGN / "metrics.jsonl").is_file():
        rows += [_row(CAMPAIGN.name, "1e-3", step, splits) for step, splits in sorted(_evaluations(CAMPAIGN).items())
                 if step <= max(last, args.campaign_until)]
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"written: {args.out} ({len(rows)} rows; probes up to step {last:,})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="train both probes until the time limit (resumable)")
    p.add_argument("--time-limit", type=float, required=True, help="seconds of wall clock for this session")
    p.add_argument("--lrs", type=lambda s: s.split(","), default=list(LRS), help="comma-separated (default: both)")
    p = sub.add_parser("collect", help="the probes' evaluations as a CSV")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--campaign-until", type=int, default=10_000,
                   help="the campaign run's evaluations up to this step at least (default: 10,000)")
    args = parser.parse_args()
    return {"run": cmd_run, "collect": cmd_collect}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
