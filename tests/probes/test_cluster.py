"""k-means on codes finds planted rule clusters (AMI/ARI near 1) and nothing in random codes (near 0)."""

import json

import numpy as np
import pytest

from probes import LatentCodes, class_vector, cluster_codes
from probes.degenerate import ConstantCodesWarning


def test_planted_clusters_match_rules(make_sraven):
    codes = make_sraven(n=800, structure="rule", planted_layers=(1, 2), noise=0.2)
    result = cluster_codes(codes)
    assert result.k == 8 and result.n_samples == 800 and result.layer_names == ["0", "1", "2", "all"]
    ami, ari = dict(zip(result.layer_names, result.scores("ami"), strict=True)), result.scores("ari")
    assert ami["1"] > 0.9 and ami["2"] > 0.9 and ari[1] > 0.9
    assert ami["0"] < 0.05  # noise layer
    assert result.scores("silhouette")[1] > 0.3 > result.scores("silhouette")[0]


def test_random_codes_have_no_cluster_structure(make_sraven):
    result = cluster_codes(make_sraven(n=800, structure="random", seed=4), layers="all")
    assert abs(result.layers[0].ami) < 0.05 and abs(result.layers[0].ari) < 0.05


def test_k_split_and_errors(sraven):
    result = cluster_codes(sraven, layers="last", k=3, split="ood")
    assert result.k == 3 and result.splits == ["ood"] and result.n_samples == (sraven.split == "ood").sum()
    with pytest.raises(ValueError, match="k=1"):
        cluster_codes(sraven, k=1)
    with pytest.raises(ValueError, match="selects no rows"):
        cluster_codes(sraven.select(split="train"), split="test")


def test_set_labels_cluster_by_composition(make_fuzzy):
    codes = make_fuzzy(n=600, structure="composition", noise=0.01)
    name, ids, names = class_vector(codes)
    assert name == "terms" and ids.max() + 1 == len(names) == len(
        np.unique(np.sort(codes.labels["terms"], 1), axis=0)
    )
    assert "+" in names[0]
    result = cluster_codes(codes, layers="all")
    assert result.k == len(names)
    assert result.layers[0].ami > 0.8


def test_serialize_and_table(sraven):
    result = cluster_codes(sraven, layers="each")
    assert json.loads(json.dumps(result.to_dict(), allow_nan=False))["k"] == 8
    assert "AMI" in result.table() and len(result.table().splitlines()) == 2 + 3
    with pytest.raises(ValueError, match="metric"):
        result.scores("purity")


def test_fitted_kmeans_assigns_new_codes_as_the_fit_did(make_sraven):
    codes = make_sraven(n=800, structure="rule", planted_layers=(1, 2), noise=0.2)
    result = cluster_codes(codes)
    row = result.layers[result.layer_names.index("1")]
    np.testing.assert_array_equal(result.predict(codes, layer=1), row.kmeans.labels_)
    X = codes.flat([1])
    nearest = ((X[:, None, :] - row.kmeans.cluster_centers_[None]) ** 2).sum(-1).argmin(1)
    np.testing.assert_array_equal(result.predict(codes, "1"), nearest)
    assert result.predict(codes, "all").shape == (800,)
    assert all("kmeans" not in row for row in result.to_dict()["layers"]) and json.dumps(result.to_dict())
    with pytest.raises(ValueError, match="was not clustered"):
        result.predict(codes, layer=7)


def test_constant_layers_are_not_clustered(make_sraven):
    codes = make_sraven(n=400, structure="rule", planted_layers=(1, 2), noise=0.2)
    array = codes.codes.copy()
    array[:, 0] = array[:1, 0] * (1 + 1e-5 * np.random.default_rng(0).normal(size=array[:, 0].shape))
    flat = LatentCodes(array, codes.labels, codes.split, codes.meta)
    with pytest.warns(ConstantCodesWarning, match=r"k-means: constant codes in layer 0 ") as caught:
        result = cluster_codes(flat)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert result.constant_layers == ["0"]
    row = result.layers[0]
    assert row.constant and row.kmeans is None
    assert np.isnan([row.ami, row.ari, row.silhouette, row.inertia]).all()
    assert result.layers[1].ami > 0.9 and not result.layers[-1].constant  # the live layers and "all" are kept
    assert "constant codes: k-means skipped" in result.table().splitlines()[2]
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["layers"][0]["constant"] is True and data["layers"][0]["ami"] is None
    with pytest.raises(ValueError, match="constant"):
        result.predict(flat, layer=0)
