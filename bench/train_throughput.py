"""Steady-state training throughput of the paper-sized models, beside the authors' JAX code on the same CPU.

One step is what `latentcode.training.train` does per step: seed, sample a batch on the device, forward, backward,
AdamW. Warm-up steps are not timed. Prints a markdown table (the one in docs/benchmarks.md) and, with --profile,
where the time of one model's step goes (torch.profiler). Not a test: nothing here asserts a timing.

    python bench/train_throughput.py                      # every non-MoE variant, both tasks
    python bench/train_throughput.py --moe --seconds 10   # MoE variants too, longer timing windows
    python bench/train_throughput.py --profile sraven hyla
    python bench/train_throughput.py --tasks fuzzy_logic --fuzzy-seq-len 32 --variants softmax linear hyla --threads 1

With --json PATH it also writes the rows, the command and the machine as JSON: `sweeps/cpu_campaign.py status`
prices a queued run that no lane has trained yet at the one-thread steps per CPU-second of results/lane_speeds/*.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from latentcode.config import VARIANTS, model_config, train_config
from latentcode.model.attention import set_fused_attention
from latentcode.model.transformer import Transformer
from latentcode.tasks import get_task
from latentcode.training._allocator import keep_freed_memory
from latentcode.training.optim import build_optimizer, lr_at
from latentcode.training.train_step import make_train_step, step_seeds

JAX_REFERENCE = {  # steps/s of the authors' JAX code on this 2-core CPU, batch 128
    ("sraven", "softmax"): 4.9, ("sraven", "linear"): 6.3, ("sraven", "hyla"): 3.3,
    ("fuzzy_logic", "softmax"): 35.0, ("fuzzy_logic", "linear"): 41.0, ("fuzzy_logic", "hyla"): 27.0,
}
MOE = tuple(v for v in VARIANTS if v.endswith("+moe"))


def setup(task_name: str, variant: str, batch_size: int, device: torch.device, fuzzy_seq_len: int | None = None,
          fused_attention: bool = True):
    # paper defaults (fuzzy logic: seq_len 16; Table A1 uses 32)
    task = get_task(task_name, **({"seq_len": fuzzy_seq_len} if task_name == "fuzzy_logic" and fuzzy_seq_len else {}))
    cfg = train_config(task_name, "paper", batch_size=batch_size, fused_attention=fused_attention)
    torch.manual_seed(0)
    model = Transformer(model_config(task, variant, "paper")).to(device).train()
    set_fused_attention(model, cfg.fused_attention)  # as train() does
    optimizer = build_optimizer(model, cfg, device)
    return task, cfg, model, make_train_step(model, task, optimizer, cfg, device)


def measure(task_name: str, variant: str, *, batch_size: int, warmup: int, seconds: float,
            device: torch.device, fuzzy_seq_len: int | None = None, fused_attention: bool = True) -> dict:
    task, cfg, model, step_fn = setup(task_name, variant, batch_size, device, fuzzy_seq_len, fused_attention)
    sample_s = 0.0

    def one(step: int) -> None:
        nonlocal sample_s
        t0 = time.perf_counter()
        data_seed, dropout_seed = step_seeds(cfg.seed, 0, step)
        torch.manual_seed(dropout_seed)
        batch = task.sample(batch_size, "train", seed=data_seed, device=device)
        sample_s += time.perf_counter() - t0
        step_fn(batch, lr_at(min(step, cfg.steps), cfg))

    for step in range(1, warmup + 1):
        one(step)
    sample_s, steps = 0.0, 0
    start, cpu_start = time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds or steps < 3:
        steps += 1
        one(warmup + steps)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "task": task_name, "seq_len": fuzzy_seq_len if task_name == "fuzzy_logic" else None, "variant": variant,
        "params": sum(p.numel() for p in model.parameters()),
        "steps_per_s": steps / elapsed, "sample_ms": 1000 * sample_s / steps,
        "step_ms": 1000 * elapsed / steps, "cpu_utilization": cpu / elapsed, "steps_per_cpu_s": steps / cpu,
    }


def table(rows: list[dict]) -> str:
    """Markdown table. 'CPU use' is process CPU time / wall time: about the thread count on a quiet machine,
    lower when other jobs take the cores. With one thread, steps per CPU-second estimates the speed the code
    has alone on a core even on a busy machine."""
    lines = ["| task | variant | parameters | steps/s | steps per CPU-s | JAX steps/s | ratio | ratio per CPU-s | "
             "ms/step (sampling) | CPU use |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        # the reference timings are of the tasks' default sizes: a fuzzy-logic row of another length has none
        ref = JAX_REFERENCE.get((r["task"], r["variant"])) if r.get("seq_len") is None else None
        ratio = f"{r['steps_per_s'] / ref:.2f}×" if ref else "—"
        ratio_cpu = f"{r['steps_per_cpu_s'] / ref:.2f}×" if ref else "—"
        lines.append(f"| {r['task']} | {r['variant']} | {r['params']:,} | {r['steps_per_s']:.1f} | "
                     f"{r['steps_per_cpu_s']:.1f} | {ref if ref else '—'} | {ratio} | {ratio_cpu} | "
                     f"{r['step_ms']:.0f} ({r['sample_ms']:.1f}) | {r['cpu_utilization']:.2f} |")
    return "\n".join(lines)


def profile(task_name: str, variant: str, batch_size: int, device: torch.device, fused_attention: bool = True) -> None:
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    task, cfg, model, _ = setup(task_name, variant, batch_size, device, fused_attention=fused_attention)
    optimizer = build_optimizer(model, cfg, device)
    for step in range(1, 4):
        batch = task.sample(batch_size, "train", seed=step, device=device)
        task.loss(model(batch.x), batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for step in range(4, 14):
            with record_function("1 sample"):
                batch = task.sample(batch_size, "train", seed=step, device=device)
            with record_function("2 forward+loss"):
                loss = task.loss(model(batch.x), batch)
            with record_function("3 backward"):
                loss.backward()
            with record_function("4 optimizer"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=30))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["sraven", "fuzzy_logic"])
    parser.add_argument("--variants", nargs="+", default=[v for v in VARIANTS if v not in MOE])
    parser.add_argument("--moe", action="store_true", help="add the mixture-of-experts variants")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--fuzzy-seq-len", type=int, default=None,
                        help="fuzzy-logic sequence length (default: the task's 16; Table A1 uses 32)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--seconds", type=float, default=6.0, help="timed window per row")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--profile", nargs=2, metavar=("TASK", "VARIANT"), help="profile one model instead")
    parser.add_argument("--default-allocator", action="store_true",
                        help="keep glibc's default mmap/trim thresholds (what latentcode.training.train used before 0.2)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write the rows, the command and the machine to this JSON file (a new file)")
    parser.add_argument("--plain-attention", action="store_true",
                        help="train HYLA through the plain torch attention path (fused_attention=False, as runs "
                             "written before it existed)")
    args = parser.parse_args()
    if args.json is not None and (args.json.exists() or not args.json.parent.is_dir()):
        parser.error(f"--json {args.json}: " + ("exists; name a new file" if args.json.exists()
                                                 else "its folder does not exist; create it first"))
    allocator = "glibc defaults" if args.default_allocator else (
        "mallopt thresholds raised" if keep_freed_memory() else "platform default")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.profile:
        profile(*args.profile, args.batch_size, device, fused_attention=not args.plain_attention)
        return
    variants = list(args.variants) + (list(MOE) if args.moe else [])
    rows = []
    for task_name in args.tasks:
        for variant in variants:
            rows.append(measure(task_name, variant, batch_size=args.batch_size, warmup=args.warmup,
                                seconds=args.seconds, device=device, fuzzy_seq_len=args.fuzzy_seq_len,
                                fused_attention=not args.plain_attention))
            r = rows[-1]
            print(f"# {task_name} {variant}: {r['steps_per_s']:.2f} steps/s", flush=True)
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
               f"{torch.get_num_threads()} threads, device {device}, batch {args.batch_size}, load average "
               f"{os.getloadavg()[0]:.1f} at the end, allocator: {allocator}, attention: "
               f"{'plain' if args.plain_attention else 'fused (HYLA on a CPU)'}")
    print(f"\nMachine: {machine}\n")
    print(table(rows))
    if args.json is not None:
        command = shlex.join(["python", "bench/train_throughput.py", *sys.argv[1:]])
        record = {"command": command, "machine": machine, "threads": torch.get_num_threads(),
                  "batch_size": args.batch_size, "rows": rows}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
