"""UMAP and PCA views: shapes, finiteness, row bookkeeping, and (UMAP) repeatability as a neighbourhood property."""

import warnings

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from probes import LatentCodes, embed_codes, subsample
from probes.degenerate import ConstantCodesWarning


def _neighbours(coords, k=10):
    return NearestNeighbors(n_neighbors=k + 1).fit(coords).kneighbors(coords, return_distance=False)[:, 1:]


def test_pca_embedding_shapes_and_rows(sraven):
    emb = embed_codes(sraven, "pca", layer="all", max_points=500)
    assert emb.coords.shape == (500, 2) and np.isfinite(emb.coords).all()
    assert emb.rows.shape == (500,) and np.all(np.diff(emb.rows) > 0)
    np.testing.assert_array_equal(emb.labels["rule"], sraven.labels["rule"][emb.rows])
    np.testing.assert_array_equal(emb.split, sraven.split[emb.rows])
    assert emb.layer == "all" and emb.method == "pca"
    assert 0 < sum(emb.params["explained_variance_ratio"]) <= 1
    np.testing.assert_array_equal(
        embed_codes(sraven, "pca", max_points=500).rows, emb.rows
    )  # seeded subsample


def test_pca_split_and_layer(sraven):
    emb = embed_codes(sraven, "pca", layer=0, split="ood", max_points=None)
    assert emb.layer == "0" and set(emb.split) == {"ood"} and emb.n_samples == (sraven.split == "ood").sum()


def test_umap_is_finite_separates_planted_rules_and_repeats_its_neighbourhoods(make_sraven):
    codes = make_sraven(n=400, structure="rule", planted_layers=(0, 1, 2), noise=0.2)
    first = embed_codes(codes, "umap", layer="last", n_neighbors=10, random_state=0)
    second = embed_codes(codes, "umap", layer="last", n_neighbors=10, random_state=0)
    assert first.coords.shape == (400, 2) and np.isfinite(first.coords).all()
    neighbours = _neighbours(first.coords)
    purity = (first.labels["rule"][neighbours] == first.labels["rule"][:, None]).mean()
    assert purity > 0.9  # neighbours in the embedding share the planted rule
    overlap = np.mean(
        [len(set(a) & set(b)) / len(a) for a, b in zip(neighbours, _neighbours(second.coords), strict=True)]
    )
    assert overlap > 0.8  # the same seed on the same machine gives the same neighbourhoods (not coordinates)
    assert first.params["n_neighbors"] == 10


def test_embed_errors(sraven):
    with pytest.raises(ValueError, match="method"):
        embed_codes(sraven, "tsne")
    with pytest.raises(ValueError, match="init"):
        embed_codes(sraven, "umap", init="tsne")
    with pytest.raises(ValueError, match="at least 3"):
        embed_codes(sraven.select(mask=[0, 1]), "pca")
    with pytest.raises(ValueError, match="max_points"):
        subsample(10, 0)


def test_a_fitted_embedding_places_new_codes_in_the_same_picture(make_sraven):
    codes = make_sraven(n=400, structure="rule", planted_layers=(0, 1, 2), noise=0.2, seed=0)
    new = make_sraven(n=200, structure="rule", planted_layers=(0, 1, 2), noise=0.2, seed=0)
    pca = embed_codes(codes, "pca", layer="all", max_points=None, standardize=True)
    X = codes.flat()
    centred = (X - X.mean(0)) / X.std(0)
    np.testing.assert_allclose(pca.transform(codes), pca.coords, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.abs(pca.transform(new)[:, 0]), np.abs(((new.flat() - X.mean(0)) / X.std(0))
                                                                         @ np.linalg.svd(centred)[2][0]), atol=1e-3)
    assert "reducer" not in pca.to_dict() and "scaler" not in pca.to_dict()
    umap_view = embed_codes(codes, "umap", layer="last", n_neighbors=10, init="pca")
    placed = umap_view.transform(codes.select(mask=umap_view.rows[:100]))
    # a fitted row lands among the fitted rows of its own rule
    nearest = NearestNeighbors(n_neighbors=5).fit(umap_view.coords).kneighbors(placed, return_distance=False)
    assert (umap_view.labels["rule"][nearest] == umap_view.labels["rule"][:100, None]).mean() > 0.9
    with pytest.raises(ValueError, match="features at layer"):
        pca.transform(make_sraven(n=50, n_heads=2))


def test_a_failed_spectral_initialisation_falls_back_to_pca_and_says_so(make_sraven, monkeypatch, caplog):
    import umap.umap_

    codes = make_sraven(n=150, structure="rule", planted_layers=(2,), noise=0.2)
    direct = embed_codes(codes, "umap", layer="last", n_neighbors=10, n_epochs=30, init="pca")

    def failing_spectral_layout(*args, **kwargs):  # what umap does when its eigensolver gives up
        import warnings

        warnings.warn("Spectral initialisation failed! The eigenvector solver failed.", UserWarning, stacklevel=1)
        return np.random.default_rng(0).uniform(-10, 10, size=(args[1].shape[0], 2))

    monkeypatch.setattr(umap.umap_, "spectral_layout", failing_spectral_layout)
    with pytest.warns(UserWarning, match="spectral initialisation failed .*using PCA initialisation instead"):
        fallback = embed_codes(codes, "umap", layer="last", n_neighbors=10, n_epochs=30, init="spectral")
    assert fallback.params["init"] == "pca"
    assert "using PCA initialisation instead" in caplog.text
    np.testing.assert_allclose(fallback.coords, direct.coords)  # exactly what a PCA start gives


def test_tiny_inputs_start_from_pca_and_record_it(sraven, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="probes.embed")
    emb = embed_codes(sraven, "umap", max_points=60, n_neighbors=5, n_epochs=20)
    assert emb.params["init"] == "pca" and "unreliable below 100 rows" in caplog.text


def _flatten_layer(codes, layer, noise=0.0, seed=0):
    """`codes` with model layer `layer` made constant: every row the first row's code, plus tiny noise."""
    array = codes.codes.copy()
    rng = np.random.default_rng(seed)
    array[:, layer] = array[:1, layer] + noise * rng.normal(size=array[:, layer].shape)
    return LatentCodes(array, codes.labels, codes.split, codes.meta)


@pytest.mark.parametrize("method", [pytest.param("umap", id="umap"), pytest.param("pca", id="pca")])
def test_constant_codes_are_not_embedded(make_sraven, method):
    codes = _flatten_layer(make_sraven(n=300), layer=2, noise=1e-5)  # a dead layer: float noise only
    with pytest.warns(ConstantCodesWarning, match=r"layer 2") as caught:
        emb = embed_codes(codes, method, layer="last", standardize=True)
    assert caught[0].filename == __file__  # the warning points at the caller, past the decorator
    assert emb.constant and emb.reducer is None and emb.params["skipped"] == "constant codes"
    assert emb.params["relative_spread"] < 1e-4 and emb.coords.shape == (300, 2) and not emb.coords.any()
    np.testing.assert_array_equal(emb.labels["rule"], codes.labels["rule"][emb.rows])
    assert emb.to_dict()["constant"] is True
    with pytest.raises(ValueError, match="constant"):
        emb.transform(codes)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantCodesWarning)
        live = embed_codes(codes, "pca", layer=1)  # the live layers still embed, silently
    assert not live.constant and live.coords.any()
