"""Paper-scale training on a 2-core CPU, across sessions and machines (issues 17, 19 and 31): a queue of Table A1
and Fig. 2B runs, trained by lanes of one thread each, whose resume state is stashed in the repository so a fresh
clone continues them.

    python sweeps/cpu_campaign.py status              # every run: step, finished, running, stashed; speed and
                                                      # hours left of a run under way, and of the whole queue
    python sweeps/cpu_campaign.py start --lanes 2     # restore stashed runs, then train the queue in the background
    python sweeps/cpu_campaign.py start --lanes 1 --threads 2   # one lane on two cores: its run ends sooner
    python sweeps/cpu_campaign.py stash               # stop the trainings (each checkpoints), copy their resume
                                                      # state to checkpoints/in-progress/<run>/ (then `git add` it;
                                                      # a finished run keeps its state there until its result is
                                                      # committed)
    python sweeps/cpu_campaign.py stash --restart 2   # the same mid-session: then start 2 lanes again at once
    python sweeps/cpu_campaign.py ship                # export each finished SRAVEN and Fig. 2B run to checkpoints/
                                                      # (then `git add` it; the next stash drops its resume state)
    python sweeps/cpu_campaign.py results             # after a new snapshot or a finished run: emergence rows,
                                                      # Table A1's CSVs, the Fig. 2B decodes, the figures and the
                                                      # docs' tables

The queue (`QUEUE`): the fuzzy-logic seeds 1 and 2, the nine SRAVEN runs, the three Fig. 2B runs at sequence length
96, then the fuzzy-logic ablation rows. Each lane takes the first run of the queue that is neither done nor taken by
another lane (`latentcode.training.lanes.train_lane`; a lock file in runs/.locks, beside the runs, holding the
lane's and its trainer's process ids), and trains that point of its sweep (`SWEEP`: sweeps/table_a1_sraven.yaml,
sweeps/table_a1_fuzzy_logic.yaml with 0.1's GELU and schedule, sweeps/fig2_fuzzy_logic_latent.yaml) with one thread,
plus, for SRAVEN, snapshots (the weights of every evaluation, for the emergence analysis) and a 2,000-step checkpoint
cadence; neither changes the numbers, and a resume may leave them out. `stash` stops the lanes it finds in the lock
files and SIGTERMs their trainers, which write a checkpoint between two steps, so the copy is a whole resume state;
`start` again continues bitwise. Snapshots and logs are not stashed (see docs/campaign-log.md).
The `results` routine is in sweeps/campaign_results.py, the `status` report in sweeps/campaign_status.py.
"""

from __future__ import annotations

# ruff: noqa: T201 (a command-line script: it reports with print)
import argparse
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
# The checkout this script lives in is the library it trains with (its lanes' `python -m latentcode` run from ROOT
# too), even where an editable install points elsewhere: a campaign run from a frozen worktree stays frozen.
sys.path.insert(0, str(ROOT))

from latentcode.rundir.files import RunFiles  # noqa: E402
from latentcode.training.lanes import is_locked, stop_lanes, train_lane  # noqa: E402
from latentcode.training.sweep import SweepPoint, point_command  # noqa: E402
from latentcode.training.sweep_grid import expand_grid, load_grid  # noqa: E402

if str(Path(__file__).resolve().parent) not in sys.path:  # the campaign's modules beside this script, also when it
    sys.path.append(str(Path(__file__).resolve().parent))  # is loaded by file path (as the tests load it)

import campaign_results  # noqa: E402
import campaign_status  # noqa: E402

GRIDS = Path(__file__).resolve().parent
"""Where the sweeps of the queued runs are (sweeps/table_a1_<task>.yaml)."""
RUNS = ROOT / "runs"
STASH = ROOT / "checkpoints" / "in-progress"
LOGS = ROOT / "runs" / "logs"
LOCKS = RUNS / ".locks"
"""One lock file per run, held by the lane training it (beside the run directories, never inside one)."""
FUZZY = ["fuzzy_logic-softmax-s1-frac0.7", "fuzzy_logic-linear-s1-frac0.7", "fuzzy_logic-hyla-s1-frac0.7",
         "fuzzy_logic-hyla-s2-frac0.7", "fuzzy_logic-softmax-s2-frac0.7", "fuzzy_logic-linear-s2-frac0.7"]
