"""SRAVEN: instances against an independent rule checker, the splits, permutations, ambiguity, metrics."""

from itertools import combinations_with_replacement, permutations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from latentcode.tasks import RULE_NAMES, Batch, SRaven, SRavenConfig, get_task
from tests.tasks.checkers import check_sraven_batch, decode_sraven, sraven_ambiguous


def _rows(array) -> set[tuple[int, ...]]:
    return {tuple(row) for row in np.asarray(array).tolist()}


def _check(task: SRaven, batch, split: str) -> None:
    batch = batch.to("cpu")
    labels = {k: v.numpy() for k, v in batch.labels.items()}
    check_sraven_batch(
        batch.x.numpy(), batch.y.numpy(), labels["rules"], labels["perm"], labels["panels"],
        task.config.n_values, task.compositions(split),
    )


@pytest.fixture(scope="module")
def task() -> SRaven:
    return SRaven()


@pytest.fixture(scope="module")
def ambiguity_batches(task):
    """4096 train and 4096 ood instances with their ambiguity flags (the measured rate is in the report)."""
    return {split: task.sample(4096, split, seed=2024, with_ambiguity=True) for split in ("train", "ood")}


@pytest.mark.parametrize("split", SRaven.splits)
def test_batch_fields_have_the_documented_shapes_and_dtypes(task, split, device):
    batch = task.sample(6, split, seed=0, device=device)
    assert batch.x.shape == (6, 36, 8) and batch.x.dtype == torch.float32
    assert batch.y.shape == (6, 4) and batch.y.dtype == torch.long
    expected = {"rules": (6, 4), "perm": (6, 3, 4), "panels": (6, 3, 3, 4)}
    assert {k: tuple(v.shape) for k, v in batch.labels.items()} == expected
    assert all(v.dtype == torch.long for v in batch.labels.values())
    assert batch.split == split and batch.x.device.type == torch.device(device).type
    assert (task.d_in, task.d_out, task.seq_len) == (8, 8, 36)


def test_rule_names_are_the_reference_order():
    assert RULE_NAMES == (
        "constant", "progression+1", "progression+2", "progression-1", "progression-2",
        "addition", "subtraction", "distribute_three",
    )


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="default"),
        pytest.param({"n_features": 2, "n_values": 5, "frac_ood": 0.3}, id="2features-5values"),
        pytest.param({"n_features": 5, "n_values": 3}, id="5features-3values"),
    ],
)
def test_every_feature_follows_its_rule(params, device):
    task = SRaven(**params)
    for split, n in (("train", 2000), ("test", 500), ("ood", 1000)):
        _check(task, task.sample(n, split, seed=3, device=device), split)
    unpermuted = task.sample(500, "ood", seed=4, device=device, unpermuted=True)
    _check(task, unpermuted, "ood")
    assert (unpermuted.labels["perm"].cpu() == torch.arange(task.config.n_features)).all()


def test_every_rule_and_every_column_permutation_occurs(task):
    batch = task.sample(4000, seed=5)
    assert set(batch.labels["rules"].unique().tolist()) == set(range(8))
    perms = _rows(batch.labels["perm"].flatten(0, 1))
    assert perms == _rows(permutations(range(4)))
    # columns are permuted independently: all three columns agree far less often than 1 in 24 squared
    same = (batch.labels["perm"][:, 0] == batch.labels["perm"][:, 1]).all(-1)
    assert 0.02 < same.float().mean() < 0.07


def test_permute_features_false_keeps_the_sorted_slot_order():
    task = SRaven(permute_features=False)
    batch = task.sample(300, seed=1)
    assert (batch.labels["perm"] == torch.arange(4)).all()
    _check(task, batch, "train")


def test_default_split_holds_out_82_of_330_multisets(task):
    train, ood = _rows(task.compositions("train")), _rows(task.compositions("ood"))
    assert len(train) == 248 and len(ood) == 82 and not train & ood
    assert train | ood == _rows(combinations_with_replacement(range(8), 4))
    assert (task.compositions("test") == task.compositions("train")).all()


def test_no_training_instance_uses_a_held_out_composition(task):
    rules = _rows(task.sample(100_000, "train", seed=6).labels["rules"])
    assert rules <= _rows(task.compositions("train")) and not rules & _rows(task.compositions("ood"))
    assert _rows(task.sample(20_000, "ood", seed=6).labels["rules"]) <= _rows(task.compositions("ood"))


def test_the_split_comes_from_the_task_seed():
    assert (SRaven(seed=2).compositions("ood") == SRaven(seed=2).compositions("ood")).all()
    assert _rows(SRaven(seed=2).compositions("ood")) != _rows(SRaven(seed=3).compositions("ood"))


