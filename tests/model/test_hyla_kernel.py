"""The fused HYLA kernel (`latentcode/model/hyla_kernel.py`): it must compute what the plain attention path computes
(the plain path is held to the authors' code by tests/project/test_reference_parity.py), and be used only where it
may be."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from latentcode.config import VARIANTS, TrainConfig, model_config, train_config
from latentcode.model import hyla_kernel
from latentcode.model.attention import MultiHeadAttention, set_fused_attention
from latentcode.model.transformer import Transformer
from latentcode.tasks import get_task
from latentcode.training.train import train
from tests.helpers import tiny_model_config


def hyla_attention(dtype=torch.float64, **overrides) -> MultiHeadAttention:
    torch.manual_seed(0)
    cfg = tiny_model_config(**{**VARIANTS["hyla"], "variant": "hyla", **overrides})
    return MultiHeadAttention(cfg).to(dtype).train()


@pytest.fixture
def kernel_calls(monkeypatch):
    """How many times the fused kernel ran."""
    calls = []
    real = hyla_kernel.HylaCore.apply

    def counted(*args):
        calls.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(hyla_kernel.HylaCore, "apply", counted)
    return calls


def forward_and_grads(attn: MultiHeadAttention, x: torch.Tensor, keep_last: int | None, fused: bool):
    attn.fused_core = fused
    torch.manual_seed(1)  # the same attention-dropout mask on both paths
    out = attn(x, keep_last)
    weights = torch.randn_like(out, generator=torch.Generator().manual_seed(2))
    grads = torch.autograd.grad((out * weights).sum(), [x, *attn.parameters()])
    return out, grads


@pytest.mark.parametrize("keep_last", [None, 2])
@pytest.mark.parametrize("attn_dropout", [0.0, 0.5])
@pytest.mark.parametrize("pos_bias", [True, False])
def test_the_fused_kernel_computes_the_plain_path_in_float64(kernel_calls, keep_last, attn_dropout, pos_bias):
    attn = hyla_attention(attn_dropout=attn_dropout, pos_bias=pos_bias)
    x = torch.randn(3, 6, 16, dtype=torch.float64, requires_grad=True)
    plain = forward_and_grads(attn, x, keep_last, fused=False)
    assert not kernel_calls
    fused = forward_and_grads(attn, x, keep_last, fused=True)
    assert len(kernel_calls) == 1
    torch.testing.assert_close(fused[0], plain[0], rtol=1e-12, atol=1e-13)
    names = ["x", *(name for name, _ in attn.named_parameters())]
    for name, f, p in zip(names, fused[1], plain[1], strict=True):
        torch.testing.assert_close(f, p, rtol=1e-12, atol=1e-12 * float(p.abs().max()), msg=name)


def test_the_fused_kernel_agrees_in_float32_to_rounding():
    """The paper-size layer in float32: the kernel sums in float32 in another order."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(model_config("sraven", "hyla", "paper")).train()
    x = torch.randn(4, 36, 128, requires_grad=True)
    plain = forward_and_grads(attn, x, None, fused=False)
    fused = forward_and_grads(attn, x, None, fused=True)
    assert fused[0].dtype == torch.float32
    torch.testing.assert_close(fused[0], plain[0], rtol=1e-4, atol=1e-5 * float(plain[0].detach().abs().max()))
    for f, p in zip(fused[1], plain[1], strict=True):
        assert float((f - p).abs().max()) <= 1e-5 * float(p.abs().max())


def test_hooks_on_the_codes_and_evaluation_take_the_plain_path(kernel_calls):
    """The kernel never makes the scores, codes or hidden units, so a hook there, evaluation and no_grad passes
    (extraction) must run the plain path; hooks on q, k, v and z still fire on the fused path."""
    attn = hyla_attention()
    attn.fused_core = True
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    seen = []
    for point in ("hook_attn_scores", "hook_pattern", "hook_value_hidden"):
        handle = getattr(attn, point).register_forward_hook(lambda module, args, out: seen.append(out.shape))
        attn(x)
        handle.remove()
    assert len(seen) == 3 and not kernel_calls
    with torch.no_grad():
        attn(x)
    attn.eval()
    attn(x)
    assert not kernel_calls
    attn.train()
    attn.hook_z.register_forward_hook(lambda module, args, out: seen.append(out.shape))
    attn(x)
    assert len(kernel_calls) == 1 and seen[-1] == (2, 6, 4, 2)


