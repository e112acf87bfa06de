"""Conditional, MDL and baseline probes (`probes.conditional`, `probes.mdl`, `probes.baselines`) against probes
fitted here with scikit-learn directly, and against codelengths computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probes import LatentCodes
from probes._targets import Target
from probes.baselines import UNTRAINED, baseline_probes
from probes.conditional import conditional_probe
from probes.mdl import block_ends, mdl_probe, online_codelength


def _codes(n=1200, seed=0, informative_inputs=True, codes_repeat_inputs=False):
    """3 classes; the inputs carry part of the label (class 2 vs the rest), layer 1's codes carry all of it, layer 0
    is noise (or, with codes_repeat_inputs, a copy of the inputs)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    inputs = rng.normal(size=(n, 2, 2))
    if informative_inputs:
        inputs[:, 0, 0] += 2.5 * (y == 2)
    layer0 = inputs.reshape(n, 4) if codes_repeat_inputs else rng.normal(size=(n, 4))
    layer1 = np.eye(3)[y] * 2.0 + 0.5 * rng.normal(size=(n, 3))
    codes = np.zeros((n, 2, 1, 1, 4))
    codes[:, 0, 0, 0] = layer0
    codes[:, 1, 0, 0, :3] = layer1
    split = np.array(["train", "test", "ood"])[rng.choice(3, n, p=[0.6, 0.2, 0.2])]
    meta = {"label": "rule", "n_classes": 3, "layers": [0, 1]}
    return LatentCodes(codes, {"rule": y, "other": y % 2}, split, meta, inputs=inputs)


def _probe():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=0))


def test_conditional_score_equals_the_difference_of_two_independently_fitted_sklearn_probes():
    codes = _codes()
    result = conditional_probe(codes, layers="each", n_resamples=200)
    y, train, test = codes.labels["rule"], codes.split == "train", codes.split == "test"
    X_in = codes.inputs.reshape(len(codes), -1)
    X_joint = np.hstack([X_in, codes.codes[:, 1].reshape(len(codes), -1)])
    inputs_only = _probe().fit(X_in[train], y[train])
    joint = _probe().fit(X_joint[train], y[train])
    acc_in = np.mean(inputs_only.predict(X_in[test]) == y[test])
    acc_joint = np.mean(joint.predict(X_joint[test]) == y[test])
    bits_in = log_loss(y[test], inputs_only.predict_proba(X_in[test])) / np.log(2)
    bits_joint = log_loss(y[test], joint.predict_proba(X_joint[test])) / np.log(2)
    row = result.row("1", "test")
    assert row.inputs_only == pytest.approx(acc_in)
    assert row.joint == pytest.approx(acc_joint)
    assert row.difference == pytest.approx(acc_joint - acc_in)
    assert row.information == pytest.approx(bits_in - bits_joint, rel=1e-6)
    low, high = row.difference_interval
    assert low <= row.difference <= high and low > 0.2  # layer 1 adds the classes the inputs miss
    assert row.majority == pytest.approx(np.mean(y[test] == np.bincount(y[train]).argmax()))


def test_codes_that_only_repeat_the_inputs_add_nothing_beyond_them():
    row = conditional_probe(_codes(codes_repeat_inputs=True), layers=0, n_resamples=300).row("0", "ood")
    assert row.inputs_only > 0.4  # the inputs carry class 2
    low, high = row.difference_interval
    assert low <= 0 <= high and abs(row.difference) < 0.03


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: conditional_probe(c, layers=7), "not an extracted model layer"),
        (lambda c: conditional_probe(c, label="rules"), "label='rules' is not in these codes"),
        (lambda c: mdl_probe(c, label="rules"), "label='rules' is not in these codes"),
        (lambda c: baseline_probes(c, layers=[5]), "not an extracted model layer"),
        (lambda c: mdl_probe(c.select(mask=np.arange(300))), "too few for the MDL blocks"),
        (lambda c: conditional_probe(c, n_resamples=0), "n_resamples=0 must be a positive integer"),
        (lambda c: baseline_probes(c, untrained=c.select(split="train")), "do not match the codes .* row for row"),
    ],
)
def test_bad_input_gets_one_clear_error_before_any_fitting(call, message):
    with pytest.raises(ValueError, match=message):
        call(_codes())


def test_block_ends_follow_voita_and_titovs_portions():
    assert block_ends(10_000) == [10, 20, 40, 80, 160, 320, 625, 1250, 2500, 5000, 10_000]


def test_online_codelength_matches_a_hand_computation():
    rng = np.random.default_rng(1)
    n, k, smoothing = 1000, 3, 1e-3
    y = rng.integers(0, k, n)
    X = y[:, None] + rng.normal(scale=1.5, size=(n, 2))
    ends = block_ends(n)
    total, blocks = online_codelength(X, Target("y", "class", y, ["a", "b", "c"]), np.arange(n), ends,
                                      LogisticRegression(max_iter=1000), smoothing)
    expected = [ends[0] * np.log2(k)]
    for start, stop in zip(ends, ends[1:], strict=False):
        seen = np.unique(y[:start])
        p = np.zeros((stop - start, k))
        if seen.size == 1:
            p[:, seen[0]] = 1.0
        else:
            model = LogisticRegression(max_iter=1000).fit(X[:start], y[:start])
            p[:, model.classes_] = model.predict_proba(X[start:stop])
        p = (1 - smoothing) * p + smoothing / k
        expected.append(-np.log2(p[np.arange(stop - start), y[start:stop]]).sum())
    assert blocks == pytest.approx(expected)
    assert total == pytest.approx(sum(expected))


