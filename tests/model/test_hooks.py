"""Tests of latentcode/model/hooks.py: `hook_name` against every model's own `hook_dict` and against
TransformerLens' `get_act_name`, and the `hooks` context manager leaving nothing attached, whatever happens inside
it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformer_lens.utilities import get_act_name

from latentcode.model.hooks import (
    HOOK_ALIASES,
    HOOK_NAMES,
    check_hook_names,
    hook_name,
    hooks,
    split_hook_name,
)
from tests.helpers import ALL_VARIANTS, tiny_model

TL_NAMES = ["embed", "resid_pre", "q", "k", "v", "attn_scores", "pattern", "z", "attn_out", "resid_mid", "mlp_out",
            "resid_post", "normalized"]
"""The short names TransformerLens' `get_act_name` knows and this model has."""


def _attached(model) -> int:
    """Hooks attached to the model's hook points; 0 only if torch holds none either."""
    handles = sum(len(hp.fwd_hooks) + len(hp.bwd_hooks) for hp in model.hook_dict.values())
    in_torch = sum(len(hp._forward_hooks) + len(hp._backward_hooks) for hp in model.hook_dict.values())
    return handles if handles or not in_torch else -in_torch


def _expected(short: str, model) -> bool:
    if short == "value_hidden":
        return model.cfg.value_net == "mlp"
    if short == "router":
        return bool(model.cfg.n_experts)
    return True


@pytest.mark.parametrize("variant", [pytest.param(v, id=v) for v in ALL_VARIANTS])
def test_hook_name_makes_exactly_the_models_hook_dict(variant):
    model = tiny_model(variant, n_layers=3)
    made = set()
    for short in HOOK_NAMES:
        if not _expected(short, model):
            continue
        if short in ("embed", "normalized"):
            made.add(hook_name(short))
        else:
            made.update(hook_name(short, layer) for layer in range(model.cfg.n_layers))
    assert made == set(model.hook_dict)
    for name in model.hook_dict:
        short, layer = split_hook_name(name)
        assert hook_name(short, layer) == name
        assert hook_name(name) == name  # a full name passes through unchanged


@pytest.mark.parametrize("short", TL_NAMES)
def test_hook_name_agrees_with_transformer_lens_get_act_name(short):
    layers = [None] if short in ("embed", "normalized") else [0, 5]
    for layer in layers:
        assert hook_name(short, layer) == get_act_name(short, layer)


def test_transformer_lens_aliases_compact_names_and_attribute_names():
    for alias, short in HOOK_ALIASES.items():
        assert hook_name(alias, 1) == hook_name(short, 1) == get_act_name(alias, 1)
    assert hook_name("pattern", 0) == "blocks.0.attn.hook_pattern"
    assert hook_name("v", 1) == "blocks.1.attn.hook_v"
    assert hook_name("value_hidden", 0) == "blocks.0.attn.hook_value_hidden"
    assert hook_name("resid_pre", 2) == "blocks.2.hook_resid_pre"
    assert hook_name("router", 1) == "blocks.1.mlp.hook_router"
    assert hook_name("k6") == get_act_name("k6") == "blocks.6.attn.hook_k"
    assert hook_name("resid_post3") == "blocks.3.hook_resid_post"
    assert hook_name("hook_pattern", 2) == "blocks.2.attn.hook_pattern"
    assert hook_name("hook_embed") == "hook_embed"
    assert hook_name("pattern", np.int64(1)) == "blocks.1.attn.hook_pattern"  # a numpy integer layer


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(("pre", 0), r"no hook named 'pre'.*Valid short names: attn, attn_logits", id="tl-mlp-pre"),
        pytest.param(("patern", 0), r"Did you mean 'pattern'", id="typo"),
        pytest.param(("pattern",), r"sits in every block; pass its layer", id="no-layer"),
        pytest.param(("embed", 0), r"outside the blocks.*layer=None", id="layer-outside-blocks"),
        pytest.param(("pattern", -1), r"layer=-1 is negative", id="negative"),
        pytest.param(("pattern", True), r"pass its layer", id="bool-layer"),
        pytest.param(("blocks.0.attn.hook_pattern", 0), r"a full name carries its layer", id="full-and-layer"),
        pytest.param(("blocks.0.attn.hook_attn",), r"no hook named 'blocks.0.attn.hook_attn'", id="unknown-full"),
    ],
)
def test_hook_name_rejects_what_the_model_cannot_have(args, message):
    with pytest.raises(ValueError, match=message):
        hook_name(*args)