@pytest.mark.parametrize("variant", ["softmax", "linear", "hyla_linear", "softmax_hyla", "hyla_no_rmshead"])
def test_other_variants_never_take_the_kernel(kernel_calls, variant):
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(**VARIANTS[variant], variant=variant)).train()
    set_fused_attention(model)
    model(torch.randn(2, 6, 5)).sum().backward()
    assert not kernel_calls


def test_new_runs_fuse_and_runs_written_before_the_field_do_not():
    assert TrainConfig().fused_attention and train_config("sraven", "paper").fused_attention
    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "fused_attention"}
    assert TrainConfig.from_dict(old).fused_attention is False
    assert TrainConfig.from_dict(TrainConfig(fused_attention=False).to_dict()).fused_attention is False


def test_training_with_the_kernel_follows_the_plain_training_run(tmp_path, kernel_calls):
    """A few SRAVEN HYLA steps with and without the kernel: the same model to float32 rounding, and the kernel
    really ran (once per layer and step)."""
    task = get_task("sraven")
    mcfg = model_config(task, "hyla", "tiny")
    tcfg = train_config("sraven", "tiny", steps=6, warmup=1, log_every=2, eval_every=6, checkpoint_every=100)
    torch.set_num_threads(1)
    plain = train(mcfg, task, dataclasses.replace(tcfg, fused_attention=False), tmp_path / "plain", progress=False)
    assert not kernel_calls
    fused = train(mcfg, task, tcfg, tmp_path / "fused", progress=False)
    assert len(kernel_calls) == 6 * mcfg.n_layers
    assert fused.config.train.fused_attention and not plain.config.train.fused_attention
    for (name, a), b in zip(fused.model.state_dict().items(), plain.model.state_dict().values(), strict=True):
        assert float((a - b).abs().max()) <= 1e-4 * max(float(b.abs().max()), 1e-3), name


def test_a_run_written_before_the_field_resumes_on_the_plain_path_bitwise(tmp_path, kernel_calls, caplog):
    """The SRAVEN campaign's HYLA seed 0 case: config.json without `fused_attention`, resumed with today's
    defaults requested. It keeps the plain path (the kernel never runs), ends bitwise where a straight plain run
    ends, and says so at INFO, not as a warning."""
    import json

    import safetensors.torch

    task = get_task("fuzzy_logic")
    mcfg = model_config(task, "hyla", "tiny")
    tcfg = train_config("fuzzy_logic", "tiny", steps=6, warmup=1, log_every=2, eval_every=6, checkpoint_every=100)
    plain_cfg = dataclasses.replace(tcfg, fused_attention=False)
    torch.set_num_threads(1)
    straight = train(mcfg, task, plain_cfg, tmp_path / "straight", progress=False)
    train(mcfg, task, plain_cfg, tmp_path / "old", progress=False, time_limit=0.0)
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    del config["train"]["fused_attention"]  # as the code before the field wrote it
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    with caplog.at_level("INFO", logger="latentcode.training.resume"):
        run = train(mcfg, task, tcfg, tmp_path / "old", resume=True, progress=False)
    assert run.step == 6 and run.config.train.fused_attention is False and not kernel_calls
    kept = [r for r in caplog.records if "fused_attention=False" in r.getMessage()]
    assert kept and all(r.levelname == "INFO" for r in kept)
    a, b = (safetensors.torch.load_file(str(p / "model.safetensors")) for p in (straight.path, run.path))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_transformer_lens_backward_hook_on_the_codes_takes_the_plain_path(kernel_calls):
    """`bwd_hooks` (gradients of the codes, as attribution methods read them) register a full backward hook, which
    the kernel could not serve: that layer runs plain and its hook sees the gradient; the other layer stays fused."""
    torch.manual_seed(0)
    model = Transformer(tiny_model_config(**VARIANTS["hyla"], variant="hyla")).train()
    set_fused_attention(model)
    seen = []
    with model.hooks(bwd_hooks=[("blocks.0.attn.hook_pattern", lambda grad, hook: seen.append(grad.shape))]):
        model(torch.randn(2, 6, 5)).sum().backward()
    assert seen == [(2, 4, 6, 6)] and len(kernel_calls) == 1


def test_a_retained_graph_backs_up_twice_with_the_same_gradients():
    attn = hyla_attention()
    attn.fused_core = True
    x = torch.randn(2, 6, 16, dtype=torch.float64, requires_grad=True)
    loss = attn(x).square().sum()
    first = torch.autograd.grad(loss, x, retain_graph=True)[0]
    torch.testing.assert_close(torch.autograd.grad(loss, x)[0], first, rtol=0, atol=0)
