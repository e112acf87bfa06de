"""Every figure draws with matplotlib and plotly from the same data; save_figure writes the files."""

import dataclasses
import re
import warnings

import numpy as np
import pytest
from matplotlib.figure import Figure
from plotly.offline import get_plotlyjs

from probes import (
    Controls,
    LatentCodes,
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
from probes.degenerate import ConstantCodesWarning
from probes.figures import CONSTANT_TEXT, experiment_figure


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


def test_decoding_figure_draws_the_input_only_control_and_names_the_reading(decoding):
    controls = Controls("rule", "raw tokens", {"test": 0.4, "ood": 0.3}, [], None, None, "input-only")
    display = decoding_figure(dataclasses.replace(decoding, controls=controls))
    assert display.input_only == {("", "test"): 0.4, ("", "ood"): 0.3}
    ax = display.plot().axes[0]
    drawn = [line for line in ax.get_lines() if len(line.get_ydata())]  # legend entries hold no data
    levels = sorted(line.get_ydata()[0] for line in drawn if line.get_linestyle() == "-.")
    assert levels == pytest.approx([0.3, 0.4])  # one input-only line per split, dash-dotted
    assert "input-only control" in [t.get_text() for t in ax.get_legend().get_texts()]
    traces = {t.name: t for t in display.plotly().data}
    assert traces["input-only control · ood"].y == (0.3, 0.3)
    assert len(traces) == 2 + 2 + 2 + 1  # two splits, their majority and input-only lines, chance
    assert decoding_figure(dataclasses.replace(decoding, controls=controls), metric="macro_f1").input_only == {}
    # the title names the reading the codes were taken at; hand-made codes (no reading) get no suffix
    assert decoding.reading and display.title.endswith(f"\nreading: {decoding.reading}")
    assert " ".join(ax.get_title().split()).endswith(f"reading: {decoding.reading}")  # wrapped to the axes' width
    assert display.plotly().layout.title.text.endswith(f"<br>reading: {decoding.reading}")
    assert "reading" not in decoding_figure(dataclasses.replace(decoding, reading=None)).title


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


def _domains(fig):
    """x domain [start, end] of each plotly panel, in panel order (xaxis, xaxis2, ...)."""
    layout = fig.layout.to_plotly_json()
    names = sorted((k for k in layout if k.startswith("xaxis")), key=lambda k: int(k[5:] or 1))
    return [list(layout[name]["domain"]) for name in names]


def test_set_labels_get_a_categorical_palette_and_a_legend_per_panel(fuzzy):
    display = embedding_figure(embed_codes(fuzzy, "pca", layer="all"), color_by=["terms", "target", "split"])
    terms, target, split = display.panels
    compositions = {tuple(row) for row in np.sort(fuzzy.labels["terms"], axis=1)}
    assert len(compositions) > 24  # more term pairs than the old limit that fell back to a colour scale
    assert terms.categorical and len(terms.categories) == len(compositions)
    names = fuzzy.class_names()  # the term names every other figure and table uses, not their ids
    assert set(terms.categories) == {f"{names[a]} + {names[b]}" for a, b in compositions}
    assert not target.categorical and split.categorical  # only a real-valued label is continuous
    assert split.categories == ["train", "test", "ood", "novel_terms"]  # split order, not alphabetical
    colors = terms.colors()
    assert len(set(colors)) == len(colors)  # one distinct colour per term pair
    fig = display.plotly()
    assert len(fig.data) == len(terms.categories) + 1 + len(split.categories)
    by_terms = [t for t in fig.data if t.legendgroup == "terms"]
    assert [t.name for t in by_terms] == terms.categories
    assert all(t.marker.colorscale is None and isinstance(t.marker.color, str) for t in by_terms)
    # each categorical panel has its own legend, the continuous one a colour bar and no legend entry
    assert {t.legend for t in by_terms} == {"legend"} and {t.legend for t in fig.data[-3:]} == {"legend3"}
    (continuous,) = [t for t in fig.data if t.marker.colorbar.title.text == "target"]
    assert continuous.showlegend is False and list(continuous.marker.color) == list(target.values)
    mpl = display.plot()
    scatter_axes = mpl.axes[:3]
    assert [ax.get_legend() is not None for ax in scatter_axes] == [True, False, True]
    legend_texts = [t.get_text() for t in scatter_axes[0].get_legend().get_texts()]
    assert legend_texts == terms.categories
    assert [ax.get_label() for ax in mpl.axes[3:]] == ["<colorbar>"]  # one colour bar: target's
    with pytest.raises(ValueError, match="color_by"):
        embedding_figure(embed_codes(fuzzy, "pca"), color_by=["colour"])


def test_keys_of_side_by_side_panels_do_not_overlap(fuzzy):
    """The report's "UMAP by terms / by target": each legend or colour bar sits between its panel and the
    next."""
    display = embedding_figure(embed_codes(fuzzy, "pca"), color_by=["target", "prediction", "terms", "split"])
    fig = display.plotly()
    domains = _domains(fig)
    assert len(domains) == 4
    bars = [t.marker.colorbar for t in fig.data if t.marker.colorbar.title.text in ("target", "prediction")]
    legends = [fig.layout.legend3, fig.layout.legend4]
    keys = [bar.x for bar in bars] + [legend.x for legend in legends]
    for (_, end), (start, _), key in zip(domains, domains[1:] + [[1.0, 1.0]], keys, strict=True):
        assert end < key < start or (start == 1.0 and end < key < 1.0)
    for (_, end), (start, _), bar in zip(domains[:2], domains[1:3], bars, strict=True):
        gap_px = (start - end) * fig.layout.width
        assert gap_px > bar.thickness + 40  # the bar and its tick labels fit in the gap


def test_labels_with_too_many_values_keep_the_most_frequent_and_grey_the_rest(make_sraven):
    codes = make_sraven(n=1200)
    display = embedding_figure(embed_codes(codes, "pca", max_points=None), color_by=["rules"])
    (panel,) = display.panels
    tuples = {tuple(row) for row in np.sort(codes.labels["rules"], axis=1)}
    assert len(tuples) > 80 and panel.categorical and len(panel.categories) == 80
    other = panel.categories[-1]
    assert other == f"other ({len(tuples) - 79} values)" and panel.colors()[-1] == "#bbbbbb"
    counts = {c: int((panel.values == c).sum()) for c in panel.categories[:-1]}
    assert min(counts.values()) >= max(  # kept: at least as frequent as any bucketed value
        int((np.array(["+".join(map(str, r)) for r in np.sort(codes.labels["rules"], 1)]) == v).sum())
        for v in {"+".join(map(str, t)) for t in tuples} - set(counts)
    )


def test_constant_codes_are_not_embedded_and_the_figure_says_so(make_fuzzy):
    codes = make_fuzzy(n=300)
    flat = LatentCodes(np.broadcast_to(codes.codes[:1], codes.codes.shape) + 1e-6 * codes.codes, codes.labels,
                       codes.split, codes.meta)
    with pytest.warns(ConstantCodesWarning, match="layer 1"):
        embedding = embed_codes(flat, "umap", layer="last")
    display = embedding_figure(embedding)
    assert display.constant and embedding.constant
    fig = display.plot()
    scatter_axes = [ax for ax in fig.axes if ax.get_title()]
    assert len(scatter_axes) == 2 and not any(ax.collections for ax in scatter_axes)
    assert all(CONSTANT_TEXT in " ".join(t.get_text() for t in ax.texts) for ax in scatter_axes)
    plotly = display.plotly()
    assert len(plotly.data) == 0
    assert sum(CONSTANT_TEXT in a.text for a in plotly.layout.annotations) == 2


def test_the_palette_gives_distinct_readable_colours():
    from matplotlib.colors import to_rgb

    from probes.figures._base import _palette

    for n in (8, 20, 66, 120):
        colors = _palette(n)
        assert len(colors) == n and len(set(colors)) == n
    rgb = np.array([to_rgb(c) for c in _palette(120)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = linear @ [0.2126, 0.7152, 0.0722]  # relative luminance (WCAG); white is 1
    assert luminance.max() < 0.75  # nothing near white, which vanishes on a white or light-grey page


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
    assert display.title.endswith(f"\nreading: {codes.reading}") and codes.reading
    hand_made = LatentCodes(codes.codes, codes.labels, codes.split, {"task": "sraven", "label": "rule"})
    assert hand_made.reading is None and "reading" not in code_heatmap_figure(hand_made).title


def test_term_f1_figure(fuzzy):
    terms = decode_rules(fuzzy, layers="each").extras["terms"]
    display = term_f1_figure(terms, split="ood")
    assert display.f1.shape == (2, 16) and len(display.plotly().data) == 1 + 1 + 1  # heatmap, mean F1, floor
    np.testing.assert_allclose(display.f1, np.asarray(terms.f1["ood"], dtype=float), equal_nan=True)
    np.testing.assert_allclose(np.asarray(display.plotly().data[0].z, dtype=float), display.f1, equal_nan=True)
    assert display.plot().axes[0].get_xlabel().startswith("term")
    assert display.title.endswith(f"\nreading: {terms.reading}")
    with pytest.raises(ValueError, match="split"):
        term_f1_figure(decode_rules(fuzzy, layers="all"), split="validation")


def test_term_f1_figure_draws_the_floor_and_the_input_only_control(fuzzy):
    terms = decode_rules(fuzzy, layers="each").extras["terms"]
    terms = dataclasses.replace(terms, input_only_f1={s: 0.5 for s in terms.f1}, reading=None)
    display = term_f1_figure(terms, split="ood")
    floor = terms.always_present_f1["ood"]
    assert display.always_present == floor and display.input_only == 0.5
    assert "reading" not in display.title  # codes without a recorded reading: no suffix
    mean_panel = display.plot().axes[1]
    lines = {line.get_label(): line for line in mean_panel.get_lines()}
    np.testing.assert_allclose(lines["codes (mean F1)"].get_ydata(), terms.mean_f1("ood"))
    assert lines[f"always present ({floor:.3f})"].get_ydata()[0] == pytest.approx(floor)
    assert lines["input-only control (0.500)"].get_ydata()[0] == pytest.approx(0.5)
    traces = {t.name: t for t in display.plotly().data}
    assert traces[f"always present ({floor:.3f})"].y == (floor, floor)
    assert traces["input-only control (0.500)"].y == (0.5, 0.5)
    no_floors = dataclasses.replace(terms, always_present_f1=None, input_only_f1=None)
    assert term_f1_figure(no_floors, split="ood").references() == {}


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
    # the page loads plotly.js from its own folder (offline), written there once; not 4.6 MB inside every page
    sources = re.findall(r'<script[^>]+src="([^"]+)"', page)
    assert sources == ["plotly.min.js"] and "plotly.js v" not in page
    bundle = tmp_path / "figs" / "plotly.min.js"
    assert bundle.read_text().startswith(get_plotlyjs()[:200])
    second = save_figure(display, tmp_path / "figs" / "again", formats=("html",))[0]
    assert sorted(p.name for p in (tmp_path / "figs").iterdir() if p.suffix == ".js") == ["plotly.min.js"]
    assert second.stat().st_size < 100_000 < bundle.stat().st_size  # the bundle is shared, not copied
    inline = save_figure(display, tmp_path / "alone" / "similarity", formats=("html",), include_plotlyjs=True)[0]
    assert "plotly.js v" in inline.read_text() and not (tmp_path / "alone" / "plotly.min.js").exists()


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


def test_training_curves_colour_by_variant_dash_by_split_and_log_loss():
    rows = _metrics_rows()
    runs = {"hyla-s0": rows, "hyla-s1": rows, "softmax-s0": rows}
    variants = {"hyla-s0": "hyla", "hyla-s1": "hyla", "softmax-s0": "softmax"}
    display = training_curves_figure(runs, variants=variants)
    fig = display.plot()
    loss_ax = fig.axes[0]
    assert loss_ax.get_yscale() == "log" and fig.axes[1].get_yscale() == "linear"
    assert "log" in loss_ax.get_ylabel()
    lines = {line.get_label(): line for line in loss_ax.get_lines()}
    assert len(lines) == 3 * 3
    color = {name: line.get_color() for name, line in lines.items()}
    assert color["hyla-s0 · train"] == color["hyla-s1 · ood"] != color["softmax-s0 · train"]  # by variant
    style = {name: line.get_linestyle() for name, line in lines.items()}
    assert len({style[f"hyla-s0 · {s}"] for s in ("train", "test", "ood")}) == 3  # line style = split
    assert style["hyla-s0 · test"] == style["softmax-s0 · test"]
    legend = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert legend == ["hyla", "softmax", "train", "test", "ood"]
    plotly = display.plotly()
    assert plotly.layout.yaxis.type == "log" and plotly.layout.yaxis2.type != "log"
    assert {t.legendgroup for t in plotly.data} == {"hyla", "softmax"}
    titles = [t.legendgrouptitle.text for t in plotly.data if t.legendgrouptitle.text]
    assert titles == ["hyla", "softmax"]
    dashes = {(t.name, t.xaxis): t.line.dash for t in plotly.data}
    assert dashes["hyla-s1 · train", "x"] == "solid" and dashes["hyla-s1 · ood", "x"] == "dot"


def test_training_curves_keep_a_linear_loss_axis_when_a_loss_is_not_positive():
    rows = [{"step": s, "split": "train", "loss": 1.0 - 0.5 * s} for s in range(4)]  # reaches -0.5
    display = training_curves_figure(rows)
    assert display.plot().axes[0].get_yscale() == "linear"
    assert display.plotly().layout.yaxis.type != "log"


def test_decoding_figure_names_constant_layers(decoding):
    display = decoding_figure({"softmax": decoding, "hyla": decoding}, splits=["ood"],
                              constant_layers={"hyla": ["0"]})
    ticks = [t.get_text() for t in display.plot().axes[0].get_xticklabels()]
    assert ticks == [f"0\n{CONSTANT_TEXT} (hyla)", "1", "2", "all"]
    axis = display.plotly().layout.xaxis
    assert list(axis.tickvals) == ["0", "1", "2", "all"]
    assert axis.ticktext[0] == f"0<br>{CONSTANT_TEXT} (hyla)"
    every = decoding_figure(decoding, constant_layers=["0", "1"])
    assert [t.get_text() for t in every.plot().axes[0].get_xticklabels()][:3] == [
        f"0\n{CONSTANT_TEXT}", f"1\n{CONSTANT_TEXT}", "2"]
    assert decoding_figure(decoding).constant == {}


def _transfer_table():
    return {
        "name": "function_transfer", "task": "fuzzy_logic", "variant": "hyla",
        "columns": ["r2_donor", "r2_recipient", "clean_r2_donor", "clean_r2_recipient", "donor_r2_donor"],
        "params": {"split": "test"},
        "rows": [{"layer": layer, "r2_donor": d, "r2_recipient": r, "clean_r2_donor": -0.45,
                  "clean_r2_recipient": 0.93, "donor_r2_donor": 0.93}  # two reference lines coincide
                 for layer, d, r in (("0", -0.4, 0.9), ("1", 0.55, 0.1), ("all", 0.8, -0.2))],
    }


@pytest.mark.parametrize(
    ("table", "ylabel"),
    [
        pytest.param(_transfer_table(), "R² of the output on test", id="function-transfer"),
        pytest.param({"name": "mean_ablation", "task": "sraven", "variant": "softmax",
                      "columns": ["clean", "ablated", "drop"], "params": {"split": "ood", "metric": "acc"},
                      "rows": [{"layer": "0", "clean": 0.9, "ablated": 0.5, "drop": 0.4}]},
                     "accuracy on ood", id="ablation"),
        pytest.param({"name": "rule_transfer", "task": "sraven", "variant": "hyla",
                      "columns": ["transfer", "keep", "clean_keep", "n_pairs"], "params": {"split": "test"},
                      "rows": [{"layer": "0", "transfer": 0.1, "keep": 0.8, "clean_keep": 0.95,
                                "n_pairs": 500}]},
                     "share of pairs on test", id="rule-transfer"),
    ],
)
def test_experiment_figures_have_a_y_label_and_every_column(table, ylabel):
    display = experiment_figure(table)
    columns = [c for c in table["columns"] if not c.startswith("n_")]
    assert list(display.series) == columns
    ax = display.plot().axes[0]
    assert ax.get_ylabel() == ylabel and ax.get_xlabel() == "layer intervened on"
    drawn = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert sorted(drawn) == sorted(columns)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == columns
    plotly = display.plotly()
    assert plotly.layout.yaxis.title.text == ylabel and {t.name for t in plotly.data} == set(columns)


def test_a_columns_interval_is_drawn_as_its_error_bars_not_as_a_line():
    """rule_transfer's `difference_ci` is the half-width of `difference`'s interval: the figure draws it as error
    bars on the difference line (±0.02 around 0.12 reaches 0.10 and 0.14), in matplotlib and plotly alike."""
    table = {"name": "rule_transfer", "task": "sraven", "variant": "linear",
             "columns": ["transfer", "control", "difference", "difference_ci", "n_pairs"], "params": {"split": "ood"},
             "rows": [{"layer": "0", "transfer": 0.01, "control": 0.01, "difference": 0.0, "difference_ci": 0.005},
                      {"layer": "all", "transfer": 0.15, "control": 0.03, "difference": 0.12, "difference_ci": 0.02}]}
    display = experiment_figure(table)
    assert list(display.series) == ["transfer", "control", "difference"]
    assert display.errors == {"difference": [0.005, 0.02]}
    ax = display.plot().axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["transfer", "control", "difference (95% interval)"]
    [bars] = [c for c in ax.containers if c.has_yerr]
    segments = bars.lines[2][0].get_segments()
    np.testing.assert_allclose([seg[:, 1] for seg in segments], [[-0.005, 0.005], [0.10, 0.14]])
    traces = {t.name: t for t in display.plotly().data}
    assert list(traces["difference (95% interval)"].error_y.array) == [0.005, 0.02]
    assert traces["transfer"].error_y.array is None


def test_coinciding_experiment_lines_stay_visible():
    """clean_r2_recipient and donor_r2_donor hold the same numbers: their lines differ in dash and marker."""
    display = experiment_figure(_transfer_table())
    ax = display.plot().axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    a, b = lines["clean_r2_recipient"], lines["donor_r2_donor"]
    np.testing.assert_array_equal(a.get_ydata(), b.get_ydata())
    assert a.get_linestyle() != b.get_linestyle() and a.get_marker() != b.get_marker()
    below, above = sorted((a, b), key=lambda line: line.get_zorder())
    assert below.get_markersize() > above.get_markersize()  # the one drawn first is the larger, open marker
    assert below.get_markerfacecolor() == "none"
    for reference in ("clean_r2_donor", "clean_r2_recipient", "donor_r2_donor"):
        assert lines[reference].get_linestyle() != "-"  # unpatched runs are dashed reference lines
    traces = {t.name: t for t in display.plotly().data}
    assert traces["clean_r2_recipient"].line.dash != traces["donor_r2_donor"].line.dash
    assert traces["clean_r2_recipient"].marker.symbol != traces["donor_r2_donor"].marker.symbol
    with pytest.raises(ValueError, match="no rows"):
        experiment_figure({"name": "x", "columns": ["a"], "rows": []})


def test_similarity_of_constant_codes_says_so(make_sraven):
    codes = make_sraven(n=300)
    flat = LatentCodes(np.broadcast_to(codes.codes[:1], codes.codes.shape).copy(), codes.labels, codes.split,
                       codes.meta)
    display = similarity_figure(rule_similarity(flat, layer="last", center=True))
    assert display.constant and CONSTANT_TEXT in display.title
    ax = display.plot().axes[0]
    assert CONSTANT_TEXT in [t.get_text() for t in ax.texts]  # the all-NaN matrix is replaced by words
    assert any(CONSTANT_TEXT in a.text for a in display.plotly().layout.annotations)
    assert not similarity_figure(rule_similarity(codes)).constant


def test_term_f1_figure_on_one_axes_draws_the_heatmap_with_its_floors_in_the_title():
    """Notebooks lay several models side by side, one Axes each (as 0.1 did)."""
    import matplotlib.pyplot as plt

    from probes.figures.decoding import TermF1Figure

    figure = TermF1Figure(terms=["a", "b"], layers=["0", "1"], f1=np.array([[0.5, np.nan], [0.2, 0.9]]),
                          split="ood", title="t", always_present=0.25, input_only=0.1)
    _, ax = plt.subplots()
    fig = figure.plot(ax=ax)
    assert len(fig.axes) == 2  # the heatmap and its colour bar, no second panel
    assert "always present (0.250)" in ax.get_title() and "input-only control (0.100)" in ax.get_title()


def test_term_f1_figure_masks_constant_layers_and_labels_terms_without_a_probe(fuzzy):
    # layer 0 made constant: every row its first row's code there
    array = fuzzy.codes.copy()
    array[:, 0] = array[:1, 0]
    codes = LatentCodes(array, fuzzy.labels, fuzzy.split, fuzzy.meta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantCodesWarning)
        terms = decode_rules(codes, layers="each+all").extras["terms"]
    assert terms.constant_layers == ["0"]
    display = term_f1_figure(terms, split="ood")
    raw = np.asarray(terms.f1["ood"])
    assert np.isfinite(raw[0]).any()  # the probe of rounding noise did score something...
    heat = display.plotly().data[0]
    z = np.array(heat.z, dtype=float)
    assert np.isnan(z[0]).all() and list(heat.y)[0] == "0 (constant codes)"  # ...which is masked, not drawn
    np.testing.assert_allclose(z[1:], raw[1:])
    assert display.plotly().data[1].y[0] is None  # the mean-F1 line skips it too
    skipped = {terms.class_names[c]: why for c, why in terms.skipped.items()}
    assert skipped  # the fixture has terms absent from train
    labels = dict(zip(terms.class_names, heat.x, strict=True))
    for term, why in skipped.items():
        assert labels[term] == f"{term} ({why})"
    assert all(labels[t] == t for t in terms.class_names if t not in skipped)
