"""Tests for latentcode/pipelines/analysis.py and the analysis subcommands (latentcode/cli/analysis.py).

One short SRAVEN run is trained per module and shared; the commands are driven through `latentcode.cli.main`
with the analysis subcommands added when cli/app.py does not list them yet.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from latentcode.cli.analysis import COMMANDS
from latentcode.codes.extract import LatentCodes, extract_latent_codes
from latentcode.config import model_config, train_config
from latentcode.pipelines import analysis, opened_run, run_codes
from latentcode.pipelines.opened_run import open_run as lc_open_run
from latentcode.rundir.checkpoint import load_run
from latentcode.tasks import get_task
from latentcode.training.train import train
from probes.decoding.decode import decode_rules

# A tiny HYLA model on two-feature, unpermuted SRAVEN learns enough in 600 steps (about 15 s on one core) for
# its last layer's OOD codes to decode each feature's rule well above the majority-class rate (measured: 0.19
# against 0.07 on the all_features positions).
TASK_PARAMS = {"n_features": 2, "permute_features": False}
TRAIN_STEPS = 600
N_CODES = 512


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, one_thread):
    """A tiny HYLA run on SRAVEN with paper and all_features codes (shared, read-only: copy it to modify)."""
    torch.manual_seed(0)
    task = get_task("sraven", seed=0, **TASK_PARAMS)
    cfg = train_config("sraven", "tiny", steps=TRAIN_STEPS, warmup=60, batch_size=128, lr=3e-3,
                       eval_every=TRAIN_STEPS, log_every=100, checkpoint_every=TRAIN_STEPS, device="cpu")
    run_dir = tmp_path_factory.mktemp("runs") / "hyla"
    train(model_config(task, "hyla", "tiny"), task, cfg, run_dir, progress=False)
    for positions in ("paper", "all_features"):
        analysis.extract_run(run_dir, n_samples=N_CODES, positions=positions, progress=False)
    return run_dir


@pytest.fixture
def run_copy(trained_run, tmp_path):
    """A private copy of the trained run (for tests that write into it)."""
    return shutil.copytree(trained_run, tmp_path / "hyla")


@pytest.fixture
def cli():
    """The real `latentcode.cli.main`, as installed: the commands under test are the ones it wires in."""
    from latentcode.cli import main

    return main


def test_the_command_line_wires_in_every_analysis_command():
    from latentcode.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    names = {add(argparse.ArgumentParser().add_subparsers()).prog.split()[-1] for add, _ in COMMANDS}
    assert names == {"extract", "decode", "figures", "report", "demo"} and names <= set(subparsers.choices)


def test_extract_command_writes_codes_that_round_trip(run_copy, cli, capsys):
    assert cli(["extract", str(run_copy), "--n", "64", "--splits", "train,ood", "--positions", "all_features"]) == 0
    assert "all_features.npz" in capsys.readouterr().out
    codes = LatentCodes.load(run_copy / "codes" / "all_features.npz")
    run = load_run(run_copy)
    direct = extract_latent_codes(run.model, run.task, ("train", "ood"), 64, positions="all_features", progress=False)
    np.testing.assert_array_equal(codes.codes, direct.codes)
    np.testing.assert_array_equal(codes.split, direct.split)
    assert sorted(codes.labels) == sorted(direct.labels)
    for name, value in direct.labels.items():
        np.testing.assert_array_equal(codes.labels[name], value)
    assert codes.codes.shape == (2 * 64 * 2, 2, 4, 1, 2)  # splits x instances x features, layers, heads, q, k
    assert codes.meta["checkpoint"] == run.checkpoint_hash and codes.meta["positions"] == "all_features"
    assert codes.meta["run"] == str(run_copy) and codes.meta["step"] == TRAIN_STEPS


def test_codes_of_another_checkpoint_are_flagged(run_copy, caplog):
    run_codes.load_codes(run_copy)
    assert not caplog.records  # the codes match the run's checkpoint
    (run_copy / "model.safetensors").write_bytes((run_copy / "model.safetensors").read_bytes() + b" ")
    run_codes.load_codes(run_copy)
    assert "re-run `latentcode extract" in caplog.text


def test_hyla_last_layer_decodes_the_rule_of_ood_codes_above_the_majority_rate(trained_run):
    result, path = analysis.decode_run(trained_run, positions="all_features", progress=False)
    assert result.layer_names == ["0", "1", "all"]
    ood = result.accuracy("ood")[1]  # the last layer
    majority = result.baselines["ood"].majority
    assert ood > majority + 0.05, result.table()
    assert ood > result.baselines["ood"].chance
    saved = json.loads(path.read_text())
    assert path.name == "all_features.decode.json"
    assert saved["label"] == "rule" and saved["layers"][1]["accuracy"]["ood"] == pytest.approx(ood)


def test_decode_run_reports_the_score_with_the_rules_sraven_says_share_a_code_merged(trained_run, tmp_path):
    result, path = analysis.decode_run(trained_run, progress=False, out_dir=tmp_path / "decode")
    assert result.merged is not None and result.merged.groups == [["addition", "subtraction"]]
    names = result.class_names
    a, s = names.index("addition"), names.index("subtraction")
    saved = json.loads(path.read_text())
    for i, layer in enumerate(saved["layers"]):
        matrix = np.array(layer["confusion"]["ood"])  # the held-out confusion matrix, as saved
        within = matrix[a, s] + matrix[s, a]
        assert saved["merged"]["accuracy"]["ood"][i] == pytest.approx((np.trace(matrix) + within) / matrix.sum())
    assert "with addition+subtraction merged" in result.table()
    assert saved["top_confusions"]["ood"][result.last_layer] is not None


def test_decode_command_prints_the_table_with_baselines(trained_run, cli, capsys, tmp_path):
    run = shutil.copytree(trained_run, tmp_path / "run")
    assert cli(["decode", str(run)]) == 0
    out = capsys.readouterr().out
    assert "chance" in out and "majority" in out and "ood" in out
    assert (run / "codes" / "paper.decode.json").is_file()


def test_figures_command_writes_png_and_html(run_copy, cli, capsys):
    assert cli(["figures", str(run_copy), "--format", "png,html", "--embed", "pca"]) == 0
    names = {p.name for p in (run_copy / "figures").iterdir()}
    for stem in ("decoding", "similarity", "code_heatmap", "pca", "training_curves"):
        assert {f"{stem}.png", f"{stem}.html"} <= names, names
    assert "files in" in capsys.readouterr().out


def test_report_command_writes_report_and_summary(run_copy, cli, capsys, tmp_path):
    out = tmp_path / "report"
    assert cli(["report", str(run_copy), "--out", str(out), "--embed", "pca"]) == 0
    assert (out / "plotly.min.js").stat().st_size > 1_000_000  # plotly.js beside the page: works offline
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"]["hyla"]["decoding"]["label"] == "rule"
    assert str(out / "report.html") in capsys.readouterr().out


def test_demo_trains_three_variants_and_prints_the_comparison(tmp_path, cli, capsys):
    out = tmp_path / "demo"
    assert (
        cli(["demo", "--train", "--out", str(out), "--preset", "tiny", "--steps", "8", "--n", "64", "--embed",
             "pca"])
        == 0
    )
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0] == "codes read at paper positions, unpermuted inputs (default); held-out (OOD) compositions"
    assert lines[1].split()[:4] == ["variant", "seed", "test", "acc"]
    assert "chance" in lines[1] and "majority" in lines[1] and "input-only" in lines[1] and "codes − best" in lines[1]
    assert [line.split()[0] for line in lines[2:5]] == ["softmax", "linear", "hyla"]
    assert f"report: {out / 'report.html'}" in printed
    result = json.loads((out / "demo.json").read_text())
    assert result["reading"] == "paper positions, unpermuted inputs (default)"
    assert [row["variant"] for row in result["rows"]] == ["softmax", "linear", "hyla"]
    for row in result["rows"]:
        assert (out / row["variant"] / "codes" / "all_features.npz").is_file()
        # the headline columns are the last single layer's OOD decoding of the default reading (paper positions)
        codes = run_codes.load_codes(out / row["variant"])
        again = decode_rules(codes, progress=False)
        assert row["decode_ood_last"] == pytest.approx(again.accuracy("ood")[-2])
        rule, train, ood = codes.labels["rule"], codes.split == "train", codes.split == "ood"
        majority = np.mean(rule[ood] == np.argmax(np.bincount(rule[train])))  # floors computed from the labels
        assert row["majority_ood"] == pytest.approx(majority) and row["chance"] == pytest.approx(1 / 8)
        best = max(majority, 1 / 8, row["input_only_ood"])
        assert row["codes_minus_control"] == pytest.approx(row["decode_ood_last"] - best)
        also = decode_rules(run_codes.load_codes(out / row["variant"], "all_features"), progress=False)
        assert row["decode_ood_last_all_features"] == pytest.approx(also.accuracy("ood")[-2])


def test_a_fuzzy_logic_run_goes_through_extract_decode_and_figures(tmp_path, cli, capsys):
    task = get_task("fuzzy_logic", seed=0)
    run_dir = tmp_path / "fuzzy"
    torch.manual_seed(0)
    train(model_config(task, "linear", "tiny"), task, train_config("fuzzy_logic", "tiny"), run_dir, progress=False)
    assert cli(["extract", str(run_dir), "--n", "96", "--splits", "train,ood,novel_terms"]) == 0
    assert cli(["decode", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "decoding 'terms' (16 classes, sets)" in out and "ridge R²" in out and "novel_terms" in out
    assert cli(["figures", str(run_dir), "--format", "png", "--embed", "pca"]) == 0
    assert (run_dir / "figures" / "term_f1.png").is_file()
    assert cli(["extract", str(run_dir), "--positions", "all_features"]) == 2
    assert "not defined for task 'fuzzy_logic'; valid: paper" in _error(capsys)


# ------------------------------------------------------------------------------------------------- bad input
def _error(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_decode_without_codes_extracts_them_first_and_says_so_once(run_copy, cli, capsys, caplog):
    shutil.rmtree(run_copy / "codes")
    with caplog.at_level(logging.INFO):
        assert cli(["decode", str(run_copy), "--no-progress"]) == 0
    said = [r.getMessage() for r in caplog.records if "extracting them first" in r.getMessage()]
    assert said == [f"{run_copy} has no codes at paper positions, unpermuted inputs yet; extracting them first"]
    assert "extracting" not in capsys.readouterr().out
    codes = run_codes.load_codes(run_copy, "paper")
    assert codes.n_samples == 3 * 2048 and codes.splits == ("train", "test", "ood")  # extract_run's defaults
    written = json.loads((run_copy / "codes" / "paper.decode.json").read_text())
    expected = decode_rules(codes, progress=False)
    assert [row["accuracy"] for row in written["layers"]] == [row.accuracy for row in expected.layers]


def test_figures_and_report_without_codes_extract_them_first(run_copy, cli, capsys, caplog):
    shutil.rmtree(run_copy / "codes")
    with caplog.at_level(logging.INFO):
        assert cli(["figures", str(run_copy), "--format", "png", "--embed", "pca", "--no-progress"]) == 0
    assert (run_copy / "codes" / "paper.npz").is_file() and (run_copy / "figures" / "decoding.png").is_file()
    assert sum("extracting them first" in r.getMessage() for r in caplog.records) == 1
    shutil.rmtree(run_copy / "codes")
    assert cli(["report", str(run_copy), "--embed", "pca", "--no-progress"]) == 0
    summary = json.loads((run_copy / "summary.json").read_text())
    assert summary["runs"]["hyla"]["meta"]["reading"] == "paper positions, unpermuted inputs (default)"
    assert "paper positions, unpermuted inputs (default)" in summary["title"]
    assert (run_copy / "codes" / "paper.npz").is_file()


def test_commands_on_a_directory_that_is_no_run(tmp_path, cli, capsys):
    for command in ("extract", "decode", "figures", "report"):
        assert cli([command, str(tmp_path)]) == 2
        assert "is not a run directory" in _error(capsys)


def _rewrite_codes(run_dir, **changes) -> None:
    codes = LatentCodes.load(run_dir / "codes" / "paper.npz")
    fields = {
        "codes": codes.codes,
        "labels": dict(codes.labels),
        "split": codes.split,
        "meta": dict(codes.meta),
    }
    for key, value in changes.items():
        if key in fields:
            fields[key] = value(fields[key])
    arrays = {"codes": fields["codes"], "split": fields["split"]}
    arrays.update({f"label_{k}": v for k, v in fields["labels"].items()})
    np.savez(
        run_dir / "codes" / "paper.npz", **arrays
    )  # bypasses LatentCodes' own checks, as a stray file would
    (run_dir / "codes" / "paper.json").write_text(json.dumps(fields["meta"]))


def _set(mapping, key, value):
    return {**mapping, key: value}


@pytest.mark.parametrize(
    "changes, message",
    [
        pytest.param(
            dict(meta=lambda m: _set(m, "task", "fuzzy_logic")),
            "codes of task 'fuzzy_logic'",
            id="another-task",
        ),
        pytest.param(
            dict(codes=lambda c: np.where(np.arange(len(c))[:, None, None, None, None] == 3, np.nan, c)),
            "NaN",
            id="nan-codes",
        ),
        pytest.param(
            dict(labels=lambda labels: _set(labels, "rule", np.full_like(labels["rule"], 7))),
            "single class",
            id="single-class-train",
        ),
        pytest.param(
            dict(split=lambda s: np.full_like(s, "train")), "no evaluation rows", id="only-train-split"
        ),
        pytest.param(
            dict(split=lambda s: np.where(s == "train", "ood", s)),
            "no rows in split 'train'",
            id="empty-train-split",
        ),
    ],
)
def test_decode_rejects_bad_codes_with_a_clear_error(run_copy, cli, capsys, changes, message):
    _rewrite_codes(run_copy, **changes)
    assert cli(["decode", str(run_copy)]) == 2
    err = _error(capsys)
    assert err.startswith("error:") and message in err, err


@pytest.mark.parametrize(
    "argv, message",
    [
        pytest.param(
            ["extract", "RUN", "--positions", "everything"],
            "positions='everything' is not defined for task 'sraven'; valid: paper, all_features (the task's named positions",
            id="unknown-positions",
        ),
        pytest.param(
            ["extract", "RUN", "--splits", "train,validation"],
            "unknown split 'validation'",
            id="unknown-split",
        ),
        pytest.param(["extract", "RUN", "--n", "0"], "must be positive", id="n-zero"),
        pytest.param(["figures", "RUN", "--format", "gif"], "valid formats", id="unknown-format"),
        pytest.param(
            ["decode", "RUN", "--label", "colour"], "label='colour' is not in these codes", id="bad-label"
        ),
    ],
)
def test_bad_arguments_exit_2_with_a_message(trained_run, cli, capsys, argv, message):
    argv = [str(trained_run) if a == "RUN" else a for a in argv]
    assert cli(argv) == 2
    captured = capsys.readouterr()
    assert message in " ".join((captured.err + captured.out).split())


@pytest.mark.parametrize(
    "command", [c[0].__name__.removeprefix("_add_").removesuffix("_parser") for c in COMMANDS]
)
def test_every_help_ends_with_an_example(cli, capsys, command):
    assert cli([command, "--help"]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-2] == "example:" and lines[-1].strip().startswith(f"latentcode {command}")


# --------------------------------------------------------------------------------------- constant codes
def _freeze_layer_0(codes: np.ndarray) -> np.ndarray:
    frozen = codes.copy()
    frozen[:, 0] = frozen[:1, 0]  # a dead layer: every instance gets the first one's code
    return frozen


def _constant_code_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "constant codes" in r.getMessage()]


def test_constant_codes_are_said_once_per_command_as_one_log_line(run_copy, cli, capsys, caplog, monkeypatch):
    import dataclasses

    _rewrite_codes(run_copy, codes=_freeze_layer_0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with caplog.at_level(logging.WARNING):
            assert cli(["decode", str(run_copy), "--no-progress"]) == 0
        (line,) = _constant_code_lines(caplog)  # once, though every layer group is probed
        assert line.startswith(f"warning: {run_copy}: constant codes in layer 0 (0.0e+00)")
        assert "constant codes: 0 (their probes read rounding noise" in capsys.readouterr().out
        assert json.loads((run_copy / "codes" / "paper.decode.json").read_text())["constant_layers"] == ["0"]

        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert cli(["figures", str(run_copy), "--format", "png", "--embed", "pca", "--no-progress"]) == 0
        assert len(_constant_code_lines(caplog)) == 1  # not again from the similarity, embedding or decoding

        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert cli(["report", str(run_copy), "--embed", "pca", "--no-progress"]) == 0
        (line,) = _constant_code_lines(caplog)
        assert line.startswith("report: ConstantCodesWarning ×1: run hyla: constant codes in layer 0")

        real = opened_run.extract_latent_codes

        def dead_layer_0(*args, **kwargs):
            codes = real(*args, **kwargs)
            return dataclasses.replace(codes, codes=_freeze_layer_0(codes.codes))

        monkeypatch.setattr(opened_run, "extract_latent_codes", dead_layer_0)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert cli(["extract", str(run_copy), "--n", "32", "--no-progress"]) == 0
        (line,) = _constant_code_lines(caplog)
        assert line.startswith(f"warning: {run_copy}: constant codes in layer 0")
    assert not [w for w in caught if w.category.__name__ == "ConstantCodesWarning"]  # log lines, not warnings
    assert "ConstantCodesWarning:" not in capsys.readouterr().err


def test_the_library_warns_where_codes_are_made_or_loaded(run_copy):
    from probes.degenerate import ConstantCodesWarning

    _rewrite_codes(run_copy, codes=_freeze_layer_0)
    with pytest.warns(ConstantCodesWarning, match="constant codes in layer 0") as caught:
        result, _ = analysis.decode_run(run_copy, progress=False)
    assert len([w for w in caught if w.category is ConstantCodesWarning]) == 1
    assert result.constant_layers == ["0"]


# ------------------------------------------------------------------------------------------ one reading
def test_the_reading_is_chosen_with_inputs_and_shown_in_every_result(run_copy, cli, capsys):
    assert cli(["decode", str(run_copy), "--inputs", "permuted", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "reading: paper positions, permuted inputs\n" in out
    assert (run_copy / "codes" / "paper-permuted.npz").is_file()
    saved = json.loads((run_copy / "codes" / "paper-permuted.decode.json").read_text())
    assert saved["reading"] == "paper positions, permuted inputs"
    assert saved["headline"]["accuracy"]["ood"]["floors"]["chance"] == pytest.approx(1 / 8)
    default = json.loads(analysis.decode_run(run_copy, progress=False)[1].read_text())
    assert default["reading"] == "paper positions, unpermuted inputs (default)"
    written = analysis.figures_run(run_copy, inputs="permuted", formats=["png"], embed_method="pca", progress=False)
    assert run_copy / "figures" / "decoding_permuted.png" in written
    assert cli(["decode", str(run_copy), "--inputs", "fixed_query"]) == 2
    assert "valid: unpermuted, permuted" in _error(capsys)


def test_codes_written_before_readings_were_recorded_still_load(run_copy, cli, capsys, tmp_path):
    # a SRAVEN file of the previous release: no reading, and `inputs` recorded as "uniform" although unpermuted
    _rewrite_codes(run_copy, meta=lambda m: {**{k: v for k, v in m.items() if k not in ("reading", "default_reading")},
                                             "inputs": "uniform"})
    codes = run_codes.load_codes(run_copy)
    assert codes.reading == "paper positions, unpermuted inputs (assumed: written before readings were recorded)"
    assert cli(["decode", str(run_copy)]) == 0
    assert "unpermuted inputs (assumed" in capsys.readouterr().out

    # a fuzzy-logic file of the previous release, read at uniform inputs: not the default reading any more
    task = get_task("fuzzy_logic", seed=0)
    run_dir = tmp_path / "fuzzy"
    torch.manual_seed(0)
    cfg = train_config("fuzzy_logic", "tiny", steps=2, warmup=1, eval_every=2, eval_samples=32, log_every=1,
                       checkpoint_every=2)
    train(model_config(task, "linear", "tiny"), task, cfg, run_dir, progress=False)
    analysis.extract_run(run_dir, n_samples=48, inputs="uniform", progress=False)
    old = run_codes.codes_path(run_dir, inputs="uniform")
    shutil.move(old, run_codes.codes_path(run_dir))
    meta = json.loads(old.with_suffix(".json").read_text())
    meta = {k: v for k, v in meta.items() if k not in ("inputs", "reading", "default_reading")}
    run_codes.codes_path(run_dir).with_suffix(".json").write_text(json.dumps(meta))
    old.with_suffix(".json").unlink()
    assert cli(["decode", str(run_dir)]) == 2
    err = _error(capsys)
    assert "not at fixed_query inputs (fuzzy_logic's default, the paper's reading)" in err
    assert "--inputs uniform" in err and "latentcode extract" in err
    assert cli(["decode", str(run_dir), "--inputs", "uniform"]) == 0
    assert "reading: paper positions, uniform inputs (assumed" in capsys.readouterr().out
    assert (run_dir / "codes" / "paper.decode.json").is_file()


# ----------------------------------------------------------------------------------- check before working
def test_extract_checks_the_splits_before_copying_the_run(trained_run, cli, capsys, tmp_path):
    out = tmp_path / "copy"
    assert cli(["extract", str(trained_run), "--splits", "train,val", "--out", str(out)]) == 2
    assert "unknown split 'val'" in _error(capsys)
    assert not out.exists()
    assert cli(["extract", str(trained_run), "--inputs", "shuffled", "--out", str(out)]) == 2
    assert "valid: unpermuted, permuted" in _error(capsys) and not out.exists()


def test_decode_checks_the_label_before_extracting(run_copy, cli, capsys, caplog):
    shutil.rmtree(run_copy / "codes")
    before = sorted(p.name for p in run_copy.iterdir())
    with caplog.at_level(logging.INFO):
        assert cli(["decode", str(run_copy), "--label", "rules"]) == 2
    err = _error(capsys)
    assert "label='rules' cannot be decoded from sraven codes; available labels: rule," in err
    assert sorted(p.name for p in run_copy.iterdir()) == before  # nothing extracted, nothing written
    assert not any("extracting" in r.getMessage() for r in caplog.records)


def test_decoding_a_shipped_checkpoint_writes_under_runs_analysis_never_into_it(run_copy, cli, capsys, caplog,
                                                                              tmp_path, monkeypatch):
    shutil.rmtree(run_copy / "codes")
    (run_copy / "shipped.json").write_text("{}")
    with pytest.raises(ValueError, match="shipped checkpoint, read in place and never written into; pass an output"):
        analysis.decode_run(run_copy, progress=False)  # the library writes only where it is told
    assert not (run_copy / "codes").exists()
    monkeypatch.chdir(tmp_path)
    assert cli(["decode", str(run_copy), "--n-samples", "32", "--no-progress"]) == 0  # the CLI's default --out
    assert "written: runs/analysis/hyla/codes/paper.decode.json" in capsys.readouterr().out
    assert (tmp_path / "runs" / "analysis" / "hyla" / "codes" / "paper.npz").is_file()
    assert not (run_copy / "codes").exists()


def test_report_checks_every_run_before_extracting_any(run_copy, trained_run, cli, capsys, tmp_path):
    shutil.rmtree(run_copy / "codes")
    assert cli(["report", str(run_copy), str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "is not a run directory" in _error(capsys)
    assert not (run_copy / "codes").exists() and not (tmp_path / "r").exists()


REPO_CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"


@pytest.mark.skipif(not (REPO_CHECKPOINTS / "fuzzy_logic-hyla").is_dir(), reason="no shipped checkpoints")
def test_the_demo_prints_floors_and_one_notes_line(tmp_path, cli, capsys, caplog):
    out = tmp_path / "demo"
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        assert cli(["demo", "--out", str(out), "--variants", "hyla", "--seeds", "0", "--n", "64", "--embed", "pca",
                    "--no-progress"]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert lines[0] == "codes read at paper positions, fixed_query inputs (default); held-out (OOD) compositions"
    assert lines[1].split("  ")[:4] == ["variant", "seed", "test r2", "OOD r2"]
    assert "always-present F1" in lines[1] and "input-only F1" in lines[1] and "codes − best" in lines[1]
    notes = [line for line in lines if line.startswith("notes: ")]
    assert len(notes) == 1 and "no probe for 4 terms" in notes[0]
    assert not any("no probe" in r.getMessage() for r in caplog.records)
    escaped = [w for w in caught if type(w.message).__name__ in ("ConvergenceWarning", "ConstantCodesWarning")]
    assert not escaped
    (row,) = json.loads((out / "demo.json").read_text())["rows"]
    codes = lc_open_run(REPO_CHECKPOINTS / "fuzzy_logic-hyla").codes(n_samples=64)  # the demo's, extracted again
    terms, ood = codes.labels["terms"], codes.split == "ood"
    present = np.zeros((len(terms), 16), dtype=bool)
    present[np.arange(len(terms))[:, None], terms] = True
    train = present[codes.split == "train"]
    evaluated = train.any(axis=0) & ~train.all(axis=0)
    support = present[ood][:, evaluated].sum(axis=0)
    always_present = np.mean(2 * support / (ood.sum() + support))  # the floor, from the labels alone
    assert row["always_present_f1_ood"] == pytest.approx(always_present)
    best = max(always_present, row["input_only_f1_ood"])
    assert row["term_f1_minus_best"] == pytest.approx(row["term_f1_ood_last"] - best)
    assert f"{always_present:.3f}" in lines[2]
