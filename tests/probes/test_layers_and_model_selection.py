"""Layer names everywhere a layer is taken, and scikit-learn's model selection on `LatentCodes` (both routes: the
container itself, and the arrays of `to_sklearn`), checked against plain scikit-learn on hand-cut arrays."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, GroupKFold, ShuffleSplit, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probes import (
    LatentCodes,
    RuleDecoder,
    cluster_codes,
    code_spread,
    decode_rules,
    decode_terms,
    embed_codes,
    ridge_bits,
    rule_similarity,
    topographic_similarity,
)


@pytest.fixture(scope="module")
def codes(make_sraven) -> LatentCodes:
    """SRAVEN-shaped codes of model layers 0, 2 and 5 (not 0..n-1, so positions and layer numbers differ)."""
    base = make_sraven(600, n_layers=3, seed=3)
    return LatentCodes(base.codes, base.labels, base.split, {**base.meta, "layers": [0, 2, 5]})


def test_flat_takes_the_layer_names_the_docs_list(codes):
    raw = codes.codes
    n = codes.n_samples
    np.testing.assert_array_equal(codes.flat("last"), raw[:, 2].reshape(n, -1))
    np.testing.assert_array_equal(codes.flat("all"), raw.reshape(n, -1))
    np.testing.assert_array_equal(codes.flat("each"), raw.reshape(n, -1))
    np.testing.assert_array_equal(codes.flat("each+all"), raw.reshape(n, -1))
    np.testing.assert_array_equal(codes.flat(2), raw[:, 1].reshape(n, -1))
    np.testing.assert_array_equal(codes.flat("5"), raw[:, 2].reshape(n, -1))  # as result tables name layers
    np.testing.assert_array_equal(codes.flat([5, 0]), raw[:, [2, 0]].reshape(n, -1))
    assert codes.axis_positions("last") == [2] and codes.axis_positions(np.int64(2)) == [1]


@pytest.mark.parametrize(
    "bad, message",
    [
        ("lst", "layers='lst' is not a layer choice; layers= takes 'each+all', 'each', 'all', 'last'"),
        (3, "layers=3: 3 is not an extracted model layer; these codes hold model layers [0, 2, 5]"),
        ([], "layers=[] selects nothing"),
        (True, "layers=True"),
        (2.0, "layers=2.0 is not a layer choice"),
    ],
)
def test_a_bad_layer_choice_gets_one_line_saying_what_layers_takes(codes, bad, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        codes.flat(bad)
    assert "\n" not in str(err.value)
    assert "'l' is not" not in str(err.value)


def test_every_entry_point_that_takes_layers_reads_last_as_the_last_extracted_layer(codes, make_fuzzy):
    train = codes.select(split="train")
    by_name = RuleDecoder(layers="last").fit(train)
    by_number = RuleDecoder(layers=[5]).fit(train)
    np.testing.assert_array_equal(by_name.coef_, by_number.coef_)
    np.testing.assert_array_equal(RuleDecoder(layers="all").fit(train).coef_, RuleDecoder().fit(train).coef_)
    assert decode_rules(codes, layers="last", progress=False, controls=False).layer_names == ["5"]
    assert cluster_codes(codes, layers="last", k=8).layer_names == ["5"]
    assert [row.layer for row in code_spread(codes, "last").layers] == ["5"]
    assert topographic_similarity(codes, layers="last").layers == ["5"]
    np.testing.assert_allclose(rule_similarity(codes, layer="last").similarity,
                               rule_similarity(codes, layer=5).similarity)
    np.testing.assert_allclose(rule_similarity(codes, layer="5").similarity,
                               rule_similarity(codes, layer=5).similarity)
    assert embed_codes(codes, "pca", layer="last", max_points=200).layer == "5"
    fuzzy = make_fuzzy(400, n_layers=2)
    assert decode_terms(fuzzy, layers="last", progress=False, controls=False).layers == ["1"]
    assert ridge_bits(fuzzy, layers="last", controls=False).layers == ["1"]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: RuleDecoder(layers="lst").fit(c.select(split="train")),
        lambda c: decode_rules(c, layers="lst", progress=False),
        lambda c: cluster_codes(c, layers="lst"),
        lambda c: code_spread(c, "lst"),
        lambda c: topographic_similarity(c, layers="lst"),
        lambda c: c.to_sklearn(layers="lst"),
    ],
    ids=["RuleDecoder", "decode_rules", "cluster_codes", "code_spread", "topographic_similarity", "to_sklearn"],
)
def test_every_entry_point_refuses_a_bad_name_with_the_same_message(codes, call):
    with pytest.raises(ValueError, match=r"^layers='lst' is not a layer choice; layers= takes 'each\+all'"):
        call(codes)


@pytest.mark.parametrize("call", [lambda c: rule_similarity(c, layer="each"),
                                  lambda c: embed_codes(c, "pca", layer="each+all")], ids=["similarity", "embed"])
def test_single_layer_analyses_refuse_a_choice_of_several_layers(codes, call):
    with pytest.raises(ValueError, match=r"selects \d layer groups; layer= takes one: 'last', 'all'"):
        call(codes)


def _by_hand(codes: LatentCodes, position: int, folds) -> np.ndarray:
    """Plain scikit-learn on arrays cut by hand: the independent reference for both routes."""
    X = codes.codes[:, position].reshape(codes.n_samples, -1)
    y = codes.labels["rule"]
    scores = []
    for train, test in folds:
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=0))
        scores.append(probe.fit(X[train], y[train]).score(X[test], y[test]))
    return np.array(scores)


def test_cross_val_score_takes_latent_codes_and_matches_plain_sklearn_on_the_same_folds(codes):
    train = codes.select(split="train")
    ids = train.composition_ids()
    expected_groups = np.unique(np.sort(train.labels["rules"], axis=1), axis=0, return_inverse=True)[1].ravel()
    np.testing.assert_array_equal(ids, expected_groups)
    cv = GroupKFold(n_splits=3)
    reference = _by_hand(train, 2, cv.split(np.zeros(train.n_samples), groups=ids))
    # route 1: the container itself
    direct = cross_val_score(RuleDecoder(layers="last"), train, groups=ids, cv=cv)
    np.testing.assert_allclose(direct, reference)
    # route 2: the arrays
    X, y, groups = train.to_sklearn(layers="last")
    np.testing.assert_array_equal(groups, ids)
    np.testing.assert_allclose(cross_val_score(RuleDecoder(), X, y, groups=groups, cv=cv), reference)
    # unstratified KFold by default (no y), shuffled splits keep rows and labels aligned
    plain = cross_val_score(RuleDecoder(layers=[5]), train, cv=3)
    np.testing.assert_allclose(plain, _by_hand(train, 2, [
        (np.setdiff1d(np.arange(train.n_samples), test), test)
        for test in np.array_split(np.arange(train.n_samples), 3)]))
    shuffled = ShuffleSplit(3, test_size=0.3, random_state=0)
    np.testing.assert_allclose(
        cross_val_score(RuleDecoder(layers="last"), train, train.label_values(), cv=shuffled),
        _by_hand(train, 2, shuffled.split(np.zeros(train.n_samples))),
    )


def test_grid_search_over_layer_names_and_strength_on_latent_codes(codes):
    train = codes.select(split="train")
    ids = train.composition_ids()
    cv = GroupKFold(n_splits=3)
    search = GridSearchCV(RuleDecoder(), {"layers": ["last", [0]], "C": [0.1, 1.0]}, cv=cv).fit(train, groups=ids)
    reference = _by_hand(train, 2, cv.split(np.zeros(train.n_samples), groups=ids)).mean()
    table = dict(zip(map(str, search.cv_results_["params"]), search.cv_results_["mean_test_score"], strict=True))
    assert table[str({"C": 1.0, "layers": "last"})] == pytest.approx(reference)
    assert search.best_params_["layers"] == "last"  # layer 0 holds noise only (sraven_codes plants layers 1, 2)
    assert search.best_estimator_.n_features_in_ == train.flat("last").shape[1]


def test_codes_index_by_rows_in_the_order_given(codes):
    picked = codes[[4, 1, 4]]
    np.testing.assert_array_equal(picked.labels["rule"], codes.labels["rule"][[4, 1, 4]])
    np.testing.assert_array_equal(picked.codes, codes.codes[[4, 1, 4]])
    assert codes[codes.split == "ood"].splits == ("ood",) and codes[:10].n_samples == 10
    assert codes[np.array([2, 3]), ...].n_samples == 2 and codes.shape == codes.codes.shape
    with pytest.raises(TypeError, match=r"codes\[\[3\]\] keeps that one row"):
        codes[3]
    with pytest.raises(IndexError, match="boolean mask of shape"):
        codes[np.ones(3, bool)]
