"""build_report: a valid, self-contained report.html (plotly.js once, every section) and a strict-JSON summary."""

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from probes import LatentCodes, RunInput, build_report
from probes.degenerate import ConstantCodesWarning
from probes.report import SECTIONS, Report

PLOTLY_HEADER = get_plotlyjs()[:40]


class _Page(HTMLParser):
    """Collects h2 titles, figure divs and script tags; fails on unbalanced tags of the page skeleton."""

    def __init__(self):
        super().__init__()
        self.h2, self.figures, self.scripts, self.stack, self._in_h2 = [], 0, 0, [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("html", "head", "body", "table", "h2"):
            self.stack.append(tag)
        self._in_h2 = tag == "h2"
        if tag == "script":
            self.scripts += 1
        if tag == "div" and "plotly-graph-div" in (attrs.get("class") or ""):
            self.figures += 1

    def handle_endtag(self, tag):
        if tag in ("html", "head", "body", "table", "h2"):
            assert self.stack.pop() == tag
        self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data)


def _parse(path):
    page = _Page()
    text = path.read_text(encoding="utf-8")
    page.feed(text)
    page.close()
    assert page.stack == []
    return page, text


def _strict_json(path):
    def reject(constant):
        raise AssertionError(f"summary.json holds {constant}")

    return json.loads(path.read_text(), parse_constant=reject)


def _metrics(final_acc):
    return [
        {"step": s, "split": split, "loss": 2.0 / (s + 1), "acc": final_acc * s / 200}
        for s in (0, 100, 200)
        for split in ("train", "test", "ood")
    ]


def test_report_compares_sraven_variants(tmp_path, make_sraven):
    runs = {
        "softmax": RunInput(
            "softmax",
            make_sraven(n=500, seed=1),
            _metrics(0.55),
            {"test_acc": 0.97, "ood_acc": 0.55},
            "softmax",
        ),
        "hyla": RunInput(
            "hyla",
            make_sraven(n=500, seed=2, score_norm="rms_head"),
            _metrics(0.69),
            {"test_acc": 0.98, "ood_acc": 0.69},
            "hyla",
        ),
        "linear": RunInput("linear", None, _metrics(0.56), {"test_acc": 0.96, "ood_acc": 0.56}, "linear"),
    }
    report = build_report(runs, tmp_path / "out", max_points=300)
    assert isinstance(report, Report) and report.path == tmp_path / "out" / "report.html"
    page, text = _parse(report.path)
    assert page.h2 == list(SECTIONS)
    # plotly.js once, beside the page (offline, and not 4.6 MB inside it): every figure reuses it
    assert re.findall(r'<script[^>]+src="([^"]+)"', text) == ["plotly.min.js"] and PLOTLY_HEADER not in text
    assert (tmp_path / "out" / "plotly.min.js").read_text().startswith(PLOTLY_HEADER)
    assert page.figures >= 8
    assert "latentcode extract" in text  # the run without codes says how to make them
    assert "attention score (not a probability)" in text and "attention probability" in text
    summary = _strict_json(tmp_path / "out" / "summary.json")
    assert report.summary_path == tmp_path / "out" / "summary.json"
    assert report.summary == summary  # what the file holds, without reading it back
    assert report.n_figures == text.count('<div class="figure">')
    assert list(report.analyses) == ["softmax", "hyla", "linear"] and report.analyses["linear"].decoding is None
    assert report.analyses["hyla"].decoding.to_dict() == summary["runs"]["hyla"]["decoding"]
    assert list(summary["runs"]) == ["softmax", "hyla", "linear"]
    hyla = summary["runs"]["hyla"]
    assert hyla["summary"]["ood_acc"] == 0.69 and hyla["variant"] == "hyla"
    assert hyla["decoding"]["baselines"]["ood"]["chance"] == pytest.approx(0.125)
    assert hyla["clustering"]["k"] == 8 and hyla["embedding"]["method"] == "umap"
    assert summary["runs"]["linear"]["decoding"] is None


