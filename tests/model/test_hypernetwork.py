"""The hypernetwork view: generated weights, and the explicit per-(query, key) loop equals the batched layer."""

from __future__ import annotations

import pytest
import torch

from latentcode.config import VALUE_ACTS, VARIANTS
from latentcode.model.hypernetwork import hypernetwork_forward, value_network_bias, value_network_weights
from latentcode.model.transformer import Transformer
from tests.helpers import tiny_model_config


def _variant_name(norm: str, net: str, act: str) -> str:
    for name, fields in VARIANTS.items():
        if fields.get("n_heads") or fields.get("n_experts"):
            continue
        if (fields["score_norm"], fields["value_net"]) == (norm, net) and fields.get("value_act", act) == act:
            return name
    return "custom"


GRID = [
    pytest.param(
        norm, net, act, id="-".join([_variant_name(norm, net, act), norm, net] + [act] * (net == "mlp"))
    )
    for norm in ("softmax", "none", "rms_head")
    for net in ("linear", "mlp")
    for act in (VALUE_ACTS if net == "mlp" else ("relu",))
]


def model_for(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(tiny_model_config(seq_len=5, **overrides)).double().eval()
    with torch.no_grad():  # non-zero biases, so the test also covers how b_V and b_O enter
        for block in model.blocks:
            for bias in (block.attn.b_Q, block.attn.b_K, block.attn.b_V, block.attn.b_O):
                bias.normal_(std=0.3)
    return model


@pytest.mark.parametrize("pos_bias", [True, False], ids=["pos_bias", "no_pos_bias"])
@pytest.mark.parametrize(("norm", "net", "act"), GRID)
def test_batched_layer_equals_hypernetwork_loop(norm, net, act, pos_bias):
    model = model_for(score_norm=norm, value_net=net, value_act=act, pos_bias=pos_bias)
    layer, block = 1, model.blocks[1]
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    batched = block.attn(block.ln1(x))
    looped = hypernetwork_forward(model, layer, x)
    torch.testing.assert_close(looped, batched)

    weights = [x, *block.ln1.parameters(), *block.attn.parameters()]
    grad_out = torch.randn_like(batched)
    batched_grads = torch.autograd.grad(batched, weights, grad_out)
    looped_grads = torch.autograd.grad(looped, weights, grad_out)
    for batched_grad, looped_grad in zip(batched_grads, looped_grads, strict=True):
        torch.testing.assert_close(looped_grad, batched_grad)


def test_hypernetwork_loop_matches_with_causal_mask():
    model = model_for(score_norm="rms_head", value_net="mlp", causal=True)
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    torch.testing.assert_close(
        hypernetwork_forward(model, 0, x), model.blocks[0].attn(model.blocks[0].ln1(x))
    )


def test_linear_weights_are_the_code_weighted_sum_of_head_products():
    model = model_for(score_norm="softmax", value_net="linear")
    attn = model.blocks[0].attn
    codes = torch.randn(3, 4, dtype=torch.float64)
    weights = value_network_weights(model, 0, codes)
    assert weights.shape == (3, 16, 16)
    expected = sum(codes[:, h, None, None] * (attn.W_O[h].T @ attn.W_V[h].T) for h in range(4))
    torch.testing.assert_close(weights, expected)
    one_head = value_network_weights(
        model, 0, torch.eye(4, dtype=torch.float64)
    )  # the basis B_h (rank d_head)
    assert [torch.linalg.matrix_rank(basis).item() for basis in one_head] == [attn.cfg.d_head] * 4
    expected_bias = sum(codes[:, h, None] * (attn.W_O[h].T @ attn.b_V[h]) for h in range(4))
    torch.testing.assert_close(value_network_bias(model, 0, codes), expected_bias)


def test_mlp_weights_are_the_two_generated_layers():
    model = model_for(score_norm="rms_head", value_net="mlp")
    attn = model.blocks[1].attn
    codes = torch.randn(5, 7, 4, dtype=torch.float64)
    first, second = value_network_weights(model, 1, codes)
    assert (first.shape, second.shape) == ((5, 7, 2, 16), (5, 7, 16, 2))
    torch.testing.assert_close(first, torch.einsum("...h,hed->...de", codes, attn.W_V))
    torch.testing.assert_close(second[1, 2], sum(codes[1, 2, h] * attn.W_O[h].T for h in range(4)))
    torch.testing.assert_close(value_network_bias(model, 1, codes), codes @ attn.b_V)


def test_bad_layer_or_code_size_raises():
    model = model_for()
    with pytest.raises(ValueError, match=r"layer=2 is out of range; the model has layers 0..1"):
        value_network_weights(model, 2, torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"codes have 3 entries; layer 0 has n_heads=4"):
        value_network_weights(model, 0, torch.zeros(3, dtype=torch.float64))