"""Table A1's fuzzy-logic seeds 1 and 2 (issue 17 ships every seed), retrained as 0.1 trained them (exact GELU,
the v0.1 schedule): their OOD R² must equal results/table_a1_fuzzy_logic.csv. The two HYLA runs (the slowest)
go side by side, so both lanes finish at about the same time."""
SRAVEN = ["sraven-softmax-s0", "sraven-hyla-s0", "sraven-linear-s0", "sraven-hyla-s1", "sraven-hyla-s2",
          "sraven-softmax-s1", "sraven-softmax-s2", "sraven-linear-s1", "sraven-linear-s2"]
"""Issue 19's order: seed 0 of softmax and HYLA side by side, linear seed 0, then seeds 1 and 2 (HYLA first)."""
FIG2B = ["fuzzy_logic-softmax-s2024-frac0.5", "fuzzy_logic-linear-s2024-frac0.5", "fuzzy_logic-hyla-s2024-frac0.5"]
"""Fig. 2B at the paper's setting (sweeps/fig2_fuzzy_logic_latent.yaml: sequence length 96, half of the term pairs
held out, seed 2024), trained with today's defaults; each ships as `fuzzy_logic_latent-<variant>`."""
ABLATION_VARIANTS = ("hyla_linear", "linear_rmshead", "hyla_no_rmshead", "softmax_hyla", "hyla_linear_no_rmshead",
                     "hyla+moe", "softmax+moe", "linear+moe")
"""Table A1's fuzzy-logic ablation rows that latentcode builds (HYLA+ and "linear + RMSHead + nonlinear value" are
not in the reference code), in issue 31's order: the three it names first, then the others by how far the paper's
value sits from the nearest of its core rows (softmax 63.28, linear 59.89, HYLA 81.13)."""
ABLATIONS = [f"fuzzy_logic-{variant}-s{seed}-frac0.7" for variant in ABLATION_VARIANTS for seed in (0, 1, 2)]
"""Three seeds of each ablation row, at the Table A1 setting and, like the core rows they are compared with, 0.1's
GELU and schedule. They do not ship: their rows in results/table_a1_fuzzy_logic.csv are what a fresh clone keeps."""
QUEUE = [*FUZZY, *SRAVEN, *FIG2B, *ABLATIONS]
"""The six short fuzzy-logic runs first (about 45 core-minutes each; issue 17 cannot close without them), then the
SRAVEN runs, then issue 31's: the three Fig. 2B runs, then the ablation rows."""
SWEEP = {**dict.fromkeys(SRAVEN, "table_a1_sraven"), **dict.fromkeys([*FUZZY, *ABLATIONS], "table_a1_fuzzy_logic"),
         **dict.fromkeys(FIG2B, "fig2_fuzzy_logic_latent")}
"""The sweep (sweeps/<name>.yaml) each queued run is a point of; its runs live in runs/<name>/."""
SHIPS = (*SRAVEN, *FIG2B)
"""The runs that ship to checkpoints/ when they finish (the fuzzy-logic seeds of `FUZZY` shipped earlier)."""
RESUME_FILES = tuple(path.name for path in RunFiles(".").resume_state)


CHECKPOINT_EVERY = 2000
"""The SRAVEN runs' checkpoint cadence (steps)."""
FUZZY_V01 = {"model": {"act_fn": "gelu"}, "train": {"lr_schedule": "v0.1"}}
"""What the fuzzy-logic runs add to their sweep point: 0.1's exact GELU and learning-rate schedule."""


def run_dir(name: str) -> Path:
    """Where a queued run lives: the folder its sweep (`SWEEP`) gives it."""
    return RUNS / SWEEP[name] / name


def point(name: str) -> SweepPoint:
    """The sweep point of one queued run (its `SWEEP`'s), living at `run_dir(name)`; a Table A1 fuzzy-logic run
    with 0.1's GELU and schedule (`FUZZY_V01`)."""
    found = dataclasses.replace(_grid_points(GRIDS / f"{SWEEP[name]}.yaml")[name], run_dir=run_dir(name))
    if SWEEP[name] == "table_a1_fuzzy_logic":
        found = dataclasses.replace(found, model={**found.model, **FUZZY_V01["model"]},
                                    train={**found.train, **FUZZY_V01["train"]})
    return found


