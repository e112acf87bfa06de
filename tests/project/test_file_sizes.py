"""The files a user gets stay light: html figures share one plotly.min.js per folder instead of embedding 4.6 MB of
plotly.js each, so a `figures` call and a report of a small run each stay well under 2 MB (docs/benchmarks.md has
the sizes on the shipped checkpoints)."""

from __future__ import annotations

import re

import pytest
import torch
from plotly.offline import get_plotlyjs

from latentcode.config import model_config, train_config
from latentcode.pipelines import analysis
from latentcode.pipelines.run_report import report_runs
from latentcode.tasks import get_task
from latentcode.training.train import train

MB = 1_000_000
BUNDLE = len(get_plotlyjs().encode("utf-8"))  # what each html file used to carry


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A few steps of a tiny HYLA model on SRAVEN, with codes: the sizes do not depend on how well it learned."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    try:
        task = get_task("sraven", seed=0, n_features=2, permute_features=False)
        cfg = train_config("sraven", "tiny", steps=40, warmup=4, batch_size=64, eval_every=20, log_every=10,
                           checkpoint_every=40, device="cpu")
        run_dir = tmp_path_factory.mktemp("runs") / "hyla"
        train(model_config(task, "hyla", "tiny"), task, cfg, run_dir, progress=False)
        analysis.extract_run(run_dir, n_samples=256, progress=False)
    finally:
        torch.set_num_threads(threads)
    return run_dir


def _script_sources(page: str) -> list[str]:
    return re.findall(r'<script[^>]+src="([^"]+)"', page)


def test_a_figures_call_writes_one_shared_plotly_js_and_stays_under_2_mb(tiny_run):
    written = analysis.figures_run(tiny_run, formats=["png", "html"], embed_method="pca", progress=False)
    pages = [path for path in written if path.suffix == ".html"]
    assert len(pages) >= 4
    for page in pages:
        text = page.read_text()
        assert _script_sources(text) == ["plotly.min.js"] and "plotly.js v" not in text
        assert page.stat().st_size < BUNDLE / 4
    folder = tiny_run / "figures"
    bundle = folder / "plotly.min.js"
    assert bundle.stat().st_size == BUNDLE  # one copy, the whole library: every page works offline
    assert sorted(p.name for p in folder.glob("*.js")) == ["plotly.min.js"]
    assert sum(path.stat().st_size for path in written) < 2 * MB  # 24 MB when each page embedded plotly.js


def test_a_report_loads_plotly_js_from_its_folder_and_stays_under_2_mb(tiny_run, tmp_path):
    path = report_runs([tiny_run], tmp_path / "report", embed_method="pca", progress=False)
    text = path.read_text()
    assert _script_sources(text) == ["plotly.min.js"] and "plotly.js v" not in text
    assert (path.parent / "plotly.min.js").stat().st_size == BUNDLE
    assert path.stat().st_size < 2 * MB
