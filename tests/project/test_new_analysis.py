"""A new analysis is one function: this module defines a small analysis of a run, registers it, and finds it in the
report through the public API and through the command line, without touching a package file, following
docs/architecture.md ("Where to add things": an analysis).

The analysis, `code_norms`: per layer, the mean L2 norm of the latent codes of held-out (OOD) instances, beside the
run's own held-out metric at the step the codes were read. It takes the run object (`latentcode.open_run`) and the
codes the report reads, and returns a frozen dataclass with `table()` and `to_dict()`. Its numbers are checked
against the attention patterns the model itself caches (`model.run_with_cache`), read at the codes' positions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pytest
import torch

import latentcode as lc
from latentcode.cli import main
from latentcode.codes.readings import code_reading
from latentcode.pipelines.run_analyses import ANALYSES, register_analysis, run_analyses, unregister_analysis
from probes.codes_io import jsonable
from probes.tables import align_columns, format_score

NAME, TITLE = "code_norms", "Code norms on held-out instances"


@dataclass(frozen=True)
class CodeNorms:
    """Per layer, the mean L2 norm of one split's codes (over heads, query and key positions), and the run's metric
    on that split at the step the codes were read."""

    split: str
    layers: list[int]
    mean_norm: list[float]
    step: int
    metric: str
    score: float | None

    def table(self) -> str:
        rows = [["layer", f"mean code norm ({self.split})"],
                *([str(layer), format_score(norm)] for layer, norm in zip(self.layers, self.mean_norm, strict=True))]
        return "\n".join([*align_columns(rows, right=True),
                          f"model {self.metric} on {self.split} at step {self.step}: {format_score(self.score)}"])

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


def code_norms(run: lc.OpenRun, codes: Any, split: str = "ood") -> CodeNorms:
    """The analysis: the codes' rows of `split`, their norm per layer, and the run's metric there."""
    rows = codes.select(split=split).codes  # [n, layer, head, query, key]
    if len(rows) == 0:
        raise ValueError(f"the codes hold no {split!r} rows")
    norms = np.linalg.norm(rows.reshape(*rows.shape[:2], -1).astype(np.float64), axis=2).mean(axis=0)
    metric = run.task.metric_name
    return CodeNorms(split=split, layers=[int(layer) for layer in codes.meta["layers"]], mean_norm=norms.tolist(),
                     step=run.step, metric=metric, score=(run.eval_metrics(split) or {}).get(metric))


def norms_from_the_model(run: lc.OpenRun, meta: dict[str, Any], split: str = "ood") -> np.ndarray:
    """The same numbers computed independently: draw the codes' instances again and read the attention patterns
    the model caches at the codes' query and key positions."""
    choice = next(c for c in code_reading(run.task).inputs if c.name == meta["inputs"])
    batch = run.task.sample(meta["n_per_split"], split, seed=meta["seed"], **choice.sample_options)
    (query,), (key,) = meta["query"], meta["key"]  # one view: a row of query positions, a row of key positions
    with torch.no_grad():
        _, cache = run.model.run_with_cache(batch.x, names_filter=lambda name: name.endswith("hook_pattern"))
    norms = []
    for layer in meta["layers"]:
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"].double()  # [batch, head, query_pos, key_pos]
        at_codes = pattern[:, :, query][:, :, :, key]
        norms.append(at_codes.flatten(1).norm(dim=1).mean().item())
    return np.array(norms)


@pytest.fixture
def registered():
    """`code_norms` registered for one test, and unregistered after it (other tests see the normal registry)."""
    before = list(ANALYSES)
    register_analysis(NAME, title=TITLE)(code_norms)
    try:
        yield code_norms
    finally:
        if NAME in ANALYSES:
            unregister_analysis(NAME)
        assert list(ANALYSES) == before


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    task = lc.get_task("sraven")
    cfg = lc.train_config("sraven", "tiny", steps=4, warmup=1, eval_every=4, log_every=4, checkpoint_every=4,
                          eval_samples=32, device="cpu")
    run_dir = tmp_path_factory.mktemp("runs") / "sraven-tiny"
    lc.train(lc.model_config(task, "hyla", "tiny"), task, cfg, run_dir, progress=False)
    torch.set_num_threads(threads)
    return run_dir


