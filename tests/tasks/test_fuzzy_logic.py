"""Fuzzy-logic task: targets against an independent DNF checker, the splits, determinism, persistence, metrics."""

from itertools import combinations

import numpy as np
import pytest
import torch

from latentcode.tasks import FuzzyLogic, FuzzyLogicConfig, get_task
from latentcode.tasks.fuzzy_logic import term_bits
from tests.tasks.checkers import check_fuzzy_batch, product_terms


def _rows(array) -> set[tuple[int, ...]]:
    return {tuple(row) for row in np.asarray(array).tolist()}


@pytest.fixture(scope="module")
def task() -> FuzzyLogic:
    return FuzzyLogic()


@pytest.mark.parametrize("split", FuzzyLogic.splits)
def test_batch_fields_have_the_documented_shapes_and_dtypes(task, split, device):
    batch = task.sample(6, split, seed=0, device=device)
    assert batch.x.shape == (6, 16, 5) and batch.x.dtype == torch.float32
    assert batch.y.shape == (6,) and batch.y.dtype == torch.float32
    assert batch.labels["terms"].shape == (6, 2) and batch.labels["terms"].dtype == torch.long
    assert batch.labels["term_bits"].shape == (6, 2, 4) and batch.labels["term_bits"].dtype == torch.long
    assert batch.split == split and batch.x.device.type == torch.device(device).type
    assert (task.d_in, task.d_out, task.seq_len) == (5, 1, 16)


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="default-4var-2term"),
        pytest.param({"n_variables": 3, "seq_len": 8}, id="3var-2term"),
        pytest.param({"n_variables": 5, "n_terms": 3, "seq_len": 5, "frac_ood": 0.3}, id="5var-3term"),
    ],
)
def test_every_target_is_the_dnf_of_its_labelled_terms(params, device):
    task = FuzzyLogic(**params)
    for split, n in (("train", 2000), ("test", 500), ("ood", 500), ("novel_terms", 500)):
        batch = task.sample(n, split, seed=11, device=device).to("cpu")
        labels = batch.labels
        check_fuzzy_batch(
            batch.x.numpy(), batch.y.numpy(), labels["terms"].numpy(), labels["term_bits"].numpy(),
            task.config.n_variables,
        )
        assert _rows(labels["terms"]) <= _rows(task.compositions(split))


def test_term_bits_follow_itertools_product_order():
    assert term_bits(4).tolist() == [list(t) for t in product_terms(4)]


def test_default_split_sizes_and_novel_terms_follow_the_spec(task):
    known = _rows(combinations(range(12), 2))
    train, ood = _rows(task.compositions("train")), _rows(task.compositions("ood"))
    assert len(train) == 33 and len(ood) == 33 and train | ood == known and not train & ood
    assert (task.compositions("test") == task.compositions("train")).all()
    # the last int(0.25 * 16) = 4 terms, (1,1,0,0)..(1,1,1,1), are never trained on
    assert _rows(task.compositions("novel_terms")) == _rows(combinations(range(12, 16), 2))
    assert term_bits(4)[12:].tolist() == [[1, 1, 0, 0], [1, 1, 0, 1], [1, 1, 1, 0], [1, 1, 1, 1]]


def test_no_training_instance_uses_a_held_out_composition(task):
    terms = _rows(task.sample(100_000, "train", seed=5).labels["terms"])
    assert terms <= _rows(task.compositions("train"))
    assert not terms & _rows(task.compositions("ood")) and not terms & _rows(task.compositions("novel_terms"))
    assert _rows(task.sample(20_000, "ood", seed=5).labels["terms"]) <= _rows(task.compositions("ood"))
    novel = task.sample(5_000, "novel_terms", seed=5).labels["terms"]
    assert (novel >= 12).all()


def test_the_split_comes_from_the_task_seed():
    same = FuzzyLogic(seed=3).compositions("ood"), FuzzyLogic(seed=3).compositions("ood")
    assert (same[0] == same[1]).all()
    assert _rows(FuzzyLogic(seed=3).compositions("ood")) != _rows(FuzzyLogic(seed=4).compositions("ood"))


