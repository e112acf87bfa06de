"""The `status` report of sweeps/cpu_campaign.py: each queued run's progress, its training speed on this machine and
the training time the queue still needs.

The routines that read the queue take the campaign module itself (`campaign`) and read its paths and queue
(`QUEUE`, `SWEEP`, `STASH`, `LOGS`, `LOCKS`, `run_dir`, `point`, `done`, ...) from it when they run, so a value
patched there is the value used here. Nothing here imports the campaign: it is handed in.
"""

from __future__ import annotations

# ruff: noqa: T201 (the report of a command-line script: it prints)
import json
import re
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from latentcode.training.lanes import is_locked

Speeds = dict[str, tuple[int, float] | None]
"""`speed_here` of each queued run."""


def speed(run: Path, window_s: float = 1800.0) -> tuple[int, float] | None:
    """The last logged step and the run's training speed now (`recent_speed` of its train rows: their `elapsed_s`
    counts training time across resumes); None with fewer than two rows."""
    from latentcode.rundir.checkpoint import recent_speed, train_rows

    return recent_speed(train_rows(run), window_s)


def starts_here(log: Path) -> list[int]:
    """The steps a lane of this machine started a run from, oldest first, read from its lane log: each `resuming
    ... from step N` line, and 0 first where the log begins with a fresh start instead."""
    text = log.read_text()
    steps = [int(found) for found in re.findall(r"^resuming .* from step (\d+)$", text, flags=re.MULTILINE)]
    return steps if text.startswith("resuming ") else [0, *steps]


def speed_here(campaign: ModuleType, name: str) -> tuple[int, float] | None:
    """`speed` of a queued run over the steps a lane of this machine trained (its log, runs/logs/<name>.log, says
    where each of its starts resumed), else None: a run's rows from another machine (the GPU, another CPU) say
    nothing of this one's speed, and a run back from the GPU keeps the GPU's rows before the step it resumed here
    from. The rows since the latest start, or since an earlier one while the latest has too few rows."""
    from latentcode.rundir.checkpoint import recent_speed, train_rows

    log = campaign.LOGS / f"{name}.log"
    if not log.is_file():
        return None
    rows = train_rows(campaign.run_dir(name))
    for start in reversed(starts_here(log)):
        if (found := recent_speed([r for r in rows if r["step"] > start])) is not None:
            return found
    return None


def _total_steps(run: Path) -> int | None:
    path = run / "config.json"
    return json.loads(path.read_text())["train"]["steps"] if path.is_file() else None


def status(campaign: ModuleType) -> None:
    """One line per queued run: its checkpointed step, finished, running, stashed step, and for a run under way its
    recent speed and the training time it still needs at that speed from its last logged step (a run this machine
    has not trained yet: at the speed of a run of its sweep and variant here, or, where no such run trains here, at
    the speed a shipped run of its sweep and variant ended with on another machine, else at a committed benchmark's
    steps per CPU-second; each said so)."""
    c = campaign
    speeds = {name: speed_here(c, name) for name in c.QUEUE}
    rates = _variant_rates(c, speeds)
    shipped = _shipped_rates(c, rates)
    benchmarks = _benchmark_rates(c)
    width = max(map(len, c.QUEUE))
    for name in c.QUEUE:
        run, kept = c.run_dir(name), c.STASH / name
        state, stashed = c._state(run), c._state(kept)
        finished = ("finished" if state.get("finished") else "" if not c.done(name)
                    else "in table" if name in c.ABLATIONS else "shipped")
        line = (f"{name:{width}s} step {state.get('step', 0):>7}  {finished:8s} "
                f"{'running' if is_locked(c.point(name), c.LOCKS) else '':7s}  stashed step {str(stashed.get('step', '-')):>7}")
        progress, total = speeds[name], _total_steps(run)
        variant = _variant(c, name)
        if not finished and progress and progress[1] > 0 and total:
            logged, rate = progress
            line += f"  {rate:.2f} steps/s, {max(total - logged, 0) / rate / 3600:.1f} h to step {total:,}"
        elif not finished and state.get("step") and total and variant in rates:
            rate = rates[variant]
            line += (f"  not trained here yet; at this machine's {variant[1]} speed ({rate:.2f} steps/s) "
                     f"{max(total - state['step'], 0) / rate / 3600:.1f} h to step {total:,}")
        elif not finished and state.get("step") and total and variant in shipped:
            rate, source = shipped[variant]
            line += (f"  no {variant[1]} speed here yet; at the speed {source} ended its training with elsewhere "
                     f"({rate:.2f} steps/s) {max(total - state['step'], 0) / rate / 3600:.1f} h to step {total:,}")
        elif not finished and state.get("step") and total and (found := benchmarks.get(_bench_key(c, name))):
            rate, source = found
            line += (f"  no {variant[1]} speed here yet; at the steps per CPU-second a benchmark measured "
                     f"({rate:.2f}, {source}) {max(total - state['step'], 0) / rate / 3600:.1f} h to step {total:,}")
        elif not finished and state.get("step"):
            line += "  no speed measured on this machine yet"
        print(line)
    left, lanes = _hours(c, speeds, rates, shipped, benchmarks), 2
    machine = left.here + left.elsewhere + left.benchmarked
    print(f"left in the queue: {machine:.1f} lane-hours (about {machine / lanes:.1f} h of the machine with {lanes} "
          f"lanes)" + (f", {left.elsewhere:.1f} of them at the speed a shipped run of the variant ended with "
                       f"elsewhere" if left.elsewhere else "")
          + (f", {left.benchmarked:.1f} of them at the steps per CPU-second of one thread that a benchmark measured "
             f"({BENCHMARKS}/, training steps only: evaluations not counted)" if left.benchmarked else "")
          + (f"; plus {len(left.unmeasured)} run(s) of a sweep and variant with no measured speed yet "
             f"({_by_sweep(c, left.unmeasured)})" if left.unmeasured else ""))


