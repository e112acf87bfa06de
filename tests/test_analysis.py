"""Tests for latentcode/analysis.py and the analysis subcommands (latentcode/_cli_analysis.py).

One short SRAVEN run is trained per module and shared; the commands are driven through `latentcode.cli.main`
with the analysis subcommands added when cli.py does not list them yet.
"""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest
import torch

from latentcode import analysis
from latentcode._cli_analysis import COMMANDS
from latentcode.checkpoint import load_run
from latentcode.config import model_config, train_config
from latentcode.extract import LatentCodes, extract_latent_codes
from latentcode.tasks import get_task
from latentcode.train import train
from probes.decode import decode_rules

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
    analysis.load_codes(run_copy)
    assert not caplog.records  # the codes match the run's checkpoint
    (run_copy / "model.safetensors").write_bytes((run_copy / "model.safetensors").read_bytes() + b" ")
    analysis.load_codes(run_copy)
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
    assert (out / "report.html").stat().st_size > 100_000  # plotly.js is embedded: works offline
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
    assert lines[0].split()[:3] == ["variant", "test", "acc"]
    assert [line.split()[0] for line in lines[1:4]] == ["softmax", "linear", "hyla"]
    assert f"report: {out / 'report.html'}" in printed
    result = json.loads((out / "demo.json").read_text())
    assert [row["variant"] for row in result["rows"]] == ["softmax", "linear", "hyla"]
    for row in result["rows"]:
        assert (out / row["variant"] / "codes" / "paper.npz").is_file()
        # the table's numbers are the last single layer's OOD decoding of the report's (all_features) codes
        again = decode_rules(analysis.load_codes(out / row["variant"], "all_features"), progress=False)
        assert row["decode_ood_last"] == pytest.approx(again.accuracy("ood")[-2])
        assert row["majority_ood"] == pytest.approx(again.baselines["ood"].majority)


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
    assert "SRAVEN only" in _error(capsys)


# ------------------------------------------------------------------------------------------------- bad input
def _error(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_decode_without_codes_extracts_them_first(run_copy, cli, capsys):
    shutil.rmtree(run_copy / "codes")
    assert cli(["decode", str(run_copy), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"{run_copy} has no paper codes yet; extracting them first" in out
    codes = analysis.load_codes(run_copy, "paper")
    assert codes.n_samples == 3 * 2048 and codes.splits == ("train", "test", "ood")  # extract_run's defaults
    written = json.loads((run_copy / "codes" / "paper.decode.json").read_text())
    expected = decode_rules(codes, progress=False)
    assert [row["accuracy"] for row in written["layers"]] == [row.accuracy for row in expected.layers]


def test_figures_and_report_without_codes_name_the_command_that_makes_them(run_copy, cli, capsys):
    shutil.rmtree(run_copy / "codes")
    assert cli(["figures", str(run_copy)]) == 2
    assert "latentcode extract" in _error(capsys)
    assert cli(["report", str(run_copy)]) == 2
    assert "latentcode extract" in _error(capsys)


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
            ["extract", "RUN", "--positions", "everything"], "invalid choice", id="unknown-positions"
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