@functools.cache
def _grid_points(grid: Path) -> dict[str, SweepPoint]:
    return {p.name: p for p in expand_grid(load_grid(grid))}


def _cadence(name: str) -> dict:
    """The flags a queued run trains with beside its point (`point_command`'s): none of them changes the numbers."""
    return {"checkpoint_every": CHECKPOINT_EVERY, "snapshots": True} if name.startswith("sraven-") else {}


def command(name: str, threads: int = 1) -> list[str]:
    """The `latentcode train` command of one queued run: its sweep point, its threads (one by default) and its
    cadence."""
    return point_command(point(name), threads=threads, **_cadence(name))


def _state(run: Path) -> dict:
    path = run / "train_state.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def done(name: str) -> bool:
    """Whether a queued run needs no more training here: its run directory says finished, or its result is
    committed (`recorded`: a fresh machine has no runs/ of the runs finished on an earlier one)."""
    return bool(_state(run_dir(name)).get("finished")) or recorded(name)


def recorded(name: str, root: Path | None = None) -> bool:
    """Whether a finished run's result is where a fresh clone finds it (in the checkout `root`, by default this
    one): an ablation row's test and OOD rows in results/table_a1_fuzzy_logic.csv, any other run's shipped
    checkpoint."""
    root = root or ROOT
    if name in ABLATIONS:
        return _in_fuzzy_table(name, root)
    return (root / "checkpoints" / shipped_name(name)).is_dir()


def _in_fuzzy_table(name: str, root: Path | None = None) -> bool:
    from latentcode.pipelines.results import read_results_csv

    table = (root or ROOT) / FUZZY_TABLE
    variant, seed = name.split("-")[1], int(name.split("-")[2].removeprefix("s"))
    found = {r.split for r in (read_results_csv(table) if table.is_file() else [])
             if r.variant == variant and r.seed == seed and r.finished}
    return {"test", "ood"} <= found


def restore() -> list[str]:
    """Copy stashed resume state into runs/ where runs/ has none or an older step; returns the restored runs."""
    restored = []
    for stash in sorted(STASH.iterdir()) if STASH.is_dir() else ():
        run = run_dir(stash.name)
        if _state(stash).get("step", 0) > _state(run).get("step", 0) and not is_locked(point(stash.name), LOCKS):
            run.mkdir(parents=True, exist_ok=True)
            for name in RESUME_FILES:
                if (stash / name).is_file():
                    shutil.copy2(stash / name, run / name)
            restored.append(stash.name)
    return restored


def lane(threads: int = 1) -> None:
    """Train queued runs one after another until none is left or one stops (runs in the background; `start`
    launches it): the sweep's queue, `train_lane`, over the queue's points, each trainer on `threads` threads."""
    groups: list[list[SweepPoint]] = []
    for name in QUEUE:  # consecutive runs with the same cadence flags train as one group, in the queue's order
        if not groups or _cadence(groups[-1][-1].name) != _cadence(name):
            groups.append([])
        groups[-1].append(point(name))
    for points in groups:
        results = train_lane(points, locks=LOCKS, logs=LOGS, threads=threads, done=lambda p: done(p.name),
                             **_cadence(points[0].name))
        if results and results[-1].status != "done":
            print(f"{results[-1].point.name} {results[-1].status} (exit status {results[-1].returncode}); see "
                  f"{results[-1].log}", file=sys.stderr)
            return


def start(lanes: int, threads: int = 1) -> None:
    if lanes < 1 or threads < 1:
        raise SystemExit(f"--lanes and --threads must be at least 1 (got {lanes} and {threads})")
    restored = restore()
    if restored:
        print("restored from", STASH.relative_to(ROOT), ":", ", ".join(restored))
    LOGS.mkdir(parents=True, exist_ok=True)
    for i in range(lanes):
        with (LOGS / f"lane{i}.log").open("a") as log:
            subprocess.Popen(["nice", "-n", "5", sys.executable, __file__, "lane", "--threads", str(threads)],
                             stdout=log, stderr=log,
                             start_new_session=True, cwd=ROOT)
        time.sleep(2)  # the first lane takes its run before the second looks
    print(f"{lanes} lane(s) of {threads} thread(s) started; logs in {LOGS.relative_to(ROOT)}")


