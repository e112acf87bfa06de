"""`latentcode demo` over every shipped seed (latentcode/pipelines/demo.py): one row per seed, the mean ± s.e. over
seeds (checked against numpy), the live fraction beside each, and clear errors for broken seed folders.

The checkpoints are tiny fuzzy-logic runs trained and exported into a temporary `$LATENTCODE_CHECKPOINTS` folder
(hyla: seeds 0, 1 and 2; softmax: seeds 0 and 1), so these tests do not depend on which seeds the repository ships.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import latentcode as lc
from latentcode.cli import main
from latentcode.pipelines.demo import shipped_seed_dirs
from latentcode.pipelines.demo_table import SEED_LEGEND, SUMMARY_TITLE, DemoResult, SeedTable, seed_row
from latentcode.rundir.pretrained import CHECKPOINTS_ENV, export_checkpoint, load_pretrained, shipped_info
from latentcode.training.diagnostics import value_live_fraction
from latentcode.training.evaluate import live_fraction_inputs
from probes import decode_rules
from probes.decoding.headline import HEADLINE
from probes.decoding.results import NA, UNDEFINED

SEEDS = {"softmax": (0, 1), "hyla": (0, 1, 2)}
N_SAMPLES = 64


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A checkpoints folder: `fuzzy_logic-<variant>` holds seed 0, `fuzzy_logic-<variant>-s<k>` seed k."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = tmp_path_factory.mktemp("runs")
    folder = tmp_path_factory.mktemp("checkpoints")
    task = lc.get_task("fuzzy_logic", seq_len=8)
    for variant, seeds in SEEDS.items():
        for seed in seeds:
            cfg = lc.train_config("fuzzy_logic", "tiny", seed=seed, device="cpu")
            run = lc.train(lc.model_config(task, variant, preset="tiny"), task, cfg, runs / f"{variant}-s{seed}",
                           progress=False)
            name = f"fuzzy_logic-{variant}" + (f"-s{seed}" if seed else "")
            export_checkpoint(run.path, folder / name, command=f"latentcode train (seed {seed})")
    torch.set_num_threads(threads)
    return folder


@pytest.fixture()
def shipped(checkpoints, monkeypatch):
    monkeypatch.setenv(CHECKPOINTS_ENV, str(checkpoints))
    return checkpoints


@pytest.fixture(scope="module")
def demo_result(checkpoints, tmp_path_factory):
    """One demo over every seed of both variants (shared, read-only)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CHECKPOINTS_ENV, str(checkpoints))
        out = tmp_path_factory.mktemp("demo") / "out"
        return lc.demo(out, variants=["softmax", "hyla"], n_samples=N_SAMPLES, embed_method="pca", progress=False)


# ----------------------------------------------------------------------------------------------- every seed
def test_the_demo_analyses_every_shipped_seed(demo_result, checkpoints):
    rows = demo_result.rows
    assert [(r["variant"], r["seed"]) for r in rows] == [(v, s) for v, seeds in SEEDS.items() for s in seeds]
    out = demo_result.report.parent
    assert not list(out.rglob("*.safetensors"))  # each checkpoint is read where it lies, never copied
    for row in rows:
        name = f"fuzzy_logic-{row['variant']}" + (f"-s{row['seed']}" if row["seed"] else "")
        assert row["run"] == checkpoints / name and row["n_per_split"] == N_SAMPLES
        recorded = shipped_info(checkpoints / name)["evaluation"]["results"]
        assert row["ood"] == recorded["ood"]["r2"] and row["test"] == recorded["test"]["r2"]
        # the decoding columns are each seed's own codes, extracted and decoded again here
        codes = lc.open_run(row["run"]).codes(n_samples=N_SAMPLES)
        terms = decode_rules(codes, progress=False).extras["terms"]
        assert row["term_f1_ood_last"] == pytest.approx(terms.mean_f1("ood")[-2])
        best = max(row["always_present_f1_ood"], row["input_only_f1_ood"])
        assert row["term_f1_minus_best"] == pytest.approx(row["term_f1_ood_last"] - best)


def test_the_live_fraction_is_measured_per_seed(demo_result):
    for row in demo_result.rows:
        run = lc.load_run(row["run"])
        if row["variant"] == "softmax":
            assert row["live_fraction"] is None
            continue
        measured = value_live_fraction(run.model, live_fraction_inputs(run.task, run.config.train.seed))
        assert row["live_fraction"] == pytest.approx(measured)


