"""The one-thread training speeds a committed benchmark recorded (`bench/train_throughput.py --threads 1 --json
results/lane_speeds/FILE.json`), as the Markdown table of docs/benchmarks.md:

    python docs/lane_speeds_table.py results/lane_speeds/fuzzy_logic-seq96.json

One row per variant: its parameters, its steps per CPU-second, and the core-hours a run of the task's paper preset
needs at that speed (training steps only; `sweeps/cpu_campaign.py status` prices the queued runs nothing here has
trained the same way). Where a checkpoint of the task and variant shipped from a one-thread lane
(checkpoints/<task>-<variant>[-s<seed>], its shipped.json's command saying `--threads 1`), the speed each ended its
training with (the median over its last half hour, as `status` reads a run) stands beside it, so the benchmark can
be read against what a lane got.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it prints Markdown)
import argparse
import json
from pathlib import Path

from latentcode.config import train_config
from latentcode.rundir.checkpoint import recent_speed, train_rows

ROOT = Path(__file__).resolve().parents[1]


def lane_speeds(task: str, variant: str, window_s: float = 1800.0) -> list[tuple[str, float]]:
    """(checkpoint name, steps/s over its last `window_s` seconds of training) of each checkpoint of this task and
    variant that shipped from a one-thread lane, in name order."""
    found = []
    for shipped in sorted((ROOT / "checkpoints").glob(f"{task}-{variant}*")):
        if shipped.name != f"{task}-{variant}" and not shipped.name.removeprefix(f"{task}-{variant}-s").isdigit():
            continue  # another variant whose name starts with this one (hyla_linear for hyla)
        record = json.loads((shipped / "shipped.json").read_text())
        if "--threads 1 " not in f"{record.get('command', '')} ":
            continue
        if (recent := recent_speed(train_rows(shipped), window_s)) is not None:
            found.append((shipped.name, recent[1]))
    return found


def table(path: Path) -> str:
    """The Markdown of one record: the command and machine, then a row per variant (the lanes' column only where a
    variant has a shipped one-thread run)."""
    record = json.loads(path.read_text())
    if record.get("threads") != 1:
        raise SystemExit(f"{path}: measured with {record.get('threads')} threads; this table is of one-thread runs")
    rows, seq_lens, all_steps = [], set(), set()
    for row in record["rows"]:
        steps = train_config(row["task"], "paper").steps
        hours = steps / row["steps_per_cpu_s"] / 3600
        lanes = ", ".join(f"{rate:.2f} ({name})" for name, rate in lane_speeds(row["task"], row["variant"]))
        rows.append([row["variant"], f"{row['params']:,}", f"{row['steps_per_cpu_s']:.2f}",
                     f"{hours:.1f} h" if hours >= 2 else f"{60 * hours:.0f} min", lanes or "—"])
        seq_lens.add(row.get("seq_len"))
        all_steps.add(steps)
    lanes = any(row[-1] != "—" for row in rows)
    run = (f"{', '.join(f'{n:,}' for n in sorted(all_steps))} steps"
           + (f", sequence length {', '.join(map(str, sorted(seq_lens)))}" if None not in seq_lens else ""))
    head = ["variant", "parameters", "steps per CPU-s", f"one run on one core ({run})",
            *(["one-thread lanes at the end of their runs (steps/s)"] if lanes else [])]
    lines = [f"`{record['command']}` ({record['machine']})", "", "| " + " | ".join(head) + " |",
             "|---|" + "---:|" * 3 + ("---|" if lanes else "")]
    lines += ["| " + " | ".join(row if lanes else row[:-1]) + " |" for row in rows]
    ratios = sorted((row["steps_per_cpu_s"] / rate, row["variant"], name) for row in record["rows"]
                    for name, rate in lane_speeds(row["task"], row["variant"]))
    if ratios:
        (low, *low_of), (high, *high_of) = ratios[0], ratios[-1]
        lines += ["", f"Benchmark over lane: {low:.2f}× ({low_of[0]}, {low_of[1]}) to {high:.2f}× ({high_of[0]}, "
                      f"{high_of[1]})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path, help="a JSON record of bench/train_throughput.py --json")
    print(table(parser.parse_args().record))


if __name__ == "__main__":
    main()
