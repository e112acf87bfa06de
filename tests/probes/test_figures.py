"""Every figure draws with matplotlib and plotly from the same data; save_figure writes the files."""

import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from probes import (
    code_heatmap_figure,
    decode_rules,
    decoding_figure,
    embed_codes,
    embedding_figure,
    rule_similarity,
    save_figure,
    similarity_figure,
    term_f1_figure,
    training_curves_figure,
    variant_figure,
)


@pytest.fixture(scope="module")
def decoding(make_sraven):
    return decode_rules(make_sraven(n=600), splits=["test", "ood"])


def _metrics_rows(accuracy_key="acc"):
    rows = []
    for step in range(0, 500, 100):
        rows.append(
            {"step": step, "split": "train", "loss": 2.0 / (step + 1), accuracy_key: step / 500, "lr": 1e-3}
        )
        for split in ("test", "ood"):
            rows.append({"step": step, "split": split, "loss": 2.5 / (step + 1), accuracy_key: step / 600})
    return rows


def test_decoding_figure_one_run(decoding):
    display = decoding_figure(decoding)
    assert display.layers == ["0", "1", "2", "all"] and set(display.series) == {("", "test"), ("", "ood")}
    fig = display.plot()
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert "Decoding" in ax.get_title() and ax.get_xlabel() == "layer"
    labels = [line.get_label() for line in ax.get_lines()]
    assert "test" in labels and "ood" in labels and any(label.startswith("chance") for label in labels)
    chance = [line for line in ax.get_lines() if line.get_label().startswith("chance")][0]
    assert chance.get_ydata()[0] == pytest.approx(1 / 8)
    assert len(display.plotly().data) == 2 + 2 + 1  # two splits, their majority lines, chance
    # the plotted values are the result's accuracies, in both renderings
    ood = [line for line in ax.get_lines() if line.get_label() == "ood"][0]
    np.testing.assert_allclose(ood.get_ydata(), decoding.accuracy("ood"))
    plotly_ood = [t for t in display.plotly().data if t.name == "ood"][0]
    np.testing.assert_allclose(plotly_ood.y, decoding.accuracy("ood"))
    assert list(plotly_ood.x) == ["0", "1", "2", "all"]


def test_decoding_figure_compares_runs(decoding):
    display = decoding_figure({"softmax": decoding, "hyla": decoding}, splits=["ood"], metric="macro_f1")
    assert len(display.plotly().data) == 2 + 2 + 1
    assert display.plot().axes[0].get_ylabel() == "macro-f1"
    with pytest.raises(ValueError, match="metric"):
        decoding_figure(decoding, metric="auc")


def test_embedding_figure_by_rule_and_target(sraven):
    display = embedding_figure(embed_codes(sraven, "pca", max_points=300))
    assert [p.name for p in display.panels] == ["rule", "target"]
    rule, target = display.panels
    assert rule.categorical and set(rule.categories) <= set(sraven.class_names())
    fig = display.plot()
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["PCA of layer 2 codes, by rule", "PCA of layer 2 codes, by target"]
    assert len(display.plotly().data) == len(rule.categories) + len(target.categories)
    embedding = embed_codes(sraven, "pca", max_points=300)
    np.testing.assert_allclose(display.coords, embedding.coords)
    drawn = np.concatenate([c.get_offsets() for c in fig.axes[0].collections])
    np.testing.assert_allclose(np.sort(drawn, axis=0), np.sort(embedding.coords, axis=0), rtol=1e-6)
    traces = [t for t in display.plotly().data if t.legendgroup == "rule"]
    assert sum(len(t.x) for t in traces) == embedding.coords.shape[0]


def test_embedding_figure_continuous_and_set_labels(fuzzy):
    display = embedding_figure(embed_codes(fuzzy, "pca", layer="all"), color_by=["terms", "target", "split"])
    terms, target, split = display.panels
    assert not terms.categorical  # more compositions than a legend holds: coloured by id
    assert not target.categorical and split.categorical
    assert len(display.plotly().data) == 1 + 1 + len(split.categories)
    assert len([ax for ax in display.plot().axes if ax.get_title()]) == 3
    with pytest.raises(ValueError, match="color_by"):
        embedding_figure(embed_codes(fuzzy, "pca"), color_by=["colour"])


def test_similarity_figure(sraven):
    display = similarity_figure(rule_similarity(sraven))
    fig = display.plot()
    assert fig.axes[0].images and "similarity" in fig.axes[0].get_title()
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == sraven.class_names()
    heatmap = display.plotly().data
    assert len(heatmap) == 1 and heatmap[0].type == "heatmap"
    expected = rule_similarity(sraven).similarity
    np.testing.assert_allclose(np.asarray(fig.axes[0].images[0].get_array()), expected)
    np.testing.assert_allclose(np.asarray(heatmap[0].z, dtype=float), expected)


@pytest.mark.parametrize(
    ("score_norm", "label"),
    [
        pytest.param("softmax", "attention probability", id="softmax"),
        pytest.param("rms_head", "attention score (not a probability)", id="hyla"),
        pytest.param("none", "attention score (not a probability)", id="linear"),
    ],
)
def test_code_heatmaps_say_whether_codes_are_probabilities(make_sraven, score_norm, label):
    codes = make_sraven(n=300, score_norm=score_norm)
    display = code_heatmap_figure(codes)
    assert display.value_label == label
    assert display.means.shape == (8, 4, 3 * 2)  # rules x heads x (layer, query, key)
    rule = codes.labels["rule"]
    expected = codes.codes[rule == 5].mean(axis=0)  # [layer, head, query, key]
    np.testing.assert_allclose(display.means[5], expected.transpose(1, 0, 2, 3).reshape(4, 6), rtol=1e-5)
    assert display.columns[:2] == ["L0 q0 k0", "L0 q0 k1"]
    fig = display.plot()
    assert any(ax.get_ylabel() == label for ax in fig.axes)  # the colour bar
    plotly = display.plotly()
    assert len(plotly.data) == 8 and plotly.layout.coloraxis.colorbar.title.text == label


