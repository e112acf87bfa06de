"""Shipped checkpoints: export, lookup by name, read-only protection, and the checkpoints that ship in the repo
reproducing the held-out metric recorded when they were shipped."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import latentcode as lc
from latentcode.cli import main
from latentcode.pipelines.analysis import decode_run, extract_run
from latentcode.rundir.pretrained import (
    CHECKPOINTS_ENV,
    checkpoints_dir,
    export_checkpoint,
    is_shipped,
    list_pretrained,
    load_pretrained,
    pretrained_name,
    pretrained_seeds,
    shipped_info,
)
from latentcode.training.evaluate import evaluate

REPO_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
SHIPPED = sorted(p.parent.name for p in REPO_CHECKPOINTS.glob("*/shipped.json"))
"""Every checkpoint in the repository's checkpoints/ folder (each seed included), found without latentcode."""


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    task = lc.get_task("fuzzy_logic", seq_len=8)
    return lc.train(lc.model_config(task, "hyla", preset="tiny"), task, lc.train_config("fuzzy_logic", "tiny"),
                    tmp_path_factory.mktemp("runs") / "hyla", progress=False)


@pytest.fixture()
def shipped(tiny_run, tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    export_checkpoint(tiny_run.path, folder / "fuzzy_logic-hyla", command="latentcode train ...")
    monkeypatch.setenv(CHECKPOINTS_ENV, str(folder))
    return folder


def test_export_writes_weights_config_metrics_and_provenance_only(tiny_run, shipped):
    dest = shipped / "fuzzy_logic-hyla"
    assert sorted(p.name for p in dest.iterdir()) == ["config.json", "metrics.jsonl", "model.safetensors",
                                                      "shipped.json"]
    info = shipped_info(dest)
    assert info["step"] == tiny_run.step and info["command"] == "latentcode train ..."
    ood = [json.loads(line) for line in (tiny_run.path / "metrics.jsonl").read_text().splitlines()
           if json.loads(line)["split"] == "ood"][-1]
    assert info["evaluation"]["results"]["ood"] == ood
    assert info["evaluation"]["n_samples"] == tiny_run.config.train.eval_samples


def test_export_never_overwrites(tiny_run, shipped):
    with pytest.raises(ValueError, match="already exists"):
        export_checkpoint(tiny_run.path, shipped / "fuzzy_logic-hyla")


def test_lookup_by_name_and_typo_suggestions(shipped, tiny_run):
    assert checkpoints_dir() == shipped
    assert list_pretrained() == ["fuzzy_logic-hyla"]
    run = load_pretrained("fuzzy_logic-hyla")
    assert run.checkpoint_hash == tiny_run.checkpoint_hash and run.step == tiny_run.step
    with pytest.raises(ValueError, match=r"did you mean 'fuzzy_logic-hyla'.*Available: fuzzy_logic-hyla"):
        load_pretrained("fuzzy-logic-hyla")


def test_every_shipped_seed_loads_by_name_and_seed(shipped, tmp_path):
    """`<name>` is one seed (its shipped.json says which), `<name>-s<k>` each other seed."""
    task = lc.get_task("fuzzy_logic", seq_len=8)
    cfg = lc.train_config("fuzzy_logic", "tiny", seed=1)
    other = lc.train(lc.model_config(task, "hyla", preset="tiny"), task, cfg, tmp_path / "s1", progress=False)
    export_checkpoint(other.path, shipped / "fuzzy_logic-hyla-s1")
    assert pretrained_seeds("fuzzy_logic-hyla") == {0: "fuzzy_logic-hyla", 1: "fuzzy_logic-hyla-s1"}
    assert load_pretrained("fuzzy_logic-hyla", seed=1).checkpoint_hash == other.checkpoint_hash
    assert load_pretrained("fuzzy_logic-hyla", seed=0).path == shipped / "fuzzy_logic-hyla"
    assert load_pretrained("fuzzy_logic-hyla-s1").config.train.seed == 1
    with pytest.raises(ValueError, match="no seed 2 of 'fuzzy_logic-hyla' is shipped; shipped seeds: 0, 1"):
        load_pretrained("fuzzy_logic-hyla", seed=2)
    # the sweeps name what they ship with pretrained_name, the inverse of the lookup above
    assert [pretrained_name("fuzzy_logic-hyla", seed) for seed in (0, 1)] == ["fuzzy_logic-hyla", "fuzzy_logic-hyla-s1"]
    with pytest.raises(ValueError, match="seed=-1 must be a non-negative integer"):
        pretrained_name("fuzzy_logic-hyla", -1)


def test_missing_checkpoints_folder_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECKPOINTS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=CHECKPOINTS_ENV):
        list_pretrained()


