"""The Transformer: hook names and shapes, caching and hook hygiene, parameter counts, MoE, build_model."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import ActivationCache

from latentcode.config import model_config
from latentcode.model.transformer import MixtureOfExperts, Transformer, build_model
from latentcode.tasks import get_task
from tests.helpers import ALL_VARIANTS, NON_MOE_VARIANTS, TASK_DIMS, tiny_model, tiny_model_config

# Golden hook lists of one-layer models: a rename must show up as a diff here.
HOOKS_LINEAR_VALUE = [
    "blocks.0.attn.hook_attn_scores",
    "blocks.0.attn.hook_k",
    "blocks.0.attn.hook_pattern",
    "blocks.0.attn.hook_q",
    "blocks.0.attn.hook_v",
    "blocks.0.attn.hook_z",
    "blocks.0.hook_attn_out",
    "blocks.0.hook_mlp_out",
    "blocks.0.hook_resid_mid",
    "blocks.0.hook_resid_post",
    "blocks.0.hook_resid_pre",
    "hook_embed",
    "ln_final.hook_normalized",
]
HOOKS_MLP_VALUE = [
    "blocks.0.attn.hook_attn_scores",
    "blocks.0.attn.hook_k",
    "blocks.0.attn.hook_pattern",
    "blocks.0.attn.hook_q",
    "blocks.0.attn.hook_v",
    "blocks.0.attn.hook_value_hidden",
    "blocks.0.attn.hook_z",
    "blocks.0.hook_attn_out",
    "blocks.0.hook_mlp_out",
    "blocks.0.hook_resid_mid",
    "blocks.0.hook_resid_post",
    "blocks.0.hook_resid_pre",
    "hook_embed",
    "ln_final.hook_normalized",
]
GOLDEN_HOOKS = {
    "softmax": HOOKS_LINEAR_VALUE,
    "linear": HOOKS_LINEAR_VALUE,
    "linear_rmshead": HOOKS_LINEAR_VALUE,
    "hyla": HOOKS_MLP_VALUE,
    "hyla_no_rmshead": HOOKS_MLP_VALUE,
    "hyla_linear": HOOKS_MLP_VALUE,
    "hyla_linear_no_rmshead": HOOKS_MLP_VALUE,
    "softmax_hyla": HOOKS_MLP_VALUE,
    "single_head": HOOKS_MLP_VALUE,
    "softmax+moe": sorted([*HOOKS_LINEAR_VALUE, "blocks.0.mlp.hook_router"]),
    "linear+moe": sorted([*HOOKS_LINEAR_VALUE, "blocks.0.mlp.hook_router"]),
    "hyla+moe": sorted([*HOOKS_MLP_VALUE, "blocks.0.mlp.hook_router"]),
}


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_hook_names_are_golden(variant):
    assert sorted(tiny_model(variant, n_layers=1).hook_dict) == GOLDEN_HOOKS[variant]
    names = sorted(tiny_model(variant, n_layers=3).hook_dict)
    assert len(names) == 3 * (len(GOLDEN_HOOKS[variant]) - 2) + 2
    assert "blocks.2.attn.hook_pattern" in names


@pytest.mark.parametrize("variant", ["softmax", "hyla", "hyla+moe"])
def test_hook_shapes(variant):
    model = tiny_model(variant)
    batch, pos, cfg = 3, 6, model.cfg
    out, cache = model.run_with_cache(torch.randn(batch, pos, cfg.d_in))
    assert out.shape == (batch, pos, cfg.d_out)
    expected = {
        "hook_q": (batch, pos, cfg.n_heads, cfg.d_head_qk),
        "hook_k": (batch, pos, cfg.n_heads, cfg.d_head_qk),
        "hook_v": (batch, pos, cfg.n_heads, cfg.d_head),
        "hook_z": (batch, pos, cfg.n_heads, cfg.d_head),
        "hook_attn_scores": (batch, cfg.n_heads, pos, pos),
        "hook_pattern": (batch, cfg.n_heads, pos, pos),
        "hook_value_hidden": (batch, pos, pos, cfg.d_head),
        "hook_router": (batch, pos, cfg.n_experts),
    }
    assert set(cache.keys()) == set(model.hook_dict)
    for name, value in cache.items():
        assert value.shape == expected.get(name.split(".")[-1], (batch, pos, cfg.d_model)), name


def test_run_with_cache_returns_an_activation_cache_with_tl_shorthands():
    model = tiny_model("hyla")
    x = torch.randn(2, 6, 5)
    out, cache = model.run_with_cache(x)
    assert isinstance(cache, ActivationCache)
    torch.testing.assert_close(out, model(x))
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["resid_post", -1] is cache["blocks.1.hook_resid_post"]
    assert cache["normalized"] is cache["ln_final.hook_normalized"]
    torch.testing.assert_close(model.unembed(cache["normalized"]), out)


def test_run_with_cache_names_filter_and_batch_dim():
    model = tiny_model("softmax")
    _, cache = model.run_with_cache(
        torch.randn(1, 6, 5), names_filter=lambda name: name.endswith("hook_pattern")
    )
    assert sorted(cache.keys()) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    _, cache = model.run_with_cache(torch.randn(1, 6, 5), names_filter="hook_embed", remove_batch_dim=True)
    assert list(cache.keys()) == ["hook_embed"] and cache["hook_embed"].shape == (6, 16)
    assert not any(hook.fwd_hooks for hook in model.hook_dict.values())


def test_residual_stream_adds_up():
    model = tiny_model("hyla")
    _, cache = model.run_with_cache(torch.randn(2, 6, 5))
    for i in range(2):
        torch.testing.assert_close(
            cache[f"blocks.{i}.hook_resid_mid"],
            cache[f"blocks.{i}.hook_resid_pre"] + cache[f"blocks.{i}.hook_attn_out"],
        )
        torch.testing.assert_close(
            cache[f"blocks.{i}.hook_resid_post"],
            cache[f"blocks.{i}.hook_resid_mid"] + cache[f"blocks.{i}.hook_mlp_out"],
        )
    torch.testing.assert_close(cache["blocks.1.hook_resid_pre"], cache["blocks.0.hook_resid_post"])


def test_run_with_hooks_patches_and_then_removes_the_hooks():
    model = tiny_model("hyla")
    with torch.no_grad():
        model.blocks[0].attn.b_O.normal_()
    x = torch.randn(2, 6, 5)
    clean = model(x)
    seen = {}

    def zero_codes(pattern, hook):
        return torch.zeros_like(pattern)

    def record(activation, hook):
        seen[hook.name] = activation

    patched = model.run_with_hooks(
        x,
        fwd_hooks=[
            (lambda name: name.endswith("hook_pattern"), zero_codes),
            ("blocks.0.hook_attn_out", record),
        ],
    )
    # zero codes generate a zero value network: the attention sublayer outputs only its out bias
    torch.testing.assert_close(seen["blocks.0.hook_attn_out"], model.blocks[0].attn.b_O.expand(2, 6, -1))
    assert not torch.allclose(patched, clean)
    assert not any(hook.fwd_hooks for hook in model.hook_dict.values())
    torch.testing.assert_close(model(x), clean)


def test_hooks_are_removed_after_an_exception():
    model = tiny_model("softmax")
    x = torch.randn(2, 6, 5)
    clean = model(x)

    def broken(activation, hook):
        raise RuntimeError("broken hook")

    with pytest.raises(RuntimeError, match="broken hook"):
        model.run_with_hooks(x, fwd_hooks=[("blocks.1.attn.hook_pattern", broken)])
    assert not any(hook.fwd_hooks or hook.bwd_hooks for hook in model.hook_dict.values())
    torch.testing.assert_close(model(x), clean)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_keep_last_returns_the_same_last_outputs(variant, causal):
    model = tiny_model(variant, causal=causal).double()
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    full = model(x)
    for keep_last in (1, 4, 6):
        torch.testing.assert_close(
            model(x, keep_last=keep_last), full[:, -keep_last:], rtol=1e-12, atol=1e-12
        )


def test_keep_last_gradients_match_a_loss_on_the_last_positions():
    model = tiny_model("hyla").double()
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    params = list(model.parameters())
    full = torch.autograd.grad(model(x)[:, -2:].square().sum(), params)
    kept = torch.autograd.grad(model(x, keep_last=2).square().sum(), params)
    for a, b in zip(full, kept, strict=True):
        torch.testing.assert_close(b, a)


def test_keep_last_out_of_range_raises():
    with pytest.raises(ValueError, match=r"keep_last=7 must lie in \[1, pos=6\]"):
        tiny_model("softmax")(torch.randn(2, 6, 5), keep_last=7)


def _n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("variant", [v for v in NON_MOE_VARIANTS if v != "single_head"])
def test_paper_parameter_counts_match_the_reference(variant):
    assert _n_params(build_model("fuzzy_logic", variant, "paper", **TASK_DIMS["fuzzy_logic"])) == 151_009
    assert _n_params(build_model("sraven", variant, "paper", **TASK_DIMS["sraven"])) == 402_824


@pytest.mark.parametrize(
    ("width", "n_layers", "expected"),
    [(1, 8, 803_208), (1, 16, 1_603_976), (2, 4, 1_592_072), (4, 4, 6_329_864)],
    ids=["w1-l8", "w1-l16", "w2-l4", "w4-l4"],
)
def test_sraven_counts_across_width_and_depth(width, n_layers, expected):
    cfg = model_config("sraven", "hyla", "paper", width=width, n_layers=n_layers, **TASK_DIMS["sraven"])
    with torch.device("meta"):  # shapes only: skips initialising millions of weights
        model = Transformer(cfg)
    assert _n_params(model) == expected  # spec §3.2: 0.80M, 1.60M, 1.59M, 6.33M


def test_fuzzy_logic_count_grows_256_per_16_positions():
    cfg = model_config("fuzzy_logic", "hyla", "paper", d_in=5, d_out=1, seq_len=32)
    assert _n_params(Transformer(cfg)) == 151_009 + 256


def test_single_head_only_shrinks_the_position_tables():
    # H = 1 keeps d_qk and d_v as totals; the (heads x buckets) bias tables lose (H - 1) rows per layer
    fuzzy = build_model("fuzzy_logic", "single_head", "paper", **TASK_DIMS["fuzzy_logic"])
    assert _n_params(fuzzy) == 151_009 - 2 * 7 * 16
    raven = build_model("sraven", "single_head", "paper", **TASK_DIMS["sraven"])
    assert _n_params(raven) == 402_824 - 4 * 15 * 36


@pytest.mark.parametrize("variant", ["softmax+moe", "linear+moe", "hyla+moe"])
def test_moe_counts(variant):
    # each layer: 5 experts of the dense MLP's 65,920 parameters instead of one, plus a bias-free router
    assert _n_params(build_model("fuzzy_logic", variant, "paper", **TASK_DIMS["fuzzy_logic"])) == 679_649
    assert _n_params(build_model("sraven", variant, "paper", **TASK_DIMS["sraven"])) == 1_460_104
    assert 151_009 + 2 * (4 * 65_920 + 128 * 5) == 679_649


def test_moe_mixes_the_top_k_experts_with_renormalized_router_probabilities():
    torch.manual_seed(0)
    moe = MixtureOfExperts(tiny_model_config(n_experts=4, top_k=2)).double()
    x = torch.randn(2, 3, 16, dtype=torch.float64)
    probs = torch.softmax(moe.router(x), dim=-1)
    top, chosen = probs.topk(2, dim=-1)
    expected = torch.zeros_like(x)
    for b in range(2):
        for p in range(3):
            for weight, e in zip(top[b, p] / top[b, p].sum(), chosen[b, p].tolist(), strict=True):
                expected[b, p] += weight * moe.experts[e](x[b, p])
    torch.testing.assert_close(moe(x), expected)


@pytest.mark.parametrize("variant", NON_MOE_VARIANTS)
def test_every_parameter_gets_a_gradient(variant):
    model = tiny_model(variant).train()
    model(torch.randn(4, 6, 5)).square().mean().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name


def test_dropout_is_active_only_in_training():
    model = tiny_model("hyla", attn_dropout=0.5, dropout=0.2)
    twin = tiny_model("hyla")  # the same architecture without dropout
    twin.load_state_dict(model.state_dict())
    x = torch.randn(2, 6, 5)
    reference = twin(x)
    torch.testing.assert_close(model(x), reference)  # eval mode: dropout is off
    model.train()
    first, second = model(x), model(x)
    assert not torch.allclose(first, reference) and not torch.allclose(first, second)


def test_device_dtype_and_init():
    model = tiny_model("linear")
    assert model.device == torch.device("cpu")
    assert model.double()(torch.randn(2, 6, 5, dtype=torch.float64)).dtype == torch.float64
    assert (model.ln_final.weight == 1).all() and (model.ln_final.bias == 0).all()
    assert (model.embed.bias == 0).all() and (model.blocks[0].mlp.fc_in.bias == 0).all()
    torch.manual_seed(0)
    big = build_model("sraven", "hyla", "paper", **TASK_DIMS["sraven"])
    assert big.blocks[0].mlp.fc_in.weight.std().item() == pytest.approx(128**-0.5, rel=0.05)
    assert big.embed.weight.std().item() == pytest.approx(8**-0.5, rel=0.1)
    assert big.cfg.variant == "hyla" and big.cfg.n_layers == 4


@pytest.mark.parametrize("task_name", ["fuzzy_logic", "sraven"])
def test_builds_from_a_registered_task_and_runs_its_batches(task_name):
    task = get_task(task_name)
    torch.manual_seed(0)
    model = build_model(task_name, "hyla", "tiny")
    assert (model.cfg.d_in, model.cfg.d_out, model.cfg.seq_len) == (task.d_in, task.d_out, task.seq_len)
    assert build_model(task, "softmax", "tiny").cfg.score_norm == "softmax"
    batch = task.sample(8, "train", seed=0)
    loss = task.loss(model(batch.x), batch)
    loss.backward()
    assert torch.isfinite(loss) and model.embed.weight.grad is not None


def test_act_fn_picks_the_mlp_gelu_as_transformer_lens_names_it():
    """'gelu_new' is the tanh approximation (TransformerLens' name), 'gelu' the exact erf form."""
    import math

    x = torch.linspace(-3, 3, 7)
    tanh = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    erf = 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    for act_fn, expected in (("gelu_new", tanh), ("gelu", erf)):
        mlp = Transformer(tiny_model_config(act_fn=act_fn)).blocks[0].mlp
        with torch.no_grad():
            mlp.fc_in.weight.copy_(torch.eye(*mlp.fc_in.weight.shape))
            mlp.fc_out.weight.copy_(torch.eye(*mlp.fc_out.weight.shape))
        got = mlp(torch.zeros(7, mlp.fc_in.in_features).index_copy_(1, torch.tensor([0]), x[:, None]))[:, 0]
        torch.testing.assert_close(got, expected)


# ------------------------------------------------------------------------ TransformerLens ActivationCache methods
def test_cfg_carries_transformer_lens_config_names():
    cfg = tiny_model_config(seq_len=6, d_v=8, n_heads=4)
    assert (cfg.n_ctx, cfg.d_head, cfg.d_vocab, cfg.d_vocab_out) == (6, 2, cfg.d_in, cfg.d_out)
    assert (cfg.act_fn, cfg.attn_only, cfg.normalization_type) == ("gelu_new", False, "LN")
    assert cfg.positional_embedding_type == "relative_bias"
    assert tiny_model_config(pos_bias=False).positional_embedding_type == "none"


@pytest.mark.parametrize("variant", ["softmax", "linear", "hyla"])
def test_decompose_resid_sums_to_the_final_residual_stream(variant):
    model = tiny_model(variant).double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    _, cache = model.run_with_cache(x)
    components, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    final = cache["blocks.1.hook_resid_post"]
    torch.testing.assert_close(components.sum(0), final)
    torch.testing.assert_close(model.unembed(model.ln_final(final)), model(x))  # the stream the readout reads
    torch.testing.assert_close(components[0], model.embed(x))


@pytest.mark.parametrize("variant", ["softmax", "hyla"])
def test_accumulated_resid_is_the_stream_before_each_block_and_at_the_end(variant):
    model = tiny_model(variant).double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    _, cache = model.run_with_cache(x)
    stack, labels = cache.accumulated_resid(return_labels=True, incl_mid=True)
    assert labels == ["0_pre", "0_mid", "1_pre", "1_mid", "final_post"]
    torch.testing.assert_close(stack[0], model.embed(x))
    torch.testing.assert_close(stack[2], model.blocks[0](model.embed(x)))
    torch.testing.assert_close(model.unembed(model.ln_final(stack[-1])), model(x))


@pytest.mark.parametrize("variant", ["softmax", "linear", "hyla", "hyla+moe"])
def test_stack_head_results_split_each_attention_output_over_heads(variant):
    model = tiny_model(variant).double()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.b_O.normal_()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    _, cache = model.run_with_cache(x)
    heads, labels = cache.stack_head_results(layer=2, return_labels=True)
    assert heads.shape == (2 * 4, 2, 6, 16) and labels[:5] == ["L0H0", "L0H1", "L0H2", "L0H3", "L1H0"]
    for layer in range(2):
        per_layer = heads[4 * layer : 4 * (layer + 1)].sum(0) + model.blocks[layer].attn.b_O
        torch.testing.assert_close(per_layer, cache[f"blocks.{layer}.hook_attn_out"])
    with_rest = cache.stack_head_results(layer=2, incl_remainder=True)
    torch.testing.assert_close(with_rest.sum(0), cache["blocks.1.hook_resid_post"])


def test_apply_ln_works_where_transformer_lens_recomputes_the_final_norm_and_fails_clearly_elsewhere():
    model = tiny_model("hyla").double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    _, cache = model.run_with_cache(x)
    normed = cache.accumulated_resid(apply_ln=True)  # recomputes ln_final on each accumulated stream
    torch.testing.assert_close(model.unembed(normed[-1]), model(x))
    torch.testing.assert_close(normed[0], model.ln_final(model.embed(x)))
    for call in (lambda: cache.decompose_resid(apply_ln=True), lambda: cache.stack_head_results(apply_ln=True),
                 lambda: cache.accumulated_resid(layer=1, apply_ln=True)):
        with pytest.raises((KeyError, IndexError)):  # our LayerNorms cache no hook_scale (docs/models.md)
            call()


def test_keep_last_shrinks_the_last_blocks_pattern_to_the_kept_queries():
    """docs/models.md: with keep_last the last block's codes cover the kept queries only; extraction runs the
    model without keep_last, so its codes cover every query."""
    model = tiny_model("hyla").double()
    x = torch.randn(2, 6, 5, dtype=torch.float64)
    _, full = model.run_with_cache(x)
    _, kept = model.run_with_cache(x, keep_last=2)
    assert full["pattern", 1].shape == (2, 4, 6, 6) and kept["pattern", 1].shape == (2, 4, 2, 6)
    assert kept["pattern", 0].shape == (2, 4, 6, 6)  # earlier blocks are unchanged
    torch.testing.assert_close(kept["pattern", 1], full["pattern", 1][:, :, -2:])
    torch.testing.assert_close(kept["pattern", 0], full["pattern", 0])


def test_an_in_place_edit_of_the_router_probabilities_in_a_hook_keeps_gradients_right():
    """The router's softmax keeps its output for the backward pass: the hook must get a copy (as TransformerLens)."""
    torch.manual_seed(0)
    model = Transformer(model_config("sraven", "softmax+moe", "tiny"))
    x = torch.randn(3, 36, 8)

    def in_place(probs, hook):
        probs[..., 0] = 0.0

    def out_of_place(probs, hook):
        return torch.cat([torch.zeros_like(probs[..., :1]), probs[..., 1:]], dim=-1)

    grads = []
    for hook in (in_place, out_of_place):
        model.zero_grad()
        out = model.run_with_hooks(x, fwd_hooks=[("blocks.0.mlp.hook_router", hook)])
        out.square().sum().backward()
        grads.append((out.detach(), model.blocks[0].mlp.router.weight.grad.clone()))
    torch.testing.assert_close(grads[0][0], grads[1][0])
    torch.testing.assert_close(grads[0][1], grads[1][1])