def stash(timeout: float = 120.0) -> None:
    """Stop the lanes and trainings (each writes a checkpoint), then copy every unfinished run's resume state.
    The lanes and trainers are those named in the held lock files of runs/.locks (a lane that records only its own
    id: its child processes), so no other training of the machine is touched."""
    if not stop_lanes(LOCKS, timeout):
        raise SystemExit("trainings still running after SIGTERM; stash again once they have exited")
    stash_state()


def stash_state() -> list[str]:
    """Copy the resume state of every unfinished run to STASH/<run>/, and of every finished SRAVEN run that has not
    shipped yet (so a fresh clone still has its final weights); drop the stash of a run that has shipped. Returns
    the runs stashed. Warns about snapshots whose emergence rows are not in results/ yet: snapshots stay on this
    machine, so a fresh one could never analyse them."""
    stashed = []
    for run in map(run_dir, QUEUE):
        # the checkout the stash belongs to (the main one, from a worktree whose in-progress folder links there)
        missing = sorted(campaign_results.snapshot_steps(run)
                         - campaign_results.committed_steps(_campaign(), run.name, STASH.resolve().parents[1]))
        if missing:
            print(f"{run.name}: the snapshots of step {', '.join(map(str, missing))} have no emergence rows in "
                  f"{EMERGENCE} yet, and snapshots are not stashed: run `python sweeps/cpu_campaign.py results` and "
                  "commit results/ before this machine goes", file=sys.stderr)
        state = _state(run)
        target = STASH / run.name
        if not state:
            continue
        if state.get("finished"):
            # in the checkout the stash resolves to: from a worktree whose in-progress folder links to the main
            # checkout's, that checkout is where `ship` and `results` wrote
            if recorded(run.name, STASH.resolve().parents[1]):
                if target.is_dir():
                    shutil.rmtree(target)  # its checkpoint or its table rows keep it, not resume state
                continue
            todo = (f"`python sweeps/cpu_campaign.py results`, `git add {FUZZY_TABLE}`" if run.name in ABLATIONS
                    else f"`python sweeps/cpu_campaign.py ship`, `git add checkpoints/{shipped_name(run.name)}`")
            print(f"{run.name} is finished but its result is not committed yet: run {todo}, then stash again (its "
                  "state is kept meanwhile)", file=sys.stderr)
        target.mkdir(parents=True, exist_ok=True)
        for name in RESUME_FILES:
            shutil.copy2(run / name, target / name)
        print(f"stashed {run.name} at step {state['step']}" + (" (finished)" if state.get("finished") else ""))
        stashed.append(run.name)
    return stashed


def shipped_name(name: str) -> str:
    """The checkpoint folder a finished run `<task>-<variant>-s<seed>` ships as (`pretrained_name`): seed 0 as
    `<task>-<variant>` (issue 19), other seeds as `<task>-<variant>-s<seed>`; a Fig. 2B run, the only seed of its
    setting, as `fuzzy_logic_latent-<variant>` (the paper's logic_latent setting; shipped.json records seed 2024)."""
    from latentcode.rundir.pretrained import pretrained_name

    task, variant, seed = name.split("-")[:3]
    if name in FIG2B:
        return f"{task}_latent-{variant}"
    return pretrained_name(f"{task}-{variant}", int(seed.removeprefix("s")))