def test_report_single_fuzzy_run_with_pca(tmp_path, make_fuzzy):
    run = RunInput("hyla-fuzzy", make_fuzzy(n=600), [], {"test_r2": 0.9, "ood_r2": 0.8}, "hyla")
    path = build_report([run], tmp_path, embed_method="pca").path
    page, text = _parse(path)
    assert page.h2 == [s if s != "UMAP" else "PCA" for s in SECTIONS]
    assert text.count(PLOTLY_HEADER) == 0 and (tmp_path / "plotly.min.js").is_file()
    assert "No training metrics given" in text and "ridge R²" in text
    decoding = _strict_json(tmp_path / "summary.json")["runs"]["hyla-fuzzy"]["decoding"]
    assert decoding["kind"] == "sets" and decoding["extras"]["terms"]["skipped"] and decoding["extras"]["term_bits"]["r2_cv"]


def _summary_table(text):
    """Row title -> cells of the report's summary table (the first table of the page)."""
    table = text[text.index("<table>"): text.index("</table>")]
    return {html.unescape(name): [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", cells)]
            for name, cells in re.findall(r"<tr><th>(.*?)</th>(.*?)</tr>", table)}


def test_report_summary_sets_every_score_beside_its_floors_and_names_the_reading(tmp_path, make_sraven, make_fuzzy):
    sraven, fuzzy = make_sraven(n=400, seed=3), make_fuzzy(n=600)
    runs = [RunInput("sraven", sraven, [], {}, "hyla"), RunInput("fuzzy", fuzzy, [], {}, "hyla"),
            RunInput("hand-made", LatentCodes(sraven.codes, sraven.labels, sraven.split, {"task": "sraven"}), [], {},
                     "hyla")]
    text = build_report(runs, tmp_path, embed_method="pca", max_points=200).path.read_text()
    rows = _summary_table(text)
    assert rows["codes read at"] == [sraven.reading, fuzzy.reading, "not recorded"]
    summary = _strict_json(tmp_path / "summary.json")["runs"]
    for metric, title, floors in [("accuracy", "decoding accuracy", {"chance": "chance (uniform)",
                                                                      "majority": "majority class"}),
                                  ("term_f1", "term F1", {"always_present": "always present"})]:
        for column, name in enumerate(["sraven", "fuzzy"]):
            headline = summary[name]["decoding"]["headline"].get(metric)
            if headline is None:  # SRAVEN has no term F1: not applicable
                assert rows[f"{title}, ood, all layers"][column] == "n/a"
                assert rows[f"always present ({title}), ood"][column] == "n/a"
                continue
            ood = headline["ood"]  # layers 0, 1, 2 (SRAVEN) or 0, 1 (fuzzy), then all
            assert rows[f"{title}, ood, last layer"][column] == f"{ood['codes'][-2]:.3f}"
            assert rows[f"{title}, ood, all layers"][column] == f"{ood['codes'][-1]:.3f}"
            for floor, floor_title in floors.items():
                assert rows[f"{floor_title} ({title}), ood"][column] == f"{ood['floors'][floor]:.3f}"
            assert rows[f"input-only control ({title}), ood"][column] == "n/a"  # no raw inputs in these codes
            assert rows[f"codes − best ({title}), ood, all layers"][column] == f"{ood['codes_minus_best'][-1]:.3f}"
            assert rows[f"codes − best ({title}), ood, last layer"][column] == f"{ood['codes_minus_best'][-2]:.3f}"
    assert "always-present = the F1 of answering 'present' for every term" in html.unescape(text)


def test_the_report_opens_as_the_path_of_report_html(tmp_path, make_sraven):
    report = build_report([RunInput("a", make_sraven(n=200, seed=1), [], {}, "hyla")], tmp_path, embed_method="pca",
                          max_points=100)
    expected = (tmp_path / "report.html").read_text()
    assert Path(report) == tmp_path / "report.html"  # os.PathLike
    with open(report) as f:
        assert f.read() == expected
    assert report.path.read_text() == expected
    with pytest.raises(AttributeError):  # the Path methods before 0.2 went with 0.3.0: report.path.read_text()
        report.read_text()  # noqa: B018


def test_report_input_errors(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        build_report({}, tmp_path)
    with pytest.raises(ValueError, match="duplicate"):
        build_report([RunInput("a"), RunInput("a")], tmp_path)


def test_report_warns_about_constant_codes_once_and_shows_it(tmp_path, make_sraven):
    live = make_sraven(n=300, seed=1)
    same = np.broadcast_to(live.codes[:1], live.codes.shape).copy()  # every row the first row's code
    flat = LatentCodes(same, live.labels, live.split, live.meta)
    runs = [RunInput("live", live, _metrics(0.6), {}, "softmax"),
            RunInput("flat", flat, _metrics(0.5), {}, "hyla")]
    with pytest.warns(ConstantCodesWarning) as caught:
        path = build_report(runs, tmp_path, embed_method="pca", max_points=200).path
    flat_warnings = [w for w in caught if issubclass(w.category, ConstantCodesWarning)]
    assert len(flat_warnings) == 1  # once per run, not once per analysis
    assert str(flat_warnings[0].message).startswith("run flat: constant codes in layers 0 (")
    page, text = _parse(path)
    assert page.h2 == [s if s != "UMAP" else "PCA" for s in SECTIONS]  # the warning is a box, not a section
    box = re.search(r'<div class="warning" role="alert">(.*?)</div>', text, flags=re.DOTALL)
    assert box is not None and "flat: constant codes in layers 0" in box.group(1)
    assert "live" not in box.group(1)
    row = re.search(r"<tr><th>constant codes \(layers\)</th><td>(.*?)</td><td>(.*?)</td></tr>", text)
    assert row.groups() == ("none", "0, 1, 2, all")
    assert "constant codes: k-means skipped" in text and "nothing to embed" in text
    summary = _strict_json(tmp_path / "summary.json")["runs"]
    assert summary["flat"]["constant_layers"] == ["0", "1", "2", "all"]
    assert summary["live"]["constant_layers"] == []
    assert summary["flat"]["embedding"]["constant"] is True
    assert [layer["constant"] for layer in summary["flat"]["clustering"]["layers"]] == [True] * 4
    assert summary["flat"]["code_spread"]["layers"][0]["relative"] == 0.0
    embeddings = [(data, layout) for data, layout in _plotly_figures(text).values()
                  if "PCA of layer" in str(layout.get("annotations"))]
    assert len(embeddings) == 2
    (flat_data, flat_layout), (live_data, _) = sorted(embeddings, key=lambda fig: len(fig[0]))
    assert flat_data == [] and any("constant codes" in a["text"] for a in flat_layout["annotations"])
    assert len(live_data) > 0


def test_report_training_curves_are_log_scaled_and_grouped_by_variant(tmp_path, make_sraven):
    runs = [RunInput(f"hyla-s{seed}", make_sraven(n=200, seed=seed), _metrics(0.6), {}, "hyla")
            for seed in (0, 1)]
    runs.append(RunInput("softmax-s0", None, _metrics(0.5), {}, "softmax"))
    text = build_report(runs, tmp_path, embed_method="pca", max_points=200).path.read_text()
    data, layout = _plotly_figures(text)["figure-1"]  # the first figure of the page after the summary's
    assert layout["title"]["text"] == "Training curves"
    assert layout["yaxis"]["type"] == "log" and layout["yaxis2"].get("type") != "log"
    assert {t["legendgroup"] for t in data} == {"hyla", "softmax"}
    colors = {t["name"]: t["line"]["color"] for t in data if t["xaxis"] == "x"}
    assert colors["hyla-s0 · train"] == colors["hyla-s1 · ood"] != colors["softmax-s0 · train"]


def _plotly_figures(text):
    """figure id -> (data, layout) of each plotly figure on the page, read back from its Plotly.newPlot."""
    decoder = json.JSONDecoder()
    figures = {}
    for match in re.finditer(r'Plotly\.newPlot\(\s*"(figure-\d+)",\s*', text):
        data, end = decoder.raw_decode(text, match.end())
        layout, _ = decoder.raw_decode(text, text.index("{", end))
        figures[match.group(1)] = (data, layout)
    return figures


def test_a_run_with_an_emergence_table_gets_a_section_on_rule_codes_over_training(tmp_path, make_sraven):
    from probes.report import EMERGENCE_SECTION

    def row(step, layer, decoding, control):
        return {"step": step, "layer": layer, "decoding": decoding, "input_only": 0.39, "control_task": control,
                "selectivity": decoding - control, "chance": 0.125, "majority": 0.39, "model_accuracy": step / 1e5}

    emergence = [row(10000, "0", 0.38, 0.51), row(10000, "all", 0.66, 0.56),
                 row(20000, "0", 0.38, 0.52), row(20000, "all", 0.75, 0.57)]
    runs = [RunInput("softmax", make_sraven(n=300, seed=1), _metrics(0.5), {"ood_acc": 0.5}, "softmax", emergence),
            RunInput("hyla", make_sraven(n=300, seed=2), _metrics(0.6), {"ood_acc": 0.6}, "hyla")]
    report = build_report(runs, tmp_path / "out", embed_method="pca", max_points=200)
    page, text = _parse(report.path)
    expected = [s if s != "UMAP" else "PCA" for s in SECTIONS]
    expected.insert(expected.index("Training curves") + 1, EMERGENCE_SECTION)
    assert page.h2 == expected
    assert f'href="#{EMERGENCE_SECTION.lower().replace(" ", "-")}"' in text  # in the navigation too
    section = text.split(f">{EMERGENCE_SECTION}</h2>")[1].split("<h2")[0]
    assert section.count('<div class="figure">') == 1  # the run with a table only
    lines = html.unescape(section.split("<pre>")[1].split("</pre>")[0]).splitlines()
    assert lines[0].split()[:4] == ["step", "layer", "0", "all"]
    # step 20,000: decoding per layer, input-only, majority, chance, the best layer's selectivity, the model
    assert lines[2].split() == ["20,000", "0.380", "0.750", "0.390", "0.390", "0.125", "+0.180", "(all", "layers)",
                                "0.200"]


def test_constant_codes_are_explained_once_and_their_scores_masked_in_the_summary(tmp_path, make_sraven):
    live = make_sraven(n=300, seed=1)
    runs = [RunInput("live", live, [], {}, "softmax")]
    for name in ("flat-a", "flat-b", "flat-c"):
        same = np.broadcast_to(live.codes[:1], live.codes.shape).copy()
        runs.append(RunInput(name, LatentCodes(same, live.labels, live.split, live.meta), [], {}, "hyla"))
    with pytest.warns(ConstantCodesWarning):
        text = html.unescape(build_report(runs, tmp_path, embed_method="pca", max_points=200).path.read_text())
    box = re.search(r'<div class="warning" role="alert">(.*?)</div>', text, flags=re.DOTALL).group(1)
    assert text.count("A dead layer, or inputs that fix what the layer sees") == 1  # said once, not per run
    assert [box.count(f"{name}: constant codes in layers 0 (") for name in ("flat-a", "flat-b", "flat-c")] == [1] * 3
    rows = _summary_table(text)
    for title in ("decoding accuracy, ood, last layer", "decoding accuracy, ood, all layers",
                  "codes − best (decoding accuracy), test, last layer", "k-means AMI, all layers"):
        assert rows[title][1:] == ["constant codes"] * 3, title  # not a score of 0 (or of rounding noise)
        assert re.fullmatch(r"-?\d\.\d{3}", rows[title][0]), rows[title]  # three decimals
    assert re.fullmatch(r"\d\.\d{3}", rows["chance (uniform) (decoding accuracy), ood"][0])


def test_ood_caveat_names_the_larger_ood_majority_class(make_sraven):
    from probes.decoding.decode import decode_rules
    from probes.report import ood_caveat

    codes = make_sraven(n=900, seed=5, noise=1.5)  # noisy enough that no split decodes perfectly
    rule = codes.labels["rule"]
    top = np.bincount(rule[codes.split == "train"]).argmax()  # the train-majority class
    # OOD rows: every row of that class, a third of the others, so its rate (the majority floor) is higher on OOD
    keep = (codes.split != "ood") | (rule == top) | (np.arange(len(rule)) % 3 == 0)
    skewed = codes.select(mask=keep)
    result = decode_rules(skewed, progress=False)
    single = [i for i, name in enumerate(result.layer_names) if name != "all"][-1]
    test, ood = float(result.accuracy("test")[single]), float(result.accuracy("ood")[single])
    majority = {s: result.baselines[s].majority for s in ("test", "ood")}
    assert majority["ood"] > majority["test"] and ood > test  # the case the caveat is for
    caveat = ood_caveat(result)
    assert f"({ood:.3f} against {test:.3f}" in caveat
    assert f"({majority['ood']:.3f} against {majority['test']:.3f})" in caveat
    assert ood_caveat(decode_rules(codes.select(split=["train", "test"]), progress=False)) == ""  # no OOD split
