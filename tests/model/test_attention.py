"""MultiHeadAttention: each normalization, the value networks, attention dropout, the RMSHead backward and in-place
edits in hooks."""

from __future__ import annotations

import pytest
import torch
from transformer_lens.hook_points import HookPoint

from latentcode.config import VARIANTS
from latentcode.model.attention import EditableHookPoint, MultiHeadAttention, _RMSHead
from tests.helpers import ALL_VARIANTS, tiny_model, tiny_model_config


def attention(dtype: torch.dtype = torch.float64, **overrides) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(tiny_model_config(**overrides)).to(dtype).eval()


def codes_for(attn: MultiHeadAttention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, _ = attn.qkv(x)
    scores = attn.scores(q, k)
    return scores, attn.normalize(scores)


def test_rms_head_codes_have_unit_rms_over_heads():
    attn = attention(score_norm="rms_head", value_net="mlp")
    _, pattern = codes_for(attn, torch.randn(3, 6, 16, dtype=torch.float64))
    rms = pattern.square().mean(dim=1).sqrt()  # over head_index, for every (batch, query, key)
    torch.testing.assert_close(rms, torch.ones_like(rms), atol=1e-5, rtol=0)


def test_softmax_rows_sum_to_one():
    attn = attention(score_norm="softmax")
    _, pattern = codes_for(attn, torch.randn(3, 6, 16, dtype=torch.float64))
    torch.testing.assert_close(pattern.sum(dim=-1), torch.ones(3, 4, 6, dtype=torch.float64))
    assert (pattern >= 0).all()


def test_linear_attention_applies_no_normalization():
    attn = attention(score_norm="none")
    scores, pattern = codes_for(attn, torch.randn(3, 6, 16, dtype=torch.float64))
    torch.testing.assert_close(pattern, scores, rtol=0, atol=0)


def test_scores_are_scaled_dot_products_plus_position_bias():
    attn = attention(score_norm="none")
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    q, k, _ = attn.qkv(x)
    expected = torch.einsum("bqhd,bkhd->bhqk", q, k) / attn.cfg.d_head_qk**0.5 + attn.position_bias(6, 6)
    torch.testing.assert_close(attn.scores(q, k), expected)


def test_qkv_are_the_tl_style_projections():
    attn = attention()
    with torch.no_grad():
        for bias in (attn.b_Q, attn.b_K, attn.b_V):
            bias.normal_()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    for got, weight, bias in zip(
        attn.qkv(x), (attn.W_Q, attn.W_K, attn.W_V), (attn.b_Q, attn.b_K, attn.b_V), strict=True
    ):
        torch.testing.assert_close(got, torch.einsum("bpe,hed->bphd", x, weight) + bias)


@pytest.mark.parametrize("norm", ["softmax", "none", "rms_head"])
def test_causal_mask_zeroes_future_keys(norm):
    attn = attention(score_norm=norm, causal=True)
    _, pattern = codes_for(attn, torch.randn(2, 6, 16, dtype=torch.float64))
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert (pattern[..., future] == 0).all()
    assert (pattern[..., ~future] != 0).all()


@pytest.mark.parametrize(
    ("norm", "net", "act"),
    [
        pytest.param("softmax", "linear", "relu", id="softmax-softmax-linear"),
        pytest.param("none", "linear", "relu", id="linear-none-linear"),
        pytest.param("rms_head", "mlp", "relu", id="hyla-rms_head-mlp-relu"),
        pytest.param("none", "mlp", "tanh", id="custom-none-mlp-tanh"),
        pytest.param("softmax", "mlp", "gelu", id="custom-softmax-mlp-gelu"),
    ],
)
def test_dropout_multiplier_acts_as_if_applied_to_the_pattern(norm, net, act):
    """The mlp value network applies `keep` to its hidden products; that must equal dropping the pattern."""
    attn = attention(score_norm=norm, value_net=net, value_act=act, attn_dropout=0.3)
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    _, _, v = attn.qkv(x)
    _, pattern = codes_for(attn, x)
    torch.manual_seed(1)
    keep = attn.dropout_mask(pattern)
    assert set(keep.unique().tolist()) <= {0.0, 1 / 0.7}
    assert keep.shape == (6, 6)  # one [query, key] mask, shared by the batch and the heads
    reference = MultiHeadAttention.value_network(attn, pattern * keep, v)
    torch.testing.assert_close(attn.value_network(pattern, v, keep), reference)


def test_attention_dropout_only_in_training():
    attn = attention(attn_dropout=0.5, score_norm="rms_head", value_net="mlp")
    twin = attention(score_norm="rms_head", value_net="mlp")  # same weights (same seed), no dropout
    twin.load_state_dict(attn.state_dict())
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    torch.testing.assert_close(attn(x), twin(x))  # eval mode: no dropout
    attn.train()
    torch.manual_seed(0)
    dropped = attn(x)
    torch.manual_seed(0)  # the same draw, by hand: pattern times the [query, key] mask, then the value network
    _, _, v = attn.qkv(x)
    _, pattern = codes_for(attn, x)
    keep = attn.dropout_mask(pattern)
    assert (keep == 0).any()
    expected = attn.project_out(MultiHeadAttention.value_network(attn, pattern * keep, v))
    torch.testing.assert_close(dropped, expected)
    assert not torch.allclose(dropped, twin(x))


@pytest.mark.parametrize("query_major", [False, True], ids=["standard-layout", "query-major"])
def test_rms_head_backward_matches_autograd(query_major):
    scores = torch.randn(2, 4, 5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: _RMSHead.apply(s, 1e-6, query_major), (scores,))
    reference = scores / torch.sqrt(scores.square().mean(dim=1, keepdim=True) + 1e-6)
    torch.testing.assert_close(_RMSHead.apply(scores, 1e-6, query_major), reference)


def test_rms_head_with_one_head_is_about_the_sign():
    attn = attention(score_norm="rms_head", value_net="mlp", n_heads=1)
    scores, pattern = codes_for(attn, torch.randn(2, 6, 16, dtype=torch.float64))
    torch.testing.assert_close(pattern, scores / torch.sqrt(scores.square() + 1e-6))
    clear = scores.abs() > 0.05
    torch.testing.assert_close(pattern[clear], torch.sign(scores[clear]), atol=1e-3, rtol=0)


def test_value_hidden_hook_exists_only_for_mlp_value_networks():
    assert hasattr(attention(value_net="mlp"), "hook_value_hidden")
    assert not hasattr(attention(value_net="linear"), "hook_value_hidden")


def test_float32_matches_float64():
    attn64 = attention(score_norm="rms_head", value_net="mlp")
    attn32 = attention(torch.float32, score_norm="rms_head", value_net="mlp")
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    torch.testing.assert_close(attn32(x.float()).double(), attn64(x), atol=1e-5, rtol=1e-4)


def test_initialisation_follows_flax_defaults():
    torch.manual_seed(0)
    cfg = tiny_model_config(d_model=256, n_heads=16, d_qk=128, d_v=128)
    attn = MultiHeadAttention(cfg)
    # lecun normal: variance 1 / fan_in (fan_in = d_model for q, k, v and d_v for the output), truncated at 2 std
    for weight, fan_in in ((attn.W_Q, 256), (attn.W_V, 256), (attn.W_O, 128)):
        assert weight.std().item() == pytest.approx(fan_in**-0.5, rel=0.05)
        assert weight.abs().max().item() <= 2 * fan_in**-0.5 / 0.8796 + 1e-6
    for bias in (attn.b_Q, attn.b_K, attn.b_V, attn.b_O):
        assert (bias == 0).all()
    assert (attn.b_Q.ndim, attn.b_V.ndim, attn.b_O.ndim) == (2, 2, 1)  # weight decay ndim >= 2 hits b_Q/K/V


@pytest.mark.parametrize("net", ["linear", "mlp"])
def test_plain_rms_head_path_matches_the_fused_one(net):
    """`fused_kernels = False` (used under torch.func transforms) must compute the same values and gradients."""
    attn = attention(score_norm="rms_head", value_net=net)
    x = torch.randn(2, 6, 16, dtype=torch.float64, requires_grad=True)
    results = []
    for fused in (True, False):
        attn.fused_kernels = fused
        out = attn(x)
        results.append((out, *torch.autograd.grad(out.square().sum(), [x, attn.W_Q])))
    for fused_value, plain_value in zip(*results, strict=True):
        torch.testing.assert_close(fused_value, plain_value)


# ------------------------------------------------------------------------------------------ in-place hook edits
ATTENTION_HOOKS = ["hook_q", "hook_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_value_hidden", "hook_z"]
EDIT_CASES = [
    pytest.param(variant, site, id=f"{variant}-{site}")
    for variant in ALL_VARIANTS
    for site in ATTENTION_HOOKS
    if site != "hook_value_hidden" or VARIANTS[variant]["value_net"] == "mlp"
]


def zero_first_in_place(activation: torch.Tensor, hook) -> None:
    """The TransformerLens idiom: edit the activation in place and return nothing."""
    activation[:, 0] = 0


def zero_first(activation: torch.Tensor) -> torch.Tensor:
    """The same edit out of place."""
    return torch.cat([torch.zeros_like(activation[:, :1]), activation[:, 1:]], dim=1)


def edited_by_hand(attn: MultiHeadAttention, x: torch.Tensor, site: str) -> torch.Tensor:
    """`attn(x)` written out without hooks, with `zero_first` applied out of place at `site`."""

    def at(name: str, activation: torch.Tensor) -> torch.Tensor:
        return zero_first(activation) if name == site else activation

    q, k, v = attn.qkv(x)
    q, k, v = at("hook_q", q), at("hook_k", k), at("hook_v", v)
    pattern = at("hook_pattern", attn.normalize(at("hook_attn_scores", attn.scores(q, k))))
    if attn.cfg.value_net == "linear":
        z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
    else:
        hidden = at("hook_value_hidden", attn.act(torch.einsum("bhqk,bkhd->bqkd", pattern, v)))
        z = torch.einsum("bhqk,bqkd->bqhd", pattern, hidden)
    return attn.project_out(at("hook_z", z))


def outputs_and_gradients(module: torch.nn.Module, run, x: torch.Tensor) -> list[torch.Tensor]:
    x = x.clone().requires_grad_()
    out = run(x)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)  # a loss that sees every output
    return [out, *torch.autograd.grad((out * weights).sum(), [x, *module.parameters()], allow_unused=True)]