def _numbers(values):
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def test_the_mean_and_standard_error_over_seeds_match_numpy(demo_result):
    columns = [key for key, _ in demo_result.seeds.columns() if key != "live_fraction"]
    assert {"test", "ood", "term_f1_ood_last", "always_present_f1_ood", "input_only_f1_ood",
            "term_f1_minus_best"} <= set(columns)
    table = demo_result.table()
    for entry in demo_result.seeds.summary():
        rows = [r for r in demo_result.rows if r["variant"] == entry["variant"]]
        assert entry["seeds"] == list(SEEDS[entry["variant"]]) and entry["n"] == len(rows)
        for key in columns:
            x = _numbers([r[key] for r in rows])
            mean, se = entry[key]
            assert mean == pytest.approx(x.mean())
            assert se == pytest.approx(x.std(ddof=1) / np.sqrt(len(x)))
        x = _numbers([r["ood"] for r in rows])
        assert f"{x.mean():.3f} ± {x.std(ddof=1) / np.sqrt(len(x)):.3f}" in table
    (hyla,) = [e for e in demo_result.seeds.summary() if e["variant"] == "hyla"]
    live = np.array([r["live_fraction"] for r in demo_result.rows if r["variant"] == "hyla"])
    assert [m for m, _ in hyla["live_fraction"]] == pytest.approx(live.mean(axis=0))
    assert [s for _, s in hyla["live_fraction"]] == pytest.approx(live.std(axis=0, ddof=1) / np.sqrt(len(live)))


def test_the_table_shows_each_seed_then_the_means(demo_result):
    lines = demo_result.table().splitlines()
    assert lines[0] == "codes read at paper positions, fixed_query inputs (default); held-out (OOD) compositions"
    assert lines[1].split("  ")[:4] == ["variant", "seed", "test r2", "OOD r2"]
    for title in ("term F1 OOD (last layer)", "always-present F1", "input-only F1", HEADLINE,
                  "live fraction (per layer)"):
        assert title in lines[1]
    assert [line.split()[:2] for line in lines[2:7]] == [["softmax", "0"], ["softmax", "1"], ["hyla", "0"],
                                                          ["hyla", "1"], ["hyla", "2"]]
    assert [line.split()[-1] for line in lines[2:4]] == [NA, NA]  # softmax has no ReLU value network
    assert lines[7] == "" and lines[8] == SUMMARY_TITLE
    assert lines[9].split("  ")[:2] == ["variant", "seeds"]
    assert lines[10].startswith("softmax  0, 1 (n=2)") and lines[11].startswith("hyla     0, 1, 2 (n=3)")


def test_the_report_and_the_summary_carry_the_seed_table(demo_result):
    out = demo_result.report.parent
    page = demo_result.report.read_text()
    assert page.index('id="every-seed"') < page.index("</h2>", page.index('id="every-seed"'))
    assert "mean ± s.e. over seeds" in page and "(n=3)" in page
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["runs"]) == {"softmax", "softmax-s1", "hyla", "hyla-s1", "hyla-s2"}
    assert summary["seeds"]["summary"] == json.loads(json.dumps(demo_result.seeds.summary()))
    written = json.loads((out / "demo.json").read_text())
    assert written["summary"] == summary["seeds"]["summary"]
    assert DemoResult.from_dict(written).table() == demo_result.table()


def test_seed_row_from_a_loaded_checkpoint_matches_the_demo(demo_result, shipped):
    """What notebook 03 does: load a seed by name, decode its codes, build the row."""
    run = load_pretrained("fuzzy_logic-hyla", seed=2)
    (expected,) = [r for r in demo_result.rows if r["variant"] == "hyla" and r["seed"] == 2]
    codes = lc.open_run(expected["run"]).codes(n_samples=N_SAMPLES)
    row = seed_row(run, decode_rules(codes, progress=False))
    for key in ("variant", "seed", "test", "ood", "term_f1_ood_last", "term_f1_minus_best", "live_fraction"):
        assert row[key] == pytest.approx(expected[key]), key


# ---------------------------------------------------------------------------------------- choosing seeds, n=1
def test_one_seed_says_it_has_no_standard_error(shipped, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "d"), "--variants", "hyla", "--seeds", "1", "--n", "32",
                 "--embed", "pca", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[2:3]] == [["hyla", "1"]]
    means = lines[lines.index(SUMMARY_TITLE) + 2]
    assert means.startswith("hyla     1 (n=1, no s.e.)") and "±" not in means
    assert SEED_LEGEND in lines
    assert (tmp_path / "d" / "report.html").is_file() and not list((tmp_path / "d").rglob("*.safetensors"))


