"""Tests of probes/estimators.py: the scikit-learn contract, LatentCodes in and out, save/load, directions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from probes.codes import LatentCodes
from probes.decoding.estimators import RuleDecoder, code_space_directions
from probes.decoding.fit import make_probe


@parametrize_with_checks([RuleDecoder()])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _codes(n: int = 300, seed: int = 0, shift: float = 0.0) -> LatentCodes:
    """Rule r shifts head r % 3 of layer 1; layer 0 is noise."""
    rng = np.random.default_rng(seed)
    rule = rng.integers(0, 3, size=n)
    codes = rng.normal(size=(n, 2, 3, 1, 2)) + shift
    codes[np.arange(n), 1, rule, 0, 0] += 3.0
    split = np.where(np.arange(n) < n // 2, "train", "ood")
    meta = {"task": "sraven", "label": "rule", "n_classes": 3, "layers": [0, 1]}
    return LatentCodes(codes, {"rule": rule, "other": rng.integers(0, 2, size=n)}, split, meta)


def test_fit_on_one_split_and_score_codes_of_another_checkpoint_like_the_pipeline_it_wraps():
    codes = _codes()
    train, ood = codes.select(split="train"), codes.select(split="ood")
    decoder = RuleDecoder(layers=[1]).fit(train)
    reference = make_probe().fit(train.flat([1]), train.labels["rule"])
    np.testing.assert_array_equal(decoder.predict(ood), reference.predict(ood.flat([1])))
    assert decoder.score(ood) == reference.score(ood.flat([1]), ood.labels["rule"]) > 0.9
    other = _codes(seed=1)  # "another checkpoint": same layout, fresh rows
    assert decoder.score(other) > 0.9
    np.testing.assert_allclose(decoder.coef_, reference[-1].coef_)
    assert RuleDecoder(layers=[0]).fit(train).score(ood) < 0.6  # noise layer
    assert RuleDecoder(label="other").fit(train).classes_.tolist() == [0, 1]
    assert decoder.n_features_in_ == 6


def test_params_clone_pipeline_and_cross_val_score():
    decoder = RuleDecoder(C=0.5, layers=[1])
    assert decoder.get_params() == {"C": 0.5, "max_iter": 1000, "random_state": 0, "layers": [1], "label": None}
    assert decoder.set_params(C=2.0).C == 2.0
    copy = clone(decoder)
    assert copy is not decoder and copy.get_params() == decoder.get_params()
    codes = _codes()
    X, y = codes.flat([1]), codes.labels["rule"]
    pipeline = make_pipeline(FunctionTransformer(np.abs), RuleDecoder())
    assert pipeline.fit(X, y).score(X, y) > 0.5
    scores = cross_val_score(RuleDecoder(), X, y, cv=3)
    assert scores.shape == (3,) and scores.min() > 0.9


def test_saved_and_reloaded_decoder_scores_identically(tmp_path):
    codes = _codes()
    decoder = RuleDecoder(layers=[1]).fit(codes.select(split="train"))
    path = decoder.save(tmp_path / "decoder")
    assert path.suffix == ".npz" and (tmp_path / "decoder.json").exists()
    with np.load(path, allow_pickle=False) as data:  # plain arrays only
        assert sorted(data.files) == ["classes", "coef", "intercept", "mean", "n_iter", "scale", "var"]
    loaded = RuleDecoder.load(tmp_path / "decoder")
    ood = codes.select(split="ood")
    assert loaded.get_params() == decoder.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(ood), decoder.predict_proba(ood))
    assert loaded.score(ood) == decoder.score(ood)
    strings = RuleDecoder().fit(codes.flat(), np.array(["a", "b", "c"])[codes.labels["rule"]])
    strings.save(tmp_path / "strings")
    assert RuleDecoder.load(tmp_path / "strings").predict(codes.flat()[:5]).tolist() == strings.predict(
        codes.flat()[:5]
    ).tolist()
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    np.savez(tmp_path / "bad.npz", coef=np.zeros(1))
    with pytest.raises(ValueError, match="not a saved RuleDecoder"):
        RuleDecoder.load(tmp_path / "bad")


def test_code_space_directions_move_the_score_as_the_probe_says():
    codes = _codes()
    decoder = RuleDecoder().fit(codes.flat(), codes.labels["rule"])
    directions = decoder.code_space_directions()
    x = codes.flat()[:1].astype(np.float64)
    for c in range(3):  # the score is linear in the codes, so a unit step along d moves it by |d| exactly
        moved = decoder.decision_function(x + directions[c] / np.linalg.norm(directions[c]))
        expected = np.linalg.norm(directions[c])
        np.testing.assert_allclose(moved[0, c] - decoder.decision_function(x)[0, c], expected, rtol=1e-6)
    pipeline_directions, classes = code_space_directions(make_probe().fit(codes.flat(), codes.labels["rule"]))
    np.testing.assert_allclose(pipeline_directions, directions)
    binary = RuleDecoder().fit(codes.flat(), codes.labels["other"])
    two, _ = code_space_directions(binary)
    np.testing.assert_allclose(two[0], -two[1])
    with pytest.raises(ValueError, match="not a fitted probe"):
        code_space_directions(object())


def test_sets_of_classes_are_refused_with_a_pointer():
    codes = _codes()
    sets = LatentCodes(codes.codes, {"terms": np.stack([codes.labels["rule"]] * 2, 1)}, codes.split,
                       {"task": "fuzzy_logic", "layers": [0, 1]})
    with pytest.raises(ValueError, match="decode_terms"):
        RuleDecoder().fit(sets)
