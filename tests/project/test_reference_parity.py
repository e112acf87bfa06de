"""Parity with the authors' JAX code: the reference's initial weights, one batch, and its outputs, loss, gradients
and learning rates (`../shared/reference/`, made by running the reference; its README gives layouts and
tolerances).

The models are built from the *defaults* (`model_config(task, variant, "paper")`, `train_config(task, "paper")`), so
a change of a default that moves away from the reference fails here. The fixtures live beside the repository
(`../shared/reference`, or `$LATENTCODE_REFERENCE`); without them the module skips, except under CI, where they are
required.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from latentcode.config import model_config, train_config
from latentcode.model.transformer import Transformer
from latentcode.tasks import get_task
from latentcode.tasks.base import Batch
from latentcode.training.optim import lr_at

REFERENCE = Path(os.environ.get("LATENTCODE_REFERENCE", Path(__file__).resolve().parents[3] / "shared" / "reference"))
if not (REFERENCE / "README.md").is_file():
    if os.environ.get("CI"):
        raise FileNotFoundError(f"the reference fixtures are missing at {REFERENCE}; CI needs ../shared beside the "
                                "clone (or LATENTCODE_REFERENCE set)")
    pytest.skip(f"no reference fixtures at {REFERENCE} (set LATENTCODE_REFERENCE)", allow_module_level=True)

CASES = [(task, variant) for task in ("fuzzy_logic", "sraven") for variant in ("softmax", "linear", "hyla")]
TASK_PARAMS = {"fuzzy_logic": dict(seq_len=32), "sraven": {}}
READOUT = {"fuzzy_logic": 1, "sraven": 4}


def _load(task: str, variant: str) -> dict[str, np.ndarray]:
    with np.load(REFERENCE / f"{task}_{variant}.npz", allow_pickle=False) as z:
        return {key: z[key] for key in z.files}


def _model(task: str, variant: str, fixture: dict[str, np.ndarray]) -> Transformer:
    cfg = model_config(get_task(task, **TASK_PARAMS[task]), variant, preset="paper")
    model = Transformer(cfg).to(torch.float64)
    params = {k.removeprefix("param/"): torch.from_numpy(v) for k, v in fixture.items() if k.startswith("param/")}
    model.load_state_dict(params, strict=True)
    return model.eval()


def _reference_loss(task: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The reference's loss, in float64 (fixture README, "Port-side settings")."""
    if task == "fuzzy_logic":
        return (out[:, -1, 0] - y).pow(2).mean()
    return F.cross_entropy(out[:, -4:].flatten(0, 1), y.flatten())


def _rel_err(ours: torch.Tensor, ref: np.ndarray) -> float:
    ref_t = torch.from_numpy(ref)
    return float((ours - ref_t).abs().max() / ref_t.abs().max())


@pytest.fixture(scope="module", params=CASES, ids=[f"{t}-{v}" for t, v in CASES])
def parity(request):
    task, variant = request.param
    fixture = _load(task, variant)
    model = _model(task, variant, fixture)
    x, y = torch.from_numpy(fixture["x"]), torch.from_numpy(fixture["y"])
    out = model(x)
    loss = _reference_loss(task, out, y)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return task, variant, fixture, model, out.detach(), loss.detach(), grads


def test_outputs_and_loss_match_the_reference_in_float64(parity):
    task, _, fixture, _, out, loss, _ = parity
    scale = np.abs(fixture["out"]).max()
    assert float((out - torch.from_numpy(fixture["out"])).abs().max()) <= 1e-13 * max(scale, 1.0)
    assert abs(float(loss) - float(fixture["loss"])) <= 1e-14


def test_gradients_match_the_reference(parity):
    _, variant, fixture, _, _, _, grads = parity
    for name, grad in grads.items():
        if name.endswith("position_bias.weight"):
            # the reference computes the bias table in float32 even under x64; grad_x64pos is the float64 gradient
            assert _rel_err(grad, fixture[f"grad_x64pos/{name}"]) <= 1e-12, name
            assert _rel_err(grad, fixture[f"grad/{name}"]) <= 2e-6, name
        elif variant == "softmax" and name.endswith("attn.b_K"):
            # analytically zero (softmax is shift-invariant per query): both sides are round-off
            assert float(grad.abs().max()) <= 1e-15 and np.abs(fixture[f"grad/{name}"]).max() <= 1e-15, name
        else:
            assert _rel_err(grad, fixture[f"grad/{name}"]) <= 1e-12, name