def test_batches_are_deterministic_per_seed_and_independent_per_split(task):
    a, b = task.sample(64, seed=7), task.sample(64, seed=7)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert all(torch.equal(a.labels[k], b.labels[k]) for k in a.labels)
    assert not torch.equal(a.labels["panels"], task.sample(64, seed=8).labels["panels"])
    assert not torch.equal(a.labels["panels"], task.sample(64, "test", seed=7).labels["panels"])


def test_seed_none_follows_torchs_global_rng(task):
    torch.manual_seed(9)
    first = task.sample(32).x
    torch.manual_seed(9)
    assert torch.equal(first, task.sample(32).x)
    assert not torch.equal(first, task.sample(32).x)


def test_round_trip_restores_the_exact_stored_lists(task):
    data = task.to_dict()
    assert data["name"] == "sraven" and data["params"]["permute_features"] is True
    moved = data["compositions"]["ood"].pop()
    data["compositions"]["train"] = data["compositions"]["train"] + [moved]
    restored = SRaven.from_dict(data)
    assert restored.compositions("train").tolist() == data["compositions"]["train"]
    assert restored.compositions("ood").tolist() == data["compositions"]["ood"]
    assert restored.config == task.config


@pytest.mark.parametrize(
    "edit, message",
    [
        pytest.param(lambda c: c["ood"].append(c["train"][0]), "overlap", id="train-ood-overlap"),
        pytest.param(lambda c: c["train"].append([0, 1, 2, 8]), r"outside \[0, 8\)", id="unknown-rule"),
        pytest.param(lambda c: c["train"].append([3, 1, 2, 2]), "sorted", id="unsorted-row"),
        pytest.param(lambda c: c["ood"].append(c["ood"][0]), "repeat", id="repeated-row"),
        pytest.param(lambda c: c.update(train=[[0, 1]]), r"shape \[m, 4\]", id="wrong-width"),
        pytest.param(lambda c: c.update(ood=[]), "non-empty", id="empty-split"),
        pytest.param(lambda c: c.update(novel_terms=[[0, 1]]), "expected", id="extra-split"),
    ],
)
def test_from_dict_rejects_broken_lists(task, edit, message):
    data = task.to_dict()
    edit(data["compositions"])
    with pytest.raises(ValueError, match=message):
        SRaven.from_dict(data)


@pytest.mark.parametrize(
    "params, message",
    [
        pytest.param({"n_values": 2}, "distribute_three needs 3 distinct values", id="too-few-values"),
        pytest.param({"n_features": 0}, "n_features=0", id="no-features"),
        pytest.param({"n_features": 9}, r"\[1, 8\]", id="too-many-features"),
        pytest.param({"frac_ood": 0.001}, "ood split empty", id="empty-ood"),
        pytest.param({"frac_ood": -0.1}, r"\[0, 1\)", id="negative-frac"),
        pytest.param({"seed": -3}, "seed=-3", id="negative-seed"),
        pytest.param({"grid": 4}, "valid: frac_ood, n_features, n_values, permute_features, seed", id="unknown"),
    ],
)
def test_impossible_parameters_raise(params, message):
    with pytest.raises(ValueError, match=message):
        get_task("sraven", **params)


@pytest.mark.parametrize(
    "call, message",
    [
        pytest.param(lambda t: t.sample(-1), "n=-1", id="n-negative"),
        pytest.param(lambda t: t.sample(4, "novel_terms"), "valid splits: train, test, ood", id="sample-split"),
        pytest.param(lambda t: t.compositions("val"), "unknown split 'val'", id="compositions-split"),
        pytest.param(lambda t: t.predict(torch.zeros(2, 36, 5)), "d_out=8", id="wrong-d_out"),
    ],
)
def test_bad_calls_raise(task, call, message):
    with pytest.raises(ValueError, match=message):
        call(task)


def test_config_is_kept():
    task = get_task("sraven", frac_ood=0.3, seed=1)
    assert task.config == SRavenConfig(frac_ood=0.3, seed=1) and len(task.compositions("ood")) == 99


def _perfect_outputs(batch) -> torch.Tensor:
    values = torch.cat([batch.x[:, :32].argmax(-1), batch.y], dim=1)
    return F.one_hot(values, 8).float() * 10.0


def test_perfect_outputs_score_accuracy_one(task):
    batch = task.sample(64, "ood", seed=0)
    outputs = _perfect_outputs(batch)
    metrics = task.metrics(outputs, batch)
    assert metrics["acc"] == 1.0 and metrics["acc_per_feature"] == 1.0 and metrics["loss"] < 1e-3
    assert torch.equal(task.predict(outputs), batch.y)


def test_one_wrong_feature_fails_the_whole_instance(task):
    batch = task.sample(64, seed=1)
    outputs = _perfect_outputs(batch)
    outputs[:, 33] = F.one_hot((batch.y[:, 1] + 1) % 8, 8).float() * 10.0  # feature 1 of panel 9 wrong
    metrics = task.metrics(outputs, batch)
    assert metrics["acc"] == 0.0 and metrics["acc_per_feature"] == 0.75


