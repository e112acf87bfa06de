"""Where a decoding score's ceiling comes from: every probe's confusion matrix (kept, serialised, its largest cells
in the table), the score with classes that share a code merged, and the confusion figure."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probes import decode_rules
from probes.figures.confusion import confusion_figure

ADDITION, SUBTRACTION = 5, 6


@pytest.fixture(scope="module")
def tied(make_sraven):
    """Codes where addition and subtraction share one centre in every planted layer (as the paper finds)."""
    return make_sraven(1600, tie=(ADDITION, SUBTRACTION), noise=0.3, seed=1)


@pytest.fixture(scope="module")
def result(tied):
    return decode_rules(tied, layers="each", progress=False, controls=False, merge=[["addition", "subtraction"]])


def _reference_predictions(codes, position):
    """The probe refitted by hand with plain scikit-learn on the train rows; its predictions on every row."""
    X = codes.codes[:, position].reshape(codes.n_samples, -1)
    y = codes.labels["rule"]
    train = codes.split == "train"
    probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=0)).fit(X[train], y[train])
    return probe.predict(X), y


def test_every_probe_keeps_its_held_out_confusion_matrix_and_serialises_it(tied, result):
    predicted, y = _reference_predictions(tied, 2)
    ood = tied.split == "ood"
    expected = confusion_matrix(y[ood], predicted[ood], labels=np.arange(8))
    np.testing.assert_array_equal(result.confusion("ood"), expected)
    np.testing.assert_array_equal(result.confusion("ood", 2), expected)
    saved = json.loads(json.dumps(result.to_dict()))
    assert saved["layers"][2]["confusion"]["ood"] == expected.tolist()
    assert saved["layers"][2]["confusion"]["test"] == result.confusion("test").tolist()


def test_top_confusions_name_the_largest_errors_with_their_share(tied, result):
    predicted, y = _reference_predictions(tied, 2)
    ood = tied.split == "ood"
    errors = ood & (predicted != y)
    pairs, counts = np.unique(np.stack([y[errors], predicted[errors]], 1), axis=0, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    names = tied.meta["class_names"]
    top = result.top_confusions(3, "ood")
    assert [(c.true, c.predicted, c.count) for c in top] == [
        (names[pairs[i][0]], names[pairs[i][1]], int(counts[i])) for i in order[:3]]
    assert top[0].share == pytest.approx(counts[order[0]] / errors.sum())
    assert {top[0].true, top[0].predicted} == {"addition", "subtraction"}  # the tied pair is the ceiling
    line = next(line for line in result.table().splitlines() if line.startswith("top confusions, layer 2, ood"))
    assert f"{top[0].true} → {top[0].predicted} {top[0].count} ({top[0].share:.0%} of errors)" in line
    saved = result.to_dict()["top_confusions"]["ood"]["2"][0]
    assert saved == {"true": top[0].true, "predicted": top[0].predicted, "count": top[0].count,
                     "share": pytest.approx(top[0].share)}


def test_the_merged_score_counts_confusions_within_a_group_as_right_beside_its_own_floors(tied, result):
    predicted, y = _reference_predictions(tied, 2)
    merge = np.arange(8)
    merge[SUBTRACTION] = ADDITION
    for split in ("test", "ood"):
        rows = tied.split == split
        assert result.merged_accuracy(split)[2] == pytest.approx(np.mean(merge[predicted[rows]] == merge[y[rows]]))
        assert result.merged_accuracy(split)[2] > result.accuracy(split)[2] + 0.05
        train_merged = merge[y[tied.split == "train"]]
        majority = np.bincount(train_merged).argmax()
        assert result.merged.baselines[split].majority == pytest.approx(np.mean(merge[y[rows]] == majority))
        assert result.merged.baselines[split].chance == pytest.approx(1 / 7)
    assert result.merged.groups == [["addition", "subtraction"]] and result.merged.n_classes == 7
    table = result.table()
    assert "with addition+subtraction merged into one class (7 classes" in table
    headline = result.to_dict()["headline"]["merged_accuracy"]["ood"]
    assert headline["codes"][2] == pytest.approx(result.merged_accuracy("ood")[2])
    assert result.params["merge"] == [["addition", "subtraction"]]


@pytest.mark.parametrize(
    "merge, message",
    [
        ([["addition", "sum"]], "'sum' is not a class of 'rule'"),
        ([["addition", "subtraction"], ["subtraction", "constant"]], "'subtraction' is in more than one group"),
        ([["addition"]], "is not a list of groups of classes"),
        ("addition", "is not a list of groups of classes"),
    ],
)
def test_a_bad_merge_is_refused_before_any_probe_is_fitted(tied, merge, message):
    with pytest.raises(ValueError, match=message):
        decode_rules(tied, layers="last", progress=False, controls=False, merge=merge)


def test_merge_takes_class_values_too_and_refuses_sets_of_classes(tied, make_fuzzy):
    by_value = decode_rules(tied, layers="last", progress=False, controls=False, merge=[[ADDITION, SUBTRACTION]])
    assert by_value.merged.groups == [["addition", "subtraction"]]
    with pytest.raises(ValueError, match="holds sets of classes"):
        decode_rules(make_fuzzy(300), label="terms", layers="last", progress=False, controls=False,
                     extras=False, merge=[[0, 1]])


def test_set_decoding_names_its_per_class_errors(make_fuzzy):
    result = decode_rules(make_fuzzy(600, noise=2.0), layers="last", progress=False, controls=False,
                          extras=False)
    matrix = result.confusion("ood")  # [class, 2, 2]
    top = result.top_confusions(2, "ood")
    flat = [(int(matrix[c, 1, 0]), f"{result.class_names[c]} present") for c in range(matrix.shape[0])]
    flat += [(int(matrix[c, 0, 1]), f"{result.class_names[c]} absent") for c in range(matrix.shape[0])]
    assert top[0].count == max(count for count, _ in flat)
    assert top[0].share == pytest.approx(top[0].count / sum(count for count, _ in flat))
    assert "top confusions, layer 1, ood:" in result.table()


def test_the_confusion_figure_draws_the_matrix_with_the_merged_group_outlined(result, make_fuzzy):
    figure = confusion_figure(result)
    np.testing.assert_array_equal(figure.counts, result.confusion("ood"))
    rows = figure.counts.sum(axis=1)
    np.testing.assert_allclose(figure.shares[rows > 0].sum(axis=1), 1.0)
    assert figure.layer == "2" and figure.merged == [[ADDITION, SUBTRACTION]]
    assert f"{result.merged_accuracy('ood')[2]:.3f} with addition+subtraction merged" in figure.caption()
    fig = figure.plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == result.class_names
    assert len(ax.patches) == 4  # the 2 x 2 block of the merged pair
    plt.close(fig)
    plotly = figure.plotly()
    assert plotly.data[0].type == "heatmap" and len(plotly.layout.shapes) == 1
    sets = decode_rules(make_fuzzy(300), layers="last", progress=False, controls=False, extras=False)
    with pytest.raises(ValueError, match="sets of classes"):
        confusion_figure(sets)