def _variant(campaign: ModuleType, name: str) -> tuple[str, str]:
    """A queued run's sweep and variant."""
    return campaign.SWEEP[name], name.split("-")[1]


def _variant_rates(campaign: ModuleType, speeds: Speeds) -> dict[tuple[str, str], float]:
    """The speed on this machine of each sweep and variant: that of its first queued run with one (`speed_here`)."""
    rates: dict[tuple[str, str], float] = {}
    for name in campaign.QUEUE:
        if speeds[name] and speeds[name][1] > 0:
            rates.setdefault(_variant(campaign, name), speeds[name][1])
    return rates


def _shipped_rates(campaign: ModuleType, rates: dict[tuple[str, str], float]) -> dict[tuple[str, str],
                                                                                        tuple[float, str]]:
    """For each sweep and variant with no speed here (not in `rates`): the speed the first of its runs that shipped
    ended its training with, as a lane trains (one thread: shipped.json's command says `--threads 1`), and that
    checkpoint's name. Another machine's speed (a fresh machine has no runs/), so only an estimate; a run finished
    on two threads or on the GPU sets none."""
    found: dict[tuple[str, str], tuple[float, str]] = {}
    for name in campaign.QUEUE:
        variant = _variant(campaign, name)
        if variant in rates or variant in found or name not in campaign.SHIPS or not campaign.recorded(name):
            continue
        shipped = campaign.ROOT / "checkpoints" / campaign.shipped_name(name)
        command = json.loads((shipped / "shipped.json").read_text()).get("command", "")
        if "--threads 1 " in f"{command} " and (progress := speed(shipped)) is not None and progress[1] > 0:
            found[variant] = (progress[1], shipped.name)
    return found


BENCHMARKS = "results/lane_speeds"
"""Where, under the campaign's checkout, `bench/train_throughput.py --json` records live whose one-thread steps per
CPU-second price the runs of a sweep and variant that nothing here has a speed for (`_benchmark_rates`)."""


def _bench_key(campaign: ModuleType, name: str) -> tuple[str, int | None, str]:
    """A queued run's task, fuzzy-logic sequence length (None for SRAVEN) and variant: what a benchmark row is
    looked up by."""
    point = campaign.point(name)
    return point.task, point.task_params.get("seq_len") if point.task == "fuzzy_logic" else None, point.variant