def test_loss_is_the_mean_cross_entropy_of_the_query_positions(task):
    batch = task.sample(16, seed=2)
    outputs = torch.randn(16, 36, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    loss = task.loss(outputs, batch)
    manual = -torch.log_softmax(outputs[:, 32:], -1).gather(-1, batch.y.unsqueeze(-1)).mean()
    assert loss.item() == pytest.approx(manual.item(), rel=1e-6)
    loss.backward()
    assert outputs.grad[:, :32].abs().sum() == 0


def test_ambiguous_rate_is_below_half_a_percent(ambiguity_batches):
    for split, batch in ambiguity_batches.items():
        rate = batch.labels["ambiguous"].float().mean().item()
        print(f"SRAVEN ambiguous rate ({split}, 4096 instances, seed 2024): {rate:.4%}")
        assert rate < 0.005, f"{split}: {rate:.4%} of instances are ambiguous"


def test_ambiguity_matches_the_brute_force_reference(task, ambiguity_batches):
    for batch in ambiguity_batches.values():
        flags = batch.labels["ambiguous"]
        assert torch.equal(flags, task.ambiguous(batch))
        chosen = torch.cat([flags.nonzero()[:, 0], (~flags).nonzero()[:40, 0]])
        assert flags.sum() > 0  # the comparison covers ambiguous instances
        panels = decode_sraven(batch.x.numpy(), batch.y.numpy(), 4, 8)
        reference = [sraven_ambiguous(panels[i], 8) for i in chosen.tolist()]
        assert reference == flags[chosen].tolist()


@pytest.mark.parametrize(
    "params", [pytest.param({"n_values": 4}, id="4values"), pytest.param({"n_features": 3, "n_values": 3}, id="3f-3v")]
)
def test_ambiguity_matches_the_reference_where_ambiguity_is_common(params):
    task = SRaven(**params)
    batch = task.sample(150, seed=0)
    flags = task.ambiguous(batch)
    panels = decode_sraven(batch.x.numpy(), batch.y.numpy(), task.config.n_features, task.config.n_values)
    assert [sraven_ambiguous(p, task.config.n_values) for p in panels] == flags.tolist()
    assert 0 < flags.sum() < 150


def test_ambiguity_refuses_more_than_six_features():
    task = SRaven(n_features=7)
    with pytest.raises(ValueError, match="n_features <= 6"):
        task.ambiguous(task.sample(2, seed=0))


@pytest.mark.parametrize(
    "context, answer",
    [
        pytest.param([2, 2, 2, 5, 5, 5, 7, 7], 7, id="constant"),
        pytest.param([0, 1, 2, 5, 6, 7, 3, 4], 5, id="progression+1"),
        pytest.param([1, 3, 5, 6, 0, 2, 4, 6], 0, id="progression+2"),
        pytest.param([2, 1, 0, 7, 6, 5, 4, 3], 2, id="progression-1"),
        pytest.param([0, 6, 4, 3, 1, 7, 5, 3], 1, id="progression-2"),
        pytest.param([1, 2, 3, 4, 5, 1, 2, 2], 4, id="addition"),
        pytest.param([5, 2, 3, 1, 4, 5, 6, 1], 5, id="subtraction"),
        pytest.param([1, 4, 6, 6, 1, 4, 4, 6], 1, id="distribute_three"),
    ],
)
def test_a_single_fitting_rule_is_ambiguous_only_against_another_answer(context, answer):
    task = SRaven(n_features=1)  # one feature: the only hypothesis is the identity
    x = torch.cat([F.one_hot(torch.tensor(context), 8).float(), torch.zeros(1, 8)]).unsqueeze(0)
    agrees = task.ambiguous(Batch(x=x, y=torch.tensor([[answer]])))
    differs = task.ambiguous(Batch(x=x, y=torch.tensor([[(answer + 1) % 8]])))
    assert agrees.tolist() == [False] and differs.tolist() == [True]
    panels = decode_sraven(x.numpy(), np.array([[answer]]), 1, 8)[0]
    assert not sraven_ambiguous(panels, 8)


def test_rule_answer_on_a_hand_made_grid():
    task = SRaven()
    grid = torch.tensor([[1, 3, 5], [5, 1, 3], [3, 5, 0]]).expand(8, 3, 3)
    answer, defined = task.rule_answer(grid, torch.arange(8))
    # constant, +1, +2, -1, -2, addition, subtraction, distribute_three on the last row (3, 5, ?)
    assert defined.tolist() == [False, False, True, False, False, True, True, True]
    assert answer.tolist() == [0, 0, 7, 0, 0, 0, 6, 1]
    broken = torch.tensor([[1, 3, 5], [5, 1, 4], [3, 5, 0]])[None]  # rows spread different triples
    assert not task.rule_answer(broken, torch.tensor([7]))[1].item()
