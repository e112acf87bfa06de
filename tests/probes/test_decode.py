"""Decoders recover planted structure, sit at chance on random codes, and report their baselines correctly."""

import json

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.pipeline import Pipeline

from probes import LatentCodes, decode_rules, decode_terms, make_probe, ridge_bits


def test_make_probe_is_a_scaled_logistic_pipeline():
    probe = make_probe(C=0.5, random_state=3)
    assert isinstance(probe, Pipeline)
    assert [name for name, _ in probe.steps] == ["standardscaler", "logisticregression"]
    params = probe.get_params()
    assert params["logisticregression__C"] == 0.5 and params["logisticregression__random_state"] == 3


def test_planted_rules_decode_on_held_out_combinations(make_sraven):
    codes = make_sraven(structure="rule", planted_layers=(1, 2))
    result = decode_rules(codes)
    assert result.layer_names == ["0", "1", "2", "all"]
    assert result.splits == ["test", "ood"]
    ood = dict(zip(result.layer_names, result.accuracy("ood"), strict=True))
    assert ood["1"] > 0.95 and ood["2"] > 0.95 and ood["all"] > 0.95
    assert ood["0"] < 0.3  # the unplanted layer stays near chance (1/8)
    assert result.baselines["ood"].chance == pytest.approx(1 / 8)
    assert result.layers[-1].confusion["ood"].shape == (8, 8)
    assert result.layers[-1].confusion["ood"].sum() == (codes.split == "ood").sum()
    assert result.macro_f1("ood")[-1] > 0.95


def test_random_codes_decode_at_chance(make_sraven):
    codes = make_sraven(n=2400, structure="random", label_from="random_feature", seed=1)
    result = decode_rules(codes, layers="all")
    for split in result.splits:
        assert abs(result.accuracy(split)[0] - 1 / 8) < 0.06, split
    assert result.accuracy("train")[0] > result.accuracy("ood")[0]  # the probe fits noise in-sample only


def test_skewed_labels_random_codes_do_not_beat_best_constant(make_sraven):
    codes = make_sraven(n=2400, structure="random", label_from="last", seed=2)
    result = decode_rules(codes, layers="all")
    baseline = result.baselines["ood"]
    assert baseline.majority > 0.2  # the last sorted rule is skewed towards H (spec §4.2)
    assert result.majority_class == "distribute_three"
    assert result.accuracy("ood")[0] <= baseline.best_constant + 0.05


def test_baselines_on_a_hand_made_example():
    train_labels, ood_labels = [0, 0, 0, 1, 2, 1], [1, 1, 2, 0]
    y = np.array(train_labels + ood_labels)
    codes = LatentCodes(
        codes=np.random.default_rng(0).normal(size=(10, 1, 2, 1, 1)),
        labels={"rule": y},
        split=np.array(["train"] * 6 + ["ood"] * 4),
        meta={"task": "sraven", "n_classes": 8},
    )
    result = decode_rules(codes, layers="all")
    baseline = result.baselines["ood"]
    assert baseline.n_samples == 4
    assert baseline.chance == pytest.approx(1 / 8)  # uniform over all 8 rules, not the 3 present
    assert baseline.majority == pytest.approx(0.25)  # train majority is rule 0; one of four OOD rows is 0
    assert baseline.best_constant == pytest.approx(0.5)  # OOD's own most frequent rule (1) covers half
    assert result.majority_class == "0"


def test_results_serialize_and_tabulate(sraven):
    result = decode_rules(sraven, layers="each+all")
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["label"] == "rule" and len(data["layers"]) == 4
    assert data["baselines"]["ood"]["chance"] == pytest.approx(0.125)
    table = result.table()
    lines = table.splitlines()
    assert "chance" in lines[1] and "majority ood" in lines[1] and "train" in lines[1]
    assert [line.split()[0] for line in lines[2:]] == ["0", "1", "2", "all"]


@pytest.mark.parametrize(
    ("layers", "names"),
    [
        pytest.param("each", ["0", "1", "2"], id="each"),
        pytest.param("all", ["all"], id="all"),
        pytest.param("last", ["2"], id="last"),
        pytest.param([0, 2], ["0", "2"], id="model-layers"),
    ],
)
def test_layer_choices(sraven, layers, names):
    assert decode_rules(sraven, layers=layers, splits="ood").layer_names == names


def test_decode_other_labels(sraven):
    result = decode_rules(sraven, label="target", layers="all")
    assert result.label == "target" and len(result.class_names) == 8
    assert abs(result.accuracy("ood")[0] - 1 / 8) < 0.1  # target is not planted