def test_term_f1_figure(fuzzy):
    terms = decode_rules(fuzzy, layers="each").terms
    display = term_f1_figure(terms, split="ood")
    assert display.f1.shape == (2, 16) and len(display.plotly().data) == 1
    np.testing.assert_allclose(display.f1, np.asarray(terms.f1["ood"], dtype=float), equal_nan=True)
    np.testing.assert_allclose(np.asarray(display.plotly().data[0].z, dtype=float), display.f1, equal_nan=True)
    assert display.plot().axes[0].get_xlabel().startswith("term")
    with pytest.raises(ValueError, match="split"):
        term_f1_figure(decode_rules(fuzzy, layers="all"), split="validation")


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"softmax": [0.55, 0.57, 0.56], "linear": 0.56, "hyla": [0.69, 0.70]}, id="mapping"),
        pytest.param(
            [
                {"variant": "softmax", "ood_acc": 0.55},
                {"variant": "softmax", "ood_acc": 0.57},
                {"variant": "softmax", "ood_acc": 0.56},
                {"variant": "linear", "ood_acc": 0.56},
                {"variant": "hyla", "ood_acc": 0.69},
                {"variant": "hyla", "ood_acc": 0.70},
            ],
            id="summary-dicts",
        ),
    ],
)
def test_variant_figure(values):
    display = variant_figure(values)
    assert display.variants == ["softmax", "linear", "hyla"]
    np.testing.assert_allclose(display.means, [0.56, 0.56, 0.695])
    np.testing.assert_allclose(
        display.sems, [0.01 / np.sqrt(3), 0.0, 0.005 / np.sqrt(2) * np.sqrt(2)], atol=1e-12
    )
    assert len(display.plot().axes[0].patches) == 3
    assert len(display.plotly().data) == 2


def test_variant_figure_errors():
    with pytest.raises(ValueError, match="lacks"):
        variant_figure([{"variant": "hyla"}])
    with pytest.raises(ValueError, match="empty"):
        variant_figure({})


@pytest.mark.parametrize("key", [pytest.param("acc", id="sraven-acc"), pytest.param("r2", id="fuzzy-r2")])
def test_training_curves(key):
    display = training_curves_figure(_metrics_rows(key))
    assert display.keys == ["loss", key]
    fig = display.plot()
    assert [ax.get_title() for ax in fig.axes] == ["loss", key]
    assert fig.axes[0].get_yscale() == "log"
    assert len(fig.axes[0].get_lines()) == 3
    assert len(display.plotly().data) == 2 * 3  # metrics x splits
    rows = [r for r in _metrics_rows(key) if r["split"] == "ood"]
    ood = [line for line in fig.axes[1].get_lines() if line.get_label() == "ood"][0]
    np.testing.assert_allclose(ood.get_xdata(), [r["step"] for r in rows])
    np.testing.assert_allclose(ood.get_ydata(), [r[key] for r in rows])
    runs = training_curves_figure({"a": _metrics_rows(key), "b": _metrics_rows(key)})
    assert len(runs.plotly().data) == 2 * 2 * 3
    with pytest.raises(ValueError, match="metrics.jsonl"):
        training_curves_figure([{"loss": 1.0}])


def test_training_curves_mark_a_single_evaluation_point():
    rows = [{"step": s, "split": "train", "loss": 1.0 / s} for s in (1, 2, 3)]
    rows += [{"step": 3, "split": "ood", "loss": 0.5, "acc": 0.25}]
    display = training_curves_figure(rows)
    acc = display.plot().axes[1].get_lines()
    assert len(acc) == 1 and acc[0].get_marker() == "o" and list(acc[0].get_ydata()) == [0.25]
    modes = {(t.name, t.xaxis): t.mode for t in display.plotly().data}
    assert modes == {("train", "x"): "lines", ("ood", "x"): "markers", ("ood", "x2"): "markers"}


def test_save_figure_writes_static_and_html(tmp_path, sraven):
    display = similarity_figure(rule_similarity(sraven))
    written = save_figure(display, tmp_path / "figs" / "similarity", formats=("png", "svg", "html"))
    assert [p.name for p in written] == ["similarity.png", "similarity.svg", "similarity.html"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in written[1].read_text()
    page = written[2].read_text()
    assert "plotly.js v" in page and not re.search(r"<script[^>]+src=", page)  # standalone, works offline


def test_save_figure_plain_figures_and_errors(tmp_path, sraven):
    display = similarity_figure(rule_similarity(sraven))
    assert save_figure(display.plot(), tmp_path / "mpl", formats=("pdf",))[0].read_bytes()[:4] == b"%PDF"
    assert save_figure(display.plotly(), tmp_path / "ply", formats=("html",))[0].exists()
    with pytest.raises(ValueError, match="kaleido"):
        save_figure(display.plotly(), tmp_path / "ply", formats=("png",))
    with pytest.raises(ValueError, match="html needs"):
        save_figure(display.plot(), tmp_path / "mpl", formats=("html",))
    with pytest.raises(ValueError, match="jpg"):
        save_figure(display, tmp_path / "x", formats=("jpg",))