def _benchmark_rates(campaign: ModuleType) -> dict[tuple[str, int | None, str], tuple[float, str]]:
    """The steps per CPU-second of one thread of each task, sequence length and variant that a committed run of
    `bench/train_throughput.py --threads 1 --json` measured (`BENCHMARKS`/*.json, the first file in name order
    that has it), with that file's path. CPU time, not wall time, so a benchmark run beside the lanes still
    measures what a lane of its own core gets; training steps only, so a run's evaluations come on top."""
    found: dict[tuple[str, int | None, str], tuple[float, str]] = {}
    for path in sorted((campaign.ROOT / BENCHMARKS).glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("threads") != 1:
            continue
        for row in record["rows"]:
            found.setdefault((row["task"], row.get("seq_len"), row["variant"]),
                             (row["steps_per_cpu_s"], f"{BENCHMARKS}/{path.name}"))
    return found


def _planned_steps(campaign: ModuleType, name: str) -> int:
    """The steps a queued run trains for, from its sweep point (for a sweep none of whose runs has started)."""
    from latentcode.config import train_config

    point = campaign.point(name)
    return train_config(point.task, point.preset, **point.train).steps


def _by_sweep(campaign: ModuleType, names: list[str]) -> str:
    """Runs named by sweep and variant, e.g. 'table_a1_fuzzy_logic: hyla_linear, linear_rmshead'."""
    variants: dict[str, list[str]] = {}
    for name in names:
        found = variants.setdefault(campaign.SWEEP[name], [])
        if name.split("-")[1] not in found:
            found.append(name.split("-")[1])
    return "; ".join(f"{sweep}: {', '.join(found)}" for sweep, found in variants.items())


class QueueHours(NamedTuple):
    """The training the unfinished runs of the queue still need, in hours of one lane (`queue_hours`)."""

    here: float
    """At speeds measured on this machine."""
    elsewhere: float
    """At the speed a shipped run of the variant ended with on another machine (`_shipped_rates`)."""
    benchmarked: float
    """At the steps per CPU-second a committed benchmark measured (`_benchmark_rates`): training steps only."""
    unmeasured: list[str]
    """The runs with none of these speeds."""


def queue_hours(campaign: ModuleType, speeds: Speeds | None = None) -> QueueHours:
    """Training time the unfinished runs of the queue still need, in hours of one lane: each run's remaining steps
    at its own recent speed on this machine, or, for a run this machine has not trained yet, at the recent speed of
    a run of the same sweep and variant (`_variant_rates`), else at the speed a shipped run of its sweep and variant
    ended with elsewhere (`_shipped_rates`), else at the steps per CPU-second a committed benchmark measured
    (`_benchmark_rates`), these two counted apart; and the runs for which no speed exists. A run not started needs
    the steps of a started run of its sweep (all of a sweep's queued runs train equally long), or, where none has
    started, its sweep point's. `speeds`: `speed_here` of each queued run, if already read."""
    c = campaign
    if speeds is None:
        speeds = {name: speed_here(c, name) for name in c.QUEUE}
    rates = _variant_rates(c, speeds)
    return _hours(c, speeds, rates, _shipped_rates(c, rates), _benchmark_rates(c))


def _hours(campaign: ModuleType, speeds: Speeds, rates: dict[tuple[str, str], float],
           shipped: dict[tuple[str, str], tuple[float, str]],
           benchmarks: dict[tuple[str, int | None, str], tuple[float, str]]) -> QueueHours:
    """`queue_hours` from the speeds and rates already read (`status` has them)."""
    c = campaign
    steps: dict[str, int] = {}
    for name in c.QUEUE:
        total = _total_steps(c.run_dir(name))
        if total:
            steps.setdefault(c.SWEEP[name], total)
    here, elsewhere, benchmarked, unmeasured = 0.0, 0.0, 0.0, []
    for name in c.QUEUE:
        if c.done(name):
            continue
        variant, total = _variant(c, name), steps.get(c.SWEEP[name])
        rate = rates.get(variant) or (shipped[variant][0] if variant in shipped else None)
        bench = benchmarks.get(_bench_key(c, name)) if rate is None else None
        if rate is None and bench is None:
            unmeasured.append(name)
            continue
        if total is None:
            total = steps[c.SWEEP[name]] = _planned_steps(c, name)
        progress = speeds[name]
        left = max(total - (progress[0] if progress else c._state(c.run_dir(name)).get("step", 0)), 0)
        if variant in rates:
            here += left / rate / 3600
        elif rate is not None:
            elsewhere += left / rate / 3600
        else:
            benchmarked += left / bench[0] / 3600
    return QueueHours(here, elsewhere, benchmarked, unmeasured)
