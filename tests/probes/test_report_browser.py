"""The HTML report as a person sees it: rendered by a real headless Chromium, every plotly figure is drawn, no
trace is invisible, and the console shows no errors.

Needs Debian's `chromium` (no driver): `apt-get install -y --no-install-recommends chromium`. Without it the test
skips, saying so; CI sets LATENTCODE_REQUIRE_CHROMIUM=1 (and installs it in `.ci/run`), where a missing browser
fails the test instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from probes import LatentCodes
from probes.degenerate import ConstantCodesWarning
from probes.report import RunInput, build_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSTALL = "apt-get install -y --no-install-recommends chromium"


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("LATENTCODE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"LATENTCODE_REQUIRE_CHROMIUM=1 but no chromium on PATH; install it: {INSTALL}")
        pytest.skip(f"no chromium on PATH; install it to render the report in a browser: {INSTALL}")
    return CHROMIUM


def render(browser: str, page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """(the DOM after the page's scripts ran, the console messages the page logged)."""
    done = subprocess.run(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0", "--dump-dom",
         page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


def figures(dom: str) -> dict[str, str]:
    """figure id -> the DOM of that figure (up to the next figure)."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'<div id="(figure-\d+)"', dom)]
    ends = [start for start, _ in starts[1:]] + [len(dom)]
    return {name: dom[start:end] for (start, name), end in zip(starts, ends, strict=True)}


def invisible_traces(figure: str) -> int:
    """Scatter traces with neither a line of two or more points nor a marker: drawn, but nothing to see."""
    count = 0
    for trace in re.findall(r'<g class="trace scatter.*?<g class="text">', figure, flags=re.DOTALL):
        line = re.search(r'class="js-line" d="([^"]*)"', trace)
        has_line = line is not None and "L" in line.group(1)
        has_points = 'class="point"' in trace
        count += not (has_line or has_points)
    return count


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A report of three small SRAVEN runs: one evaluated once (a single point per eval curve), one with
    constant codes (a dead model: every figure of its codes says so instead of drawing)."""
    rng = np.random.default_rng(0)
    inputs = []
    for name, eval_steps in (("one-eval", [4]), ("three-evals", [2, 4, 6]), ("constant", [2, 4, 6])):
        n = 120
        rule = rng.integers(0, 8, size=n)
        array = np.eye(8)[rule][:, None, :8, None, None] + rng.normal(0, 0.3, (n, 2, 8, 1, 2))
        if name == "constant":
            array = np.broadcast_to(array[:1], array.shape)
        codes = LatentCodes(
            codes=array.astype(np.float32),
            labels={"rule": rule, "rules": rng.integers(0, 8, size=(n, 4)), "target": rng.integers(0, 8, size=n)},
            split=np.array(["train"] * 60 + ["test"] * 30 + ["ood"] * 30),
            meta={"task": "sraven", "label": "rule", "n_classes": 8, "layers": [0, 1], "score_norm": "softmax"},
        )
        metrics = [{"step": s, "split": "train", "loss": 2.0 / s} for s in range(1, 7)]
        metrics += [{"step": s, "split": split, "loss": 2.0 / s, "acc": 0.1 * s}
                    for s in eval_steps for split in ("test", "ood")]
        inputs.append(RunInput(name=name, codes=codes, metrics=metrics, summary={"steps": 6},
                               variant="softmax" if name == "constant" else "hyla"))
    with pytest.warns(ConstantCodesWarning, match="run constant"):
        return build_report(inputs, tmp_path_factory.mktemp("report"), title="browser test",
                            embed_method="pca", progress=False).path


def test_every_figure_is_drawn_with_no_invisible_trace_and_no_console_error(chromium, report, tmp_path):
    html = report.read_text()
    expected = re.findall(r'<div id="(figure-\d+)"', html)
    assert len(expected) >= 5
    dom, console = render(chromium, report, tmp_path)
    drawn = figures(dom)
    assert sorted(drawn) == sorted(expected)
    undrawn = [name for name, figure in drawn.items() if 'class="main-svg"' not in figure]
    assert not undrawn, f"plotly drew nothing in {undrawn}"
    assert dom.count('class="main-svg"') >= len(expected)
    blank = {name: invisible_traces(figure) for name, figure in drawn.items() if invisible_traces(figure)}
    assert not blank, f"traces with nothing visible (e.g. a one-point line) in {blank}"
    errors = [line for line in console if re.search(r"Uncaught|Error|error|Failed", line)]
    assert not errors, errors


def test_constant_codes_are_named_on_the_page_and_drawn_as_words(chromium, report, tmp_path):
    dom, _ = render(chromium, report, tmp_path)
    warning = re.search(r'<div class="warning" role="alert">(.*?)</div>', dom, flags=re.DOTALL)
    assert warning is not None and "constant: constant codes in layers 0" in warning.group(1)
    drawn = figures(dom)
    # the PCA section holds one figure per run; the constant run's draws no points, only the words
    section = dom[dom.index('id="pca"'):dom.index('id="code-heatmaps"')]
    names = re.findall(r'<div id="(figure-\d+)"', section)
    assert len(names) == 3
    flat = drawn[names[-1]]
    assert 'class="point"' not in flat
    assert flat.count("constant codes") >= 2  # one per panel, drawn as svg text
    assert all('class="point"' in drawn[name] for name in names[:2])


def test_the_invisible_trace_check_catches_a_one_point_line(chromium, tmp_path):
    """The check above can fail: a plotly line through one point draws nothing, and it is counted."""
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    figure = go.Figure([go.Scatter(x=[1], y=[2], mode="lines"), go.Scatter(x=[1, 2], y=[2, 3], mode="lines")])
    page = tmp_path / "page.html"
    div = figure.to_html(full_html=False, include_plotlyjs=False, div_id="figure-0")
    page.write_text(f"<html><head><script>{get_plotlyjs()}</script></head><body>{div}</body></html>")
    dom, console = render(chromium, page, tmp_path)
    assert invisible_traces(figures(dom)["figure-0"]) == 1
    assert not [line for line in console if "Uncaught" in line]