def test_the_training_forward_and_task_loss_agree_with_the_reference(parity):
    """What training computes: `keep_last` outputs and the task's own (float32) loss."""
    task, _, fixture, model, _, _, _ = parity
    k = READOUT[task]
    with torch.no_grad():
        out = model(torch.from_numpy(fixture["x"]), keep_last=k)
    assert float((out - torch.from_numpy(fixture["out"][:, -k:])).abs().max()) <= 1e-13 * max(
        np.abs(fixture["out"]).max(), 1.0)
    task_obj = get_task(task, **TASK_PARAMS[task])
    assert task_obj.n_readout == k
    batch = Batch(x=torch.from_numpy(fixture["x"]), y=torch.from_numpy(fixture["y"]), labels={}, split="train")
    loss = task_obj.loss(out, batch)
    assert abs(float(loss) - float(fixture["loss"])) <= 1e-6


def test_the_default_mlp_uses_the_reference_gelu():
    """The exact GELU moves the outputs by 2e-5 to 6e-4 (fixture README): the default must be the tanh form."""
    fixture = _load("fuzzy_logic", "softmax")
    model = _model("fuzzy_logic", "softmax", fixture)
    x = torch.from_numpy(fixture["x"])
    exact = Transformer(model_config(get_task("fuzzy_logic", seq_len=32), "softmax", "paper", act_fn="gelu"))
    exact = exact.to(torch.float64).eval()
    exact.load_state_dict(model.state_dict())
    with torch.no_grad():
        moved = float((exact(x) - torch.from_numpy(fixture["out"])).abs().max())
    assert moved > 1e-6  # the fixture tells the two forms apart, so the parity tests above test the default


@pytest.mark.parametrize("name, task", [("warmup100_steps50000", "fuzzy_logic"),
                                        ("warmup1000_steps156250", "sraven")])
def test_learning_rate_schedule_matches_optax(name, task):
    """Update k (0-based optimizer count) of the reference applies lr[k]; our step k + 1 completes that update."""
    schedule = json.loads((REFERENCE / "lr_schedule.json").read_text())["schedules"][name]
    cfg = train_config(task, "paper")
    assert (cfg.steps, cfg.warmup, cfg.lr, cfg.lr * cfg.min_lr_ratio) == (
        schedule["train_steps"], schedule["warmup_steps"], schedule["peak_lr"],
        schedule["optax_warmup_cosine_decay_schedule_args"]["end_value"])
    ours = np.array([lr_at(k + 1, cfg) for k in schedule["update_index"]])
    ref = np.array(schedule["lr"])
    assert ours[0] == 0.0
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-10)


@pytest.mark.parametrize("task", ["fuzzy_logic", "sraven"])
def test_hyla_training_through_the_fused_kernel_matches_the_reference(task, monkeypatch):
    """What HYLA training on a CPU runs by default (`TrainConfig.fused_attention`, the numba kernel): the training
    forward (`keep_last`) and gradients, in training mode with attention dropout off, against the reference."""
    from latentcode.model import hyla_kernel
    from latentcode.model.attention import set_fused_attention

    assert train_config(task, "paper").fused_attention
    fixture = _load(task, "hyla")
    cfg = model_config(get_task(task, **TASK_PARAMS[task]), "hyla", preset="paper", attn_dropout=0.0)
    model = Transformer(cfg).to(torch.float64)
    model.load_state_dict(_model(task, "hyla", fixture).state_dict())
    set_fused_attention(model)
    calls = []
    real = hyla_kernel.HylaCore.apply
    monkeypatch.setattr(hyla_kernel.HylaCore, "apply", lambda *args: calls.append(1) or real(*args))
    k = READOUT[task]
    out = model.train()(torch.from_numpy(fixture["x"]), keep_last=k)
    assert len(calls) == cfg.n_layers
    assert float((out.detach() - torch.from_numpy(fixture["out"][:, -k:])).abs().max()) <= 1e-13 * max(
        np.abs(fixture["out"]).max(), 1.0)
    _reference_loss(task, out, torch.from_numpy(fixture["y"])).backward()  # it reads the last READOUT outputs
    for name, p in model.named_parameters():
        key = f"grad_x64pos/{name}" if name.endswith("position_bias.weight") else f"grad/{name}"
        assert _rel_err(p.grad, fixture[key]) <= 1e-12, name
