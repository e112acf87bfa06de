"""The graph-ready step (`TrainConfig.cuda_graph`): static buffers, masks drawn outside the recorded region."""

import dataclasses

import pytest
import torch

from latentcode.config import TrainConfig, model_config, train_config
from latentcode.rundir.checkpoint import load_run
from latentcode.tasks import get_task
from latentcode.training.ensemble import train_ensemble
from latentcode.training.train import train

STEPS = 8


def _setup(variant, seeds=(0, 1, 2), **model_overrides):
    task = get_task("sraven")
    mcfg = model_config(task, variant, preset="tiny", attn_dropout=0.1, **model_overrides)
    cfgs = [train_config("sraven", "tiny", steps=STEPS, seed=seed, lr=lr, warmup=2, eval_every=STEPS,
                         checkpoint_every=STEPS, log_every=1, device="cpu", fused_attention=False)
            for seed, lr in zip(seeds, (1e-3, 3e-3, 2e-3), strict=False)]
    return task, mcfg, cfgs


def _graphed(cfgs):
    return [dataclasses.replace(cfg, cuda_graph=True) for cfg in cfgs]


def _assert_params_close(a, b, what, rtol=1e-5, atol=1e-6):
    for (name, p), (_, q) in zip(a.model.named_parameters(), b.model.named_parameters(), strict=True):
        if name.endswith("b_K") and a.config.model.variant == "softmax":
            continue  # softmax is invariant to a key bias: its gradient is rounding noise, which Adam amplifies
        torch.testing.assert_close(p, q, rtol=rtol, atol=atol, msg=f"{what}: parameter {name}")


def _train_losses(run):
    return [r["loss"] for r in run.metrics if r["split"] == "train"]


@pytest.mark.parametrize("variant", ["softmax", "linear", "hyla"])
def test_graph_ready_ensemble_follows_the_eager_ensemble(tmp_path, variant):
    # three members with attention dropout and their own learning rates: same batches, masks and AdamW updates
    task, mcfg, cfgs = _setup(variant)
    eager = train_ensemble(mcfg, task, cfgs, [tmp_path / f"e{i}" for i in range(3)], progress=False)
    graphed = train_ensemble(mcfg, task, _graphed(cfgs), [tmp_path / f"g{i}" for i in range(3)], progress=False)
    for i in range(3):
        assert graphed[i].step == eager[i].step == STEPS
        _assert_params_close(graphed[i], eager[i], f"member {i}")
        assert _train_losses(graphed[i]) == pytest.approx(_train_losses(eager[i]), rel=1e-5)
    # the members did not collapse onto one another
    assert not torch.equal(graphed[0].model.unembed.weight, graphed[1].model.unembed.weight)


def test_single_run_with_cuda_graph_follows_the_eager_single_run(tmp_path):
    task, mcfg, cfgs = _setup("hyla", seeds=(1,))
    eager = train(mcfg, task, cfgs[0], tmp_path / "eager", progress=False)
    graphed = train(mcfg, task, _graphed(cfgs)[0], tmp_path / "graphed", progress=False)
    assert graphed.config.train.cuda_graph and not eager.config.train.cuda_graph
    # vmapped and plain kernels round differently; the dropout masks and batches are the same draws
    _assert_params_close(graphed, eager, "single run", rtol=1e-4, atol=1e-5)
    assert _train_losses(graphed) == pytest.approx(_train_losses(eager), rel=1e-4)


def test_resuming_a_graph_ready_run_is_bitwise(tmp_path):
    task, mcfg, cfgs = _setup("hyla", seeds=(0, 1))
    cfgs = _graphed(cfgs)
    straight = train_ensemble(mcfg, task, cfgs, [tmp_path / "s0", tmp_path / "s1"], progress=False)
    dirs = [tmp_path / "c0", tmp_path / "c1"]
    for _ in range(STEPS // 2):  # time_limit=0.0 stops (with a checkpoint) after each step
        train_ensemble(mcfg, task, cfgs, dirs, resume=True, progress=False, time_limit=0.0)
    assert load_run(dirs[0]).step == STEPS // 2
    chunked = train_ensemble(mcfg, task, cfgs, dirs, resume=True, progress=False)
    for a, b in zip(chunked, straight, strict=True):
        assert a.step == b.step == STEPS
        for (name, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
            assert torch.equal(p, q), f"{name} differs after resuming"
        assert _train_losses(a) == _train_losses(b)


def test_cuda_graph_defaults_off_and_old_configs_load_without_it():
    data = TrainConfig().to_dict()
    assert data["cuda_graph"] is False
    del data["cuda_graph"]
    assert TrainConfig.from_dict(data).cuda_graph is False


@pytest.mark.gpu
def test_graph_ready_ensemble_on_cuda_follows_the_eager_ensemble(tmp_path):
    # the captured graph replays from step 3 on; TF32 matmuls make the tolerance loose, the masks are exact
    task, mcfg, cfgs = _setup("hyla")
    cfgs = [dataclasses.replace(cfg, device="cuda") for cfg in cfgs]
    eager = train_ensemble(mcfg, task, cfgs, [tmp_path / f"e{i}" for i in range(3)], progress=False)
    graphed = train_ensemble(mcfg, task, _graphed(cfgs), [tmp_path / f"g{i}" for i in range(3)], progress=False)
    for i in range(3):
        torch.testing.assert_close(_train_losses(graphed[i]), _train_losses(eager[i]), rtol=1e-2, atol=0)


@pytest.mark.gpu
def test_resuming_a_graph_ready_run_on_cuda_is_bitwise(tmp_path):
    task, mcfg, cfgs = _setup("hyla", seeds=(0, 1))
    cfgs = [dataclasses.replace(cfg, device="cuda", cuda_graph=True) for cfg in cfgs]
    straight = train_ensemble(mcfg, task, cfgs, [tmp_path / "s0", tmp_path / "s1"], progress=False)
    dirs = [tmp_path / "c0", tmp_path / "c1"]
    train_ensemble(mcfg, task, cfgs, dirs, progress=False, time_limit=0.0)
    chunked = train_ensemble(mcfg, task, cfgs, dirs, resume=True, progress=False)
    for a, b in zip(chunked, straight, strict=True):
        for (name, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
            assert torch.equal(p, q), f"{name} differs after resuming"
