"""Rule similarity of mean codes (Fig. 5E) and topographic similarity, on planted and random codes."""

import json

import numpy as np
import pytest

from probes import LatentCodes, class_means, rule_similarity, topographic_similarity
from probes.degenerate import ConstantCodesWarning


def test_rules_sharing_a_code_have_cosine_one(make_sraven):
    # addition (5) and subtraction (6) share one code, as the paper reports (Fig. 5E)
    codes = make_sraven(structure="rule", planted_layers=(0, 1, 2), tie=(5, 6), noise=0.1)
    result = rule_similarity(codes)
    sim = result.similarity
    assert sim.shape == (8, 8) and result.class_names[5] == "addition"
    np.testing.assert_allclose(np.diag(sim), 1.0, atol=1e-6)
    np.testing.assert_allclose(sim, sim.T, atol=1e-12)
    assert sim[5, 6] > 0.99
    off = sim[~np.eye(8, dtype=bool)]
    assert np.sort(off)[-3] < 0.9  # only the tied pair (counted twice) is that close
    assert result.most_similar(1)[0][:2] == ("addition", "subtraction")
    json.dumps(result.to_dict(), allow_nan=False)


def test_absent_rule_gives_nan_and_center_option(sraven):
    rows = sraven.select(mask=sraven.labels["rule"] != 7)
    result = rule_similarity(rows, layer="last", center=True)
    assert result.counts[7] == 0 and np.isnan(result.similarity[7]).all()
    assert result.layer == "2" and result.centered


def test_class_means_of_set_labels(fuzzy):
    means = class_means(fuzzy, split="train")
    assert means.means.shape == (16, 2, 8, 1, 1)
    terms = fuzzy.labels["terms"][fuzzy.split == "train"]
    assert means.counts[3] == (terms == 3).any(axis=1).sum()
    assert means.counts[12:].sum() == 0  # novel terms never occur in train


def test_topographic_similarity_planted_vs_random(make_sraven):
    planted = topographic_similarity(
        make_sraven(n=600, structure="tuple", noise=0.1), n_permutations=20, n_pairs=5000
    )
    assert planted.label == "rules" and planted.distance == "hamming"
    assert planted.layers == ["0", "1", "2", "all"]
    assert planted.rho[-1] > 0.3 and planted.rho[0] < 0.1  # layer 0 holds noise only
    assert planted.p_value[-1] == pytest.approx(1 / 21)  # no shuffle reaches the planted correlation
    random = topographic_similarity(
        make_sraven(n=600, structure="random", seed=5), layers="all", n_pairs=5000
    )
    assert abs(random.rho[0]) < 0.05 and random.p_value is None
    json.dumps(planted.to_dict(), allow_nan=False)


def test_topographic_similarity_fuzzy_uses_term_sets(fuzzy):
    result = topographic_similarity(fuzzy, layers="all", metric="cosine")
    assert result.label == "terms" and result.distance == "symmetric_difference"
    assert result.rho[0] > 0.3


def test_topographic_all_pairs_when_few_rows_and_errors(sraven):
    small = sraven.select(mask=np.arange(30))
    assert topographic_similarity(small, layers="all").n_pairs == 30 * 29 // 2
    with pytest.raises(ValueError, match="metric"):
        topographic_similarity(sraven, metric="manhattan")
    with pytest.raises(ValueError, match="distance"):
        topographic_similarity(sraven, distance="jaccard")


def test_constant_codes_give_no_topographic_score_and_no_centered_similarity(make_sraven):
    codes = make_sraven(n=300, structure="tuple", noise=0.1)
    array = codes.codes.copy()
    array[:, 2] = array[:1, 2] + 1e-6 * np.random.default_rng(1).normal(size=array[:, 2].shape)
    flat = LatentCodes(array, codes.labels, codes.split, codes.meta)
    with pytest.warns(ConstantCodesWarning, match="topographic similarity: constant codes in layer 2") as w:
        topo = topographic_similarity(flat, n_permutations=5, n_pairs=2000)
    assert w[0].filename == __file__
    assert topo.constant_layers == ["2"] and np.isnan(topo.rho[2]) and np.isnan(topo.p_value[2])
    assert np.isfinite(topo.rho[[0, 1, 3]]).all()
    assert json.loads(json.dumps(topo.to_dict(), allow_nan=False))["constant_layers"] == ["2"]
    plain = rule_similarity(flat, layer="last", center=False)
    assert plain.constant and np.allclose(plain.similarity[np.isfinite(plain.similarity)], 1.0)
    centered = rule_similarity(flat, layer="last", center=True)
    assert centered.constant and np.isnan(centered.similarity).all()  # what centering leaves is noise
    assert not rule_similarity(flat, layer=1).constant


def test_rule_similarity_is_centred_by_default(make_sraven):
    # softmax-like codes: positive, with a large shared mean, so raw cosines are all close to 1
    codes = make_sraven(structure="rule", planted_layers=(2,), noise=0.1)
    shifted = LatentCodes(np.abs(codes.codes) + 5.0, codes.labels, codes.split, codes.meta)
    default = rule_similarity(shifted, layer="last")
    assert default.centered
    flat = shifted.codes[:, 2].reshape(shifted.n_samples, -1).astype(np.float64)
    rule = shifted.labels["rule"]
    means = np.stack([flat[rule == c].mean(axis=0) for c in range(8)]) - flat.mean(axis=0)
    unit = means / np.linalg.norm(means, axis=1, keepdims=True)
    np.testing.assert_allclose(default.similarity, unit @ unit.T, atol=1e-6)
    raw = rule_similarity(shifted, layer="last", center=False).similarity
    assert raw[~np.eye(8, dtype=bool)].min() > 0.9  # raw: one dark block; centred: the rules' differences
    assert default.similarity[~np.eye(8, dtype=bool)].min() < 0.5
