"""The report's sections: the explorer, "Does the model use the code?", the caller's own sections
(`ReportSection`), and the page built once from the results objects (nothing written is read back)."""

from __future__ import annotations

import html
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

import latentcode as lc
from latentcode.causal.alignment import AlignmentResult
from latentcode.causal.erasure import ErasureResult
from latentcode.config import model_config, train_config
from latentcode.pipelines.run_report import find_causal, report_runs
from latentcode.tasks import get_task
from latentcode.training.train import train
from probes.report import CAUSAL_SECTION, ReportSection, RunInput, build_report
from tests.explore.test_explorer_browser import browser  # noqa: F401 (the Chromium fixture)

ALIGNMENT_ROWS = [
    {"layer": 0, "k": 1, "iia": 0.125, "iia_low": 0.0625, "iia_high": 0.2344, "identity": 0.0451, "random": 0.0312,
     "same_rule": 0.0208, "train_iia": 0.3333, "clean_counterfactual": 0.0417, "n": 96, "n_control": 80},
    {"layer": 3, "k": 8, "iia": 0.5729, "iia_low": 0.4731, "iia_high": 0.6670, "identity": 0.2917, "random": 0.1875,
     "same_rule": 0.0729, "train_iia": 0.8021, "clean_counterfactual": 0.0417, "n": 96, "n_control": 88},
]
ERASURE_ROWS = [
    {"layer": 2, "rank": 7, "acc_clean": 0.6367, "acc_leace": 0.3906, "acc_random": 0.5586,
     "acc_per_feature_clean": 0.878, "acc_per_feature_leace": 0.7285, "acc_per_feature_random": 0.8354,
     "decode_clean": 0.8633, "decode_leace": 0.2871, "decode_random": 0.8501, "decode_floor": 0.2827,
     "n_fit": 1024, "n_eval": 512},
]


def _section(text: str) -> str:
    start = text.index(f">{html.escape(CAUSAL_SECTION)}</h2>")
    return text[start:text.index("</body>")]


def _rows(table_html: str) -> list[list[str]]:
    """Every body row of the tables: [row header, cells...]."""
    return [[html.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table_html.split("<tbody>", 1)[1])] if "<tbody>" in table_html \
        else []


def test_the_causal_section_shows_the_numbers_of_the_results_it_is_given(tmp_path):
    causal = {"alignment": {"rows": ALIGNMENT_ROWS, "params": {"n_samples": 96}},
              "erasure": {"rows": ERASURE_ROWS, "params": {"n_fit": 1024}}}
    report = build_report([RunInput(name="toy", causal=causal)], tmp_path, embed_method="pca", progress=False)
    section = _section(report.path.read_text())
    tables = section.split("</table>")[:2]
    alignment, erasure = (_rows(t) for t in tables)
    assert [r[:2] for r in alignment] == [["0", "1"], ["3", "8"]]
    for cells, row in zip(alignment, ALIGNMENT_ROWS, strict=True):
        assert cells[2] == f"{row['iia']:.3f}"
        assert cells[3] == f"[{row['iia_low']:.3f}, {row['iia_high']:.3f}]"
        assert cells[4:9] == [f"{row[k]:.3f}" for k in ("identity", "random", "same_rule", "clean_counterfactual",
                                                         "train_iia")]
        assert cells[9] == str(row["n"])
    (cells,) = erasure
    row = ERASURE_ROWS[0]
    assert cells[:2] == ["2", "7"]
    assert cells[2:9] == [f"{row[k]:.3f}" for k in ("acc_clean", "acc_leace", "acc_random", "decode_clean",
                                                     "decode_leace", "decode_random", "decode_floor")]
    assert cells[9] == f"{row['decode_leace'] - row['decode_floor']:+.3f}"  # +0.004: at the floor
    assert report.summary["runs"]["toy"]["causal"]["erasure"]["rows"][0]["acc_leace"] == row["acc_leace"]


