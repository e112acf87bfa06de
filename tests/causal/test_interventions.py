"""Tests of latentcode/causal/interventions.py: cases whose answer is known without running the code under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentcode.causal.interventions import (
    Ablate,
    Site,
    Steer,
    Transplant,
    Zero,
    ablate,
    code_direction,
    intervene,
    site_mask,
    steer,
    transplant,
)
from latentcode.model.hooks import hook_name
from latentcode.model.transformer import Transformer, build_model
from latentcode.tasks.fuzzy_logic import FuzzyLogic
from latentcode.tasks.sraven import SRaven
from probes.decoding.fit import make_probe

TASKS = {"sraven": SRaven, "fuzzy_logic": FuzzyLogic}


def _model(task, variant: str = "hyla", seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return build_model(task, variant, "tiny").eval()


def _codes_ignored(model: Transformer) -> Transformer:
    """Zero every W_O: each attention output is the bias b_O whatever the codes, so the output ignores them."""
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_O.zero_()
            block.attn.b_O.normal_()
    return model


@pytest.mark.parametrize("task_name", list(TASKS))
def test_a_model_that_ignores_its_codes_shows_no_transfer_and_no_ablation_drop(task_name):
    task = TASKS[task_name]()
    model = _codes_ignored(_model(task))
    recipient, donor = task.sample(16, seed=0), task.sample(16, seed=1)
    moved = transplant(model, task, recipient, donor, positions="all", values=True)
    assert torch.equal(moved.outputs, moved.clean_outputs)
    assert torch.equal(moved.prediction, moved.clean_prediction)  # 0% transfer
    for method in ("zero", "mean", "resample"):
        result = ablate(model, task, recipient, method=method)
        assert result.drop == 0.0
        assert torch.equal(result.outputs, result.clean_outputs)


def test_the_same_interventions_do_change_a_model_that_reads_its_codes():
    task = SRaven()
    model = _model(task)
    recipient, donor = task.sample(16, seed=0), task.sample(16, seed=1)
    assert not torch.equal(transplant(model, task, recipient, donor, positions="all").outputs, model(recipient.x))
    assert not torch.equal(ablate(model, task, recipient, method="zero").outputs, model(recipient.x))


@pytest.mark.parametrize("variant", ["softmax", "linear", "hyla"])
def test_every_layers_codes_and_values_from_a_donor_with_the_same_query_give_the_donors_output(variant):
    # SRAVEN's query tokens are all zeros in every instance, so the query positions' residual stream only
    # differs through attention; with every code and value the donor's, it is the donor's exactly.
    task = SRaven()
    model = _model(task, variant)
    recipient, donor = task.sample(16, seed=0), task.sample(16, seed=1)
    assert torch.equal(recipient.x[:, -4:], donor.x[:, -4:])
    result = transplant(model, task, recipient, donor, positions="all", values=True)
    torch.testing.assert_close(result.outputs[:, -4:], donor_outputs := model(donor.x)[:, -4:])
    assert torch.equal(result.prediction, task.predict(model(donor.x)))
    assert not torch.allclose(result.clean_outputs[:, -4:], donor_outputs)  # the two runs differ unpatched
    # without the values (or with one layer left out) the output is not the donor's
    codes_only = transplant(model, task, recipient, donor, positions="all")
    assert not torch.allclose(codes_only.outputs[:, -4:], donor_outputs)
    one_layer = transplant(model, task, recipient, donor, positions="all", values=True, layers=[1])
    assert not torch.allclose(one_layer.outputs[:, -4:], donor_outputs)


def test_fuzzy_logic_with_a_fixed_query_transplants_the_donors_function_exactly():
    task = FuzzyLogic()
    model = _model(task, "hyla")
    recipient = task.sample(16, "ood", seed=0, inputs="fixed_query")
    donor = task.sample(16, "ood", seed=1, inputs="fixed_query")
    assert torch.equal(recipient.x[:, -1], donor.x[:, -1])
    result = transplant(model, task, recipient, donor, positions="all", values=True)
    torch.testing.assert_close(result.prediction, task.predict(model(donor.x)))
    assert torch.equal(result.donor_prediction, task.predict(model(donor.x)))


def test_mean_and_resample_from_a_single_reference_equal_a_transplant_of_that_instance():
    task = FuzzyLogic()
    model = _model(task, "softmax")
    batch = task.sample(8, seed=0)
    single = task.sample(1, seed=5)
    repeated = type(single)(x=single.x.expand(8, -1, -1), y=single.y.expand(8), split=single.split)
    expected = transplant(model, task, batch, repeated, layers=[0], positions="all").outputs
    for method in ("mean", "resample"):
        result = ablate(model, task, batch, method=method, layers=[0], reference=single)
        torch.testing.assert_close(result.outputs, expected)


def test_ablation_shapes_sites_and_the_mean_over_the_reference():
    task = SRaven()
    model = _model(task)
    batch, reference = task.sample(6, seed=0), task.sample(10, seed=3)
    result = ablate(model, task, batch, method="mean", layers=[1], heads=[2], reference=reference)
    assert result.outputs.shape == result.clean_outputs.shape == (6, 36, 8)
    assert result.prediction.shape == (6, 4)
    assert result.sites.shape == (4, 36, 36)
    assert result.sites[2].all() and not result.sites[[0, 1, 3]].any()
    assert result.layers == (1,)
    assert set(result.metrics) == {"loss", "acc", "acc_per_feature"}
    hook = "blocks.1.attn.hook_pattern"
    _, cache = model.run_with_cache(reference.x, names_filter=[hook])
    mean = cache[hook].mean(0)  # [head, query_pos, key_pos]
    head_2_mean = model.run_with_hooks(
        batch.x, fwd_hooks=[(hook, lambda p, hook: torch.cat([p[:, :2], mean[None, 2:3].expand(6, -1, -1, -1), p[:, 3:]], 1))]
    )
    torch.testing.assert_close(result.outputs, head_2_mean)
    # resample draws each instance's codes from the reference with replacement, the same for the same seed
    one = ablate(model, task, batch, method="resample", reference=reference, seed=1)
    two = ablate(model, task, batch, method="resample", reference=reference, seed=1)
    assert torch.equal(one.outputs, two.outputs)
    assert not torch.equal(one.outputs, ablate(model, task, batch, method="resample", reference=reference,
                                               seed=2).outputs)


def test_site_mask_positions():
    sraven, fuzzy = SRaven(), FuzzyLogic()
    paper = site_mask(sraven, 2)
    assert paper.nonzero().tolist() == [[0, 35, 27], [0, 35, 31], [1, 35, 27], [1, 35, 31]]
    row = site_mask(sraven, 2, whole_row=True, heads=[1])
    assert row[1, 35].all() and row.sum() == 36
    assert site_mask(fuzzy, 3).nonzero().tolist() == [[0, 15, 15], [1, 15, 15], [2, 15, 15]]
    features = site_mask(sraven, 1, "all_features")
    assert features.sum() == 8 and features[0, 32, 24] and features[0, 32, 28]
    custom = np.zeros((16, 16), dtype=bool)
    custom[3, 4] = True
    assert site_mask(fuzzy, 1, custom).nonzero().tolist() == [[0, 3, 4]]


def test_steer_by_the_difference_of_two_instances_codes_is_their_transplant():
    task = SRaven()
    model = _model(task, "linear")
    recipient, donor = task.sample(1, seed=0), task.sample(1, seed=1)
    hook = "blocks.1.attn.hook_pattern"
    codes = {}
    for name, batch in (("r", recipient), ("d", donor)):
        _, cache = model.run_with_cache(batch.x, names_filter=[hook])
        codes[name] = cache[hook][0][:, [35]][:, :, [27, 31]]  # [head, 1 query, 2 keys] at the paper positions
    direction = (codes["d"] - codes["r"]).numpy()
    steered = steer(model, task, recipient, direction, layer=1)
    moved = transplant(model, task, recipient, donor, layers=[1])
    torch.testing.assert_close(steered.outputs, moved.outputs)
    zero = steer(model, task, recipient, np.zeros(8), layer=1, alpha=5.0)  # flat [head * query * key]
    assert torch.equal(zero.outputs, zero.clean_outputs)
    assert steered.sites.sum() == 8


def test_code_direction_is_the_gradient_of_the_probe_score_in_code_space():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6)) * np.array([1, 10, 0.1, 3, 1, 5])
    y = (X[:, 1] / 10 + X[:, 2] * 10 > 0).astype(int) + 2 * (X[:, 0] > 1)
    probe = make_probe().fit(X, y)
    eps = 1e-3
    for target in (0, 2):
        direction = code_direction(probe, target)
        base = probe.decision_function(X[:1])[0, target]
        numeric = [(probe.decision_function(X[:1] + eps * np.eye(6)[j])[0, target] - base) / eps for j in range(6)]
        np.testing.assert_allclose(direction, numeric, rtol=1e-3, atol=1e-6)
    assert code_direction(probe, "2", shape=(2, 3)).shape == (2, 3)
    with pytest.raises(ValueError, match="not a class"):
        code_direction(probe, 7)


class _KeepLastModel(Transformer):
    def forward(self, x, keep_last=None):
        return super().forward(x, keep_last=4)


def test_bad_inputs_give_clear_errors():
    task = SRaven()
    model = _model(task)
    batch = task.sample(4, seed=0)
    with pytest.raises(ValueError, match=r"layers=\[2\] out of range: the model has 2 layers"):
        transplant(model, task, batch, task.sample(4, seed=1), layers=[2])
    with pytest.raises(ValueError, match=r"donor x has shape \(3, 36, 8\) but recipient x has \(4, 36, 8\)"):
        transplant(model, task, batch, task.sample(3, seed=1))
    with pytest.raises(ValueError, match=r"heads=\[4\] out of range"):
        ablate(model, task, batch, heads=[4])
    with pytest.raises(ValueError, match="method='median' is not one of zero, mean, resample"):
        ablate(model, task, batch, method="median")
    with pytest.raises(ValueError, match=r"reference x has shape"):
        ablate(model, task, batch, reference=FuzzyLogic().sample(4))
    with pytest.raises(ValueError, match=r"direction has shape \(3,\)"):
        steer(model, task, batch, np.zeros(3), layer=0)
    with pytest.raises(ValueError, match="2 views"):
        steer(model, SRaven(n_features=2), SRaven(n_features=2).sample(2), np.zeros(4), layer=0,
              positions="all_features")
    with pytest.raises(ValueError, match=r"bool \[query_pos, key_pos\] = \[36, 36\]"):
        site_mask(task, 4, np.ones((3, 3), dtype=bool))
    with pytest.raises((ValueError, TypeError), match="Batch"):
        ablate(model, task, batch.x)
    keep_last = _KeepLastModel(model.cfg)
    keep_last.load_state_dict(model.state_dict())
    with pytest.raises(ValueError, match="run the model without keep_last"):
        ablate(keep_last, task, batch, method="zero")


def test_steer_takes_a_flat_torch_direction_like_a_one_layer_probes_features():
    task = SRaven()
    model = _model(task, "linear")
    batch = task.sample(2, seed=0)
    flat = torch.arange(8, dtype=torch.float32)
    shaped = steer(model, task, batch, flat.reshape(4, 1, 2), layer=0, alpha=0.1)
    torch.testing.assert_close(steer(model, task, batch, flat, layer=0, alpha=0.1).outputs, shaped.outputs)
    assert not torch.equal(shaped.outputs, shaped.clean_outputs)


def _set(index, value):
    """A hand-written hook: a copy of the activation with `[index]` set to `value(activation)`."""

    def hook(act, hook):
        out = act.clone()
        out[index] = value(act)
        return out

    return hook


def test_intervene_equals_hand_written_hooks_at_each_kind_of_site():
    task = SRaven()  # 'paper' positions: query 35, keys 27 and 31; 'all_features': queries 32..35
    model = _model(task, "hyla")
    batch, donor, reference = task.sample(6, seed=0), task.sample(6, seed=1), task.sample(9, seed=2)
    _, donor_cache = model.run_with_cache(donor.x)
    _, reference_cache = model.run_with_cache(reference.x)
    index = torch.randint(9, (6,), generator=torch.Generator().manual_seed(4))
    all_ = slice(None)
    cases = [
        (Site("resid_post", layers=0), Transplant(donor), "blocks.0.hook_resid_post",
         _set((all_, 35), lambda a: donor_cache["blocks.0.hook_resid_post"][:, 35])),
        (Site("v", layers=1, heads=[1]), Zero(), "blocks.1.attn.hook_v", _set((all_, [27, 31], 1), lambda a: 0.0)),
        (Site("z", layers=0, positions="all_features"), Ablate("mean", reference), "blocks.0.attn.hook_z",
         _set((all_, slice(32, 36)), lambda a: reference_cache["blocks.0.attn.hook_z"][:, 32:36].mean(0))),
        (Site("value_hidden", layers=1, whole_row=True), Steer(torch.ones(model.cfg.d_head), alpha=0.5),
         "blocks.1.attn.hook_value_hidden", _set((all_, 35), lambda a: a[:, 35] + 0.5)),
        (Site("attn", layers=1, positions={"query": [3], "key": [0, 1]}, heads=2),
         Ablate("resample", reference, seed=4), "blocks.1.attn.hook_pattern",
         _set((all_, 2, 3, slice(0, 2)), lambda a: reference_cache["blocks.1.attn.hook_pattern"][index, 2, 3, :2])),
        (Site("embed", positions="all"), Zero(), "hook_embed", _set((all_,), lambda a: 0.0)),
    ]
    for site, edit, name, manual in cases:
        result = intervene(model, task, batch, [(site, edit)])
        expected = model.run_with_hooks(batch.x, fwd_hooks=[(name, manual)])
        assert torch.equal(result.outputs, expected), name
        assert not torch.equal(result.outputs, result.clean_outputs), name  # the edit does change something
        assert torch.equal(result.clean_outputs, model(batch.x))
        assert result.hook_names == (name,) and result.kind == edit.kind
    # several edits in one run: each at its own hook, the donor cached once
    both = intervene(model, task, batch, [cases[0][:2], cases[1][:2]])
    expected = model.run_with_hooks(batch.x, fwd_hooks=[cases[0][2:], cases[1][2:]])
    assert torch.equal(both.outputs, expected) and torch.equal(both.donor_outputs, model(donor.x))
    assert both.layers == (0, 1) and both.kind == "transplant"


def test_the_wrappers_are_intervene_on_the_codes():
    task = FuzzyLogic()
    model = _model(task, "hyla")
    batch, donor = task.sample(8, seed=0), task.sample(8, seed=1)
    moved = transplant(model, task, batch, donor, layers=[1], positions="all", values=True)
    sites = [(Site(layers=[1], positions="all"), Transplant(donor)),
             (Site("v", layers=[1], positions="all"), Transplant(donor))]
    assert torch.equal(moved.outputs, intervene(model, task, batch, sites).outputs)
    assert moved.hook_names == ("blocks.1.attn.hook_pattern", "blocks.1.attn.hook_v")
    zeroed = ablate(model, task, batch, method="zero", layers=0, heads=[0, 3])
    direct = intervene(model, task, batch, [(Site(layers=0, positions="all", heads=[0, 3]), Zero())])
    assert torch.equal(zeroed.outputs, direct.outputs) and zeroed.kind == "ablate" and direct.kind == "zero"


@pytest.mark.parametrize("function", ["transplant", "ablate", "steer", "site_mask"])
def test_pairs_is_no_longer_a_name_of_positions(function):
    task = SRaven()
    model = _model(task, "linear")
    a, b = task.sample(4, seed=0), task.sample(4, seed=1)
    call = {
        "transplant": lambda **kw: transplant(model, task, a, b, **kw).outputs,
        "ablate": lambda **kw: ablate(model, task, a, method="zero", **kw).outputs,
        "steer": lambda **kw: steer(model, task, a, torch.ones(8), layer=0, **kw).outputs,
        "site_mask": lambda **kw: site_mask(task, 4, **kw),
    }[function]
    positions = {"query": [35], "key": [0, 27]}
    with pytest.raises(TypeError, match="pairs"):
        call(pairs=positions)
    assert call(positions=positions) is not None


def test_bad_sites_and_edits_give_clear_errors_and_leave_no_hook_behind():
    task = SRaven()
    model = _model(task)
    batch = task.sample(2, seed=0)
    with pytest.raises(ValueError, match="hook 'resid_post' has no head axis; leave heads=None"):
        intervene(model, task, batch, [(Site("resid_post", heads=[0]), Zero())])
    with pytest.raises(ValueError, match="hook 'embed' sits outside the blocks; leave layers=None"):
        intervene(model, task, batch, [(Site("embed", layers=0), Zero())])
    with pytest.raises(ValueError, match=r"Site\(hook='mlp_pre'\) is not a short hook name; valid: embed"):
        intervene(model, task, batch, [(Site("mlp_pre"), Zero())])
    with pytest.raises(ValueError, match="at least one"):
        intervene(model, task, batch, [])
    with pytest.raises(ValueError, match=r"Ablate\(method='zero'\) is not one of mean, resample"):
        Ablate("zero")
    with pytest.raises(ValueError, match="value_net='linear' generates no hidden layer"):
        intervene(_model(task, "softmax"), task, batch, [(Site("value_hidden"), Zero())])
    keep_last = _KeepLastModel(model.cfg)
    keep_last.load_state_dict(model.state_dict())
    for site in (Site(), Site("z", layers=1), Site("resid_post", layers=1)):
        with pytest.raises(ValueError, match="run the model without keep_last"):
            intervene(keep_last, task, batch, [(site, Zero())])
        assert not any(hp.fwd_hooks or hp._forward_hooks for hp in keep_last.hook_dict.values())
    assert hook_name("pattern", 1) in intervene(model, task, batch, [(Site(layers=1), Zero())]).hook_names


def test_a_user_defined_edit_runs_like_the_built_in_ones():
    """`Edit` is the extension point: a subclass with `bind` (and `source` when it reads another batch) runs through
    `intervene`, its kind names the result, and it matches the same edit written as a hand-made hook."""
    from dataclasses import dataclass

    import latentcode
    from latentcode.causal.edits import Edit

    @dataclass(frozen=True)
    class Scale(Edit):
        factor: float = 0.5
        kind = "scale"

        def bind(self, batch, cached):
            return lambda act, mask, name: torch.where(mask, self.factor * act, act)

    @dataclass(frozen=True)
    class AddDonor(Edit):  # reads another batch, as Transplant does
        donor: object = None
        kind = "add_donor"

        def source(self, batch):
            return self.donor

        def bind(self, batch, cached):
            return lambda act, mask, name: torch.where(mask, act + cached[name], act)

    assert latentcode.Edit is Edit and latentcode.Zero.__module__ == "latentcode.causal.edits"
    task = SRaven()
    model = _model(task, "hyla")
    batch, donor = task.sample(5, seed=0), task.sample(5, seed=1)
    _, donor_cache = model.run_with_cache(donor.x)
    name = "blocks.1.attn.hook_pattern"  # the default site: the codes at the paper's (query 35; keys 27, 31)

    def scaled(act, hook):
        act = act.clone()
        act[:, :, 35, [27, 31]] *= 0.5
        return act

    def added(act, hook):
        act = act.clone()
        act[:, :, 35, [27, 31]] += donor_cache[name][:, :, 35, [27, 31]]
        return act

    half = intervene(model, task, batch, [(Site(layers=1), Scale(0.5))])
    assert half.kind == "scale" and half.hook_names == (name,)
    assert torch.equal(half.outputs, model.run_with_hooks(batch.x, fwd_hooks=[(name, scaled)]))
    assert not torch.equal(half.outputs, half.clean_outputs)
    nothing = intervene(model, task, batch, [(Site(layers=1), Scale(1.0))])
    assert torch.equal(nothing.outputs, nothing.clean_outputs)
    plus = intervene(model, task, batch, [(Site(layers=1), AddDonor(donor))])
    assert plus.kind == "add_donor" and plus.donor_outputs is None  # only a Transplant reports the donor's outputs
    assert torch.equal(plus.outputs, model.run_with_hooks(batch.x, fwd_hooks=[(name, added)]))
