"""Lanes: one queue of sweep points trained by several processes, each a lane that takes the next point no other
lane holds (`train_lane`). Lanes share the queue through lock files beside the run directories (`lock_file`),
which also say who trains what (`held_locks`, `is_locked`); each point is the sweep's ordinary `latentcode train
... --resume` process (`latentcode.training.sweep.point_command`), so a point stopped by one lane continues in
the next, bitwise. A long campaign's lanes (sweeps/cpu_campaign.py) are this queue.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from latentcode.training.sweep import PointResult, _status, point_command
from latentcode.training.sweep_grid import SweepPoint
from latentcode.training.train_state import is_finished

__all__ = ["held_locks", "is_locked", "lock_file", "stop_lanes", "train_lane"]

logger = logging.getLogger(__name__)


def lock_file(point: SweepPoint, locks: Path) -> Path:
    """The lock a lane holds while it trains `point`: `<locks>/<name>.lock`, beside the run directories, never in
    one. It holds the lane's process id, and on a second line its trainer's."""
    return Path(locks) / f"{point.name}.lock"


def _held(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def is_locked(point: SweepPoint, locks: Path) -> bool:
    """Whether a lane is training `point` now (its lock is held)."""
    return _held(lock_file(point, locks))


def held_locks(locks: Path) -> dict[str, list[int]]:
    """{point name: [lane pid, trainer pid (once started)]} of every lock held under `locks` (a lock written by a
    lane that records only its own pid gives [lane pid])."""
    found = {}
    for path in sorted(Path(locks).glob("*.lock")) if Path(locks).is_dir() else ():
        if _held(path):
            found[path.stem] = [int(word) for word in path.read_text().split() if word.isdigit()]
    return found


def train_lane(
    points: Sequence[SweepPoint],
    *,
    locks: Path,
    logs: Path,
    threads: int = 1,
    checkpoint_every: int | None = None,
    snapshots: bool = False,
    done: Any = None,
) -> list[PointResult]:
    """One lane of a queue: train the first point that is neither done nor held by another lane, then the next,
    until none is left. Lanes in several processes share `points` through lock files (`lock_file`), so no two
    train one run; each point is an ordinary `latentcode train ... --resume` process (`point_command`), so a point
    stopped earlier continues where it stopped, bitwise.

    A trainer that stops before its point is finished (SIGTERM: it checkpoints between two steps and exits) or
    fails ends the lane, which then takes no other point.

    Args:
        points: the queue, in the order lanes take it.
        locks: folder of the lock files (created).
        logs: folder of each point's log, `<logs>/<name>.log`, appended to (created).
        threads: torch CPU threads of each trainer (also its `OMP_NUM_THREADS`).
        checkpoint_every, snapshots: `point_command`'s.
        done: `done(point) -> bool`, a point that needs no training here (default: its run directory says
            finished).

    Returns:
        What happened to each point this lane trained, in order.
    """
    done = done or (lambda point: is_finished(point.run_dir))
    Path(locks).mkdir(parents=True, exist_ok=True)
    Path(logs).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    results: list[PointResult] = []
    while True:
        for point in points:
            if done(point):
                continue
            with lock_file(point, locks).open("a+") as lock:  # not "w": that would empty a holder's pids
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # another lane has it
                lock.seek(0)
                lock.truncate()
                log = Path(logs) / f"{point.name}.log"
                with log.open("a") as out:
                    trainer = subprocess.Popen(point_command(point, threads=threads, checkpoint_every=checkpoint_every,
                                                             snapshots=snapshots),
                                               stdout=out, stderr=subprocess.STDOUT, env=env)
                    lock.write(f"{os.getpid()}\n{trainer.pid}\n")
                    lock.flush()
                    rc = trainer.wait()
            results.append(PointResult(point, _status(rc, point), rc, log))
            if results[-1].status != "done":
                logger.info("lane: %s %s (exit status %d); see %s", point.name, results[-1].status, rc, log)
                return results
            break
        else:
            return results


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs (an exited one its parent has not reaped yet, a zombie, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): the signal's answer


def stop_lanes(locks: Path, timeout: float = 120.0) -> bool:
    """Stop every lane named in the held locks under `locks` and SIGTERM its trainer, which writes a checkpoint
    between two steps and exits; a lane that recorded only its own id has its child processes stopped. No other
    process of the machine is touched. Returns whether all the trainers exited within `timeout` seconds."""
    trainers = []
    for lane_pid, *trainer in held_locks(locks).values():
        children = subprocess.run(["pgrep", "-P", str(lane_pid)], capture_output=True, text=True).stdout
        trainers += trainer or [int(pid) for pid in children.split()]
        os.kill(lane_pid, signal.SIGKILL)  # the lane only waits on its trainer; it must not start the next run
    for pid in trainers:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(map(_alive, trainers)) and time.monotonic() < deadline:
        time.sleep(1)
    return not any(map(_alive, trainers))
