"""TransformerLens drift: the names latentcode, its docs and its notebooks import from TransformerLens, and one hook
round trip through `HookedRootModule`'s API on a tiny latentcode model. A TransformerLens release that moves a name
or changes what a hook sees fails here, naming what broke, before it reaches a user.

The expected tensors come from plain torch hooks (`register_forward_hook`, `torch.autograd.grad`) on the same
`HookPoint` modules, not from TransformerLens."""

from __future__ import annotations

import importlib
from importlib.metadata import version

import pytest
import torch

from latentcode.model.transformer import build_model

USED = [
    ("transformer_lens", "HookedRootModule"),  # latentcode.model.transformer.Transformer's base class
    ("transformer_lens", "ActivationCache"),  # what run_with_cache returns; extract_latent_codes reads it
    ("transformer_lens.hook_points", "HookPoint"),  # every hook of our model
    ("transformer_lens.utilities", "get_act_name"),  # hook_name follows its names (tests/model/test_hooks.py)
    ("transformer_lens.config", "TransformerBridgeConfig"),  # docs/latent-codes.md, notebook 05
    ("transformer_lens.model_bridge", "TransformerBridge"),  # docs/latent-codes.md, notebook 05
    ("transformer_lens.model_bridge.sources", "native"),  # attaches TransformerBridge.boot_native
]
PATTERN = "blocks.0.attn.hook_pattern"


@pytest.mark.parametrize(("module", "name"), USED, ids=[f"{m}.{n}" for m, n in USED])
def test_the_names_we_import_exist(module, name):
    found = getattr(importlib.import_module(module), name, None)
    assert found is not None, (f"transformer_lens {version('transformer-lens')} has no {module}.{name}; latentcode "
                               f"imports it (see the comment in {__name__})")


def test_the_native_bridge_boots():
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.model_bridge.sources import native  # noqa: F401  (attaches boot_native)

    assert callable(getattr(TransformerBridge, "boot_native", None))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model("fuzzy_logic", "hyla", "tiny").eval()


@pytest.fixture(scope="module")
def x(model):
    return torch.randn(3, model.cfg.seq_len, model.cfg.d_in, generator=torch.Generator().manual_seed(1))


def _torch_capture(model, x, name, replace=None):
    """The output and the activation at hook `name`, read with a plain torch forward hook (optionally replacing
    the activation with `replace(activation)`)."""
    seen = {}

    def grab(module, args, output):
        seen["act"] = output
        return None if replace is None else replace(output)

    handle = model.get_submodule(name).register_forward_hook(grab)
    try:
        out = model(x)
    finally:
        handle.remove()
    return out, seen["act"]


def test_our_model_is_a_hooked_root_module_of_hook_points(model):
    from transformer_lens import HookedRootModule
    from transformer_lens.hook_points import HookPoint

    assert isinstance(model, HookedRootModule)
    assert PATTERN in model.hook_dict and "hook_embed" in model.hook_dict
    assert all(isinstance(hp, HookPoint) and hp.name == name for name, hp in model.hook_dict.items())


def test_run_with_cache_returns_what_the_hook_points_see(model, x):
    from transformer_lens import ActivationCache

    with torch.no_grad():
        expected_out, expected_pattern = _torch_capture(model, x, PATTERN)
        out, cache = model.run_with_cache(x)
        _, only = model.run_with_cache(x, names_filter=lambda n: n.endswith("hook_pattern"))
    assert isinstance(cache, ActivationCache)
    torch.testing.assert_close(out, expected_out, rtol=0, atol=0)
    torch.testing.assert_close(cache[PATTERN], expected_pattern, rtol=0, atol=0)
    torch.testing.assert_close(cache["pattern", 0], expected_pattern, rtol=0, atol=0)
    assert sorted(cache.keys()) == sorted(model.hook_dict)
    assert sorted(only.keys()) == [f"blocks.{i}.attn.hook_pattern" for i in range(model.cfg.n_layers)]
    with torch.no_grad():
        _, single = model.run_with_cache(x[:1], remove_batch_dim=True)
    torch.testing.assert_close(single[PATTERN], expected_pattern[0], rtol=0, atol=0)


def test_run_with_hooks_edits_the_activation_and_leaves_nothing_attached(model, x):
    names = []

    def ablate(activation, hook):
        names.append(hook.name)
        return torch.zeros_like(activation)

    with torch.no_grad():
        clean = model(x)
        expected, _ = _torch_capture(model, x, PATTERN, replace=torch.zeros_like)
        out = model.run_with_hooks(x, fwd_hooks=[(PATTERN, ablate)])
        after = model(x)
    assert names == [PATTERN]
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert not torch.allclose(out, clean)  # the edit changed the output, so the comparison above means something
    torch.testing.assert_close(after, clean, rtol=0, atol=0)
    assert not any(hp.fwd_hooks or hp.bwd_hooks for hp in model.hook_dict.values())


def test_a_backward_hook_sees_the_gradient_at_its_hook_point(model, x):
    seen = {}

    def grab_grad(grad, hook):
        seen["grad"] = grad.detach().clone()

    with model.hooks(bwd_hooks=[(PATTERN, grab_grad)], reset_hooks_end=True):
        model(x).square().sum().backward()
    model.zero_grad(set_to_none=True)
    out, pattern = _torch_capture(model, x, PATTERN)
    (expected,) = torch.autograd.grad(out.square().sum(), pattern)
    torch.testing.assert_close(seen["grad"], expected)
    assert not any(hp.fwd_hooks or hp.bwd_hooks for hp in model.hook_dict.values())