def test_check_hook_names_says_why_a_name_is_missing():
    softmax = tiny_model("softmax")
    check_hook_names(softmax, list(softmax.hook_dict))
    with pytest.raises(ValueError, match=r"value_net='linear' generates no hidden layer"):
        check_hook_names(softmax, [hook_name("value_hidden", 0)])
    with pytest.raises(ValueError, match=r"no mixture of experts"):
        check_hook_names(softmax, [hook_name("router", 0)])
    with pytest.raises(ValueError, match=r"the model has 2 layers, numbered 0..1"):
        check_hook_names(softmax, [hook_name("pattern", 2)])
    with pytest.raises(ValueError, match=r"did you mean 'blocks.0.attn.hook_pattern'"):
        check_hook_names(softmax, ["blocks.0.attn.hook_patern"])


def test_hooks_run_inside_the_block_and_are_gone_after_it():
    model = tiny_model("hyla")
    x = torch.randn(3, 6, 5)
    name = hook_name("pattern", 1)
    with hooks(model, fwd_hooks=[(name, lambda pattern, hook: torch.zeros_like(pattern))]) as hooked:
        assert hooked is model and _attached(model) > 0
        zeroed = model(x)
    manual = model.run_with_hooks(x, fwd_hooks=[(name, lambda pattern, hook: torch.zeros_like(pattern))])
    assert torch.equal(zeroed, manual) and not torch.equal(zeroed, model(x))
    assert _attached(model) == 0


def test_an_exception_inside_the_block_or_inside_a_hook_leaves_no_hook_attached():
    model = tiny_model("hyla")
    x = torch.randn(2, 6, 5)
    with pytest.raises(RuntimeError, match="inside the block"):
        with hooks(model, fwd_hooks=[(hook_name("v", 0), lambda v, hook: v), (lambda n: "resid" in n,
                                                                                lambda a, hook: None)]):
            assert _attached(model) > 2
            raise RuntimeError("inside the block")
    assert _attached(model) == 0

    def broken(pattern, hook):
        raise KeyError("a hook that fails mid-forward")

    with pytest.raises(KeyError, match="mid-forward"):
        with hooks(model, fwd_hooks=[(hook_name("resid_pre", 0), lambda a, hook: a), (hook_name("pattern", 1), broken)]):
            model(x)
    assert _attached(model) == 0
    with pytest.raises(ValueError, match="not a hook of this model"):  # checked before anything is attached
        with hooks(model, fwd_hooks=[(hook_name("pattern", 0), broken), ("blocks.9.attn.hook_pattern", broken)]):
            pass
    assert _attached(model) == 0


def test_nested_blocks_remove_only_their_own_hooks_and_backward_hooks_work_inside():
    model = tiny_model("softmax")
    seen: list[str] = []
    outer = (hook_name("pattern", 0), lambda a, hook: seen.append("outer"))
    inner = (hook_name("pattern", 0), lambda a, hook: seen.append("inner"))
    x = torch.randn(2, 6, 5)
    with hooks(model, fwd_hooks=[outer]):
        with hooks(model, fwd_hooks=[inner]):
            model(x)
        model(x)
        assert _attached(model) == 1
    assert seen == ["outer", "inner", "outer"] and _attached(model) == 0
    grads = []
    with hooks(model, bwd_hooks=[(hook_name("resid_post", 1), lambda grad, hook: grads.append(grad.shape))]):
        model(x).sum().backward()
    assert grads == [torch.Size([2, 6, 16])] and _attached(model) == 0
