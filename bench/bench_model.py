"""Model cost per attention variant: forward+backward time and memory, and a bare training-step loop.

Part 1, the paper's SRAVEN model (4 layers, 16 heads, d_model 128, seq 36) in training mode (attention dropout
0.1), batch 128: the wall time of forward + backward of a summed-output loss, the activations autograd
saves for the backward (exact, from saved-tensor hooks, shared storage counted once) and the peak resident memory
a step adds (VmHWM minus VmRSS before the first step, in a fresh process per variant; it includes what the
allocator keeps). Part 2, a bare training loop: forward, the task's loss, backward and
`torch.optim.AdamW(fused=True)` on paper models of both tasks, in steps/s, with outputs at every position and
with `keep_last` (only the positions the loss reads: fuzzy logic 1, SRAVEN 4), beside the speed targets (1.5x
the authors' JAX code on this CPU). Times are the best of `--trials` medians of `--steps` steps, since other
jobs may share the machine. Nothing here is asserted in tests.

    .venv/bin/python bench/bench_model.py [--variants softmax linear hyla ...] [--steps 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

from latentcode.config import VARIANTS
from latentcode.model.transformer import build_model
from latentcode.tasks import get_task

TARGETS = {  # steps/s: 1.5x the authors' JAX code on this 2-core CPU, batch 128
    ("sraven", "softmax"): 7.4, ("sraven", "linear"): 9.5, ("sraven", "hyla"): 5.0,
    ("fuzzy_logic", "softmax"): 53.0, ("fuzzy_logic", "linear"): 62.0, ("fuzzy_logic", "hyla"): 41.0,
}  # fmt: skip


def _setup(task_name: str, variant: str, batch_size: int, device: torch.device):
    task = get_task(task_name)
    torch.manual_seed(0)
    model = build_model(task, variant, "paper").to(device).train()
    batch = task.sample(batch_size, "train", seed=0, device=device)
    return task, model, batch


def _status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (VmRSS: now, VmHWM: peak since exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


CLOCK = time.perf_counter


def _best_median(step, steps: int, trials: int) -> float:
    """The fastest of `trials` medians of `steps` timed calls, in seconds. Other jobs share this machine; the
    best trial is the one they disturbed least."""
    medians = []
    for _ in range(trials):
        times = []
        for _ in range(steps):
            start = CLOCK()
            step()
            times.append(CLOCK() - start)
        medians.append(statistics.median(times))
    return min(medians)


def forward_backward(variant: str, batch_size: int, steps: int, trials: int, device: torch.device) -> dict:
    """Forward+backward time and the bytes of activations saved for the backward."""
    _, model, batch = _setup("sraven", variant, batch_size, device)

    def step() -> None:
        model(batch.x).sum().backward()
        model.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    seconds = _best_median(step, steps, trials)
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(batch.x)
    return {"ms": 1000 * seconds, "saved": sum(storages.values())}


def peak_rss_child(variant: str, batch_size: int) -> None:
    """Run in a fresh process: print the resident memory a forward+backward step adds at its peak."""
    _, model, batch = _setup("sraven", variant, batch_size, torch.device("cpu"))
    before = _status_bytes("VmRSS")  # (ru_maxrss would not do: Linux carries it over from the parent process)
    for _ in range(2):
        model(batch.x).sum().backward()
        model.zero_grad(set_to_none=True)
    print(json.dumps({"peak_rss_added": _status_bytes("VmHWM") - before}))


def peak_rss(variant: str, batch_size: int, threads: int) -> int:
    command = [sys.executable, __file__, "--child", variant, "--batch-size", str(batch_size)]
    command += ["--threads", str(threads)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_rss_added"]


KEEP_LAST = {"fuzzy_logic": 1, "sraven": 4}  # the positions each task's loss reads


def train_steps(
    task_name: str,
    variant: str,
    batch_size: int,
    steps: int,
    trials: int,
    device: torch.device,
    keep_last: int | None,
) -> float:
    """Steps per second of forward + loss + backward + fused AdamW."""
    task, model, batch = _setup(task_name, variant, batch_size, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=True)

    def step() -> None:
        task.loss(model(batch.x, keep_last=keep_last), batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    return 1.0 / _best_median(step, steps, trials)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--tasks", nargs="+", default=["sraven", "fuzzy_logic"], help="part 2's tasks")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per trial (after warm-up)")
    parser.add_argument("--trials", type=int, default=3, help="trials per row; the best median is reported")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or this process's CPU time (all threads summed): with --threads 1, a figure that other "
        "jobs on a busy machine barely disturb",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-train", action="store_true", help="only part 1")
    parser.add_argument("--skip-fwd-bwd", action="store_true", help="only part 2")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        peak_rss_child(args.child, args.batch_size)
        return
    device = torch.device(args.device)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    load = os.getloadavg()[0]
    rows = {}
    for variant in [] if args.skip_fwd_bwd else args.variants:
        rows[variant] = forward_backward(variant, args.batch_size, args.steps, args.trials, device)
        if device.type == "cpu":
            rows[variant]["rss"] = peak_rss(variant, args.batch_size, args.threads)
        print(f"# {variant}: {rows[variant]['ms']:.1f} ms", file=sys.stderr, flush=True)
    reference = rows.get("softmax", {}).get("ms")
    print(f"`{' '.join([os.path.relpath(sys.executable), *sys.argv])}`\n")
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} threads, "
        f"device {device}, batch {args.batch_size}, {args.clock} clock, load average {load:.1f} at the start\n"
    )
    if rows:
        print("| variant | fwd+bwd ms | vs softmax | saved activations MiB | peak RSS added MiB |")
        print("|---|---:|---:|---:|---:|")
    for variant, r in rows.items():
        ratio = f"{r['ms'] / reference:.2f}x" if reference else "-"
        rss = f"{r['rss'] / 2**20:.0f}" if "rss" in r else "-"
        print(f"| {variant} | {r['ms']:.1f} | {ratio} | {r['saved'] / 2**20:.0f} | {rss} |")
    if args.skip_train:
        return
    print("\n| task | variant | steps/s, all outputs | steps/s, keep_last | target | ratio (keep_last) |")
    print("|---|---|---:|---:|---:|---:|")
    for (task_name, variant), target in TARGETS.items():
        if variant not in args.variants or task_name not in args.tasks:
            continue
        full, kept = (
            train_steps(task_name, variant, args.batch_size, args.steps * 2, args.trials, device, keep_last)
            for keep_last in (None, KEEP_LAST[task_name])
        )
        print(
            f"| {task_name} | {variant} | {full:.1f} | {kept:.1f} | {target} | {kept / target:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
