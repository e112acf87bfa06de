"""Docs generators for the GPU calls (docs/gpu.md, docs/benchmarks.md): Markdown from the committed records only.

    python docs/gpu_tables.py bench results/gpu/h100                 # the benchmark table of call 1
    python docs/gpu_tables.py bench-summary results/gpu/h100         # its summary: a row per variant
    python docs/gpu_tables.py calls results/gpu/h100                 # each call: wall clock, training window, steps
    python docs/gpu_tables.py compare --out results/gpu/h100/devices.csv RUN_DIR...   # write the device CSV
    python docs/gpu_tables.py devices results/gpu/h100/devices.csv   # held-out accuracy by step, run and device

A record folder holds `bench_table.csv` (bench/gpu_bench_table.py) and one folder per call, `callN/`, with the call's
`runbook.log` (bench/gpu_runbook.sh) and its ensembles' logs (`*-ensembleK.log`, unpacked from `logs.tar.gz`).
`compare` reads the `ood` evaluations of run directories' metrics.jsonl (trained on any device) and writes one row per
run and evaluation step; nothing here imports torch.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import csv
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN_FOR = re.compile(r"^== training for at most (?P<s>\d+) s \(cuda_graph (?P<graph>\w+)\)")
DONE = re.compile(r"^== done at (?P<s>\d+) s")
STOPPED = re.compile(r"time limit reached at step (?P<step>\d+) of (?P<total>\d+)")
RUN_LINE = re.compile(r"^run: \S+ \((?P<name>[\w-]+), step \d+ of \d+\)")


def _fmt(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def bench(folder: Path) -> str:
    """The benchmark table: steps/s of one process and of the runs it trains (run-steps/s), by variant, K and form."""
    rows = list(csv.DictReader((folder / "bench_table.csv").open()))
    lines = ["| variant | K | form | steps/s | run-steps/s | 9 runs at this rate, min | peak MiB |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['variant']} | {r['members']} | {r['form']} | failed: {r['error']} | | | |")
            continue
        lines.append(f"| {r['variant']} | {r['members']} | {r['form']} | {_fmt(float(r['steps_s']))} | "
                     f"{_fmt(float(r['run_steps_s']))} | {_fmt(float(r['grid_min']))} | {_fmt(float(r['peak_mib']), 0)} |")
    return "\n".join(lines)


def bench_summary(folder: Path) -> str:
    """One row per variant: the eager and graphed step of one run, and the fastest ensemble (the most run-steps/s)."""
    rows = [r for r in csv.DictReader((folder / "bench_table.csv").open()) if not r.get("error")]
    lines = ["| variant | steps/s, eager K = 1 | steps/s, graphed K = 1 | fastest: K, form | run-steps/s | 9 runs, min |",
             "|---|---:|---:|---|---:|---:|"]
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        one = {r["form"]: float(r["steps_s"]) for r in mine if r["members"] == "1"}
        best = max(mine, key=lambda r: float(r["run_steps_s"]))
        lines.append(f"| {variant} | {_fmt(one.get('eager', float('nan')))} | {_fmt(one.get('graphed', float('nan')))} | "
                     f"{best['members']}, {best['form']} | {_fmt(float(best['run_steps_s']))} | {_fmt(float(best['grid_min']))} |")
    return "\n".join(lines)


def _call(folder: Path) -> dict:
    """One call's record: its wall clock, the training window and the step each ensemble reached."""
    train_s, graph, done_s = None, None, None
    for line in (folder / "runbook.log").read_text().splitlines():
        if m := TRAIN_FOR.match(line):
            train_s, graph = int(m["s"]), m["graph"]
        elif m := DONE.match(line):
            done_s = int(m["s"])
    ensembles = {}
    for log in sorted(folder.glob("*-ensemble*.log")):
        text = log.read_text()
        stopped = STOPPED.search(text)
        names = [m["name"] for m in map(RUN_LINE.match, text.splitlines()) if m]
        ensembles[log.stem] = {"runs": names, "step": int(stopped["step"]) if stopped else None}
    return {"train_s": train_s, "graph": graph, "done_s": done_s, "ensembles": ensembles}


