"""build_report: a valid, self-contained report.html (plotly.js once, every section) and a strict-JSON summary."""

import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from probes import LatentCodes, RunInput, build_report
from probes.degenerate import ConstantCodesWarning
from probes.report import SECTIONS

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
    path = build_report(runs, tmp_path / "out", max_points=300)
    assert path == tmp_path / "out" / "report.html"
    page, text = _parse(path)
    assert page.h2 == list(SECTIONS)
    assert text.count(PLOTLY_HEADER) == 1  # plotly.js embedded once, every figure reuses it
    assert page.figures >= 8
    assert "latentcode extract" in text  # the run without codes says how to make them
    assert "attention score (not a probability)" in text and "attention probability" in text
    summary = _strict_json(tmp_path / "out" / "summary.json")
    assert list(summary["runs"]) == ["softmax", "hyla", "linear"]
    hyla = summary["runs"]["hyla"]
    assert hyla["summary"]["ood_acc"] == 0.69 and hyla["variant"] == "hyla"
    assert hyla["decoding"]["baselines"]["ood"]["chance"] == pytest.approx(0.125)
    assert hyla["clustering"]["k"] == 8 and hyla["embedding"]["method"] == "umap"
    assert summary["runs"]["linear"]["decoding"] is None


def test_report_single_fuzzy_run_with_pca(tmp_path, make_fuzzy):
    run = RunInput("hyla-fuzzy", make_fuzzy(n=600), [], {"test_r2": 0.9, "ood_r2": 0.8}, "hyla")
    path = build_report([run], tmp_path, embed_method="pca")
    page, text = _parse(path)
    assert page.h2 == [s if s != "UMAP" else "PCA" for s in SECTIONS]
    assert text.count(PLOTLY_HEADER) == 1
    assert "No training metrics given" in text and "ridge R²" in text
    decoding = _strict_json(tmp_path / "summary.json")["runs"]["hyla-fuzzy"]["decoding"]
    assert decoding["kind"] == "sets" and decoding["terms"]["skipped"] and decoding["bits"]["r2_cv"]


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
        path = build_report(runs, tmp_path, embed_method="pca", max_points=200)
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
    text = build_report(runs, tmp_path, embed_method="pca", max_points=200).read_text()
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