def assert_all_close(got: list[torch.Tensor | None], expected: list[torch.Tensor | None]) -> None:
    for g, e in zip(got, expected, strict=True):
        assert (g is None) == (e is None)
        if g is not None:
            torch.testing.assert_close(g, e)


@pytest.mark.parametrize(("variant", "site"), EDIT_CASES)
def test_in_place_hook_edit_takes_effect_and_gradients_flow(variant, site):
    """`activation[:, 0] = 0` in a forward hook, with gradients on, equals the same edit made out of place in a
    hand-written forward pass: outputs and the gradients of the input and every parameter."""
    attn = attention(**VARIANTS[variant])
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    hook_point = getattr(attn, site)
    hook_point.add_hook(zero_first_in_place)
    try:
        hooked = outputs_and_gradients(attn, attn, x)
    finally:
        hook_point.remove_hooks("fwd")
    expected = outputs_and_gradients(attn, lambda x: edited_by_hand(attn, x, site), x)
    assert_all_close(hooked, expected)
    assert not torch.allclose(hooked[0], attn(x))  # the edit changed the output


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_in_place_edits_in_run_with_hooks_match_out_of_place_edits(variant):
    """Through the model, in every layer at once: an in-place edit and a returned edited copy agree, outputs and
    gradients, for each attention hook (including keep_last, where the last block's q is a slice)."""
    model = tiny_model(variant).double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    for site in ATTENTION_HOOKS:
        if f"blocks.0.attn.{site}" not in model.hook_dict:
            continue
        names = lambda name, site=site: name.endswith(site)  # noqa: E731
        for keep_last in (None, 2):
            def run(x, edit, keep_last=keep_last, names=names):
                return model.run_with_hooks(x, keep_last, fwd_hooks=[(names, edit)])

            in_place = outputs_and_gradients(model, lambda x, run=run: run(x, zero_first_in_place), x)
            copied = outputs_and_gradients(model, lambda x, run=run: run(x, lambda a, hook: zero_first(a)), x)
            assert_all_close(in_place, copied)


