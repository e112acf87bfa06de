"""Decoders recover planted structure, sit at chance on random codes, and report their baselines correctly."""

import json
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.pipeline import Pipeline

from probes import (
    BitRegressionResult,
    LatentCodes,
    TermDecodingResult,
    decode_rules,
    decode_terms,
    extras_from_dict,
    make_probe,
    ridge_bits,
)


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
    assert lines[1] == "reading: paper positions, unpermuted inputs (assumed: written before readings were recorded)"
    assert "chance" in lines[2] and "majority ood" in lines[2] and "train" in lines[2]
    assert "input-only ood" in lines[2] and "codes − best ood" in lines[2]
    assert [line.split()[0] for line in lines[3:7]] == ["0", "1", "2", "all"]
    assert data["reading"] == result.reading == sraven.reading
    assert set(data["headline"]["accuracy"]) == {"test", "ood"}


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
    assert sorted(result.extras) == ["term_bits", "terms"]  # keyed by the codes' own label names
    terms = result.extras["terms"]
    assert isinstance(terms, TermDecodingResult) and isinstance(result.extras["term_bits"], BitRegressionResult)
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
    assert "ridge R²" in result.table() and "no probe (n/a)" in result.table()
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert "terms" not in data and "bits" not in data  # the generic result names no task's labels
    read = extras_from_dict(data)
    assert sorted(read) == ["term_bits", "terms"] and read["terms"]["label"] == "terms"
    assert read["terms"]["f1"]["ood"][-1][:12] == pytest.approx(terms.f1["ood"][-1][:12].tolist())
    old = {k: v for k, v in data.items() if k != "extras"}  # a .decode.json written before 0.3
    old.update(terms=data["extras"]["terms"], bits=data["extras"]["term_bits"])
    assert extras_from_dict(old) == extras_from_dict(data)


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


# ------------------------------------------------------------------------------------- floors beside every score
def _mode(values: np.ndarray) -> int:
    return int(np.argmax(np.bincount(values)))


def test_rule_floors_are_chance_and_majority_on_the_same_rows(make_sraven):
    codes = make_sraven(n=1600, structure="random", label_from="last", seed=4)  # skewed labels, nothing to read
    result = decode_rules(codes, layers="each+all")
    rule, train = codes.labels["rule"], codes.split == "train"
    majority_class = _mode(rule[train])
    for split in ("test", "ood"):
        rows = codes.split == split
        majority = float(np.mean(rule[rows] == majority_class))
        headline = result.headlines()["accuracy"][split]
        assert headline.floors == {"chance": pytest.approx(1 / 8), "majority": pytest.approx(majority)}
        assert headline.control is None and headline.best == pytest.approx(max(1 / 8, majority))
        accuracy = np.array([row.accuracy[split] for row in result.layers])
        np.testing.assert_allclose(headline.over_best, accuracy - max(1 / 8, majority))
        saved = result.to_dict()["headline"]["accuracy"][split]
        assert saved["best_of"] == "majority" and saved["codes_minus_best"] == pytest.approx(list(headline.over_best))
    table = result.table()
    assert f"{np.mean(rule[codes.split == 'ood'] == majority_class):.3f}" in table
    header = table.splitlines()[2].split("  ")
    assert "codes − best ood" in [h.strip() for h in header]
    assert (result.headlines()["accuracy"]["ood"].over_best < 0.05).all()  # random codes do not beat the floor


def test_term_floor_is_always_present_f1_on_the_same_rows(make_fuzzy):
    codes = make_fuzzy(structure="random", seed=5)
    result = decode_rules(codes)
    terms, train = codes.labels["terms"], codes.split == "train"
    present = np.zeros((codes.n_samples, 16), dtype=bool)
    present[np.arange(codes.n_samples)[:, None], terms] = True
    varies = present[train].any(axis=0) & ~present[train].all(axis=0)
    assert result.extras["terms"].evaluated == np.flatnonzero(varies).tolist()
    for split in ("test", "ood", "novel_terms"):
        rows = codes.split == split
        n, support = rows.sum(), present[rows][:, varies].sum(axis=0)
        # "present" for every row: precision s / n, recall 1 (0 when the term is absent from the split)
        expected = float(np.mean(2 * support / (n + support)))
        assert result.extras["terms"].always_present_f1[split] == pytest.approx(expected)
        headline = result.headlines()["term_f1"][split]
        assert headline.floors == {"always_present": pytest.approx(expected)}
        with np.errstate(all="ignore"):
            mean_f1 = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan
                                for row in result.extras["terms"].f1[split]])
        np.testing.assert_allclose(headline.over_best, mean_f1 - expected)
    assert result.extras["terms"].always_present_f1["novel_terms"] == 0.0  # no evaluated term occurs there
    assert result.to_dict()["headline"]["term_f1"]["ood"]["best_of"] == "always_present"
    assert result.extras["terms"].to_dict()["headline"]["ood"]["best_of"] == "always_present"
    table = result.extras["terms"].table()
    assert "always-present ood" in table and "codes − best ood" in table
    assert f"{result.extras['terms'].always_present_f1['ood']:.3f}" in table