def test_batches_are_deterministic_per_seed_and_independent_per_split(task):
    a, b = task.sample(64, "train", seed=7), task.sample(64, "train", seed=7)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.labels["terms"], b.labels["terms"])
    assert not torch.equal(a.x, task.sample(64, "train", seed=8).x)
    # `test` instances are fresh draws, never the training stream's batch for the same seed
    assert not torch.equal(a.x[..., :4], task.sample(64, "test", seed=7).x[..., :4])
    assert not torch.equal(a.x[..., :4], FuzzyLogic(seed=1).sample(64, "train", seed=7).x[..., :4])


def test_seed_none_follows_torchs_global_rng(task):
    torch.manual_seed(123)
    first = task.sample(32).x
    torch.manual_seed(123)
    assert torch.equal(first, task.sample(32).x)
    assert not torch.equal(first, task.sample(32).x)


def test_round_trip_restores_the_exact_stored_lists(task):
    data = task.to_dict()
    assert data["name"] == "fuzzy_logic" and data["params"]["frac_unseen_terms"] == 0.25
    # move one composition from ood to train: from_dict must keep the stored lists, not redraw them
    moved = data["compositions"]["ood"].pop(0)
    data["compositions"]["train"] = sorted(data["compositions"]["train"] + [moved])
    restored = FuzzyLogic.from_dict(data)
    assert restored.compositions("train").tolist() == data["compositions"]["train"]
    assert restored.compositions("ood").tolist() == data["compositions"]["ood"]
    assert restored.compositions("novel_terms").tolist() == task.compositions("novel_terms").tolist()


@pytest.mark.parametrize(
    "edit, message",
    [
        pytest.param(lambda c: c["ood"].append(c["train"][0]), "overlap", id="train-ood-overlap"),
        pytest.param(lambda c: c["train"].append([3, 12]), r"outside \[0, 12\)", id="unseen-term-in-train"),
        pytest.param(lambda c: c["novel_terms"].append([0, 13]), r"outside \[12, 16\)", id="known-term-in-novel"),
        pytest.param(lambda c: c["train"].append([5, 2]), "sorted", id="unsorted-row"),
        pytest.param(lambda c: c["train"].append(c["train"][0]), "repeat", id="repeated-row"),
        pytest.param(lambda c: c.update(ood=[[1, 2, 3]]), r"shape \[m, 2\]", id="wrong-width"),
        pytest.param(lambda c: c.update(ood=[]), "non-empty", id="empty-split"),
        pytest.param(lambda c: c.pop("novel_terms"), "expected", id="missing-split"),
    ],
)
def test_from_dict_rejects_broken_lists(task, edit, message):
    data = task.to_dict()
    edit(data["compositions"])
    with pytest.raises(ValueError, match=message):
        FuzzyLogic.from_dict(data)


def test_from_dict_rejects_another_task():
    data = FuzzyLogic().to_dict() | {"name": "sraven"}
    with pytest.raises(ValueError, match="not 'fuzzy_logic'"):
        FuzzyLogic.from_dict(data)


@pytest.mark.parametrize(
    "params, message",
    [
        pytest.param({"n_terms": 13}, "exceeds the 12 known terms", id="too-many-terms"),
        pytest.param({"frac_unseen_terms": 0.0}, "novel_terms split would be empty", id="no-unseen-terms"),
        pytest.param({"n_terms": 5}, "fewer than n_terms=5", id="unseen-fewer-than-terms"),
        pytest.param({"frac_ood": 0.0}, "ood split empty", id="empty-ood"),
        pytest.param({"frac_ood": 1.0}, r"\[0, 1\)", id="frac-ood-one"),
        pytest.param({"seq_len": 1}, "seq_len=1", id="no-context"),
        pytest.param({"n_variables": 0}, "n_variables=0", id="no-variables"),
        pytest.param({"seed": -1}, "seed=-1", id="negative-seed"),
        pytest.param({"n_variables": 12, "n_terms": 3}, "more than the 1000000 supported", id="too-large"),
    ],
)
def test_impossible_parameters_raise(params, message):
    with pytest.raises(ValueError, match=message):
        get_task("fuzzy_logic", **params)