def ship() -> list[str]:
    """`latentcode export` every finished run of `SHIPS` that checkpoints/ lacks; returns what it wrote. The export
    evaluates the final weights and records the training command in shipped.json."""
    written = []
    for name in SHIPS:
        run, dest = run_dir(name), ROOT / "checkpoints" / shipped_name(name)
        if not _state(run).get("finished") or dest.exists():
            continue
        train = " ".join(command(name)[2:]).replace(str(ROOT) + "/", "")
        note = f"{train} (a point of: latentcode sweep sweeps/{SWEEP[name]}.yaml, as sweeps/cpu_campaign.py runs it)"
        subprocess.run([sys.executable, "-m", "latentcode", "export", str(run.relative_to(ROOT)),
                        str(dest.relative_to(ROOT)), "--command", note], cwd=ROOT, check=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        written.append(str(dest.relative_to(ROOT)))
    return written


EMERGENCE = Path("results/emergence")
TABLE_A1 = Path("results/table_a1_sraven.csv")
FUZZY_TABLE = Path("results/table_a1_fuzzy_logic.csv")
"""Table A1's fuzzy-logic rows, per seed: the ablation rows join it as they finish (`results`)."""
FIG2B_RESULTS = Path("results/fig2b")
DECODE_ARGS = ["--no-progress"]
"""What `results` passes to `latentcode decode` beside the checkpoint and --out: the task's reading (one query input
shared by all instances, 2,048 instances per split), as the Table A1 runs' Fig. 2B files were made."""
ACCURACY_FIGURE = "docs/images/sraven_accuracy.png"


def _campaign() -> ModuleType:
    """This module as it stands (names patched into it included): the routines of sweeps/campaign_results.py and
    sweeps/campaign_status.py read the campaign's paths and queue from it. The same object whether the script runs
    as __main__ or is imported, so no second copy of the campaign is ever loaded."""
    return sys.modules[__name__]


def results() -> list[str]:
    """Bring the committed results up to the runs here; returns the runs whose results changed
    (`campaign_results.results`)."""
    return campaign_results.results(_campaign())


def table_runs() -> list[str]:
    """What Table A1's SRAVEN CSV is made from (`campaign_results.table_runs`)."""
    return campaign_results.table_runs(_campaign())


speed = campaign_status.speed


def speed_here(name: str) -> tuple[int, float] | None:
    """A queued run's `speed` if a lane of this machine has trained it, else None (`campaign_status.speed_here`)."""
    return campaign_status.speed_here(_campaign(), name)


def status() -> None:
    """One line per queued run, then the queue's hours left (`campaign_status.status`)."""
    campaign_status.status(_campaign())


def queue_hours(speeds: dict[str, tuple[int, float] | None] | None = None) -> campaign_status.QueueHours:
    """Lane-hours the unfinished runs of the queue still need, at speeds measured here and elsewhere, and the runs
    with no speed to price them at (`campaign_status.queue_hours`)."""
    return campaign_status.queue_hours(_campaign(), speeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("status")
    p = sub.add_parser("lane")
    p.add_argument("--threads", type=int, default=1)
    sub.add_parser("ship", help="export every finished SRAVEN and Fig. 2B run to checkpoints/ (seed 0 as "
                                "sraven-<variant>, Fig. 2B as fuzzy_logic_latent-<variant>)")
    sub.add_parser("results", help="emergence rows, Table A1's CSVs, the Fig. 2B decodes and the docs tables, after "
                                   "new snapshots or finished runs")
    p = sub.add_parser("stash", help="stop the trainings and copy their resume state (they stay stopped)")
    p.add_argument("--restart", type=int, metavar="LANES", default=0,
                   help="start this many lanes again once the state is copied (a mid-session stash)")
    p = sub.add_parser("start")
    p.add_argument("--lanes", type=int, default=2)
    p.add_argument("--threads", type=int, default=1,
                   help="threads per lane (`--lanes 1 --threads 2`: the run at the queue's head ends sooner)")
    args = parser.parse_args()
    if args.cmd == "stash":
        stash()
        if args.restart:
            start(args.restart)
        else:
            print("the trainings are stopped; `start --lanes 2` (or `stash --restart 2` next time) resumes them")
        return
    if args.cmd == "results":
        updated = results()
        print("updated:", ", ".join(updated) if updated else "nothing (every snapshot already has its emergence rows)")
        if updated:
            print("next: read the prose of docs/reproduction.md and docs/campaign-log.md against the new tables, then commit results/ and docs/")
        return
    if args.cmd == "ship":
        written = ship()
        print("shipped:", ", ".join(written) if written else "nothing (no finished SRAVEN run without its checkpoint)")
        return
    {"status": status, "lane": lambda: lane(args.threads),
     "start": lambda: start(args.lanes, args.threads)}[args.cmd]()


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # `status | head`
        sys.stderr.close()