def test_registration_is_checked_and_undone(registered):
    assert ANALYSES[NAME].fn is code_norms and ANALYSES[NAME].title == TITLE
    with pytest.raises(ValueError, match="'code_norms' is already registered"):
        register_analysis(NAME)(code_norms)
    with pytest.raises(ValueError, match=f"title '{TITLE}' is already the section of analysis 'code_norms'"):
        register_analysis("other", title=TITLE)(code_norms)
    with pytest.raises(ValueError, match="'nope' is not registered; registered analyses: .*code_norms"):
        unregister_analysis("nope")


def test_the_analysis_matches_the_models_own_attention_patterns(tiny_run):
    run = lc.open_run(tiny_run)
    codes = run.codes(n_samples=24)
    result = code_norms(run, codes)
    np.testing.assert_allclose(result.mean_norm, norms_from_the_model(run, codes.meta), rtol=1e-5)
    assert result.step == 4 and result.metric == "acc"
    assert result.score == pytest.approx(run.eval_metrics("ood")["acc"])
    assert json.loads(json.dumps(result.to_dict())) == result.to_dict()
    with pytest.raises(ValueError, match="no 'novel_terms' rows"):  # a split of another task: none here
        code_norms(run, codes, split="novel_terms")


def test_a_registered_analysis_is_in_the_report(registered, tiny_run, tmp_path):
    report = lc.report_runs([tiny_run], tmp_path / "report", embed_method="pca", n_samples=24, progress=False,
                            explorer=False)
    page = report.read_text()
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"]["sraven-tiny"]
    found = summary["analyses"][TITLE]
    nav = page[page.index("<nav>"):page.index("</nav>")]
    assert TITLE in nav and page.count(f">{TITLE}</h2>") == 1
    run = lc.open_run(tiny_run)
    codes = lc.load_codes(tiny_run)  # what the report extracted and saved into the run
    assert codes.meta["n_per_split"] == 24
    np.testing.assert_allclose(found["mean_norm"], norms_from_the_model(run, codes.meta), rtol=1e-5)
    shown = CodeNorms(**found).table()
    assert shown in page  # each line escapes to itself: no <, > or & in it
    assert run_analyses(run, codes)[0][TITLE].to_dict() == found


def test_a_registered_analysis_is_in_the_reports_of_the_command_line(registered, tiny_run, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["report", str(tiny_run), "--out", str(out), "--embed", "pca", "--no-explorer",
                 "--no-progress"]) == 0, capsys.readouterr().err
    assert f">{TITLE}</h2>" in (out / "report.html").read_text()
    assert "mean_norm" in json.loads((out / "summary.json").read_text())["runs"]["sraven-tiny"]["analyses"][TITLE]


def test_an_analysis_that_fails_on_a_run_is_a_note_and_a_bad_result_is_refused(tiny_run, tmp_path):
    run = lc.open_run(tiny_run)
    codes = run.codes(n_samples=8)

    def no_rows(run, codes):
        raise ValueError("the codes hold no 'validation' rows")

    register_analysis("no_rows", title="Never")(no_rows)
    try:
        assert run_analyses(run, codes) == ({}, ["no Never: the codes hold no 'validation' rows"])
    finally:
        unregister_analysis("no_rows")
    register_analysis("bare", title="Bare")(lambda run, codes: 0.5)
    try:
        with pytest.raises(TypeError, match="analysis 'bare' returned float, which lacks table.. and to_dict"):
            run_analyses(run, codes)
    finally:
        unregister_analysis("bare")