def test_a_report_without_causal_results_has_no_causal_section(tmp_path):
    report = build_report([RunInput(name="toy")], tmp_path, embed_method="pca", progress=False)
    assert CAUSAL_SECTION not in report.path.read_text()


def test_find_causal_reads_what_latentcode_causal_writes(tmp_path):
    AlignmentResult("sraven", "hyla", ALIGNMENT_ROWS).save(tmp_path / "run-a" / "align")  # the command's layout
    ErasureResult("sraven", "hyla", ERASURE_ROWS).save(tmp_path / "run-a" / "erase")
    ErasureResult("sraven", "hyla", ERASURE_ROWS).save(tmp_path / "run-b")  # results/causal's layout
    found = find_causal("run-a", tmp_path)
    assert [r["iia"] for r in found["alignment"]["rows"]] == [0.125, 0.5729]
    assert found["erasure"]["rows"][0]["decode_leace"] == 0.2871
    assert set(find_causal("run-b", tmp_path)) == {"erasure", "source"}
    assert find_causal("run-c", tmp_path) is None


@pytest.fixture(scope="module")
def tiny_sraven(tmp_path_factory):
    task = get_task("sraven")
    cfg = train_config("sraven", "tiny", steps=4, warmup=1, eval_every=4, log_every=4, checkpoint_every=4,
                       eval_samples=32, device="cpu")
    run_dir = tmp_path_factory.mktemp("runs") / "sraven-tiny"
    train(model_config(task, "hyla", "tiny"), task, cfg, run_dir, progress=False)
    return run_dir


@pytest.fixture(scope="module")
def tiny_report(tiny_sraven, tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    causal = folder / "causal"
    ErasureResult("sraven", "hyla", ERASURE_ROWS).save(causal / "sraven-tiny" / "erase")
    return report_runs([tiny_sraven], folder / "with", embed_method="pca", n_samples=32, progress=False,
                       causal_dir=causal)


def test_the_report_embeds_the_explorer_unless_told_not_to(tiny_sraven, tiny_report, tmp_path):
    text = tiny_report.read_text()
    assert text.count('<iframe class="lc-explorer" srcdoc="') == 1
    assert 'id="explorer"' in text and CAUSAL_SECTION in text
    page = html.unescape(re.search(r'srcdoc="([^"]*)"', text).group(1))  # the frame holds the whole explorer page
    assert page.startswith("<!DOCTYPE html>") and "1024 codes" in page
    without = report_runs([tiny_sraven], tmp_path / "without", embed_method="pca", n_samples=32, progress=False,
                          explorer=False)
    text = without.read_text()
    assert "<iframe" not in text and 'id="explorer"' not in text and CAUSAL_SECTION not in text


@pytest.fixture(scope="module")
def chromium(browser):  # noqa: F811 (test_explorer_browser's headless Chromium, skipped without it)
    return browser


def test_the_explorer_in_the_report_answers_a_hover_and_a_click(chromium, tiny_report):
    from selenium.webdriver.common.by import By

    from tests.explore.test_explorer_browser import pointer_to, severe

    chromium.get(tiny_report.resolve().as_uri())
    frame = chromium.find_element(By.CSS_SELECTOR, "iframe.lc-explorer")
    chromium.execute_script("arguments[0].scrollIntoView()", frame)
    chromium.switch_to.frame(frame)
    try:
        deadline = time.monotonic() + 30
        while chromium.execute_script("return document.getElementById('lc-root').dataset.ready") != "1":
            assert time.monotonic() < deadline, f"the explorer never got ready: {chromium.get_log('browser')}"
            time.sleep(0.05)
        pointer_to(chromium, 3).perform()
        instance = chromium.find_element(By.ID, "lc-instance")
        assert instance.get_attribute("data-row") == "3"
        assert len(instance.find_elements(By.CSS_SELECTOR, "svg.lc-instance rect")) >= 9 * 4  # the 3 x 3 grid
        pointer_to(chromium, 3).click().perform()
        assert chromium.find_element(By.ID, "lc-pattern").get_attribute("data-row") == "3"
        assert severe(chromium) == []
    finally:
        chromium.switch_to.default_content()


# ------------------------------------------------------------------------- the page is built once, nothing read back
_EVENTS: list[tuple[str, Path]] | None = None
"""("write" | "read", path) in the order they happen, while a test listens (None: nobody listens)."""


def _audit(event: str, args: tuple) -> None:
    if _EVENTS is None:
        return
    if event == "open" and isinstance(args[0], str | os.PathLike):
        mode, flags = args[1], args[2]
        writes = (any(c in mode for c in "wax+") if isinstance(mode, str)
                  else bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)))
        _EVENTS.append(("write" if writes else "read", Path(args[0]).resolve()))
    elif event == "os.rename" and isinstance(args[1], str | os.PathLike):  # an atomic write lands by os.replace
        _EVENTS.append(("write", Path(args[1]).resolve()))


