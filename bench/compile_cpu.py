"""Does torch.compile speed up training on a CPU? Steps per CPU-second of one paper-sized fuzzy-logic model
(sequence length 32, batch 128, one thread), eager against `torch.compile(model)`, after untimed warm-up steps
(which include the compilation). Training compiles on CUDA only (`TrainConfig.compile`); this is the measurement
behind that choice. Not a test: nothing here asserts a timing.

    python bench/compile_cpu.py --variants softmax linear hyla --steps 60
"""

from __future__ import annotations

import argparse
import time

import torch

from latentcode.config import model_config, train_config
from latentcode.model.transformer import Transformer
from latentcode.tasks import get_task
from latentcode.training.optim import build_optimizer
from latentcode.training.train_step import step_seeds


def measure(variant: str, compiled: bool, steps: int, seq_len: int) -> tuple[float, float]:
    """(CPU seconds of the 3 warm-up steps, timed steps per CPU-second)."""
    task = get_task("fuzzy_logic", seq_len=seq_len)
    cfg = train_config("fuzzy_logic", "paper", batch_size=128)
    torch.manual_seed(0)
    model = Transformer(model_config(task, variant, "paper")).train()
    optimizer = build_optimizer(model, cfg, torch.device("cpu"))
    forward = torch.compile(model) if compiled else model

    def step(i: int) -> None:
        data_seed, dropout_seed = step_seeds(cfg.seed, 0, i)
        torch.manual_seed(dropout_seed)
        batch = task.sample(cfg.batch_size, "train", seed=data_seed)
        task.loss(forward(batch.x), batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    start = time.process_time()
    for i in range(1, 4):
        step(i)
    warmup = time.process_time() - start
    start = time.process_time()
    for i in range(4, 4 + steps):
        step(i)
    return warmup, steps / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=["softmax", "linear", "hyla"])
    parser.add_argument("--steps", type=int, default=60, help="timed steps per row")
    parser.add_argument("--seq-len", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| variant | eager steps per CPU-s | compiled steps per CPU-s | compiled warm-up (CPU s) |")
    print("|---|---:|---:|---:|")
    for variant in args.variants:
        _, eager = measure(variant, False, args.steps, args.seq_len)
        warmup, compiled = measure(variant, True, args.steps, args.seq_len)
        print(f"| {variant} | {eager:.1f} | {compiled:.1f} | {warmup:.1f} |", flush=True)


if __name__ == "__main__":
    main()