def test_perfectly_separable_labels_cost_about_the_first_blocks_uniform_code():
    n = 2000
    y = np.empty(n, dtype=np.int64)
    y[np.random.default_rng(0).permutation(n)] = np.tile([0, 1], n // 2)  # sent in this order: both classes first
    codes = LatentCodes((10.0 * (2 * y - 1))[:, None, None, None, None] * np.ones((1, 1, 1, 1, 1)), {"rule": y},
                        np.array(["train"] * n), {"label": "rule", "n_classes": 2},
                        inputs=np.zeros((n, 1, 1)))
    result = mdl_probe(codes, estimator=LogisticRegression(C=1e4, max_iter=1000), smoothing=0.0, random_state=0)
    row = result.row("0")
    first = result.ends[0] * 1.0  # the first block: 1 bit per row with two classes
    assert row.uniform == n
    assert first <= row.online < first + 2.0
    assert row.inputs_only == pytest.approx(n, rel=0.05)  # constant inputs: no better than uniform
    assert row.prior_only == pytest.approx(row.inputs_only)  # reading a constant is reading nothing
    assert row.compression > 100


def test_the_prior_only_codelength_learns_the_class_frequencies():
    rng = np.random.default_rng(2)
    n = 2000
    y = (rng.random(n) < 0.1).astype(np.int64)  # 10% ones: entropy 0.469 bits per row
    codes = LatentCodes(rng.normal(size=(n, 1, 1, 1, 2)), {"rule": y}, np.array(["train"] * n),
                        {"label": "rule", "n_classes": 2}, inputs=rng.normal(size=(n, 2, 1)))
    row = mdl_probe(codes).row("0")
    p = y.mean()
    entropy = -(p * np.log2(p) + (1 - p) * np.log2(1 - p)) * n  # the best fixed code in hindsight
    assert 0.98 * entropy < row.prior_only < 1.05 * entropy + 20
    assert row.prior_compression == pytest.approx(n / row.prior_only)


def test_knn_and_pca_baselines_match_sklearn_on_the_same_folds():
    codes = _codes(seed=3)
    result = baseline_probes(codes, layers=1, untrained=_codes(seed=3, informative_inputs=False), pca_k=2)
    y, train = codes.labels["rule"], codes.split == "train"
    X = codes.codes[:, 1].reshape(len(codes), -1)
    knn = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=10)).fit(X[train], y[train])
    pca = make_pipeline(StandardScaler(), PCA(n_components=2, random_state=0),
                        LogisticRegression(max_iter=1000, random_state=0)).fit(X[train], y[train])
    X_in = codes.inputs.reshape(len(codes), -1)
    knn_inputs = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=10)).fit(X_in[train], y[train])
    for split in ("test", "ood"):
        rows = codes.split == split
        row = result.row("1", split)
        assert row.input_scores["knn"] == pytest.approx(np.mean(knn_inputs.predict(X_in[rows]) == y[rows]))
        assert row.input_scores["linear"] == row.input_only
        assert row.scores["knn"] == pytest.approx(np.mean(knn.predict(X[rows]) == y[rows]))
        assert row.scores["pca2"] == pytest.approx(np.mean(pca.predict(X[rows]) == y[rows]))
        assert row.scores["linear"] > row.input_only > row.majority
    assert result.probes == ["linear", "pca2", "knn", "mlp", UNTRAINED]


def test_a_set_label_is_probed_one_class_at_a_time():
    rng = np.random.default_rng(0)
    n = 900
    terms = np.sort(np.stack([rng.permutation(4)[:2] for _ in range(n)]), axis=1)
    present = np.zeros((n, 4))
    np.put_along_axis(present, terms, 1, axis=1)
    codes = LatentCodes((present + 0.2 * rng.normal(size=(n, 4)))[:, None, None, None, :], {"terms": terms},
                        np.array(["train", "test", "ood"])[rng.integers(0, 3, n)], {"label": "terms"},
                        inputs=rng.normal(size=(n, 3, 2)))
    result = baseline_probes(codes, estimators={"linear": _probe()})
    row = result.row("0", "ood")
    assert row.scores["linear"] > 0.95 and row.input_only < 0.65  # chance: 2 of 4 terms
    # the floor: the two most frequent train terms, scored by the fraction of each row's terms among them
    train, ood = codes.split == "train", codes.split == "ood"
    top_two = np.argsort(-present[train].sum(axis=0), kind="stable")[:2]
    assert row.majority == pytest.approx(present[ood][:, top_two].sum(axis=1).mean() / 2)