def test_set_accuracy_floors_and_ridge_floor_on_the_same_rows(make_fuzzy):
    codes = make_fuzzy(structure="bits", seed=6)
    result = decode_rules(codes)
    sets, train = np.sort(codes.labels["terms"], axis=1), codes.split == "train"
    values, counts = np.unique(sets[train], axis=0, return_counts=True)
    majority_set = values[np.argmax(counts)]
    bits = codes.labels["term_bits"].reshape(codes.n_samples, -1).astype(float)
    for split in ("test", "ood"):
        rows = codes.split == split
        floors = result.headlines()["accuracy"][split].floors
        assert floors["chance"] == pytest.approx(1 / 120)  # one of C(16, 2) sets
        assert floors["majority"] == pytest.approx(np.mean((sets[rows] == majority_set).all(axis=1)))
        mean = bits[train].mean(axis=0)
        residual = ((bits[rows] - mean) ** 2).sum(axis=0)
        total = ((bits[rows] - bits[rows].mean(axis=0)) ** 2).sum(axis=0)
        expected = np.mean(1 - residual[total > 0] / total[total > 0])
        assert result.extras["term_bits"].train_mean_r2[split] == pytest.approx(expected)
        assert result.headlines()["bit_r2"][split].floors == {"train_mean": pytest.approx(expected)}
    assert "train-mean ood" in result.extras["term_bits"].table()


def test_cells_say_na_when_not_computed_and_dash_when_undefined(make_fuzzy):
    table = decode_rules(make_fuzzy(structure="terms")).table()  # codes without raw inputs: no control fitted
    grid = table.splitlines()[2:6]
    assert all(row.split()[-6:-3] == ["n/a", "n/a", "n/a"] for row in grid[1:]), table  # input-only per split
    assert "controls: n/a" in table and "no probe (n/a): x1∧x2∧¬x3∧¬x4 (absent from train)" in table
    # an F1 that was computed but is undefined (no row holds the term and none was predicted) reads "–"
    terms = TermDecodingResult(label="terms", class_names=["a", "b", "c"], layers=["0"], evaluated=[0, 1],
                               skipped={2: "absent from train"}, f1={"ood": np.array([[np.nan, np.nan, np.nan]])},
                               support={"ood": np.array([0, 0, 0])}, always_present_f1={"ood": 0.0})
    row = terms.table().splitlines()[3].split()
    assert row == ["0", "–", "0.000", "n/a", "–"], terms.table()


def test_convergence_warnings_become_one_note(make_sraven):
    codes = make_sraven(n=600)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = decode_rules(codes, max_iter=1)
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    (note,) = result.notes
    assert "stopped at max_iter=1 before converging" in note
    assert result.table().splitlines()[-1] == f"notes: {note}"
    assert decode_rules(codes).notes == ()


def _with_constant_layer(codes: LatentCodes, layer: int = 0, seed: int = 0) -> LatentCodes:
    """`codes` with one layer frozen at its first row's code plus float32-rounding-sized noise (a dead layer)."""
    array = codes.codes.copy()
    rng = np.random.default_rng(seed)
    array[:, layer] = array[:1, layer] + 1e-6 * rng.normal(size=array[:, layer].shape)
    return LatentCodes(array, codes.labels, codes.split, codes.meta)


def test_constant_layers_are_named_and_left_out_of_the_all_layers_probe(make_sraven):
    live = make_sraven(n=600)
    codes = _with_constant_layer(live)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decoding records constant layers; it does not warn (the caller checks once)
        result = decode_rules(codes, controls=False)
    assert result.constant_layers == ["0"]
    without = LatentCodes(codes.codes[:, 1:], codes.labels, codes.split, {**codes.meta, "layers": [1, 2]})
    reference = decode_rules(without, layers="all", controls=False)
    for split in result.splits:  # the all-layers probe reads exactly the live layers' features
        assert result.accuracy(split)[-1] == reference.accuracy(split)[0]
    assert json.loads(json.dumps(result.to_dict()))["constant_layers"] == ["0"]
    assert "constant codes: 0 (their probes read rounding noise; the all-layers probe leaves them out)" in (
        result.table())
    assert decode_rules(live, controls=False).constant_layers == []


def test_when_every_layer_is_constant_the_all_layers_probe_keeps_them(make_sraven):
    from probes.decoding.fit import probe_groups

    codes = make_sraven(n=300)
    for layer in range(3):
        codes = _with_constant_layer(codes, layer, seed=layer)
    groups, constant = probe_groups(codes)
    assert constant == ["0", "1", "2", "all"] and groups[-1] == ("all", [0, 1, 2])
    result = decode_rules(codes, layers="all", controls=False)
    assert result.constant_layers == ["all"] and "leaves them out" not in result.table()


def test_term_probes_leave_constant_layers_out_too(make_fuzzy):
    codes = _with_constant_layer(make_fuzzy(n=600))
    terms = decode_terms(codes, layers="each+all", controls=False)
    assert terms.constant_layers == ["0"]
    assert decode_rules(codes, controls=False).extras["terms"].constant_layers == ["0"]
    assert "constant codes: 0" in terms.table()
