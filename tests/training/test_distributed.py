"""Tests of latentcode/training/distributed.py and DDP training: two gloo processes under torchrun train the same
model as one process that sees the same global batches."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
import safetensors.torch
import torch

from latentcode.config import model_config, train_config
from latentcode.constants import MODEL_FILE
from latentcode.rundir.checkpoint import RunConfig, read_metrics
from latentcode.tasks import Batch, get_task
from latentcode.training import distributed
from latentcode.training.train import train
from latentcode.training.train_step import step_seeds


def test_without_torchrun_there_is_one_process(monkeypatch):
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    info = distributed.env_info()
    assert (info.rank, info.world_size, info.enabled, info.is_main) == (0, 1, False, True)
    values = torch.tensor([1.0, 2.0])
    assert distributed.mean_across(values, info) is values


def test_inconsistent_torchrun_variables_are_rejected(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match=r"RANK=2 must lie in \[0, WORLD_SIZE=2\)"):
        distributed.env_info()


def test_a_global_batch_that_does_not_split_evenly_is_rejected(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    task = get_task("fuzzy_logic")
    with pytest.raises(ValueError, match="batch_size=32 is not divisible by the 3 processes"):
        train(
            model_config(task, "softmax", "tiny"), task, train_config("fuzzy_logic", "tiny"), tmp_path / "r"
        )


def _two_rank_batches(task, seed: int):
    """task.sample that returns, for the training split, the global batch two DDP ranks draw together."""
    real, steps = task.sample, itertools.count(1)

    def sample(n, split="train", **kwargs):
        if split != "train":
            return real(n, split, **kwargs)
        step = next(steps)
        halves = [
            real(n // 2, "train", seed=step_seeds(seed, rank, step)[0], device=kwargs.get("device", "cpu"))
            for rank in (0, 1)
        ]
        return Batch(
            x=torch.cat([h.x for h in halves]),
            y=torch.cat([h.y for h in halves]),
            labels={k: torch.cat([h.labels[k] for h in halves]) for k in halves[0].labels},
            split=split,
        )

    return sample


@pytest.mark.slow
def test_two_gloo_processes_match_one_process_on_the_same_global_batches(tmp_path):
    steps = 30
    args = [
        "train",
        "fuzzy_logic",
        "--model",
        "hyla",
        "--preset",
        "tiny",
        "--steps",
        str(steps),
        "--train.log_every=5",
        "--train.eval_every=15",
        "--no-progress",
        "--out",
        str(tmp_path / "ddp"),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "latentcode",
            "-q",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = read_metrics(tmp_path / "ddp")

    task = get_task("fuzzy_logic")
    task.sample = _two_rank_batches(task, seed=0)
    tcfg = train_config("fuzzy_logic", "tiny", steps=steps, log_every=5, eval_every=15)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = train(model_config(task, "hyla", "tiny"), task, tcfg, tmp_path / "single", progress=False)
    finally:
        torch.set_num_threads(threads)

    assert RunConfig.load(tmp_path / "ddp").differences(single.config) == []
    assert [(r["step"], r["split"]) for r in ddp] == [
        (r["step"], r["split"]) for r in single.metrics
    ]  # rank 0 only
    for a, b in zip(ddp, single.metrics, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4), (a, b)
    first, last = single.metrics[0]["loss"], [r for r in single.metrics if r["split"] == "train"][-1]["loss"]
    assert last < first
    ddp_weights = safetensors.torch.load_file(str(tmp_path / "ddp" / MODEL_FILE))
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(ddp_weights[name], value, rtol=1e-4, atol=1e-5, msg=name)