@pytest.mark.parametrize(("seeds", "match"), [
    pytest.param([2], r"seed 2 of 'fuzzy_logic-softmax' is not shipped; shipped seeds: 0, 1", id="not-shipped"),
    pytest.param([], "non-empty list of integers", id="empty"),
])
def test_unknown_seeds_are_refused_before_anything_is_copied(shipped, tmp_path, seeds, match):
    with pytest.raises(ValueError, match=match):
        lc.demo(tmp_path / "d", variants=["softmax", "hyla"], seeds=seeds)
    assert not (tmp_path / "d").exists()


def test_without_variants_the_demo_analyses_the_shipped_ones_and_names_the_rest(shipped, tmp_path, capsys):
    """A task whose core variants are not all shipped yet (here fuzzy logic without linear attention; SRAVEN while
    its campaign runs): `latentcode demo` without --variants analyses the shipped ones and says which are missing,
    in its notes and in demo.json."""
    assert main(["demo", "--out", str(tmp_path / "d"), "--seeds", "0", "--n", "32", "--embed", "pca",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "notes: not shipped yet, so not in this demo: fuzzy_logic-linear" in out
    assert not list((tmp_path / "d").rglob("*.safetensors"))  # nothing copied
    record = json.loads((tmp_path / "d" / "demo.json").read_text())
    assert [row["variant"] for row in record["rows"]] == ["softmax", "hyla"]
    assert record["notes"][0] == "not shipped yet, so not in this demo: fuzzy_logic-linear"


def test_a_task_with_no_shipped_checkpoint_is_refused_naming_what_ships(shipped, tmp_path):
    with pytest.raises(ValueError, match=r"no shipped checkpoint of task 'sraven' .*looked for sraven-softmax, "
                                         r"sraven-linear, sraven-hyla; shipped: fuzzy_logic-hyla.*Pass --train"):
        lc.demo(tmp_path / "d", task="sraven")
    assert not (tmp_path / "d").exists()
    with pytest.raises(ValueError, match="no shipped checkpoint named 'fuzzy_logic-linear'"):
        lc.demo(tmp_path / "d", variants=["softmax", "linear"])  # named explicitly: every one must ship


def test_seeds_with_train_are_refused_naming_the_flags_too(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"CLI: --train\) with another seed, pass seed= \(CLI: --seed\) instead"):
        lc.demo(tmp_path / "d", train=True, seeds=[0, 1])
    from latentcode.cli import main

    assert main(["demo", "--out", str(tmp_path / "d"), "--train", "--seeds", "1"]) != 0
    assert "seeds=[1] (CLI: --seeds) selects shipped checkpoints" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


# --------------------------------------------------------------------------------------------- broken folders
def _break(folder: Path, how: str) -> str:
    """Add a broken seed folder of fuzzy_logic-hyla; return what the error must say."""
    if how == "no-weights":
        dest = folder / "fuzzy_logic-hyla-s3"
        shutil.copytree(folder / "fuzzy_logic-hyla-s1", dest)
        (dest / "model.safetensors").unlink()
        return r"fuzzy_logic-hyla-s3 is broken: no model\.safetensors"
    if how == "wrong-seed":
        dest = folder / "fuzzy_logic-hyla-s4"
        shutil.copytree(folder / "fuzzy_logic-hyla-s1", dest)
        return "fuzzy_logic-hyla-s4 is broken: the folder is named for seed 4 but shipped.json records seed 1"
    if how == "bad-shipped-json":
        dest = folder / "fuzzy_logic-hyla-s3"
        shutil.copytree(folder / "fuzzy_logic-hyla-s1", dest)
        (dest / "shipped.json").write_text("{not json")
        return "fuzzy_logic-hyla-s3 is broken: shipped.json does not record the evaluation seed"
    if how == "truncated-weights":
        dest = folder / "fuzzy_logic-hyla-s1"
        data = (dest / "model.safetensors").read_bytes()
        (dest / "model.safetensors").write_bytes(data[: len(data) // 2])
        return "fuzzy_logic-hyla-s1 is broken: it does not load"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["no-weights", "wrong-seed", "bad-shipped-json", "truncated-weights"])
def test_a_broken_seed_folder_is_named_before_anything_is_copied(checkpoints, tmp_path, monkeypatch, how):
    folder = tmp_path / "checkpoints"
    shutil.copytree(checkpoints, folder)
    monkeypatch.setenv(CHECKPOINTS_ENV, str(folder))
    match = _break(folder, how)
    with pytest.raises(ValueError, match=match) as caught:
        lc.demo(tmp_path / "d", variants=["softmax", "hyla"], n_samples=32, embed_method="pca", progress=False)
    assert "Export it again" in str(caught.value)
    assert not (tmp_path / "d").exists()  # softmax comes first, yet nothing was copied
    assert main(["demo", "--out", str(tmp_path / "d"), "--variants", "hyla", "--no-progress"]) == 2


def test_shipped_seed_dirs_lists_each_seed_folder(shipped):
    assert {s: p.name for s, p in shipped_seed_dirs("fuzzy_logic-hyla").items()} == {
        0: "fuzzy_logic-hyla", 1: "fuzzy_logic-hyla-s1", 2: "fuzzy_logic-hyla-s2"}
    assert list(shipped_seed_dirs("fuzzy_logic-hyla", [2, 0])) == [0, 2]
    with pytest.raises(ValueError, match="no shipped checkpoint named 'fuzzy_logic-linear'"):
        shipped_seed_dirs("fuzzy_logic-linear")


# --------------------------------------------------------------------------------------------- the seed table
def _row(variant, seed, ood, f1, live=None):
    return {"variant": variant, "seed": seed, "test": 0.9, "ood": ood, "term_f1_ood_last": f1,
            "always_present_f1_ood": 0.25, "input_only_f1_ood": None, "term_f1_minus_best": f1 - 0.25,
            "live_fraction": live}


def test_seed_table_cells_follow_the_na_and_undefined_convention():
    rows = [_row("hyla", 0, 0.8, 0.3, [0.0, 0.5]), _row("hyla", 1, 0.9, math.nan, [0.2, 0.4]),
            _row("linear", 0, 0.6, 0.35)]
    table = SeedTable(rows, metric="r2", reading="somewhere")
    hyla, linear = table.summary()
    assert hyla["input_only_f1_ood"] == (None, None)  # no seed has it: n/a
    assert all(math.isnan(v) for v in hyla["term_f1_ood_last"])  # one seed's is undefined: so is the mean
    assert hyla["ood"] == pytest.approx((0.85, np.std([0.8, 0.9], ddof=1) / np.sqrt(2)))
    assert np.array(hyla["live_fraction"]) == pytest.approx(np.array([[0.1, 0.1], [0.45, 0.05]]))
    assert linear["ood"] == (0.6, None) and linear["live_fraction"] is None
    text = table.table()
    assert "0.000 / 0.500" in text and "0.100 ± 0.100 / 0.450 ± 0.050" in text
    means = text.splitlines()[-2:]
    assert means[0].split("  ")[0] == "hyla" and f" {UNDEFINED} " in means[0] and f" {NA} " in means[0]
    assert "0 (n=1, no s.e.)" in means[1] and "0.600" in means[1] and "±" not in means[1]


def test_the_demo_runs_on_shipped_sraven_checkpoints(tmp_path, monkeypatch):
    """`latentcode demo --task sraven` on shipped SRAVEN checkpoints (tiny stand-ins here): the recorded metric per
    seed, the rule decoded from the last layer beside chance (1/8), the majority rule and the input-only control,
    and the headline equal to the score minus the best of those three."""
    torch.set_num_threads(1)
    task = lc.get_task("sraven", permute_features=False)
    folder = tmp_path / "checkpoints"
    for variant in ("softmax", "hyla"):
        cfg = lc.train_config("sraven", "tiny", device="cpu")
        run = lc.train(lc.model_config(task, variant, preset="tiny"), task, cfg, tmp_path / "runs" / variant,
                       progress=False)
        export_checkpoint(run.path, folder / f"sraven-{variant}", command="latentcode train sraven (tiny)")
    monkeypatch.setenv(CHECKPOINTS_ENV, str(folder))
    result = lc.demo(tmp_path / "out", task="sraven", variants=["softmax", "hyla"], n_samples=N_SAMPLES,
                     embed_method="pca", progress=False)
    assert [(r["variant"], r["seed"]) for r in result.rows] == [("softmax", 0), ("hyla", 0)]
    for row in result.rows:
        recorded = shipped_info(folder / f"sraven-{row['variant']}")["evaluation"]["results"]
        assert row["ood"] == recorded["ood"]["acc"] and row["test"] == recorded["test"]["acc"]
        assert row["chance"] == pytest.approx(1 / 8)
        best = max(row["chance"], row["majority_ood"], row["input_only_ood"])
        assert row["codes_minus_control"] == pytest.approx(row["decode_ood_last"] - best)
    assert result.rows[0]["live_fraction"] is None and len(result.rows[1]["live_fraction"]) == 2  # HYLA only
    assert "codes read at paper positions, unpermuted inputs (default)" in result.table()