def test_analyses_never_write_into_a_shipped_checkpoint(shipped, tmp_path, capsys, monkeypatch):
    dest = shipped / "fuzzy_logic-hyla"
    before = _tree_digest(dest)
    assert is_shipped(dest) and is_shipped(dest / "codes")
    with pytest.raises(ValueError, match="shipped checkpoint, read in place and never written into; pass an output"):
        extract_run(dest, n_samples=32)
    monkeypatch.chdir(tmp_path)  # the command line's default output folder is runs/analysis/<name>
    assert main(["decode", "fuzzy_logic-hyla", "--n-samples", "32", "--no-progress"]) == 0
    assert "written: runs/analysis/fuzzy_logic-hyla/codes/paper.decode.json" in capsys.readouterr().out
    out = tmp_path / "analysis"
    result, path = decode_run(dest, out_dir=out, n_samples=32)
    assert path.is_relative_to(out) and not (out / "model.safetensors").exists() and not is_shipped(out)
    assert len(result.layer_names) > 0
    assert json.loads(path.read_text())["n_per_split"] == 32
    again, _ = decode_run(dest, out_dir=out)  # the codes written there are reused
    assert again.to_dict() == result.to_dict()
    assert _tree_digest(dest) == before


def test_demo_analyses_the_shipped_checkpoints_without_touching_them(shipped, tmp_path, tiny_run):
    before = _tree_digest(shipped)
    out = tmp_path / "demo"
    result = lc.demo(out, variants=["hyla"], n_samples=64, embed_method="pca", progress=False)
    (row,) = result.rows
    recorded = shipped_info(shipped / "fuzzy_logic-hyla")["evaluation"]["results"]["ood"]["r2"]
    assert row["variant"] == "hyla" and row["ood"] == recorded
    assert result.report == out / "report.html" and not list(out.rglob("*.safetensors"))  # nothing copied
    assert "load" in result.timings and "train" not in result.timings
    assert row["input_only_ood"] is not None
    best = max(row["input_only_ood"], row["majority_ood"], row["chance"])
    assert row["codes_minus_control"] == pytest.approx(row["decode_ood_last"] - best)
    summary = json.loads((out / "summary.json").read_text())["runs"]
    f1 = [np.nan if v is None else v for v in summary[next(iter(summary))]["decoding"]["extras"]["terms"]["f1"]["ood"][-2]]
    assert row["term_f1_ood_last"] == pytest.approx(np.nanmean(f1))
    assert row["codes_minus_input_only"] == pytest.approx(row["term_f1_ood_last"] - row["input_only_f1_ood"])
    assert "term F1 OOD (last layer)" in result.table()
    assert _tree_digest(shipped) == before
    with pytest.raises(ValueError, match="no shipped checkpoint named 'fuzzy_logic-softmax'"):
        lc.demo(tmp_path / "demo2", variants=["softmax"])


def test_the_pretrained_command_lists_names_and_metrics(shipped, capsys):
    assert main(["pretrained"]) == 0
    out = capsys.readouterr().out
    assert "fuzzy_logic-hyla" in out and "ood r2" in out


@pytest.mark.skipif(not REPO_CHECKPOINTS.is_dir(), reason="no checkpoints/ folder (not a clone)")
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_checkpoint_reproduces_its_recorded_metric(name, monkeypatch):
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    assert name in list_pretrained()
    run = load_pretrained(name)
    evaluation = shipped_info(run.path)["evaluation"]
    results = evaluate(run.model, run.task, splits=("ood",), n_samples=evaluation["n_samples"],
                       seed=evaluation["seed"])
    metric = evaluation["metric"]
    assert results["ood"][metric] == pytest.approx(evaluation["results"]["ood"][metric], abs=1e-4)
    # weights only, in float32: the size of the parameters plus the safetensors header (no optimizer state, no
    # buffers of another size); a SRAVEN paper-scale model is 1.6 MB, a fuzzy-logic one 0.6 MB
    weights = sum(4 * p.numel() for p in run.model.state_dict().values())
    assert weights <= (run.path / "model.safetensors").stat().st_size < weights + 64_000


def test_every_core_fuzzy_logic_variant_ships():
    assert {"fuzzy_logic-softmax", "fuzzy_logic-linear", "fuzzy_logic-hyla"} <= set(SHIPPED)


def test_the_report_measures_the_live_fraction_of_a_run_trained_before_the_diagnostic(tiny_run, tmp_path):
    from latentcode.pipelines.run_report import report_runs
    from latentcode.training.diagnostics import LIVE_KEY, format_live_fraction

    old = tmp_path / "old-run"
    tiny_run.save(old)  # as shipped runs of the first release: metrics without the live fraction
    lines = [json.loads(line) for line in (old / "metrics.jsonl").read_text().splitlines()]
    (old / "metrics.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != LIVE_KEY}) + "\n"
                                               for r in lines))
    extract_run(old, n_samples=32)
    report = report_runs([old], tmp_path / "report", embed_method="pca")
    summary = json.loads((report.parent / "summary.json").read_text())["runs"]
    recorded = tiny_run.eval_metrics("ood")[LIVE_KEY]  # what training measured on the same batch
    assert summary[next(iter(summary))]["summary"]["value network live"] == format_live_fraction(recorded)