@pytest.mark.parametrize(
    ("make", "kwargs", "message"),
    [
        pytest.param(
            lambda c: c.select(split=["test", "ood"]), {}, "no rows in split 'train'", id="no-train"
        ),
        pytest.param(lambda c: c.select(split="train"), {}, "no evaluation rows", id="no-eval"),
        pytest.param(
            lambda c: c.select(split=["train", "ood"]),
            {"splits": "test"},
            "splits=",
            id="empty-eval-split",
        ),
        pytest.param(lambda c: c, {"splits": ["train"]}, "splits=", id="train-as-eval"),
        pytest.param(lambda c: c, {"label": "missing"}, "available labels", id="missing-label"),
        pytest.param(
            lambda c: LatentCodes(
                c.codes,
                {**c.labels, "rule": np.where(c.split == "train", 3, c.labels["rule"])},
                c.split,
                c.meta,
            ),
            {},
            "label='rule' has a single class",
            id="single-class",
        ),
        pytest.param(
            lambda c: LatentCodes(c.codes, {**c.labels, "x": np.linspace(0, 1, c.n_samples)}, c.split, c.meta),
            {"label": "x"},
            "continuous",
            id="continuous-label",
        ),
        pytest.param(lambda c: c, {"label": "rules"}, "repeats a class", id="multiset-label"),
    ],
)
def test_decode_rules_errors(sraven, make, kwargs, message):
    with pytest.raises(ValueError, match=message):
        decode_rules(make(sraven), **kwargs)


@pytest.mark.parametrize(
    "decoder", [pytest.param(decode_terms, id="decode_terms"), pytest.param(ridge_bits, id="ridge_bits")]
)
def test_fuzzy_decoders_reject_sraven_codes(sraven, decoder):
    with pytest.raises(ValueError, match="task 'sraven'"):
        decoder(sraven)


def test_fuzzy_term_probes_generalize_to_held_out_compositions(make_fuzzy):
    codes = make_fuzzy(structure="terms")
    result = decode_rules(codes)
    assert result.kind == "sets" and result.label == "terms"
    terms = result.terms
    assert terms is not None and result.bits is not None
    assert terms.skipped == {
        12: "absent from train",
        13: "absent from train",
        14: "absent from train",
        15: "absent from train",
    }
    assert terms.evaluated == list(range(12))
    assert np.isnan(terms.f1["ood"][:, 12:]).all()
    assert terms.mean_f1("ood")[-1] > 0.95
    assert result.accuracy("ood")[-1] > 0.8  # the exact term set of unseen compositions (chance 1/120)
    assert result.accuracy("novel_terms")[-1] == 0.0  # never-trained terms cannot be decoded
    baseline = result.baselines["ood"]
    assert baseline.chance == pytest.approx(1 / 120)  # 1 / C(16, 2)
    assert baseline.majority == 0.0  # the train-majority composition never occurs in held-out compositions
    assert result.layers[-1].confusion["ood"].shape == (16, 2, 2)
    assert "ridge R²" in result.table() and "skipped" in result.table()
    json.dumps(result.to_dict(), allow_nan=False)


def test_decode_terms_on_random_codes_is_poor(make_fuzzy):
    terms = decode_terms(make_fuzzy(structure="random"), layers="all", splits="ood")
    assert terms.mean_f1("ood")[0] < 0.4


def test_ridge_r2_per_bit_on_codes_linear_in_bits(make_fuzzy):
    result = ridge_bits(make_fuzzy(structure="bits"))
    assert result.layers == ["0", "1", "all"] and len(result.bit_names) == 8
    assert result.r2_cv.shape == (3, 8)
    assert result.mean("cv")[-1] > 0.95
    assert result.mean("ood")[-1] > 0.95
    assert result.n_folds == 5 and result.n_groups == 33


def test_ridge_folds_are_grouped_by_composition(make_fuzzy):
    # Codes that only name the composition: memorizable but not linear in the bits.
    codes = make_fuzzy(structure="composition", n_heads=48, noise=0.01, seed=3)
    grouped = ridge_bits(codes, layers="all").mean("cv")[0]
    train = codes.split == "train"
    bits = codes.labels["term_bits"].reshape(codes.n_samples, -1)[train]
    leaky = cross_val_predict(
        Ridge(alpha=1.0), codes.flat()[train], bits, cv=KFold(5, shuffle=True, random_state=0)
    )
    leaky_r2 = 1 - ((bits - leaky) ** 2).sum(0) / ((bits - bits.mean(0)) ** 2).sum(0)
    assert leaky_r2.mean() > 0.9  # row-wise folds see every composition while fitting
    assert grouped < 0.5  # composition-wise folds do not


def test_ridge_groups_fall_back_to_terms(make_fuzzy):
    codes = make_fuzzy(structure="bits", with_composition=False)
    assert ridge_bits(codes, layers="all").n_groups == 33