def test_an_in_place_pattern_edit_leaves_the_cached_scores_alone():
    """Linear attention's pattern is its scores tensor; with gradients on, the hook edits a copy, so
    hook_attn_scores keeps its values (as in TransformerLens, where the two are different tensors)."""
    attn = attention(score_norm="none")
    seen = {}
    attn.hook_attn_scores.add_hook(lambda scores, hook: seen.setdefault("scores", scores))
    attn.hook_pattern.add_hook(zero_first_in_place)
    try:
        attn(torch.randn(2, 6, 16, dtype=torch.float64))
    finally:
        attn.hook_attn_scores.remove_hooks("fwd")
        attn.hook_pattern.remove_hooks("fwd")
    assert (seen["scores"][:, 0] != 0).all()


def test_the_copy_is_made_only_for_hooks_on_a_graph():
    """No forward hook (training) or no autograd graph (`torch.no_grad`, extraction): the activation passes through
    itself, so those forward passes are bitwise what plain HookPoints compute. A hook on a graph gets a copy."""
    hook_point = EditableHookPoint()
    x = torch.randn(3, 4, requires_grad=True)
    assert hook_point(x) is x
    hook_point.add_hook(lambda a, hook: None)
    copied = hook_point(x)
    assert copied is not x and torch.equal(copied, x)
    with torch.no_grad():
        made_without_grad = x * 2
        assert hook_point(made_without_grad) is made_without_grad

    for variant in ("softmax", "linear", "hyla"):
        attn = attention(torch.float32, **VARIANTS[variant]).train()
        x = torch.randn(2, 6, 16)
        editable = outputs_and_gradients(attn, attn, x)
        for name, module in list(attn.named_children()):
            if isinstance(module, EditableHookPoint):
                setattr(attn, name, HookPoint())
        plain = outputs_and_gradients(attn, attn, x)
        for e, p in zip(editable, plain, strict=True):
            assert torch.equal(e, p)


def test_in_place_edits_without_gradients_change_the_output_as_with_them():
    """Under `torch.no_grad` the hooks edit the activation itself; the output is the one the edit gives with
    gradients on."""
    model = tiny_model("hyla").double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    for site in ATTENTION_HOOKS:
        hooks = [(lambda name, site=site: name.endswith(site), zero_first_in_place)]
        with torch.no_grad():
            without_grad = model.run_with_hooks(x, fwd_hooks=hooks)
        torch.testing.assert_close(without_grad, model.run_with_hooks(x, fwd_hooks=hooks).detach())
