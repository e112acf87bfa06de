"""Tests of latentcode/causal/experiments.py on tiny models: a model that ignores its codes transfers nothing and
loses nothing under ablation; the bookkeeping adds up; results save as CSV, JSON and PNG; shipped runs stay
untouched."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from latentcode.causal.experiments import (
    ExperimentResult,
    function_transfer,
    mean_ablation,
    rule_transfer,
    run_experiment,
)
from latentcode.causal.transfer import _one_feature_pairs, _same_rule_partners
from latentcode.config import model_config, train_config
from latentcode.model.transformer import build_model
from latentcode.tasks import FuzzyLogic, SRaven, get_task
from latentcode.training.train import train


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _ignores_codes(model):
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_O.zero_()
    return model


@pytest.fixture(scope="module")
def sraven_model():
    torch.manual_seed(0)
    task = SRaven()
    return task, build_model(task, "hyla", "tiny").eval()


def test_one_feature_pairs_differ_in_exactly_one_feature():
    rules = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 5], [0, 1, 4, 5], [7, 7, 7, 7]])
    recipient, donor = _one_feature_pairs(rules, torch.Generator().manual_seed(0))
    assert recipient.tolist() == [0, 1, 2]  # instance 3 has no partner
    assert donor[0] == 1 and donor[1] in (0, 2) and donor[2] == 1
    assert ((rules[recipient] != rules[donor]).sum(1) == 1).all()


def test_same_rule_partners_share_every_rule_and_are_never_the_instance_itself():
    rules = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 5], [4, 4, 4, 4]])
    partner = _same_rule_partners(rules, torch.tensor([0, 1, 2, 3]), torch.Generator().manual_seed(0))
    assert partner[0] in (1, 2) and partner[1] in (0, 2) and partner[2] in (0, 1)
    assert partner[3] == -1  # no other instance has rules (0, 1, 2, 5)


def test_the_pair_search_in_chunks_finds_the_pairs_of_one_whole_block(monkeypatch):
    """The donors and same-rule partners found chunk by chunk (to bound memory) are those of one comparison of every
    instance with every other: the same seeded draws in the same order."""
    from latentcode.causal import transfer

    rules = SRaven().sample(300, "test", seed=1, unpermuted=True).labels["rules"]
    found = []
    for chunk in (300, 7):
        monkeypatch.setattr(transfer, "_CHUNK", chunk)
        generator = torch.Generator().manual_seed(0)
        recipient, donor = _one_feature_pairs(rules, generator)
        found.append((recipient, donor, _same_rule_partners(rules, recipient, generator)))
    assert len(found[0][0]) > 250
    for whole, chunked in zip(*found, strict=True):
        assert torch.equal(whole, chunked)


def test_rule_transfer_of_a_model_that_ignores_its_codes_is_zero(sraven_model):
    task, model = sraven_model
    result = rule_transfer(_ignores_codes(build_model(task, "hyla", "tiny").eval()), task, n_samples=256,
                           progress=False)
    assert result.column("transfer").tolist() == [0.0, 0.0, 0.0]
    assert result.column("control").tolist() == [0.0, 0.0, 0.0]  # a same-rule donor moves nothing either
    assert result.column("keep").tolist() == result.column("clean_keep").tolist()
    assert 0 < result.column("n_control_pairs")[0] == counts_pairs_with_partner(task, 256)
    counts = result.counts
    assert counts["without_partner"] + counts["undefined"] + counts["same_answer"] + counts["pairs"] == 256
    assert result.column("n_pairs").tolist() == [counts["pairs"]] * 3
    assert result.column("difference").tolist() == [0.0, 0.0, 0.0] == result.column("difference_ci").tolist()
    reads = rule_transfer(model, task, n_samples=256, progress=False)
    assert reads.column("transfer").max() > 0  # the same pairs move a model that reads its codes
    assert [row["layer"] for row in reads.rows] == ["0", "1", "all"]
    assert rule_transfer(model, task, n_samples=256, layers=[1], progress=False).rows == [reads.rows[1]]


def test_the_paired_transfer_difference_is_transfer_minus_control_with_a_paired_interval(sraven_model):
    """Where every pair has a control, `difference` is the transfer share minus the control share; its interval
    (1.96 standard errors of the per-pair difference of 0/1 outcomes) is bounded by what the two shares allow: at
    least the interval with the largest covariance they permit, at most the one with the lowest."""
    task, model = sraven_model
    result = rule_transfer(model, task, n_samples=2048, progress=False)  # enough draws for a twin of each recipient
    checked = 0
    for row in result.rows:
        n, p, q = row["n_control_pairs"], row["transfer"], row["control"]
        if n != row["n_pairs"] or n < 2:
            continue
        checked += 1
        assert row["difference"] == pytest.approx(p - q, abs=1e-6)
        both_most, both_least = min(p, q), max(0.0, p + q - 1)  # the share of pairs where both moved
        spread = [p + q - 2 * both - (p - q) ** 2 for both in (both_most, both_least)]  # variance of the difference
        low, high = (1.96 * (v * n / (n - 1) / n) ** 0.5 for v in spread)
        assert low - 1e-6 <= row["difference_ci"] <= high + 1e-6
    assert checked


def counts_pairs_with_partner(task, n_samples):
    """Kept pairs whose recipient has another instance with its exact rule tuple, counted from the batch alone."""
    from latentcode.causal.transfer import _one_feature_pairs as pairs

    batch = task.sample(n_samples, "test", seed=0, unpermuted=True)
    rules = batch.labels["rules"]
    recipient, donor = pairs(rules, torch.Generator().manual_seed(0))
    feature = (rules[recipient] != rules[donor]).int().argmax(dim=1)
    grid = batch.labels["panels"][recipient, :, :, feature]
    answer, defined = task.rule_answer(grid, rules[donor, feature])
    kept = recipient[defined & (answer != batch.y[recipient, feature])]
    twins = (rules[kept][:, None, :] == rules[None, :, :]).all(-1).sum(1) > 1
    return int(twins.sum())


def test_function_transfer_and_ablation_of_a_model_that_ignores_its_codes_change_nothing():
    task = FuzzyLogic()
    torch.manual_seed(0)
    model = _ignores_codes(build_model(task, "hyla", "tiny").eval())
    result = function_transfer(model, task, n_samples=128, progress=False)
    assert result.column("r2_donor").tolist() == result.column("clean_r2_donor").tolist()
    assert result.column("r2_recipient").tolist() == result.column("clean_r2_recipient").tolist()
    assert result.counts["pairs"] + result.counts["same_terms"] == 128
    ablation = mean_ablation(model, task, n_samples=128, progress=False)
    assert ablation.column("drop").tolist() == [0.0, 0.0, 0.0]
    assert ablation.params["metric"] == "r2"


def test_results_save_csv_json_and_png(tmp_path, sraven_model):
    task, model = sraven_model
    result = mean_ablation(model, task, n_samples=64, split="ood", method="zero", progress=False)
    paths = result.save(tmp_path / "out")
    assert [p.name for p in paths] == ["zero_ablation.csv", "zero_ablation.json", "zero_ablation.png"]
    with open(paths[0]) as f:
        rows = list(csv.DictReader(f))
    assert [row["layer"] for row in rows] == ["0", "1", "all"]
    assert float(rows[0]["drop"]) == pytest.approx(result.rows[0]["drop"])
    assert ExperimentResult(**json.loads(paths[1].read_text())).rows == result.rows
    assert paths[2].stat().st_size > 1000
    assert "drop" in result.table() and "zero_ablation — sraven" in result.table()


def test_bad_inputs(sraven_model):
    task, model = sraven_model
    with pytest.raises(ValueError, match="rule_transfer needs a task with rule_answer.*lacks rule_answer"):
        rule_transfer(model, FuzzyLogic())
    with pytest.raises(ValueError, match="function_transfer needs a task with recompose.*lacks recompose"):
        function_transfer(model, task)
    with pytest.raises(ValueError, match=r"layers=\[3\] out of range"):
        mean_ablation(model, task, n_samples=8, layers=[3])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    torch.manual_seed(0)
    task = get_task("fuzzy_logic")
    cfg = train_config("fuzzy_logic", "tiny", steps=4, warmup=1, eval_every=4, log_every=4, checkpoint_every=4,
                       eval_samples=32, device="cpu")
    run_dir = tmp_path_factory.mktemp("runs") / "fuzzy"
    train(model_config(task, "hyla", "tiny"), task, cfg, run_dir, progress=False)
    return run_dir


def test_run_experiment_writes_into_the_run_or_out_and_never_into_a_shipped_run(tiny_run, tmp_path):
    result, paths = run_experiment(tiny_run, "transfer", n_samples=32, progress=False)
    assert result.name == "function_transfer" and paths[0].parent == tiny_run / "interventions"
    assert result.params["run"] == str(tiny_run) and result.params["step"] == 4
    _, paths = run_experiment(tiny_run, "ablate", out_dir=tmp_path / "elsewhere", n_samples=32, progress=False)
    assert paths[0] == tmp_path / "elsewhere" / "mean_ablation.csv"
    (tiny_run / "shipped.json").write_text("{}")
    try:
        with pytest.raises(ValueError, match="shipped checkpoint.*--out"):
            run_experiment(tiny_run, "ablate", n_samples=32)
    finally:
        (tiny_run / "shipped.json").unlink()
    with pytest.raises(ValueError, match="unknown experiment 'steer'"):
        run_experiment(tiny_run, "steer")


def test_the_transfer_and_ablate_subcommands_print_the_table_and_write_the_files(tiny_run, tmp_path, capsys):
    import argparse

    from latentcode.cli.interventions import COMMANDS

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add_parser, command in COMMANDS:
        add_parser(subparsers).set_defaults(func=command)
    out = tmp_path / "out"
    for argv in (["transfer", str(tiny_run), "--positions", "paper"], ["ablate", str(tiny_run), "--method", "zero"]):
        args = parser.parse_args([*argv, "--out", str(out), "--n-samples", "16", "--layers", "1", "--no-progress"])
        assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "function_transfer — fuzzy_logic, hyla" in printed and "zero_ablation — fuzzy_logic, hyla" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        "function_transfer.csv", "function_transfer.json", "function_transfer.png",
        "zero_ablation.csv", "zero_ablation.json", "zero_ablation.png",
    ]
    saved = json.loads((out / "function_transfer.json").read_text())
    assert saved["params"]["whole_row"] is False and [row["layer"] for row in saved["rows"]] == ["1"]
    with pytest.raises(SystemExit):
        parser.parse_args(["ablate", str(tiny_run), "--layers", "one"])


def test_run_experiment_records_what_it_writes_into_a_run_so_force_removes_it(tiny_run, tmp_path):
    import shutil

    from latentcode.constants import MANIFEST_FILE
    from latentcode.rundir.directory import read_manifest, remove_run_files

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = set(read_manifest(run))
    _, paths = run_experiment(run, "ablate", method="zero", n_samples=16, layers=[0], progress=False)
    written = {f"interventions/zero_ablation.{ext}" for ext in ("csv", "json", "png")}
    assert set(read_manifest(run)) == before | written
    manifest = (run / MANIFEST_FILE).read_bytes()
    run_experiment(run, "ablate", out_dir=tmp_path / "elsewhere", n_samples=16, layers=[0], progress=False)
    assert (run / MANIFEST_FILE).read_bytes() == manifest  # files outside the run are not the run's
    (run / "shipped.json").write_text("{}")
    run_experiment(run, "ablate", out_dir=tmp_path / "other", n_samples=16, layers=[0], progress=False)
    assert (run / MANIFEST_FILE).read_bytes() == manifest  # a shipped run is never written into
    (run / "shipped.json").unlink()
    removed = remove_run_files(run)
    assert set(paths) <= set(removed) and not any(p.exists() for p in paths)
    assert not (run / "interventions").exists()  # the folder it emptied goes too