sys.addaudithook(_audit)  # an audit hook cannot be removed; it records only while _EVENTS is a list


def _read_back(fn):
    """Run `fn()`; return (the files it read after writing them itself, what `fn` returned)."""
    global _EVENTS
    _EVENTS = []
    try:
        value = fn()
    finally:
        events, _EVENTS = _EVENTS, None
    written: set[Path] = set()
    read_back = []
    for kind, path in events:
        if kind == "write":
            written.add(path)
        elif path in written and path not in read_back:
            read_back.append(path)
    return read_back, value


def test_the_audit_hook_sees_a_file_read_back():  # the check below can fail: a read-back is caught
    def write_then_read(folder: Path) -> str:
        (folder / "x.json").write_text("{}")
        return (folder / "x.json").read_text()

    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        read_back, _ = _read_back(lambda: write_then_read(Path(folder)))
        assert read_back == [(Path(folder) / "x.json").resolve()]


def test_the_callers_sections_go_on_the_page_and_into_the_summary_once(tmp_path):
    top = ReportSection("Every seed", text="variant  ood\nhyla   0.500", notes=("what the columns mean",),
                        key="seeds", summary={"rows": [{"variant": "hyla", "ood": 0.5}]})
    end = ReportSection("Closing words", text="done", place="end")
    read_back, report = _read_back(lambda: build_report([RunInput(name="toy")], tmp_path, embed_method="pca",
                                                        progress=False, sections=[top, end]))
    assert read_back == []
    page = (tmp_path / "report.html").read_text()
    nav = page[page.index("<nav>"):page.index("</nav>")]
    assert nav.index("Every seed") < nav.index("Summary") < nav.index("Closing words")
    assert page.count('id="every-seed"') == 1 and page.index("</nav>") < page.index('id="every-seed"')
    assert page.index('id="every-seed"') < page.index('id="summary"') < page.index('id="closing-words"')
    assert "hyla   0.500" in page and "what the columns mean" in page
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert report.summary == on_disk and on_disk["seeds"] == {"rows": [{"variant": "hyla", "ood": 0.5}]}
    assert report.sections == (top, end)
    with pytest.raises(ValueError, match="sections share a title"):
        build_report([RunInput(name="toy")], tmp_path / "again", sections=[top, top])
    assert not (tmp_path / "again").exists()  # refused before anything is written
    with pytest.raises(ValueError, match="summary.json's own"):
        ReportSection("x", key="runs")