@pytest.mark.parametrize(
    "call, message",
    [
        pytest.param(lambda t: t.sample(0), "n=0", id="n-zero"),
        pytest.param(lambda t: t.sample(4, "valid"), "valid splits: train, test, ood, novel_terms", id="sample-split"),
        pytest.param(lambda t: t.compositions("oodd"), "unknown split 'oodd'", id="compositions-split"),
        pytest.param(lambda t: t.sample(4, inputs="fixed"), "fixed_context", id="inputs"),
        pytest.param(lambda t: t.sample(4, seed=-2), "seed=-2", id="negative-seed"),
        pytest.param(lambda t: t.loss(torch.zeros(4, 16, 2), t.sample(4)), "d_out=1", id="wrong-d_out"),
    ],
)
def test_bad_calls_raise(task, call, message):
    with pytest.raises(ValueError, match=message):
        call(task)


def test_config_is_kept_and_frozen():
    task = get_task("fuzzy_logic", frac_ood=0.3, seed=1)
    assert task.config == FuzzyLogicConfig(frac_ood=0.3, seed=1)
    assert len(task.compositions("ood")) == int(66 * 0.3)
    with pytest.raises(AttributeError):
        task.config.seed = 2


def test_perfect_outputs_score_r2_one_and_zero_loss(task):
    batch = task.sample(64, "ood", seed=0)
    outputs = torch.zeros(64, 16, 1)
    outputs[:, -1, 0] = batch.y
    metrics = task.metrics(outputs, batch)
    assert metrics == {"loss": 0.0, "r2": 1.0}
    assert torch.equal(task.predict(outputs), batch.y)


def test_r2_uses_each_instances_target_variance_query_included(task):
    batch = task.sample(256, seed=1)
    outputs = torch.rand(256, 16, 1, generator=torch.Generator().manual_seed(0))
    targets = np.concatenate([batch.x[:, :-1, -1].numpy(), batch.y.numpy()[:, None]], axis=1)
    err = (outputs[:, -1, 0].numpy() - batch.y.numpy()) ** 2
    expected = np.mean(1 - err / targets.var(axis=1))
    metrics = task.metrics(outputs, batch)
    assert metrics["r2"] == pytest.approx(expected, rel=1e-5)
    assert metrics["loss"] == pytest.approx(err.mean(), rel=1e-5)
    # predicting each instance's mean target scores r2 = 1 - (y - mean)^2 / var, i.e. about 0 on average
    outputs[:, -1, 0] = torch.from_numpy(targets.mean(axis=1))
    assert abs(task.metrics(outputs, batch)["r2"]) < 0.5


def test_loss_is_the_query_mse_and_has_gradients(task):
    batch = task.sample(32, seed=2)
    outputs = torch.zeros(32, 16, 1, requires_grad=True)
    loss = task.loss(outputs, batch)
    assert loss.item() == pytest.approx(batch.y.pow(2).mean().item())
    loss.backward()
    assert outputs.grad[:, :-1].abs().sum() == 0 and outputs.grad[:, -1].abs().sum() > 0


@pytest.mark.parametrize("inputs", ["fixed_context", "fixed_query"])
def test_fixed_inputs_share_the_context_or_the_query(task, inputs):
    batch = task.sample(16, inputs=inputs, seed=0)
    shared = slice(None, -1) if inputs == "fixed_context" else slice(-1, None)
    free = slice(-1, None) if inputs == "fixed_context" else slice(None, -1)
    x = batch.x[..., :4]
    assert (x[:, shared] == x[:1, shared]).all() and not (x[:, free] == x[:1, free]).all()
    check_fuzzy_batch(batch.x.numpy(), batch.y.numpy(), batch.labels["terms"].numpy(),
                      batch.labels["term_bits"].numpy(), 4)
