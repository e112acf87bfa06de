"""Process-group helpers for training one model on several processes (`torchrun` + DDP).

Nothing here starts a process group unless torchrun's `WORLD_SIZE` > 1 is in the environment, so a plain
`latentcode train` stays a single process. Backends: nccl on CUDA, gloo on CPU. Only `train.py` uses this module.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int = 0
    """Global rank; rank 0 writes the run directory."""
    world_size: int = 1
    """Number of processes training the model."""
    local_rank: int = 0
    """Rank on this machine (picks the GPU)."""

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def env_info() -> DistInfo:
    """Rank and world size from torchrun's environment variables (a single process without them).

    Raises:
        ValueError: the variables are not integers or are inconsistent.
    """
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as e:
        raise ValueError(f"WORLD_SIZE/RANK/LOCAL_RANK must be integers ({e})") from e
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} must lie in [0, WORLD_SIZE={world})")
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def init(device_type: str) -> tuple[DistInfo, bool]:
    """Join the process group torchrun set up, if there is one.

    Args:
        device_type: "cuda" selects nccl, anything else gloo.

    Returns:
        (this process's place, whether this call created the group and so should `shutdown` it).
    """
    info = env_info()
    if not info.enabled or dist.is_initialized():
        return info, False
    backend = "nccl" if device_type == "cuda" else "gloo"
    if device_type == "cuda":
        torch.cuda.set_device(info.local_rank)
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=30))
    return info, True


def shutdown() -> None:
    """Leave the process group (a no-op without one)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(info: DistInfo) -> None:
    """Wait for every process (a no-op for a single process)."""
    if info.enabled:
        dist.barrier()


def mean_across(values: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Element-wise mean of `values` over the processes (unchanged for a single process)."""
    if not info.enabled:
        return values
    values = values.clone()
    dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values / info.world_size