def test_a_wide_table_keeps_its_columns_on_the_page_and_a_long_sentence_is_folded(tmp_path):
    # the demo's table over seeds is wider than the page; wrapping it would break its columns
    header = "variant  seeds" + "".join(f"  column {i:02d} (mean ± s.e.)" for i in range(8))
    row = "hyla     0, 1, 2" + "".join(f"  {0.5 + i / 100:.3f} ± 0.010{' ' * 10}" for i in range(8))
    words = [f"word{i}" for i in range(60)]
    sentence = "notes: " + " ".join(words)
    section = ReportSection("Every seed", text="\n".join([sentence, header, row]))
    build_report([RunInput(name="toy")], tmp_path, embed_method="pca", progress=False, sections=[section])
    page = (tmp_path / "report.html").read_text()
    block = html.unescape(re.search(r'<h2 id="every-seed">.*?<pre>(.*?)</pre>', page, re.S).group(1))
    lines = block.split("\n")
    assert header in lines and row in lines  # each table row whole, on one line
    prose = lines[:lines.index(header)]
    assert len(prose) > 1 and all(len(line) <= 120 for line in prose)
    assert " ".join(prose).split() == sentence.split()  # every word kept, in order
    style = page[page.index("<style>"):page.index("</style>")]
    pre_rule = re.search(r"pre \{([^}]*)\}", style).group(1)
    assert "white-space: pre;" in pre_rule and "overflow-x: auto" in pre_rule  # no wrapping; scrolls sideways


def test_a_report_of_a_run_reads_back_nothing_it_wrote(tiny_sraven, tmp_path):
    read_back, path = _read_back(lambda: report_runs([tiny_sraven], tmp_path / "out", embed_method="pca",
                                                     n_samples=32, progress=False, explorer=False))
    assert path.is_file() and read_back == []


REPO_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"


def test_the_demo_builds_its_page_once_from_its_results(tmp_path, monkeypatch):
    """The demo's table over seeds is a section of the page from the start: the page and summary.json are each
    written once, and nothing the demo wrote is read back (no page cut open and written again)."""
    from latentcode.rundir.pretrained import CHECKPOINTS_ENV

    if not (REPO_CHECKPOINTS / "fuzzy_logic-hyla-s1" / "config.json").is_file():
        pytest.skip("the repository's checkpoints/ folder is not here")
    monkeypatch.setenv(CHECKPOINTS_ENV, str(REPO_CHECKPOINTS))
    out = tmp_path / "demo"
    read_back, result = _read_back(lambda: lc.demo(out, variants=["hyla"], seeds=[0, 1], n_samples=24,
                                                   embed_method="pca", progress=False))
    assert read_back == []
    page = result.report.read_text()
    assert page.count('id="every-seed"') == 1 and page.index("</nav>") < page.index('id="every-seed"')
    assert html.escape(result.table()) in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seeds"] == json.loads(json.dumps(result.seeds.to_dict()))
    assert [row["decode_ood_last"] for row in result.rows] == pytest.approx(
        [summary["runs"][name]["decoding"]["headline"]["accuracy"]["ood"]["codes"][-2] for name in ("hyla", "hyla-s1")])


def test_the_erasure_table_shows_the_model_scores_the_result_records():
    from probes.report_causal import erasure_table

    row = {"layer": 1, "rank": 3, "r2_clean": 0.91, "r2_leace": 0.85, "r2_random": 0.9, "loss_clean": 0.25,
           "loss_leace": 0.5, "loss_random": 0.375, "decode_clean": 0.7, "decode_leace": 0.3, "decode_random": 0.69,
           "decode_floor": 0.25}
    header, rows = erasure_table({"params": {"metrics": ["r2", "loss"]}, "rows": [row]})
    assert header[2:8] == ["R² clean", "R² LEACE", "R² random erasure", "loss clean", "loss LEACE",
                           "loss random erasure"]
    assert rows == [("1", ["3", "0.910", "0.850", "0.900", "0.250", "0.500", "0.375", "0.700", "0.300", "0.690",
                           "0.250", "+0.050"])]
    sraven = {"layer": 0, "rank": 6, "acc_clean": 0.5, "acc_leace": 0.25, "acc_random": 0.5, "decode_clean": 0.75,
              "decode_leace": 0.25, "decode_random": 0.75, "decode_floor": 0.25}
    header, rows = erasure_table({"rows": [sraven]})
    assert header[2] == "accuracy clean" and rows[0][1][:4] == ["6", "0.500", "0.250", "0.500"]