def calls(folder: Path) -> str:
    """Each call: wall clock, the training window, and each ensemble's step at the end of the call with the rate of
    the call (steps gained over the training window, start-up and the first graph capture included)."""
    lines = ["| call | wall s | training window s | step form | ensemble (runs) | step reached | steps/s in the window |",
             "|---|---:|---:|---|---|---:|---:|"]
    before: dict[str, int] = {}
    for n, call_dir in enumerate(sorted(folder.glob("call*")), 1):
        rec = _call(call_dir)
        for stem, ens in rec["ensembles"].items():
            start = before.get(stem, 0)
            rate = (ens["step"] - start) / rec["train_s"] if ens["step"] and rec["train_s"] else float("nan")
            runs = ", ".join(ens["runs"])
            lines.append(f"| {n} | {rec['done_s']} | {rec['train_s']} | {'graphed' if rec['graph'] == 'on' else 'eager'}"
                         f" | {runs} | {ens['step']:,} | {_fmt(rate)} |")
            before[stem] = ens["step"]
    return "\n".join(lines)


def compare(run_dirs: list[Path], out: Path) -> None:
    """Write one row per run and `ood` evaluation: name, device, seed, step, held-out accuracy."""
    rows = []
    for run in run_dirs:
        config = json.loads((run / "config.json").read_text())
        graph = config.get("train", {}).get("cuda_graph")
        device = "gpu" if graph or config.get("train", {}).get("device") == "cuda" else "cpu"
        for line in (run / "metrics.jsonl").read_text().splitlines():
            entry = json.loads(line)
            if entry.get("split") == "ood":
                rows.append({"run": run.name, "device": device, "step": entry["step"], "ood_acc": round(entry["acc"], 4)})
    if not rows:
        sys.exit(f"gpu_tables: no `ood` evaluation in {', '.join(map(str, run_dirs))}; pass run directories")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {out}")


def devices(path: Path) -> str:
    """Held-out accuracy at each step where a GPU run was evaluated, one row per run (its device in brackets)."""
    rows = list(csv.DictReader(path.open()))
    steps = sorted({int(r["step"]) for r in rows if r["device"] == "gpu"} or {int(r["step"]) for r in rows})
    runs = list(dict.fromkeys((r["run"], r["device"]) for r in rows))
    acc = {(r["run"], r["device"], int(r["step"])): float(r["ood_acc"]) for r in rows}
    lines = ["| run (device) | " + " | ".join(f"{s:,}" for s in steps) + " |",
             "|---|" + "---:|" * len(steps)]
    for run, device in runs:
        cells = [f"{acc[(run, device, s)]:.3f}" if (run, device, s) in acc else "" for s in steps]
        lines.append(f"| {run} ({device}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    for kind in ("bench", "bench-summary", "calls"):
        sub.add_parser(kind).add_argument("folder", type=Path, help="a record folder, e.g. results/gpu/h100")
    p = sub.add_parser("compare")
    p.add_argument("runs", type=Path, nargs="+", help="run directories")
    p.add_argument("--out", type=Path, required=True, help="the CSV to write")
    sub.add_parser("devices").add_argument("csv", type=Path, help="a CSV written by `compare`")
    args = parser.parse_args(argv)
    if args.kind == "compare":
        compare(args.runs, args.out)
        return
    target = args.csv if args.kind == "devices" else args.folder
    if not target.exists():
        sys.exit(f"gpu_tables: {target} does not exist; name a record folder such as results/gpu/h100")
    print({"bench": bench, "bench-summary": bench_summary, "calls": calls, "devices": devices}[args.kind](target))


if __name__ == "__main__":
    main()
